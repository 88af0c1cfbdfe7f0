"""Control: asymmetric actor-critic for POMDPs (Lambrechts, Ernst & Mahajan, ICML 2025).

LightningModules: :class:`AsymmetricActorCritic` (neural, gymnasium episodes collected in the
training step) and :class:`LinearAsymmetricActorCritic` (the paper's linear setting on a tabular
POMDP). Functional core: a tabular POMDP and wrappers for gymnasium, exact evaluation of agent-state
policies on the (state, window) chain, and linear natural actor-critic with an asymmetric
``Q(s, z, a)`` or symmetric ``Q(z, a)`` critic.
"""

from lightning_info.control.agent_state import WindowEncoding
from lightning_info.control.deep_ac import AsymmetricActorCritic, m_step_returns, make_agent_env
from lightning_info.control.exact import (
    AgentStateChain,
    PolicyEvaluation,
    agent_state_chain,
    critic_error,
    evaluate_policy,
    lift_to_pairs,
    td_fixed_point,
)
from lightning_info.control.linear_ac import (
    ActorCriticHistory,
    SGDSettings,
    critic_feature_index,
    m_step_td,
    natural_actor_critic,
    npg_direction,
    softmax_policy,
)
from lightning_info.control.linear_module import LinearAsymmetricActorCritic
from lightning_info.control.rollouts import ChainSampler
from lightning_info.control.tabular_pomdp import T_MAZE_ACTIONS, TabularPOMDP, t_maze
from lightning_info.control.wrappers import ObservationWindow, PartialObservation

__all__ = [
    "AsymmetricActorCritic",
    "LinearAsymmetricActorCritic",
    "ActorCriticHistory",
    "AgentStateChain",
    "ChainSampler",
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
    "make_agent_env",
    "m_step_td",
    "natural_actor_critic",
    "npg_direction",
    "softmax_policy",
    "t_maze",
    "td_fixed_point",
]
