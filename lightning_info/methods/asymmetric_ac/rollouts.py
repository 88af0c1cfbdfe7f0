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


def _index_array(values, name: str, size: int) -> np.ndarray:
    """``values`` as a 1-D int64 array, or raise unless it holds integer indices in
    ``[0, size)``: a float or bool array, or a negative index (read from the other end by
    numpy), is refused rather than cast or wrapped."""
    array = np.asarray(values)
    if array.dtype.kind not in "iu":
        raise TypeError(f"`{name}` must be an integer array of indices, got dtype {array.dtype}.")
    if array.ndim != 1:
        raise ValueError(f"`{name}` must be 1-D, got shape {array.shape}.")
    if array.size and (array.min() < 0 or array.max() >= size):
        bad = int(array.min()) if array.min() < 0 else int(array.max())
        raise ValueError(f"`{name}` must hold indices in [0, {size}), got {bad}.")
    return array.astype(np.int64)


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

    def _pairs_and_actions(self, pairs, actions) -> tuple[np.ndarray, np.ndarray]:
        pairs = _index_array(pairs, "pairs", self.chain.num_pairs)
        actions = _index_array(actions, "actions", self.chain.num_actions)
        if pairs.shape != actions.shape:
            raise ValueError(
                f"`pairs` and `actions` must have one entry each per sample, got {pairs.shape[0]} "
                f"pairs and {actions.shape[0]} actions."
            )
        return pairs, actions

    def actions(self, pairs: np.ndarray) -> np.ndarray:
        """``a ~ pi(. | z)`` for the window ``z`` of each pair (indices in ``[0, n_pairs)``)."""
        return self._actions(_index_array(pairs, "pairs", self.chain.num_pairs))

    def _actions(self, pairs: np.ndarray) -> np.ndarray:
        return _draw(self._cdf_policy[self.chain.agent_state_of_pair[pairs]], self.rng)

    def step(self, pairs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``x' = (s', U(z, a, o'))`` with ``s' ~ P(. | s, a)`` and ``o' ~ O(. | s')``."""
        return self._step(*self._pairs_and_actions(pairs, actions))

    def _step(self, pairs: np.ndarray, actions: np.ndarray) -> np.ndarray:
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
            pairs[moving] = self._step(pairs[moving], self._actions(pairs[moving]))
        return pairs, self._actions(pairs)

    def m_step(
        self, pairs: np.ndarray, actions: np.ndarray, m: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Continue ``m`` steps under ``pi`` from ``(x_0, a_0)``.

        Returns ``sum_{i<m} gamma^i r_i`` and the pair and action ``(x_m, a_m)`` at which the
        m-step TD target bootstraps.
        """
        m = require_int(m, "m", 1)
        pairs, actions = self._pairs_and_actions(pairs, actions)
        returns = np.zeros(pairs.shape[0])
        for i in range(m):
            returns += self.gamma**i * self.chain.rewards[pairs, actions]
            pairs = self._step(pairs, actions)
            actions = self._actions(pairs)
        return returns, pairs, actions
