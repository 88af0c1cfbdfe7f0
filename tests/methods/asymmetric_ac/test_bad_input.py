"""Bad input to the deep asymmetric actor-critic fails before training, or at the first bad
step of an environment, with a message saying what to do: environments without a time limit
or with Discrete observations, NaN rewards, observations and states, and arguments of the
wrong type (a string or floats as ``keep``, a string as ``asymmetric``)."""

from __future__ import annotations

import pytest

gym = pytest.importorskip("gymnasium")

import torch  # noqa: E402

from lightning_info.methods.asymmetric_ac.linear_module import (  # noqa: E402
    LinearAsymmetricActorCritic,
)
from lightning_info.methods.asymmetric_ac.module import (  # noqa: E402
    AsymmetricActorCritic,
    m_step_returns,
    make_agent_env,
)
from lightning_info.methods.asymmetric_ac.tabular_pomdp import t_maze  # noqa: E402
from tests.methods.asymmetric_ac.envs import INF, NAN, BadStep, Forever  # noqa: E402


def _rollout(**values):
    module = AsymmetricActorCritic(lambda: BadStep(**values), max_episode_steps=5, hidden=4)
    return module.collect_episodes([0, 1], torch.Generator().manual_seed(0))


def _returns(rewards=None, next_values=None):
    zeros, flags = torch.zeros(4, 2), torch.zeros(4, 2, dtype=torch.bool)
    rewards = torch.ones(4, 2) if rewards is None else rewards
    next_values = zeros if next_values is None else next_values
    return m_step_returns(rewards, next_values, flags, flags, 0.9, 2)


def _cartpole(**kwargs):
    return AsymmetricActorCritic("CartPole-v1", hidden=4, **kwargs)


BAD_INPUT = [
    pytest.param(
        lambda: AsymmetricActorCritic(Forever, hidden=4),
        ValueError,
        r"has no time limit, so an episode may never end; pass max_episode_steps",
        id="factory-without-time-limit",
    ),
    pytest.param(
        lambda: make_agent_env(Forever),
        ValueError,
        r"has no time limit",
        id="make-agent-env-without-time-limit",
    ),
    pytest.param(
        lambda: make_agent_env(Forever, max_episode_steps=0),
        ValueError,
        r"`max_episode_steps` must be >= 1, got 0",
        id="make-agent-env-zero-steps",
    ),
    pytest.param(
        lambda: AsymmetricActorCritic(lambda: gym.wrappers.TimeLimit(t_maze(), 10)),
        TypeError,
        r"needs a Box observation space, got Discrete\(4\); one-hot encode .*FlattenObservation",
        id="discrete-observations",
    ),
    pytest.param(
        lambda: _rollout(reward=NAN),
        ValueError,
        r"returned the reward nan at step 1; rewards must be finite",
        id="reward-nan",
    ),
    pytest.param(
        lambda: _rollout(reward=INF),
        ValueError,
        r"returned the reward inf at step 1",
        id="reward-inf",
    ),
    pytest.param(
        lambda: _rollout(observation=NAN),
        ValueError,
        r"returned a NaN or infinite observation; observations and states must be finite",
        id="observation-nan",
    ),
    pytest.param(
        lambda: _rollout(state=-INF),
        ValueError,
        r"returned a NaN or infinite info\[\"state\"\]",
        id="state-inf",
    ),
    pytest.param(
        lambda: _returns(rewards=torch.full((4, 2), NAN)),
        ValueError,
        r"`rewards` contains 8 NaN/inf",
        id="m-step-rewards-nan",
    ),
    pytest.param(
        lambda: _returns(next_values=torch.full((4, 2), INF)),
        ValueError,
        r"`next_values` contains 8 NaN/inf",
        id="m-step-next-values-inf",
    ),
    pytest.param(
        lambda: _cartpole(keep="02"),
        TypeError,
        r"`keep` must be a sequence of integer indices, got a string '02'",
        id="keep-str",
    ),
    pytest.param(
        lambda: _cartpole(keep=[0.7, 2]),
        TypeError,
        r"`keep\[0\]` must be an integer index, got float 0.7",
        id="keep-float",
    ),
    pytest.param(
        lambda: _cartpole(keep=[True, 2]),
        TypeError,
        r"`keep\[0\]` must be an integer index, got bool True",
        id="keep-bool",
    ),
    pytest.param(
        lambda: _cartpole(asymmetric="no"),
        TypeError,
        r"`asymmetric` must be True or False, got 'no'",
        id="asymmetric-str",
    ),
    pytest.param(
        lambda: LinearAsymmetricActorCritic(asymmetric="no"),
        TypeError,
        r"`asymmetric` must be True or False, got 'no'",
        id="linear-asymmetric-str",
    ),
    pytest.param(
        lambda: _cartpole(max_episode_steps=True),
        TypeError,
        r"`max_episode_steps` must be an int, got True",
        id="max-episode-steps-bool",
    ),
    pytest.param(
        lambda: AsymmetricActorCritic(42),
        TypeError,
        r"`env` must be a gymnasium id \(str\) or a factory .*got int",
        id="env-int",
    ),
    pytest.param(
        lambda: AsymmetricActorCritic(lambda: None),
        TypeError,
        r"`env` must return a gymnasium.Env when called, got NoneType",
        id="factory-returns-none",
    ),
]
