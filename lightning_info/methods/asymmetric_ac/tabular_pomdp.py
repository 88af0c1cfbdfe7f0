"""A tabular POMDP given by explicit arrays, as a ``gymnasium.Env``, and a T-maze built on it.

The model is the one of Lambrechts, Ernst & Mahajan (ICML 2025):

    s_0 ~ p_0,   o_t ~ O(. | s_t),   r_t = R(s_t, a_t),   s_{t+1} ~ P(. | s_t, a_t),

with the observation emitted on arrival in a state (also at reset). The task is continuing: it
never terminates or truncates by itself (wrap it in ``gymnasium.wrappers.TimeLimit`` for episodes),
and the discount factor belongs to the caller. The hidden state is the privileged signal of the
asymmetric critic: ``reset`` and ``step`` return it as ``info["state"]`` (an ``int``).
"""

from __future__ import annotations

import operator

import numpy as np

from lightning_info.core.optional import require_extra
from lightning_info.core.validation import require_finite, require_int

gym = require_extra("gymnasium", "control", "The actor-critic modules")
spaces = gym.spaces

_TOLERANCE = 1e-9


def _real_copy(value, name: str) -> np.ndarray:
    """A float64 copy of ``value``, or raise unless it holds real numbers (strings such as
    ``"0.5"`` and complex or object arrays are refused, not parsed)."""
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"`{name}` must hold real numbers, got dtype {array.dtype}.")
    return np.array(array, dtype=np.float64)


def _distributions(array: np.ndarray, name: str) -> np.ndarray:
    """``array`` read-only, or raise unless it holds distributions along its last axis."""
    if not np.isfinite(array).all() or (array < 0).any():
        raise ValueError(f"`{name}` must hold finite probabilities >= 0.")
    sums = array.sum(axis=-1)
    if not np.allclose(sums, 1.0, rtol=0.0, atol=_TOLERANCE):
        worst = float(np.abs(sums - 1.0).max())
        raise ValueError(
            f"Every distribution in `{name}` (last axis) must sum to 1; one is off by {worst:.3g}."
        )
    array.setflags(write=False)
    return array


def cumulative_distribution(probabilities: np.ndarray) -> np.ndarray:
    """Cumulative sums along the last axis, ending at exactly 1 so that ``u < 1`` always lands."""
    cdf = probabilities.cumsum(axis=-1)
    return cdf / cdf[..., -1:]


class TabularPOMDP(gym.Env):
    """Continuing POMDP with ``S`` states, ``A`` actions and ``n`` observations.

    Args:
        transitions: ``P[s, a, s']``, shape ``(S, A, S)``, rows sum to 1.
        observations: ``O[s', o]``, shape ``(S, n)``, the law of the observation emitted on
            arrival in ``s'``; rows sum to 1. Several states sharing an observation make it a POMDP.
        rewards: ``R[s, a]``, shape ``(S, A)``, the (deterministic) reward of ``a`` in ``s``.
        initial: ``p_0[s]``, shape ``(S,)``.

    Observations and actions are ``Discrete``; randomness comes from ``reset(seed=...)``.
    ``info["state"]`` holds the hidden state after ``reset`` and after every ``step``.
    """

    metadata = {"render_modes": []}

    def __init__(self, transitions, observations, rewards, initial) -> None:
        initial = _real_copy(initial, "initial")
        transitions = _real_copy(transitions, "transitions")
        observations = _real_copy(observations, "observations")
        rewards = _real_copy(rewards, "rewards")
        if initial.ndim != 1 or initial.shape[0] < 1:
            raise ValueError(f"`initial` must be a non-empty 1-D array, got shape {initial.shape}.")
        num_states = initial.shape[0]
        if transitions.ndim != 3 or transitions.shape[::2] != (num_states, num_states):
            raise ValueError(
                f"`transitions` must have shape (S, A, S) with S = {num_states} states (the length "
                f"of `initial`), got {transitions.shape}."
            )
        num_actions = transitions.shape[1]
        if observations.ndim != 2 or observations.shape[0] != num_states:
            raise ValueError(
                f"`observations` must have shape (S, n) with S = {num_states}, got "
                f"{observations.shape}."
            )
        if rewards.shape != (num_states, num_actions):
            raise ValueError(
                f"`rewards` must have shape (S, A) = {(num_states, num_actions)}, got "
                f"{rewards.shape}."
            )
        if not np.isfinite(rewards).all():
            raise ValueError("`rewards` must be finite.")
        rewards.setflags(write=False)
        initial = _distributions(initial, "initial")
        transitions = _distributions(transitions, "transitions")
        observations = _distributions(observations, "observations")
        self.transitions = transitions
        self.observation_probs = observations
        self.rewards = rewards
        self.initial = initial
        self.observation_space = spaces.Discrete(observations.shape[1])
        self.action_space = spaces.Discrete(num_actions)
        self._cdf_initial = cumulative_distribution(initial)
        self._cdf_transitions = cumulative_distribution(transitions)
        self._cdf_observations = cumulative_distribution(observations)
        self._state: int | None = None

    @property
    def num_states(self) -> int:
        return self.initial.shape[0]

    @property
    def num_actions(self) -> int:
        return self.transitions.shape[1]

    @property
    def num_observations(self) -> int:
        return self.observation_probs.shape[1]

    def fully_observable(self) -> TabularPOMDP:
        """The same model with ``O = I``: the observation is the state (``n = S``)."""
        return TabularPOMDP(self.transitions, np.eye(self.num_states), self.rewards, self.initial)

    def _draw(self, cdf: np.ndarray) -> int:
        return int(cdf.searchsorted(self.np_random.random(), side="right"))

    def _observe(self) -> np.int64:
        return np.int64(self._draw(self._cdf_observations[self._state]))

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._state = self._draw(self._cdf_initial)
        return self._observe(), {"state": self._state}

    def step(self, action):
        if self._state is None:
            raise RuntimeError("Call `reset()` before `step()`.")
        try:
            index = -1 if isinstance(action, (bool, np.bool_)) else operator.index(action)
        except TypeError:
            index = -1
        if not 0 <= index < self.num_actions:
            raise ValueError(
                f"`action` must be an int in 0..{self.num_actions - 1}, got {action!r}."
            )
        action = index
        reward = float(self.rewards[self._state, action])
        self._state = self._draw(self._cdf_transitions[self._state, action])
        return self._observe(), reward, False, False, {"state": self._state}


