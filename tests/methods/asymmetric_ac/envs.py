"""Toy gymnasium environments of the bad-input tests: one that never ends (its step counter
raises long after any limit, so a missing limit fails a test instead of hanging it), one that
ends after a fixed number of steps, and ones that return NaN."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np

RUNAWAY = 10_000
"""Steps after which :class:`Forever` raises: far beyond every limit the tests set."""


class Forever(gym.Env):
    """Reward 1 at every step; never terminates or truncates."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self.steps = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.steps += 1
        if self.steps > RUNAWAY:
            raise RuntimeError(f"{RUNAWAY} steps without an end: the time limit was ignored")
        return np.full(2, 0.5, np.float32), 1.0, False, False, {}


class Episodic(Forever):
    """Reward 1 at every step; terminates after ``length`` steps."""

    def __init__(self, length: int = 4) -> None:
        super().__init__()
        self.length = length

    def reset(self, *, seed=None, options=None):
        self.steps = 0
        return super().reset(seed=seed, options=options)

    def step(self, action):
        observation, reward, _, truncated, info = super().step(action)
        return observation, reward, self.steps >= self.length, truncated, info


class BadStep(Episodic):
    """Returns ``reward``, ``observation`` or ``info["state"]`` as given (NaN, say) at its
    second step."""

    def __init__(self, reward=1.0, observation=0.5, state=0.0) -> None:
        super().__init__(length=3)
        self.values = (reward, observation, state)

    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        if self.steps == 2:
            reward, value, state = self.values
            observation = np.full(2, value, np.float32)
            info = {"state": np.full(3, state)}
        else:
            info = {"state": np.zeros(3)}
        return observation, reward, terminated, truncated, info

    def reset(self, *, seed=None, options=None):
        observation, _ = super().reset(seed=seed, options=options)
        return observation, {"state": np.zeros(3)}


NAN, INF = math.nan, math.inf
