"""ObservationWindow (window contents, blank padding, integer codes) and PartialObservation."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

from lightning_info.methods.asymmetric_ac.tabular_pomdp import t_maze
from lightning_info.methods.asymmetric_ac.wrappers import ObservationWindow, PartialObservation


def test_discrete_window_pads_with_blank_and_slides():
    inner = t_maze(1, sign_accuracy=0.7)
    env = ObservationWindow(inner, 3)
    assert env.observation_space == spaces.MultiDiscrete([5, 5, 5])
    assert env.num_agent_states == 125
    window, info = env.reset(seed=1)
    history = [int(window[-1])]
    np.testing.assert_array_equal(window[:2], [4, 4])  # blank = number of observations
    assert "state" in info
    for action in [0, 1, 0, 2, 0]:
        window, _, _, _, info = env.step(action)
        history.append(int(window[-1]))
        padded = [4, 4, *history][-3:]
        np.testing.assert_array_equal(window, padded)
        assert info["agent_state"] == env.encoding.encode(padded)
        np.testing.assert_array_equal(env.encoding.decode(info["agent_state"]), window)
    window, info = env.reset()
    np.testing.assert_array_equal(window[:2], [4, 4])


def test_discrete_window_matches_the_unwrapped_observations():
    env = ObservationWindow(t_maze(2, sign_accuracy=0.8), 2)
    reference = t_maze(2, sign_accuracy=0.8)
    window, _ = env.reset(seed=5)
    observation, _ = reference.reset(seed=5)
    for action in [0, 0, 0, 1, 0, 0, 0, 2]:
        assert window[-1] == observation
        window, *_ = env.step(action)
        previous = observation
        observation, *_ = reference.step(action)
        assert window[0] == previous


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped")
def test_window_passes_env_checker_and_returns_copies():
    env = ObservationWindow(t_maze(1), 2)
    check_env(env, skip_render_check=True)
    window, _ = env.reset(seed=0)
    newest = int(window[-1])
    window[:] = 0
    again, *_ = env.step(0)
    assert again[0] == newest


def test_box_window_stacks_and_fills():
    env = ObservationWindow(gym.make("CartPole-v1"), 2, fill=0.0)
    assert env.observation_space.shape == (2, 4)
    window, _ = env.reset(seed=0)
    np.testing.assert_array_equal(window[0], np.zeros(4))
    first = window[1].copy()
    window, *_ = env.step(0)
    np.testing.assert_array_equal(window[0], first)
    assert env.observation_space.contains(window)
    with pytest.raises(TypeError, match="Discrete"):
        _ = env.num_agent_states


def test_partial_observation_hides_coordinates_and_exposes_state():
    env = PartialObservation(gym.make("CartPole-v1"), keep=[0, 2])
    reference = gym.make("CartPole-v1")
    assert env.observation_space.shape == (2,)
    observation, info = env.reset(seed=7)
    full, _ = reference.reset(seed=7)
    for action in [0, 1, 1, 0, 1]:
        np.testing.assert_array_equal(info["state"], full)
        np.testing.assert_array_equal(observation, full[[0, 2]])
        assert env.observation_space.contains(observation)
        observation, _, _, _, info = env.step(action)
        full, *_ = reference.step(action)
    np.testing.assert_array_equal(
        env.observation_space.low, reference.observation_space.low[[0, 2]]
    )


def test_partial_observation_keeps_the_given_order():
    env = PartialObservation(gym.make("CartPole-v1"), keep=(np.int64(3), 1))
    observation, info = env.reset(seed=0)
    np.testing.assert_array_equal(observation, info["state"][[3, 1]])


def test_bad_arguments():
    with pytest.raises(ValueError, match="`k` must be >= 1"):
        ObservationWindow(t_maze(1), 0)
    with pytest.raises(TypeError, match="`k` must be an int"):
        ObservationWindow(t_maze(1), 2.5)
    with pytest.raises(TypeError, match="Discrete and Box"):
        ObservationWindow(ObservationWindow(t_maze(1), 2), 2)
    cartpole = gym.make("CartPole-v1")
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        PartialObservation(cartpole, keep=[0, 4])
    with pytest.raises(ValueError, match="`keep index` must be >= 0"):
        PartialObservation(cartpole, keep=[-1])
    with pytest.raises(ValueError, match="at least one"):
        PartialObservation(cartpole, keep=[])
    with pytest.raises(ValueError, match="repeat"):
        PartialObservation(cartpole, keep=[1, 1])
    with pytest.raises(TypeError, match="must hold ints"):
        PartialObservation(cartpole, keep=[0.0])
    with pytest.raises(TypeError, match="1-D Box"):
        PartialObservation(t_maze(1), keep=[0])
