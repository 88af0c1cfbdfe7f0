"""LinearAsymmetricActorCritic: one Lightning step is one round of linear natural actor-critic.

Oracles: the round recomputed with :func:`m_step_td` and :func:`npg_direction` from the same
``(seed, step, rank)`` generator; the exact :func:`evaluate_policy` of the policy before the step;
the aliasing floor, a lower bound on the error of any ``(z, a)`` critic; the T-maze optimum.
"""

import numpy as np
import pytest
from lightning.pytorch import Callback, Trainer

from lightning_info.methods.asymmetric_ac.exact import (
    agent_state_chain,
    critic_error,
    evaluate_policy,
)
from lightning_info.methods.asymmetric_ac.functional import (
    SGDSettings,
    m_step_td,
    npg_direction,
    softmax_policy,
)
from lightning_info.methods.asymmetric_ac.linear_module import LinearAsymmetricActorCritic
from lightning_info.methods.asymmetric_ac.tabular_pomdp import t_maze
from tests.tiny import QUIET

METRICS = ("linear/value", "linear/critic_error", "linear/aliasing_floor")


class _Recorder(Callback):
    """theta before and after every training step, and the metrics the step logged."""

    def __init__(self) -> None:
        self.before, self.after, self.steps, self.logged = [], [], [], []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.before.append(pl_module.theta.detach().clone().numpy())
        self.steps.append(trainer.global_step)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.after.append(pl_module.theta.detach().clone().numpy())
        self.logged.append({key: trainer.callback_metrics[key] for key in METRICS})


def _fit(module: LinearAsymmetricActorCritic, steps: int) -> _Recorder:
    recorder = _Recorder()
    trainer = Trainer(**QUIET, devices=1, max_steps=steps, callbacks=[recorder])
    trainer.fit(module)
    assert trainer.global_step == steps == len(recorder.logged)
    return recorder


# Non-default settings throughout, so that the recomputation must use the module's own.
SETTINGS = dict(
    window=2,
    gamma=0.85,
    td_steps=2,
    critic=SGDSettings(num_steps=200, batch_size=32, step_size=0.7),
    actor_step_size=1.3,
    seed=5,
)


@pytest.fixture(scope="module")
def three_steps():
    module = LinearAsymmetricActorCritic(t_maze(2, 0.9, penalty=-0.7), **SETTINGS)
    chain = agent_state_chain(t_maze(2, 0.9, penalty=-0.7), 2)
    return module, chain, _fit(module, 3)


def _round(chain, theta, step, kind="asymmetric"):
    """The round of ``theta`` at ``step``, recomputed from the functional core."""
    settings = SGDSettings(num_steps=200, batch_size=32, step_size=0.7)
    rng = np.random.default_rng(np.random.SeedSequence([SETTINGS["seed"], step, 0]))
    policy = softmax_policy(theta)
    q_hat = m_step_td(chain, policy, 0.85, kind, rng, 2, settings)
    w = npg_direction(chain, policy, 0.85, q_hat, rng, settings)
    return policy, q_hat, w


