"""Batched rollouts on the (state, window) pair chain, driven by a seeded numpy Generator.

Samples the inputs of m-step TD and of the natural-gradient regression (Lambrechts, Ernst &
Mahajan, ICML 2025): ``(s, z, a) ~ d(s, z) pi(a | z)`` by a rollout from ``p_0`` whose
length ``T`` is geometric, ``Pr(T = t) = (1 - gamma) gamma^t`` (continue with probability
``gamma`` at each step), and m-step continuations from it.
"""

from __future__ import annotations

import numpy as np

from lightning_info.core.validation import require_fraction, require_int
from lightning_info.methods.asymmetric_ac.exact import AgentStateChain, check_policy
from lightning_info.methods.asymmetric_ac.tabular_pomdp import cumulative_distribution


def _draw(cdf_rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One index per row of ``cdf_rows`` (each ending at exactly 1)."""
    u = rng.random(cdf_rows.shape[0])
    return (cdf_rows <= u[:, None]).sum(axis=1)


class ChainSampler:
    """Batched sampling of ``(x, a)`` pairs and transitions of the chain under ``policy``."""

    def __init__(
        self,
        chain: AgentStateChain,
        policy: np.ndarray,
        gamma: float,
        rng: np.random.Generator,
    ) -> None:
        if not isinstance(rng, np.random.Generator):
            raise TypeError(
                f"`rng` must be a numpy Generator (np.random.default_rng(seed)), got {rng!r}."
            )
        self.chain = chain
        self.policy = check_policy(chain, policy)
        self.gamma = require_fraction(gamma, "gamma")
        self.rng = rng
        self._cdf_policy = cumulative_distribution(self.policy)
        self._cdf_initial = cumulative_distribution(chain.initial)
        self._cdf_transitions = cumulative_distribution(chain.pomdp.transitions)
        self._cdf_observations = cumulative_distribution(chain.pomdp.observation_probs)

    def actions(self, pairs: np.ndarray) -> np.ndarray:
        """``a ~ pi(. | z)`` for the window ``z`` of each pair."""
        return _draw(self._cdf_policy[self.chain.agent_state_of_pair[pairs]], self.rng)

    def step(self, pairs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``x' = (s', U(z, a, o'))`` with ``s' ~ P(. | s, a)`` and ``o' ~ O(. | s')``."""
        next_states = _draw(self._cdf_transitions[self.chain.states[pairs], actions], self.rng)
        observations = _draw(self._cdf_observations[next_states], self.rng)
        return self.chain.successor[pairs, next_states, observations]

    def visitation(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``n`` independent ``(x, a) ~ d(x) pi(a | z)``, as pair and action indices."""
        n = require_int(n, "n", 1)
        pairs = np.searchsorted(self._cdf_initial, self.rng.random(n), side="right")
        lengths = self.rng.geometric(1.0 - self.gamma, size=n) - 1
        for t in range(int(lengths.max())):
            moving = np.flatnonzero(lengths > t)
            pairs[moving] = self.step(pairs[moving], self.actions(pairs[moving]))
        return pairs, self.actions(pairs)

    def m_step(
        self, pairs: np.ndarray, actions: np.ndarray, m: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Continue ``m`` steps under ``pi`` from ``(x_0, a_0)``.

        Returns ``sum_{i<m} gamma^i r_i`` and the pair and action ``(x_m, a_m)`` at which the
        m-step TD target bootstraps.
        """
        m = require_int(m, "m", 1)
        returns = np.zeros(pairs.shape[0])
        for i in range(m):
            returns += self.gamma**i * self.chain.rewards[pairs, actions]
            pairs = self.step(pairs, actions)
            actions = self.actions(pairs)
        return returns, pairs, actions