T_MAZE_ACTIONS = ("forward", "up", "down")
"""Action names of :func:`t_maze`, in index order."""


def t_maze(
    corridor_length: int = 1,
    sign_accuracy: float = 1.0,
    reward: float = 1.0,
    penalty: float = -1.0,
) -> TabularPOMDP:
    """T-maze (Bakker, "Reinforcement Learning with Long Short-Term Memory", NeurIPS 2001).

    The goal ``g`` (0 = up, 1 = down) is drawn uniformly at the start; the agent walks a corridor
    of positions ``0 .. L`` (``L = corridor_length``) with the junction at ``L``. State index
    ``s = g (L + 1) + p``. Observations: ``0``/``1`` = the sign at ``p = 0`` pointing up/down
    (right with probability ``sign_accuracy``), ``2`` = corridor (``0 < p < L``), ``3`` =
    junction. Actions ``forward``, ``up``, ``down``: ``forward`` moves ``p -> min(p + 1, L)``;
    ``up``/``down`` do nothing before the junction, and at the junction pay ``reward`` (matches
    ``g``) or ``penalty`` and restart the maze from ``p_0``. Only the sign tells ``g`` apart, so an
    agent state whose window misses the sign is aliased at the junction.
    """
    length = require_int(corridor_length, "corridor_length", 1)
    sign_accuracy = require_finite(sign_accuracy, "sign_accuracy")
    if not 0.5 <= sign_accuracy <= 1.0:
        raise ValueError(f"`sign_accuracy` must lie in [0.5, 1], got {sign_accuracy!r}.")
    reward = require_finite(reward, "reward")
    penalty = require_finite(penalty, "penalty")
    positions = length + 1
    num_states = 2 * positions
    initial = np.zeros(num_states)
    initial[[0, positions]] = 0.5
    transitions = np.zeros((num_states, 3, num_states))
    observations = np.zeros((num_states, 4))
    rewards = np.zeros((num_states, 3))
    for goal in (0, 1):
        for position in range(positions):
            s = goal * positions + position
            if position == 0:
                observations[s, goal] = sign_accuracy
                observations[s, 1 - goal] = 1.0 - sign_accuracy
            else:
                observations[s, 3 if position == length else 2] = 1.0
            transitions[s, 0, goal * positions + min(position + 1, length)] = 1.0
            for action in (1, 2):
                if position == length:
                    transitions[s, action] = initial
                    rewards[s, action] = reward if action - 1 == goal else penalty
                else:
                    transitions[s, action, s] = 1.0
    return TabularPOMDP(transitions, observations, rewards, initial)
