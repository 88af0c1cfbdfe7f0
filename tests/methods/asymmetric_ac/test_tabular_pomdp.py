"""The tabular POMDP as a gymnasium Env, and the T-maze built on it."""

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from lightning_info.methods.asymmetric_ac.tabular_pomdp import TabularPOMDP, t_maze


def test_passes_gymnasium_env_checker():
    check_env(t_maze(2, sign_accuracy=0.9), skip_render_check=True)
    check_env(t_maze(1).fully_observable(), skip_render_check=True)


def test_t_maze_arrays_and_aliasing():
    env = t_maze(2)
    assert (env.num_states, env.num_actions, env.num_observations) == (6, 3, 4)
    # the two goals share the corridor and the junction observation
    emitting = [set(np.flatnonzero(env.observation_probs[:, o])) for o in range(4)]
    assert emitting == [{0}, {3}, {1, 4}, {2, 5}]
    np.testing.assert_allclose(env.initial, [0.5, 0, 0, 0.5, 0, 0])
    assert env.rewards[2, 1] == 1.0 and env.rewards[2, 2] == -1.0  # goal up, at the junction
    assert env.rewards[5, 2] == 1.0 and env.rewards[5, 1] == -1.0  # goal down
    np.testing.assert_allclose(env.transitions[2, 1], env.initial)  # a choice restarts the maze
    assert env.transitions[0, 0, 1] == 1.0 and env.transitions[0, 1, 0] == 1.0


def test_info_state_follows_the_dynamics_and_seeding_reproduces():
    def trajectory(seed):
        env = t_maze(1, sign_accuracy=0.75)
        observation, info = env.reset(seed=seed)
        out = [(int(observation), info["state"])]
        for action in [0, 0, 1, 0, 2, 0, 0, 1] * 5:
            observation, reward, terminated, truncated, info = env.step(action)
            assert not terminated and not truncated
            out.append((int(observation), info["state"], reward))
        return out

    first = trajectory(3)
    assert first == trajectory(3)
    assert first != trajectory(4)
    env = t_maze(1, sign_accuracy=0.75)
    for observation, state, *_ in first:
        assert env.observation_probs[state, observation] > 0


def test_fully_observable_variant_shows_the_state():
    env = t_maze(2).fully_observable()
    observation, info = env.reset(seed=0)
    for action in [0, 0, 1, 0, 0, 2]:
        assert observation == info["state"]
        observation, _, _, _, info = env.step(action)
    assert env.num_observations == env.num_states


def test_observation_frequencies_match_the_model():
    env = t_maze(1, sign_accuracy=0.8)
    counts = np.zeros((2, 4))
    for seed in range(2000):
        observation, info = env.reset(seed=seed)
        counts[info["state"] // 2, observation] += 1
    frequencies = counts / counts.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(frequencies[:, :2], [[0.8, 0.2], [0.2, 0.8]], atol=0.04)


def test_bad_arguments():
    good = t_maze(1)
    args = (good.transitions, good.observation_probs, good.rewards, good.initial)
    with pytest.raises(ValueError, match="`initial`.*sum to 1"):
        TabularPOMDP(*args[:3], np.array([0.5, 0.0, 0.6, 0.0]))
    with pytest.raises(ValueError, match=r"`transitions` must have shape \(S, A, S\)"):
        TabularPOMDP(good.transitions[:3, :, :3], *args[1:])
    with pytest.raises(ValueError, match="`observations`.*>= 0"):
        TabularPOMDP(args[0], -good.observation_probs, *args[2:])
    with pytest.raises(ValueError, match=r"`rewards` must have shape \(S, A\)"):
        TabularPOMDP(*args[:2], good.rewards[:, :2], args[3])
    with pytest.raises(ValueError, match="`corridor_length` must be >= 1"):
        t_maze(0)
    with pytest.raises(ValueError, match="`sign_accuracy`"):
        t_maze(1, sign_accuracy=0.3)
    with pytest.raises(RuntimeError, match="reset"):
        t_maze(1).step(0)
    env = t_maze(1)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"`action` must be an int in 0\.\.2"):
        env.step(3)
    with pytest.raises(ValueError, match="`action`"):
        env.step(0.5)
