"""Gymnasium wrappers that build the agent state and the privileged signal of asymmetric RL.

``ObservationWindow`` turns observations into the window agent state ``z_t`` of the last ``k``
observations; ``PartialObservation`` masks coordinates of a ``Box`` observation and hands the full
observation to the critic as ``info["state"]`` (Lambrechts, Ernst & Mahajan, ICML 2025:
the asymmetric critic sees ``s_t`` at training time, the actor only ``z_t``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lightning_info.core.optional import require_extra
from lightning_info.core.validation import require_finite, require_int
from lightning_info.methods.asymmetric_ac.agent_state import WindowEncoding

gym = require_extra("gymnasium", "control", "The actor-critic modules")
spaces = gym.spaces


class ObservationWindow(gym.Wrapper):
    """Observation = the last ``k`` observations of ``env``, oldest first.

    For a ``Discrete(n)`` observation space the window is an ``int64`` array in
    ``MultiDiscrete([n + 1] * k)``, padded at the start with the blank symbol ``n``; its integer
    code (:class:`~lightning_info.methods.asymmetric_ac.agent_state.WindowEncoding`,
    ``encoding.size`` codes) is
    returned as ``info["agent_state"]`` so tabular code can index one-hot features by it.

    For a ``Box`` observation space the window has shape ``(k, *shape)``, padded with ``fill``
    (default ``0.0``); there is no integer code.

    Other entries of ``info`` (such as ``info["state"]``) pass through unchanged.
    """

    def __init__(self, env: gym.Env, k: int, fill: float = 0.0) -> None:
        super().__init__(env)
        self.k = require_int(k, "k", 1)
        inner = env.observation_space
        self.encoding: WindowEncoding | None = None
        if isinstance(inner, spaces.Discrete):
            if int(inner.start) != 0:
                raise ValueError(
                    f"ObservationWindow needs a Discrete space starting at 0, got start="
                    f"{inner.start}; shift the observations first."
                )
            self.encoding = WindowEncoding(int(inner.n), self.k)
            self._blank = np.full(self.k, self.encoding.blank, dtype=np.int64)
            self.observation_space = spaces.MultiDiscrete([self.encoding.blank + 1] * self.k)
        elif isinstance(inner, spaces.Box):
            fill = require_finite(fill, "fill")
            self._blank = np.full((self.k, *inner.shape), fill, dtype=inner.dtype)
            low = np.broadcast_to(np.minimum(inner.low, fill), self._blank.shape)
            high = np.broadcast_to(np.maximum(inner.high, fill), self._blank.shape)
            self.observation_space = spaces.Box(low, high, dtype=inner.dtype)
        else:
            raise TypeError(
                "ObservationWindow supports Discrete and Box observation spaces, got "
                f"{type(inner).__name__}."
            )
        self._window = self._blank.copy()
        self._code: int | None = None

    @property
    def num_agent_states(self) -> int:
        """Number of window codes, ``(n + 1)^k`` (Discrete observations only)."""
        return self._require_encoding().size

    def _require_encoding(self) -> WindowEncoding:
        if self.encoding is None:
            raise TypeError("Window codes exist only for Discrete observation spaces.")
        return self.encoding

    def _push(self, observation, info: dict) -> tuple[np.ndarray, dict]:
        self._window[:-1] = self._window[1:]
        self._window[-1] = observation
        if self.encoding is not None:
            self._code = int(self.encoding.update(self._code, int(observation)))
            info = {**info, "agent_state": self._code}
        return self._window.copy(), info

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        observation, info = self.env.reset(seed=seed, options=options)
        self._window = self._blank.copy()
        self._code = self.encoding.empty if self.encoding is not None else None
        return self._push(observation, info)

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        window, info = self._push(observation, info)
        return window, reward, terminated, truncated, info


class PartialObservation(gym.Wrapper):
    """Keep the coordinates ``keep`` (in that order) of a 1-D ``Box`` observation.

    The agent sees ``observation[keep]``; the full observation is returned as ``info["state"]``
    (a copy, replacing any ``"state"`` of ``env``), the privileged input of an asymmetric critic.
    E.g. ``PartialObservation(gym.make("CartPole-v1"), keep=[0, 2])`` hides both velocities.
    """

    def __init__(self, env: gym.Env, keep: Sequence[int]) -> None:
        super().__init__(env)
        inner = env.observation_space
        if not isinstance(inner, spaces.Box) or len(inner.shape) != 1:
            raise TypeError(
                f"PartialObservation needs a 1-D Box observation space, got {inner}; flatten it "
                "first (gymnasium.wrappers.FlattenObservation)."
            )
        dim = inner.shape[0]
        indices = []
        for index in keep:
            if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
                raise TypeError(f"`keep` must hold ints, got {index!r}.")
            indices.append(require_int(int(index), "keep index", 0))
        if not indices:
            raise ValueError("`keep` must name at least one coordinate.")
        if max(indices) >= dim:
            raise ValueError(
                f"`keep` indices must lie in [0, {dim}) for a {dim}-D observation, got {indices}."
            )
        if len(set(indices)) != len(indices):
            raise ValueError(f"`keep` must not repeat a coordinate, got {indices}.")
        self.keep = np.array(indices, dtype=np.int64)
        self.observation_space = spaces.Box(
            inner.low[self.keep], inner.high[self.keep], dtype=inner.dtype
        )

    def _split(self, observation, info: dict) -> tuple[np.ndarray, dict]:
        full = np.array(observation, copy=True)
        return full[self.keep], {**info, "state": full}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        observation, info = self.env.reset(seed=seed, options=options)
        return self._split(observation, info)

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        observation, info = self._split(observation, info)
        return observation, reward, terminated, truncated, info