def test_step_moves_theta_by_step_size_times_the_npg_direction(three_steps):
    module, chain, recorder = three_steps
    assert recorder.steps == [0, 1, 2]
    np.testing.assert_array_equal(recorder.before[0], np.zeros_like(recorder.before[0]))
    for step, (before, after) in enumerate(zip(recorder.before, recorder.after)):
        _, _, w = _round(chain, before, step)
        assert np.abs(w).max() > 0.01
        np.testing.assert_allclose(after - before, 1.3 * w, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(recorder.after[-1], module.theta.detach().numpy())


def test_logged_metrics_are_exact_for_the_policy_before_the_step(three_steps):
    _, chain, recorder = three_steps
    for step, (theta, logged) in enumerate(zip(recorder.before, recorder.logged)):
        policy, q_hat, _ = _round(chain, theta, step)
        evaluation = evaluate_policy(chain, policy, 0.85)
        expected = {
            "linear/value": evaluation.value,
            "linear/critic_error": critic_error(chain, evaluation, q_hat),
            "linear/aliasing_floor": evaluation.aliasing_floor,
        }
        for key, value in expected.items():  # logged as float32
            assert float(logged[key]) == float(np.float32(value)), (step, key)
    # the values differ between rounds: the policy moved
    assert len({float(logged["linear/value"]) for logged in recorder.logged}) == 3


def test_asymmetric_error_is_far_below_the_floor_symmetric_is_not():
    """Window 1 T-maze (junction aliased), seed 0, 3 rounds: asymmetric errors 0.021-0.063 vs
    floors 0.335-0.363; symmetric errors within 1e-3 of (and above) their floors."""
    logged = {}
    for asymmetric in (True, False):
        module = LinearAsymmetricActorCritic(window=1, asymmetric=asymmetric, seed=0)
        logged[asymmetric] = _fit(module, 3).logged
    for rows, kind in ((logged[True], "asym"), (logged[False], "sym")):
        for row in rows:
            error, floor = float(row["linear/critic_error"]), float(row["linear/aliasing_floor"])
            assert floor > 0.3
            if kind == "asym":
                assert error < 0.25 * floor
            else:  # the floor bounds every (z, a) critic; float32 rounding aside
                assert floor * (1 - 1e-6) <= error < 1.05 * floor


def test_asymmetric_value_climbs_to_the_window_two_optimum():
    """Window 2 sees the sign at the junction: J(pi_t) (exact, seed 0, eta = 2) goes
    0.5, 2.098, 3.564, 4.407, 4.687, 4.731, 4.732, 4.733, 4.734, optimum 0.9 / (1 - 0.81)."""
    module = LinearAsymmetricActorCritic(window=2, actor_step_size=2.0, seed=0)
    values = [float(row["linear/value"]) for row in _fit(module, 8).logged]
    values.append(module.value())
    optimum = 0.9 / (1 - 0.9**2)
    assert values[0] == pytest.approx(0.5, abs=1e-6)  # the uniform policy
    assert (np.diff(values) > 0).all(), values
    assert values[-1] > 0.99 * optimum
    assert values[-1] < optimum


def test_bad_arguments():
    with pytest.raises(ValueError, match="`window` must be >= 1"):
        LinearAsymmetricActorCritic(window=0)
    with pytest.raises(ValueError, match=r"`gamma` must lie in \[0, 1\)"):
        LinearAsymmetricActorCritic(gamma=1.0)
    with pytest.raises(ValueError, match="`actor_step_size` must be > 0"):
        LinearAsymmetricActorCritic(actor_step_size=-1.0)
    with pytest.raises(ValueError, match="`step_size` must be > 0"):
        SGDSettings(step_size=-0.5)
    with pytest.raises(ValueError, match="`td_steps` must be >= 1"):
        LinearAsymmetricActorCritic(td_steps=0)
    with pytest.raises(ValueError, match="`batch_size` must be >= 1"):
        SGDSettings(batch_size=0)
    with pytest.raises(TypeError, match="`critic` must be an SGDSettings"):
        LinearAsymmetricActorCritic(critic={"num_steps": 10})
    with pytest.raises(ValueError, match=r"`sign_accuracy` must lie in \[0.5, 1\]"):
        t_maze(sign_accuracy=0.2)


def test_default_pomdp_is_the_window_one_t_maze_and_default_critic_settings():
    module = LinearAsymmetricActorCritic()
    explicit = LinearAsymmetricActorCritic(t_maze(1, 1.0, penalty=-0.5))
    np.testing.assert_array_equal(module.chain.transition, explicit.chain.transition)
    np.testing.assert_array_equal(module.chain.rewards, explicit.chain.rewards)
    assert module.settings == SGDSettings(num_steps=1000, batch_size=64, step_size=0.5)
