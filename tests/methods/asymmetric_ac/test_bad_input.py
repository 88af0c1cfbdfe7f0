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


# Tabular core: a T-maze with a one-observation window (4 pairs, 3 agent states, 3 actions).
import math  # noqa: E402

import numpy as np  # noqa: E402

from lightning_info.methods.asymmetric_ac import (  # noqa: E402
    AgentStateChain,
    ChainSampler,
    ObservationWindow,
    PartialObservation,
    PolicyEvaluation,
    SGDSettings,
    TabularPOMDP,
    WindowEncoding,
    agent_state_chain,
    critic_error,
    critic_feature_index,
    evaluate_policy,
    lift_to_pairs,
    m_step_td,
    natural_actor_critic,
    npg_direction,
    softmax_policy,
    td_fixed_point,
)

_MAZE = t_maze(1)
_CHAIN: AgentStateChain = agent_state_chain(_MAZE, 1)
_OTHER_CHAIN = agent_state_chain(t_maze(2), 2)
_UNIFORM = np.full((_CHAIN.num_agent_states, _CHAIN.num_actions), 1 / 3)
_EVALUATION: PolicyEvaluation = evaluate_policy(_CHAIN, _UNIFORM, 0.9)
_OTHER_EVALUATION = evaluate_policy(
    _OTHER_CHAIN, np.full((_OTHER_CHAIN.num_agent_states, 3), 1 / 3), 0.9
)
_FEATURES = critic_feature_index(_CHAIN, "asymmetric")[0]
_SMALL = SGDSettings(num_steps=2, batch_size=2)


def _rng():
    return np.random.default_rng(0)


def _sampler():
    return ChainSampler(_CHAIN, _UNIFORM, 0.9, _rng())


def _stepped_maze():
    maze = t_maze(1)
    maze.reset(seed=0)
    return maze


def _pomdp(**changes):
    arrays = {
        "transitions": _MAZE.transitions,
        "observations": _MAZE.observation_probs,
        "rewards": _MAZE.rewards,
        "initial": _MAZE.initial,
    }
    return TabularPOMDP(**{**arrays, **changes})


