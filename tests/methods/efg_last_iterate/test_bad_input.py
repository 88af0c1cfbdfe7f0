"""Bad input to the last-iterate solvers fails before any update, with a message saying what
to do: NaN or infinite rates, a bad seed, and a checkpoint of one game resumed on another."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("pyspiel")

import torch  # noqa: E402
from lightning.pytorch import Trainer  # noqa: E402

from lightning_info.methods.efg_last_iterate import (  # noqa: E402
    GameEpisodesDataModule,
    LastIterateSolver,
    TabularSolver,
    game_tree,
)
from lightning_info.methods.efg_last_iterate.functional import SolverRates  # noqa: E402

NAN, INF = math.nan, math.inf


def _kuhn():
    return game_tree("kuhn_poker")


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
]


def test_boundary_rates_still_work():
    solver = TabularSolver(_kuhn(), "ix_omd", eta=1, gamma=0, tau=0, seed=0)  # ints, zeros
    assert (solver.rates.eta, solver.rates.gamma, solver.rates.tau) == (1.0, 0.0, 0.0)
    solver.step(4)
    assert torch.isfinite(solver.log_policy).all()
    LastIterateSolver(method="virtual_transition", eta=1e-9, gamma=0.0, tau=0.0, seed=0)


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
