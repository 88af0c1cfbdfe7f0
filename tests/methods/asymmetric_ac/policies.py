"""Fixed agent-state policies of the T-maze used across the control tests."""

import numpy as np

from lightning_info.methods.asymmetric_ac.exact import AgentStateChain

OBSERVATION_POLICY = np.array(
    [
        [0.8, 0.1, 0.1],  # sign "up": mostly forward
        [0.8, 0.1, 0.1],  # sign "down"
        [0.8, 0.1, 0.1],  # corridor
        [0.2, 0.5, 0.3],  # junction: leans to "up", so values differ between the goals
        [1 / 3, 1 / 3, 1 / 3],  # blank (never the newest entry of a window)
    ]
)
"""A T-maze policy of the newest observation only: the same (s, o-history) chain for every k."""


def observation_policy(chain: AgentStateChain) -> np.ndarray:
    """:data:`OBSERVATION_POLICY` as an ``(n_z, A)`` policy of ``chain``'s windows."""
    newest = chain.agent_states % (chain.encoding.num_observations + 1)
    return OBSERVATION_POLICY[newest]


def random_policy(chain: AgentStateChain, seed: int, scale: float = 1.0) -> np.ndarray:
    """A softmax policy with N(0, scale^2) logits: it depends on the whole window."""
    logits = scale * np.random.default_rng(seed).standard_normal(
        (chain.num_agent_states, chain.num_actions)
    )
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))
    return weights / weights.sum(axis=1, keepdims=True)