BAD_INPUT += [
    pytest.param(
        lambda: _pomdp(transitions=_MAZE.transitions.astype(str)),
        TypeError,
        r"`transitions` must hold real numbers, got dtype <U",
        id="tabular-pomdp-string-transitions",
    ),
    pytest.param(
        lambda: _pomdp(rewards=np.full_like(_MAZE.rewards, math.nan)),
        ValueError,
        r"`rewards` must be finite",
        id="tabular-pomdp-nan-rewards",
    ),
    pytest.param(
        lambda: _pomdp(initial=[]),
        ValueError,
        r"`initial` must be a non-empty 1-D array",
        id="tabular-pomdp-empty-initial",
    ),
    pytest.param(
        lambda: _pomdp(rewards=_MAZE.rewards[:, :2]),
        ValueError,
        r"`rewards` must have shape \(S, A\) = \(4, 3\)",
        id="tabular-pomdp-rewards-shape",
    ),
    pytest.param(
        lambda: _pomdp(observations=-_MAZE.observation_probs),
        ValueError,
        r"`observations` must hold finite probabilities >= 0",
        id="tabular-pomdp-negative-observations",
    ),
    pytest.param(
        lambda: _stepped_maze().step(True),
        ValueError,
        r"`action` must be an int in 0..2, got True",
        id="tabular-pomdp-step-bool",
    ),
    pytest.param(
        lambda: _stepped_maze().step(1.0),
        ValueError,
        r"`action` must be an int in 0..2, got 1.0",
        id="tabular-pomdp-step-float",
    ),
    pytest.param(
        lambda: t_maze(1).step(0),
        RuntimeError,
        r"Call `reset\(\)` before `step\(\)`",
        id="tabular-pomdp-step-before-reset",
    ),
    pytest.param(
        lambda: WindowEncoding(True, 2),
        TypeError,
        r"`num_observations` must be an int, got True",
        id="window-encoding-bool",
    ),
    pytest.param(
        lambda: WindowEncoding(3, 2).encode([0.7, 1]),
        TypeError,
        r"`window\[0\]` must be an integer index, got float 0.7",
        id="window-encoding-encode-float",
    ),
    pytest.param(
        lambda: WindowEncoding(3, 2).encode(["1", "2"]),
        TypeError,
        r"`window\[0\]` must be an integer index, got str '1'",
        id="window-encoding-encode-str",
    ),
    pytest.param(
        lambda: WindowEncoding(3, 2).encode([True, 1]),
        TypeError,
        r"`window\[0\]` must be an integer index, got bool True",
        id="window-encoding-encode-bool",
    ),
    pytest.param(
        lambda: WindowEncoding(3, 2).encode([0, 4]),
        ValueError,
        r"`window\[1\]` must be an index in \[0, 4\), got 4",
        id="window-encoding-encode-out-of-range",
    ),
    pytest.param(
        lambda: WindowEncoding(3, 2).decode(1.5),
        TypeError,
        r"`code` must be an integer index, got float 1.5",
        id="window-encoding-decode-float",
    ),
    pytest.param(
        lambda: WindowEncoding(3, 2).decode(True),
        TypeError,
        r"`code` must be an integer index, got bool True",
        id="window-encoding-decode-bool",
    ),
    pytest.param(
        lambda: WindowEncoding(3, 2).decode(16),
        ValueError,
        r"`code` must be an index in \[0, 16\), got 16",
        id="window-encoding-decode-out-of-range",
    ),
    pytest.param(
        lambda: agent_state_chain(_MAZE, 1.0),
        TypeError,
        r"`k` must be an int, got 1.0",
        id="agent-state-chain-float-k",
    ),
    pytest.param(
        lambda: agent_state_chain(gym.make("CartPole-v1"), 1),
        TypeError,
        r"`env` must be \(or wrap\) a TabularPOMDP, got CartPoleEnv",
        id="agent-state-chain-not-tabular",
    ),
    pytest.param(
        lambda: evaluate_policy(_MAZE, _UNIFORM, 0.9),
        TypeError,
        r"`chain` must be an AgentStateChain \(from agent_state_chain.*got TabularPOMDP",
        id="evaluate-policy-not-a-chain",
    ),
    pytest.param(
        lambda: evaluate_policy(_CHAIN, _UNIFORM.astype(str), 0.9),
        TypeError,
        r"`policy` must hold real numbers, got dtype <U",
        id="evaluate-policy-string-policy",
    ),
    pytest.param(
        lambda: evaluate_policy(_CHAIN, _UNIFORM * math.nan, 0.9),
        ValueError,
        r"`policy` must hold finite probabilities >= 0",
        id="evaluate-policy-nan-policy",
    ),
    pytest.param(
        lambda: evaluate_policy(_CHAIN, _UNIFORM[:-1], 0.9),
        ValueError,
        r"`policy` must have shape \(n_z, A\) = \(3, 3\)",
        id="evaluate-policy-shape",
    ),
    pytest.param(
        lambda: evaluate_policy(_CHAIN, _UNIFORM, True),
        TypeError,
        r"`gamma` must be a real number, got True",
        id="evaluate-policy-bool-gamma",
    ),
    pytest.param(
        lambda: evaluate_policy(_CHAIN, _UNIFORM, 1.0),
        ValueError,
        r"`gamma` must lie in \[0, 1\), got 1.0",
        id="evaluate-policy-gamma-one",
    ),
    pytest.param(
        lambda: critic_error(_CHAIN, _EVALUATION, _EVALUATION.q * math.nan),
        ValueError,
        r"`q_hat` must be finite",
        id="critic-error-nan",
    ),
    pytest.param(
        lambda: critic_error(_CHAIN, _OTHER_EVALUATION, _OTHER_EVALUATION.q),
        ValueError,
        r"`evaluation` belongs to another chain: its Q has shape \(14, 3\)",
        id="critic-error-evaluation-of-another-chain",
    ),
    pytest.param(
        lambda: critic_error(_CHAIN, _EVALUATION, _EVALUATION.q[:-1]),
        ValueError,
        r"`q_hat` must have shape \(n_pairs, A\) = \(4, 3\)",
        id="critic-error-shape",
    ),
    pytest.param(
        lambda: lift_to_pairs(_CHAIN, _UNIFORM * math.nan),
        ValueError,
        r"`values_z` must be finite",
        id="lift-to-pairs-nan",
    ),
    pytest.param(
        lambda: lift_to_pairs(_MAZE, _UNIFORM),
        TypeError,
        r"`chain` must be an AgentStateChain",
        id="lift-to-pairs-not-a-chain",
    ),
    pytest.param(
        lambda: td_fixed_point(_CHAIN, _EVALUATION, 1, _FEATURES - 1),
        ValueError,
        r"`feature_index` must hold feature indices >= 0, got -1",
        id="td-fixed-point-negative-feature",
    ),
    pytest.param(
        lambda: td_fixed_point(_CHAIN, _EVALUATION, 1, _FEATURES.astype(float)),
        ValueError,
        r"`feature_index` must be an int array of shape \(4, 3\)",
        id="td-fixed-point-float-features",
    ),
    pytest.param(
        lambda: td_fixed_point(_CHAIN, _EVALUATION, True, _FEATURES),
        TypeError,
        r"`m` must be an int, got True",
        id="td-fixed-point-bool-m",
    ),
    pytest.param(
        lambda: td_fixed_point(_CHAIN, _OTHER_EVALUATION, 1, _FEATURES),
        ValueError,
        r"`evaluation` belongs to another chain",
        id="td-fixed-point-evaluation-of-another-chain",
    ),
    pytest.param(
        lambda: critic_feature_index(_CHAIN, "asym"),
        ValueError,
        r"`kind` must be 'asymmetric' or 'symmetric', got 'asym'",
        id="critic-feature-index-kind",
    ),
    pytest.param(
        lambda: critic_feature_index(_MAZE, "asymmetric"),
        TypeError,
        r"`chain` must be an AgentStateChain",
        id="critic-feature-index-not-a-chain",
    ),
    pytest.param(
        lambda: softmax_policy(np.zeros((3, 0))),
        ValueError,
        r"`theta` has no actions",
        id="softmax-policy-no-actions",
    ),
    pytest.param(
        lambda: softmax_policy(_UNIFORM * math.nan),
        ValueError,
        r"`theta` must be a finite \(n_z, A\) array",
        id="softmax-policy-nan",
    ),
    pytest.param(
        lambda: softmax_policy([["0.5"]]),
        TypeError,
        r"`theta` must hold real numbers",
        id="softmax-policy-strings",
    ),
    pytest.param(
        lambda: SGDSettings(num_steps=True),
        TypeError,
        r"`num_steps` must be an int, got True",
        id="sgd-settings-bool-steps",
    ),
    pytest.param(
        lambda: SGDSettings(batch_size=2.0),
        TypeError,
        r"`batch_size` must be an int, got 2.0",
        id="sgd-settings-float-batch",
    ),
    pytest.param(
        lambda: SGDSettings(step_size=math.nan),
        ValueError,
        r"`step_size` must be finite, got nan",
        id="sgd-settings-nan-step",
    ),
    pytest.param(
        lambda: SGDSettings(burn_in=1.0),
        ValueError,
        r"`burn_in` must lie in \[0, 1\), got 1.0",
        id="sgd-settings-burn-in-one",
    ),
    pytest.param(
        lambda: m_step_td(_CHAIN, _UNIFORM, 0.9, "asymmetric", _rng(), 1, {"num_steps": 2}),
        TypeError,
        r"`settings` must be an SGDSettings .* or None, got dict",
        id="m-step-td-settings-dict",
    ),
    pytest.param(
        lambda: m_step_td(_CHAIN, _UNIFORM, 0.9, "symmetric", 0, 1, _SMALL),
        TypeError,
        r"`rng` must be a numpy Generator",
        id="m-step-td-int-rng",
    ),
    pytest.param(
        lambda: m_step_td(_CHAIN, _UNIFORM, 0.9, "symmetric", _rng(), 0, _SMALL),
        ValueError,
        r"`m` must be >= 1, got 0",
        id="m-step-td-zero-m",
    ),
    pytest.param(
        lambda: npg_direction(_CHAIN, _UNIFORM, 0.9, _EVALUATION.q * math.nan, _rng(), _SMALL),
        ValueError,
        r"`critic` must be finite",
        id="npg-direction-nan-critic",
    ),
    pytest.param(
        lambda: npg_direction(_CHAIN, _UNIFORM, 0.9, _EVALUATION.q, _rng(), {}),
        TypeError,
        r"`settings` must be an SGDSettings .* got dict",
        id="npg-direction-settings-empty-dict",
    ),
    pytest.param(
        lambda: npg_direction(_CHAIN, _UNIFORM, 0.9, _EVALUATION.q[:-1], _rng(), _SMALL),
        ValueError,
        r"`critic` must have shape \(n_pairs, A\) = \(4, 3\)",
        id="npg-direction-critic-shape",
    ),
    pytest.param(
        lambda: natural_actor_critic(_CHAIN, 0.9, "symmetric", _rng(), True, 0.1),
        TypeError,
        r"`iterations` must be an int, got True",
        id="natural-actor-critic-bool-iterations",
    ),
    pytest.param(
        lambda: natural_actor_critic(_CHAIN, 0.9, "symmetric", _rng(), 1, math.nan),
        ValueError,
        r"`actor_step_size` must be finite",
        id="natural-actor-critic-nan-step",
    ),
    pytest.param(
        lambda: natural_actor_critic(
            _CHAIN, 0.9, "symmetric", _rng(), 1, 0.1, theta=np.zeros((4, 3))
        ),
        ValueError,
        r"`theta` must have shape \(n_z, A\) = \(3, 3\), got \(4, 3\)",
        id="natural-actor-critic-theta-shape",
    ),
    pytest.param(
        lambda: natural_actor_critic(_CHAIN, 0.9, "symmetric", _rng(), 1, 0.1, actor={}),
        TypeError,
        r"`actor` must be an SGDSettings",
        id="natural-actor-critic-actor-settings-dict",
    ),
    pytest.param(
        lambda: natural_actor_critic(
            _CHAIN, 0.9, "bad", _rng(), 1, 0.1, critic=_SMALL, actor=_SMALL
        ),
        ValueError,
        r"`kind` must be 'asymmetric' or 'symmetric', got 'bad'",
        id="natural-actor-critic-kind",
    ),
    pytest.param(
        lambda: ChainSampler(_CHAIN, _UNIFORM, 0.9, 0),
        TypeError,
        r"`rng` must be a numpy Generator",
        id="chain-sampler-int-rng",
    ),
    pytest.param(
        lambda: _sampler().visitation(2.0),
        TypeError,
        r"`n` must be an int, got 2.0",
        id="chain-sampler-visitation-float",
    ),
    pytest.param(
        lambda: _sampler().m_step(np.array([-1]), np.array([0]), 1),
        ValueError,
        r"`pairs` must hold indices in \[0, 4\), got -1",
        id="chain-sampler-m-step-negative-pair",
    ),
    pytest.param(
        lambda: _sampler().m_step(np.array([0.5]), np.array([0]), 1),
        TypeError,
        r"`pairs` must be an integer array of indices, got dtype float64",
        id="chain-sampler-m-step-float-pairs",
    ),
    pytest.param(
        lambda: _sampler().m_step(np.array([0, 1]), np.array([0]), 1),
        ValueError,
        r"got 2 pairs and 1 actions",
        id="chain-sampler-m-step-mismatched-lengths",
    ),
    pytest.param(
        lambda: _sampler().step(np.array([0]), np.array([7])),
        ValueError,
        r"`actions` must hold indices in \[0, 3\), got 7",
        id="chain-sampler-step-action-out-of-range",
    ),
    pytest.param(
        lambda: _sampler().actions(np.array([-1])),
        ValueError,
        r"`pairs` must hold indices in \[0, 4\), got -1",
        id="chain-sampler-actions-negative-pair",
    ),
    pytest.param(
        lambda: ObservationWindow(t_maze(1), True),
        TypeError,
        r"`k` must be an int, got True",
        id="observation-window-bool-k",
    ),
    pytest.param(
        lambda: ObservationWindow(gym.make("CartPole-v1"), 2, fill=math.nan),
        ValueError,
        r"`fill` must be finite, got nan",
        id="observation-window-nan-fill",
    ),
    pytest.param(
        lambda: ObservationWindow(gym.make("Blackjack-v1"), 2),
        TypeError,
        r"supports Discrete and Box observation spaces, got Tuple",
        id="observation-window-tuple-space",
    ),
    pytest.param(
        lambda: ObservationWindow(gym.make("CartPole-v1"), 2).num_agent_states,
        TypeError,
        r"Window codes exist only for Discrete observation spaces",
        id="observation-window-codes-of-box",
    ),
    pytest.param(
        lambda: PartialObservation(gym.make("CartPole-v1"), [4]),
        ValueError,
        r"`keep` indices must lie in \[0, 4\)",
        id="partial-observation-out-of-range",
    ),
    pytest.param(
        lambda: PartialObservation(gym.make("CartPole-v1"), []),
        ValueError,
        r"`keep` must name at least one coordinate",
        id="partial-observation-empty",
    ),
    pytest.param(
        lambda: PartialObservation(gym.make("CartPole-v1"), [0, 0]),
        ValueError,
        r"`keep` must not repeat a coordinate",
        id="partial-observation-repeat",
    ),
    pytest.param(
        lambda: PartialObservation(gym.make("CartPole-v1"), [-1]),
        ValueError,
        r"`keep index` must be >= 0, got -1",
        id="partial-observation-negative",
    ),
    pytest.param(
        lambda: PartialObservation(t_maze(1), [0]),
        TypeError,
        r"needs a 1-D Box observation space, got Discrete\(4\)",
        id="partial-observation-discrete",
    ),
]
