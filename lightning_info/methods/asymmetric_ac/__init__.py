"""Asymmetric actor-critic for POMDPs (Lambrechts, Ernst & Mahajan, ICML 2025).

See README.md in this folder."""

from lightning_info.methods.asymmetric_ac.agent_state import WindowEncoding
from lightning_info.methods.asymmetric_ac.exact import (
    AgentStateChain,
    PolicyEvaluation,
    agent_state_chain,
    critic_error,
    evaluate_policy,
    lift_to_pairs,
    td_fixed_point,
)
from lightning_info.methods.asymmetric_ac.functional import (
    ActorCriticHistory,
    SGDSettings,
    critic_feature_index,
    m_step_td,
    natural_actor_critic,
    npg_direction,
    softmax_policy,
)
from lightning_info.methods.asymmetric_ac.linear_module import LinearAsymmetricActorCritic
from lightning_info.methods.asymmetric_ac.module import (
    A2COptions,
    AsymmetricActorCritic,
    m_step_returns,
    make_agent_env,
)
from lightning_info.methods.asymmetric_ac.rollouts import ChainSampler
from lightning_info.methods.asymmetric_ac.tabular_pomdp import T_MAZE_ACTIONS, TabularPOMDP, t_maze
from lightning_info.methods.asymmetric_ac.wrappers import ObservationWindow, PartialObservation

__all__ = [
    "ActorCriticHistory",
    "A2COptions",
    "AgentStateChain",
    "AsymmetricActorCritic",
    "ChainSampler",
    "LinearAsymmetricActorCritic",
    "ObservationWindow",
    "PartialObservation",
    "PolicyEvaluation",
    "SGDSettings",
    "T_MAZE_ACTIONS",
    "TabularPOMDP",
    "WindowEncoding",
    "agent_state_chain",
    "critic_error",
    "critic_feature_index",
    "evaluate_policy",
    "lift_to_pairs",
    "m_step_returns",
    "m_step_td",
    "make_agent_env",
    "natural_actor_critic",
    "npg_direction",
    "softmax_policy",
    "t_maze",
    "td_fixed_point",
]
