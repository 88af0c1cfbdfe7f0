"""Inputs that used to hang, be refused or be misread now give the right answer.

Oracles: the episode length a time limit sets; the undiscounted return ``L - t`` of an episode
of ``L`` unit rewards (``gamma = 1``); one-hot rows for Discrete observations flattened by
``FlattenObservation``.
"""

from __future__ import annotations

import pytest

gym = pytest.importorskip("gymnasium")

import torch  # noqa: E402
from lightning.pytorch import Trainer  # noqa: E402
from torch import nn  # noqa: E402

from lightning_info.methods.asymmetric_ac.module import (  # noqa: E402
    A2COptions,
    AsymmetricActorCritic,
)
from lightning_info.methods.asymmetric_ac.tabular_pomdp import t_maze  # noqa: E402
from tests.methods.asymmetric_ac.envs import Episodic, Forever  # noqa: E402
from tests.tiny import QUIET  # noqa: E402


def test_max_episode_steps_limits_a_factory_environment():
    """A factory's environment that never ends is truncated after ``max_episode_steps`` (it
    used to run until the runaway guard of ``Forever``: a hang without it)."""
    module = AsymmetricActorCritic(Forever, max_episode_steps=5, hidden=4)
    rollout = module.collect_episodes([0, 1], torch.Generator().manual_seed(0))
    assert rollout["reward"].shape == (5, 2)
    assert rollout["truncated"][-1].all() and not rollout["truncated"][:-1].any()
    assert not rollout["terminated"].any()
    torch.testing.assert_close(rollout["returns"], torch.full((2,), 5.0))


def test_the_shorter_of_two_time_limits_wins():
    module = AsymmetricActorCritic(
        lambda: gym.wrappers.TimeLimit(Forever(), 3), max_episode_steps=5, hidden=4
    )
    assert module.collect_episodes([0], None)["reward"].shape == (3, 1)


def test_fit_finishes_on_a_factory_environment_that_never_ends(tmp_path):
    module = AsymmetricActorCritic(
        Forever, max_episode_steps=4, hidden=4, a2c=A2COptions(num_envs=2), steps_per_epoch=2
    )
    trainer = Trainer(max_steps=2, default_root_dir=tmp_path, **QUIET)
    trainer.fit(module)
    assert trainer.global_step == 2


def _zero_critic(width: int) -> nn.Linear:
    critic = nn.Linear(width, 1)
    nn.init.zeros_(critic.weight)
    nn.init.zeros_(critic.bias)
    return critic


def test_gamma_one_gives_undiscounted_returns(tmp_path):
    """``gamma = 1`` is a valid discount (the m-step returns accept it): with a zero critic the
    targets of an episode of ``L = 4`` unit rewards are ``L - t``, so the critic loss is
    ``mean_t (L - t)^2 = (16 + 9 + 4 + 1) / 4``."""
    a2c = A2COptions(num_envs=2, gamma=1.0, td_steps=8, entropy_coef=0.0)
    assert a2c.gamma == 1.0
    module = AsymmetricActorCritic(
        lambda: gym.wrappers.TimeLimit(Episodic(4), 10), critic=_zero_critic(4), hidden=4, a2c=a2c
    )
    rollout = module.collect_episodes([0, 1], torch.Generator().manual_seed(0))
    assert rollout["reward"].shape == (4, 2)
    assert module.losses(rollout)["critic"].item() == pytest.approx(7.5)

    trainer = Trainer(max_steps=2, default_root_dir=tmp_path, **QUIET)
    trainer.fit(module)
    assert trainer.global_step == 2
    assert all(torch.isfinite(p).all() for p in module.parameters())


def test_discrete_observations_train_once_flattened_to_one_hot():
    """The refusal of a Discrete observation names FlattenObservation; with it the agent state
    is the one-hot code of the observation."""
    module = AsymmetricActorCritic(
        lambda: gym.wrappers.FlattenObservation(gym.wrappers.TimeLimit(t_maze(), 6)), hidden=4
    )
    rollout = module.collect_episodes([0], None)
    z = rollout["agent_state"][:, 0, -1]  # the newest observation of the window
    assert z.shape == (6, 4)
    torch.testing.assert_close(z.sum(1), torch.ones(6))
    assert set(z.unique().tolist()) == {0.0, 1.0}


def test_natural_actor_critic_leaves_the_callers_theta_alone():
    """The history's first value is the exact ``J`` of the caller's ``theta`` (oracle:
    ``evaluate_policy``), and that array is neither modified nor frozen."""
    import numpy as np

    from lightning_info.methods.asymmetric_ac import (
        ActorCriticHistory,
        SGDSettings,
        agent_state_chain,
        evaluate_policy,
        natural_actor_critic,
        softmax_policy,
    )

    chain = agent_state_chain(t_maze(1), 1)
    theta = np.arange(9, dtype=np.float64).reshape(3, 3) / 10
    before = theta.copy()
    small = SGDSettings(num_steps=2, batch_size=2)
    history = natural_actor_critic(
        chain,
        0.9,
        "asymmetric",
        np.random.default_rng(0),
        1,
        0.1,
        critic=small,
        actor=small,
        theta=theta,
    )
    assert isinstance(history, ActorCriticHistory)
    np.testing.assert_array_equal(theta, before)
    assert theta.flags.writeable
    expected = evaluate_policy(chain, softmax_policy(before), 0.9).value
    assert history.values[0] == pytest.approx(expected, abs=1e-12)


def test_tabular_pomdp_copies_the_callers_arrays():
    """The model freezes its own copies; the caller's arrays stay writable and unchanged."""
    import numpy as np

    from lightning_info.methods.asymmetric_ac import TabularPOMDP

    maze = t_maze(1)
    arrays = [
        np.array(maze.transitions),
        np.array(maze.observation_probs),
        np.array(maze.rewards),
        np.array(maze.initial),
    ]
    TabularPOMDP(*arrays)
    assert all(array.flags.writeable for array in arrays)


def test_window_codes_accept_numpy_integers():
    """``np.int64`` entries (what numpy arrays hold) encode like ints: oracle base-4 digits."""
    import numpy as np

    from lightning_info.methods.asymmetric_ac import WindowEncoding

    encoding = WindowEncoding(3, 2)
    code = encoding.encode(np.array([2, 1]))
    assert code == 2 * 4 + 1
    np.testing.assert_array_equal(encoding.decode(np.int64(code)), [2, 1])
