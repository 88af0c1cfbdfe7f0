"""Bad input to the last-iterate solvers fails before any update, with a message saying what
to do: NaN or infinite rates, a bad seed, negative, float or bool episode ids, a batch size
that is not a positive int, NaN payoffs or loss estimates, uniforms outside [0, 1), a game
with NaN payoffs, and a checkpoint of one game resumed on another."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("pyspiel")

import torch  # noqa: E402
from lightning.pytorch import Trainer  # noqa: E402

from lightning_info.methods.efg_last_iterate import (  # noqa: E402
    GameEpisodesDataModule,
    GameTree,
    LastIterateSolver,
    TabularSolver,
    game_tree,
    nash_conv,
    to_tabular_policy,
)
from lightning_info.methods.efg_last_iterate import functional as F  # noqa: E402
from lightning_info.methods.efg_last_iterate.functional import SolverRates  # noqa: E402

NAN, INF = math.nan, math.inf


def _kuhn():
    return game_tree("kuhn_poker")


def _solver():
    return TabularSolver(_kuhn(), seed=0)


def _apply(loss_sum, episodes=2):
    solver = _solver()
    solver.apply(loss_sum(solver.log_policy), episodes)


def _step(batch_size):
    _solver().step(batch_size)


def _episodes(returns=None, last_sequence=None):
    """Eight sampled Kuhn episodes, their payoffs or last sequences replaced, turned into
    implicit-exploration estimates."""
    tree, solver = _kuhn(), _solver()
    uniforms = F.episode_uniforms(0, torch.arange(8), tree.path_length)
    episodes = F.sample_episodes(tree, solver.policy, uniforms)
    episodes = F.Episodes(
        episodes.last_sequence if last_sequence is None else last_sequence(episodes.last_sequence),
        episodes.returns if returns is None else returns(episodes.returns),
    )
    log_plan = F.log_sequence_plan(tree, solver.log_policy)
    return F.implicit_exploration_losses(tree, episodes, log_plan, solver.rates.at(1).gamma)


def _sample(uniforms):
    tree = _kuhn()
    return F.sample_episodes(tree, tree.uniform_policy(), uniforms)


def _nan_kuhn():
    """Python Kuhn poker whose showdowns pay NaN."""
    from open_spiel.python.games import kuhn_poker

    class State(kuhn_poker.KuhnPokerState):
        def returns(self):
            payoffs = super().returns()
            return [NAN, NAN] if self.is_terminal() and sum(map(abs, payoffs)) == 2 else payoffs

    class Game(kuhn_poker.KuhnPokerGame):
        def new_initial_state(self):
            return State(self)

    return game_tree(Game())


BAD_INPUT = [
    pytest.param(
        lambda: TabularSolver(_kuhn(), eta=NAN),
        ValueError,
        "`eta` must be finite",
        id="solver-eta-nan",
    ),
    pytest.param(
        lambda: TabularSolver(_kuhn(), gamma=INF),
        ValueError,
        "`gamma` must be finite",
        id="solver-gamma-inf",
    ),
    pytest.param(
        lambda: TabularSolver(_kuhn(), "ix_omd", tau=NAN),
        ValueError,
        "`tau` must be finite",
        id="solver-tau-nan",
    ),
    pytest.param(
        lambda: TabularSolver(_kuhn(), eta="1"),
        TypeError,
        "`eta` must be a real",
        id="solver-eta-str",
    ),
    pytest.param(
        lambda: TabularSolver(_kuhn(), seed=1.5),
        TypeError,
        "`seed` must be an int",
        id="solver-seed-float",
    ),
    pytest.param(
        lambda: TabularSolver(_kuhn(), seed=-1),
        ValueError,
        "`seed` must be >= 0",
        id="solver-seed-negative",
    ),
    pytest.param(
        lambda: SolverRates(_kuhn(), "ix_omd", NAN, 0.1),
        ValueError,
        "`eta` must be finite",
        id="rates-eta-nan",
    ),
    pytest.param(
        lambda: LastIterateSolver(eta=NAN), ValueError, "`eta` must be finite", id="module-eta-nan"
    ),
    pytest.param(
        lambda: LastIterateSolver(gamma=-1.0), ValueError, "gamma >= 0", id="module-gamma-negative"
    ),
    pytest.param(
        lambda: LastIterateSolver(method="ix_omd", tau=0.1),
        ValueError,
        "no regulariser",
        id="module-tau-without-regulariser",
    ),
    pytest.param(
        lambda: LastIterateSolver(seed=NAN),
        TypeError,
        "`seed` must be an int",
        id="module-seed-nan",
    ),
    pytest.param(
        lambda: _solver().loss_sum(torch.tensor([-1, 2])),
        ValueError,
        r"`episode_ids` must hold indices >= 0, got -1",
        id="loss-sum-negative-ids",
    ),
    pytest.param(
        lambda: _solver().loss_sum(torch.tensor([0.5, 1.7])),
        TypeError,
        r"`episode_ids` must hold integer indices, got dtype torch.float32",
        id="loss-sum-float-ids",
    ),
    pytest.param(
        lambda: _solver().loss_sum(torch.tensor([True, False])),
        TypeError,
        r"`episode_ids` must hold integer indices, got dtype torch.bool",
        id="loss-sum-bool-ids",
    ),
    pytest.param(
        lambda: F.episode_uniforms(0, [0, 2.5], 3),
        TypeError,
        r"`episode_ids\[1\]` must be an integer index, got float 2.5",
        id="uniforms-float-id-in-list",
    ),
    pytest.param(
        lambda: F.episode_uniforms(-1, torch.tensor([0]), 3),
        ValueError,
        r"`seed` must be >= 0, got -1",
        id="uniforms-seed-negative",
    ),
    pytest.param(
        lambda: F.episode_uniforms(1.5, torch.tensor([0]), 3),
        TypeError,
        r"`seed` must be an int, got 1.5",
        id="uniforms-seed-float",
    ),
    pytest.param(
        lambda: _step(-3), ValueError, r"`batch_size` must be >= 1, got -3", id="step-negative"
    ),
    pytest.param(
        lambda: _step(2.5), TypeError, r"`batch_size` must be an int, got 2.5", id="step-float"
    ),
    pytest.param(
        lambda: _apply(lambda p: torch.full_like(p, NAN)),
        ValueError,
        r"`loss_sum` contains 24 NaN/inf",
        id="apply-loss-nan",
    ),
    pytest.param(
        lambda: _apply(lambda p: torch.zeros(3, dtype=p.dtype)),
        ValueError,
        r"`loss_sum` must be an \(12, 2\) table like the policy, got \(3,\)",
        id="apply-loss-shape",
    ),
    pytest.param(
        lambda: _apply(torch.zeros_like, episodes=0),
        ValueError,
        r"`episodes` must be >= 1, got 0",
        id="apply-zero-episodes",
    ),
    pytest.param(
        lambda: _apply(torch.zeros_like, episodes=True),
        TypeError,
        r"`episodes` must be an int, got True",
        id="apply-bool-episodes",
    ),
    pytest.param(
        lambda: _episodes(returns=lambda r: torch.full_like(r, NAN)),
        ValueError,
        r"`episodes.returns` contains 16 NaN/inf",
        id="ix-returns-nan",
    ),
    pytest.param(
        lambda: _episodes(last_sequence=lambda s: s + 100),
        ValueError,
        r"`episodes.last_sequence` must hold sequence indices in \[0, 24\) or -1",
        id="ix-last-sequence-out-of-range",
    ),
    pytest.param(
        lambda: _sample(torch.full((2, 5), NAN, dtype=torch.float64)),
        ValueError,
        r"`uniforms` must lie in \[0, 1\) \(no NaN\)",
        id="sample-uniforms-nan",
    ),
    pytest.param(
        lambda: _sample(torch.full((2, 5), 1.5, dtype=torch.float64)),
        ValueError,
        r"`uniforms` must lie in \[0, 1\)",
        id="sample-uniforms-above-one",
    ),
    pytest.param(
        lambda: _sample(torch.zeros(5, dtype=torch.float64)),
        ValueError,
        r"`uniforms` must be \(B, >= 5\).*got shape \(5,\)",
        id="sample-uniforms-1d",
    ),
    pytest.param(
        lambda: GameEpisodesDataModule(sequential_shards="no"),
        TypeError,
        r"`sequential_shards` must be True or False, got 'no'",
        id="datamodule-shards-str",
    ),
    pytest.param(
        _nan_kuhn,
        ValueError,
        r"returns payoffs outside its utility range \[-2.0, 2.0\] \(or NaN\)",
        id="game-payoffs-nan",
    ),
]


def test_boundary_rates_still_work():
    solver = TabularSolver(_kuhn(), "ix_omd", eta=1, gamma=0, tau=0, seed=0)  # ints, zeros
    assert (solver.rates.eta, solver.rates.gamma, solver.rates.tau) == (1.0, 0.0, 0.0)
    solver.step(4)
    assert torch.isfinite(solver.log_policy).all()
    LastIterateSolver(method="virtual_transition", eta=1e-9, gamma=0.0, tau=0.0, seed=0)


def test_valid_episode_ids_give_the_same_stream_in_every_form():
    tree = _kuhn()
    expected = F.episode_uniforms(3, torch.tensor([0, 5, 9]), tree.path_length)
    for ids in ([0, 5, 9], np.array([0, 5, 9]), torch.tensor([0, 5, 9], dtype=torch.int32)):
        assert torch.equal(F.episode_uniforms(3, ids, tree.path_length), expected)
    solver = TabularSolver(tree, "ix_omd")  # no regulariser: a zero loss keeps the policy
    solver.apply(torch.zeros_like(solver.log_policy), 1)
    torch.testing.assert_close(solver.policy, tree.uniform_policy())
    assert solver.episodes == 1


QUIET = dict(logger=False, enable_progress_bar=False, enable_model_summary=False, accelerator="cpu")


def test_a_checkpoint_of_another_game_is_refused_before_it_is_loaded(tmp_path):
    kuhn = LastIterateSolver(seed=1)
    trainer = Trainer(max_steps=2, default_root_dir=tmp_path, **QUIET)
    trainer.fit(kuhn, datamodule=GameEpisodesDataModule("kuhn_poker", 4, 16))
    checkpoint = trainer.checkpoint_callback.best_model_path
    assert torch.load(checkpoint, weights_only=False)["efg_last_iterate_game"] == "kuhn_poker()"

    leduc = LastIterateSolver(seed=1)
    resumed = Trainer(max_steps=4, default_root_dir=tmp_path, **QUIET)
    with pytest.raises(ValueError, match=r"of kuhn_poker\(\).*plays leduc_poker\(\)"):
        resumed.fit(
            leduc, datamodule=GameEpisodesDataModule("leduc_poker", 4, 16), ckpt_path=checkpoint
        )
    assert resumed.global_step == 0
    assert tuple(leduc.log_policy.shape) == (936, 3)  # Leduc's table, not Kuhn's

    # the same game resumes and continues
    again = LastIterateSolver(seed=1)
    continued = Trainer(max_steps=4, default_root_dir=tmp_path, **QUIET)
    continued.fit(
        again, datamodule=GameEpisodesDataModule("kuhn_poker", 4, 16), ckpt_path=checkpoint
    )
    assert continued.global_step == 4 and int(again.episodes) == 16


def _uniform():
    return _kuhn().uniform_policy()


BAD_INPUT += [
    pytest.param(
        lambda: nash_conv(_kuhn(), _uniform().long()),
        TypeError,
        r"`policy` must be a real floating-point tensor, got dtype torch.int64",
        id="nash-conv-int-policy",
    ),
    pytest.param(
        lambda: nash_conv(_kuhn(), _kuhn().legal),
        TypeError,
        r"`policy` must be a real floating-point tensor, got dtype torch.bool",
        id="nash-conv-bool-policy",
    ),
    pytest.param(
        lambda: nash_conv(_kuhn(), _uniform().tolist()),
        TypeError,
        r"`policy` must be a torch.Tensor, got list",
        id="nash-conv-list-policy",
    ),
    pytest.param(
        lambda: nash_conv(_kuhn(), torch.full_like(_uniform(), NAN)),
        ValueError,
        r"negative or non-finite probabilities",
        id="nash-conv-nan-policy",
    ),
    pytest.param(
        lambda: nash_conv(game_tree("leduc_poker"), _uniform()),
        ValueError,
        r"a policy of leduc_poker\(\) is \(936, 3\), got \(12, 2\)",
        id="nash-conv-policy-of-another-game",
    ),
    pytest.param(
        lambda: nash_conv("kuhn_poker", _uniform()),
        TypeError,
        r"`tree` must be a GameTree",
        id="nash-conv-tree-str",
    ),
    pytest.param(
        lambda: to_tabular_policy(_kuhn(), _uniform(), "leduc_poker"),
        ValueError,
        r"`game` is not the game of `tree` \(kuhn_poker\(\)\)",
        id="tabular-policy-other-game",
    ),
    pytest.param(
        lambda: to_tabular_policy(_kuhn(), torch.full_like(_uniform(), INF), "kuhn_poker"),
        ValueError,
        r"negative or non-finite probabilities",
        id="tabular-policy-inf",
    ),
    pytest.param(
        lambda: game_tree(3),
        TypeError,
        r"`game` must be a pyspiel.Game or a game string",
        id="game-tree-int",
    ),
    pytest.param(
        lambda: GameTree.check_policy(_kuhn(), _uniform().to(torch.complex128)),
        TypeError,
        r"`policy` must be a real floating-point tensor, got dtype torch.complex128",
        id="game-tree-check-policy-complex",
    ),
]


def test_nash_conv_of_a_float32_policy_matches_float64():
    tree = _kuhn()
    policy = torch.rand(tree.num_infosets, tree.num_actions, dtype=torch.float64)
    policy = policy * tree.legal
    policy = policy / policy.sum(1, keepdim=True)
    expected = nash_conv(tree, policy)
    assert nash_conv(tree, policy.float()) == pytest.approx(expected, abs=1e-6)
    assert nash_conv(tree, tree.uniform_policy()) == pytest.approx(11 / 12)


BAD_INPUT += [
    pytest.param(
        lambda: F.virtual_transition("kuhn_poker"),
        TypeError,
        r"`tree` must be a GameTree \(see game_tree\('kuhn_poker'\)\), got str",
        id="virtual-transition-tree-str",
    ),
]


def _rates(eta=1.0, tau=0.0):
    return F.Rates(torch.full((12,), eta, dtype=torch.float64), torch.ones(12).double(), tau)


def _log_uniform():
    return torch.log(_uniform())


BAD_INPUT += [
    pytest.param(
        lambda: F.require_game_tree("kuhn_poker"),
        TypeError,
        r"`tree` must be a GameTree \(see game_tree\('kuhn_poker'\)\), got str",
        id="require-game-tree-str",
    ),
    pytest.param(
        lambda: F.balanced_plan("kuhn_poker"),
        TypeError,
        r"`tree` must be a GameTree",
        id="balanced-plan-tree-str",
    ),
    pytest.param(
        lambda: F.expected_returns(_kuhn(), 3 * _uniform()),
        ValueError,
        r"every row of the policy must sum to 1",
        id="expected-returns-unnormalised-policy",
    ),
    pytest.param(
        lambda: F.expected_returns(_kuhn(), -_uniform()),
        ValueError,
        r"negative or non-finite probabilities",
        id="expected-returns-negative-policy",
    ),
    pytest.param(
        lambda: F.best_response_values(_kuhn(), 3 * _uniform()),
        ValueError,
        r"every row of the policy must sum to 1",
        id="best-response-unnormalised-policy",
    ),
    pytest.param(
        lambda: F.best_response_values(_kuhn(), _uniform()[:3]),
        ValueError,
        r"a policy of kuhn_poker\(\) is \(12, 2\), got \(3, 2\)",
        id="best-response-policy-shape",
    ),
    pytest.param(
        lambda: F.best_response_values("kuhn_poker", _uniform()),
        TypeError,
        r"`tree` must be a GameTree",
        id="best-response-tree-str",
    ),
    pytest.param(
        lambda: F.sequence_payoffs(_kuhn(), _uniform(), _kuhn().terminal_returns[:2]),
        ValueError,
        r"`payoff` must have shape \(30, 2\), got \(2, 2\)",
        id="sequence-payoffs-payoff-shape",
    ),
    pytest.param(
        lambda: F.sequence_payoffs(_kuhn(), _uniform(), _kuhn().terminal_returns.float()),
        TypeError,
        r"`payoff` has dtype torch.float32 but the policy has torch.float64",
        id="sequence-payoffs-dtype-mismatch",
    ),
    pytest.param(
        lambda: F.negentropy_gradient(_kuhn(), _log_uniform(), torch.ones(3).double()),
        ValueError,
        r"`weight` must have shape \(12,\), got \(3,\)",
        id="negentropy-gradient-weight-shape",
    ),
    pytest.param(
        lambda: F.negentropy_gradient(_kuhn(), _log_uniform().tolist(), torch.ones(12).double()),
        TypeError,
        r"`log_plan` must be a tensor of shape \(12, 2\), got list",
        id="negentropy-gradient-list",
    ),
    pytest.param(
        lambda: F.dilated_omd_step(
            _kuhn(), _log_uniform(), torch.zeros(12, 2), torch.ones(12).double()
        ),
        TypeError,
        r"`losses` has dtype torch.float32 but the policy has torch.float64; convert it",
        id="dilated-omd-step-dtype-mismatch",
    ),
    pytest.param(
        lambda: F.dilated_omd_step(
            _kuhn(), _log_uniform(), torch.zeros(12, 2).double(), torch.ones(3).double()
        ),
        ValueError,
        r"`eta` must have shape \(12,\), got \(3,\)",
        id="dilated-omd-step-eta-shape",
    ),
    pytest.param(
        lambda: F.dilated_omd_step(_kuhn(), _log_uniform(), torch.zeros(12, 2).double(), 1.0),
        TypeError,
        r"`eta` must be a tensor of shape \(12,\), got float",
        id="dilated-omd-step-scalar-eta",
    ),
    pytest.param(
        lambda: F.solver_update(
            _kuhn(), _log_uniform(), torch.zeros(12, 2).double(), (1.0, 1.0, 0.0), None
        ),
        TypeError,
        r"`rates` must be a Rates \(from SolverRates.at\(k\)\), got tuple",
        id="solver-update-rates-tuple",
    ),
    pytest.param(
        lambda: F.solver_update(
            _kuhn(), _log_uniform(), torch.zeros(12, 2).double(), _rates(tau=NAN), None
        ),
        ValueError,
        r"`rates.tau` must be finite, got nan",
        id="solver-update-nan-tau",
    ),
    pytest.param(
        lambda: F.solver_update(
            _kuhn(), _log_uniform(), torch.zeros(12, 2).double(), _rates(eta=0.0), None
        ),
        ValueError,
        r"`rates.eta` must be positive and finite at every infoset",
        id="solver-update-zero-eta",
    ),
    pytest.param(
        lambda: F.solver_update(
            _kuhn(),
            _log_uniform(),
            torch.zeros(12, 2).double(),
            _rates(tau=0.1),
            -torch.ones(12).double(),
        ),
        ValueError,
        r"`weight` must be positive at every infoset",
        id="solver-update-negative-weight",
    ),
    pytest.param(
        lambda: F.solver_update(
            _kuhn(), _log_uniform(), torch.zeros(12, 2).double(), _rates(), None, True
        ),
        TypeError,
        r"`episodes` must be an int, got True",
        id="solver-update-bool-episodes",
    ),
]
