"""Linear natural actor-critic: m-step TD critics, the NPG direction, the full loop."""

import numpy as np
import pytest

from lightning_info.methods.asymmetric_ac.exact import (
    agent_state_chain,
    critic_error,
    evaluate_policy,
    lift_to_pairs,
    td_fixed_point,
)
from lightning_info.methods.asymmetric_ac.functional import (
    SGDSettings,
    critic_feature_index,
    m_step_td,
    natural_actor_critic,
    npg_direction,
    softmax_policy,
)
from lightning_info.methods.asymmetric_ac.tabular_pomdp import t_maze
from tests.methods.asymmetric_ac.policies import observation_policy, random_policy

CRITIC = SGDSettings(num_steps=3000, batch_size=64, step_size=1.0)


def _weighted_distance(chain, ev, a, b):
    weights = ev.visitation[:, None] * ev.policy[chain.agent_state_of_pair]
    return float(np.sqrt((weights * (a - b) ** 2).sum()))


def test_fully_observable_critics_coincide():
    """With z = s (k = 1, O = I) both feature maps index the same cells: identical iterates."""
    chain = agent_state_chain(t_maze(1).fully_observable(), 1)
    assert chain.num_pairs == chain.num_agent_states
    policy = random_policy(chain, seed=0)
    ev = evaluate_policy(chain, policy, 0.8)
    settings = SGDSettings(num_steps=500, batch_size=64, step_size=0.5, radius=5.0)
    q_asym = m_step_td(chain, policy, 0.8, "asymmetric", np.random.default_rng(0), 2, settings)
    q_sym = m_step_td(chain, policy, 0.8, "symmetric", np.random.default_rng(0), 2, settings)
    np.testing.assert_allclose(q_asym, q_sym, rtol=0, atol=1e-12)
    assert ev.aliasing_floor < 1e-12
    for kind in ("asymmetric", "symmetric"):
        fixed_point = td_fixed_point(chain, ev, 2, critic_feature_index(chain, kind)[0])
        np.testing.assert_allclose(fixed_point, ev.q, rtol=0, atol=1e-10)
    assert critic_error(chain, ev, q_asym) < 0.05 * critic_error(chain, ev, np.zeros_like(ev.q))


def test_asymmetric_error_vanishes_symmetric_keeps_a_floor_that_shrinks_with_k():
    maze, gamma = t_maze(1), 0.8
    symmetric_errors = {}
    for k in (1, 2, 3):
        chain = agent_state_chain(maze, k)
        policy = observation_policy(chain)
        ev = evaluate_policy(chain, policy, gamma)
        start = critic_error(chain, ev, np.zeros_like(ev.q))
        asym = m_step_td(chain, policy, gamma, "asymmetric", np.random.default_rng(k), 1, CRITIC)
        sym = m_step_td(chain, policy, gamma, "symmetric", np.random.default_rng(k), 1, CRITIC)
        assert critic_error(chain, ev, asym) < 0.05 * start
        symmetric_errors[k] = critic_error(chain, ev, sym)
        assert symmetric_errors[k] >= ev.aliasing_floor > 0.15 * start
        # the symmetric critic converges too, to its own (biased) fixed point
        fixed_point = td_fixed_point(chain, ev, 1, critic_feature_index(chain, "symmetric")[0])
        assert _weighted_distance(chain, ev, sym, fixed_point) < 0.05 * start
    assert symmetric_errors[1] > 2 * symmetric_errors[2] > 4 * symmetric_errors[3]


def test_npg_direction_matches_the_closed_form():
    """One-hot psi: w*(z, a) = E_d[Q(s, z, a) - V(s, z) | z], the advantage averaged over s."""
    chain = agent_state_chain(t_maze(1, sign_accuracy=0.8), 2)
    policy = random_policy(chain, seed=4)
    ev = evaluate_policy(chain, policy, 0.8)
    advantage = ev.q - ev.v[:, None]
    weights = np.zeros(chain.num_agent_states)
    np.add.at(weights, chain.agent_state_of_pair, ev.visitation)
    expected = np.zeros_like(ev.q_agent_state)
    conditional = ev.visitation / weights[chain.agent_state_of_pair]
    np.add.at(expected, chain.agent_state_of_pair, conditional[:, None] * advantage)
    settings = SGDSettings(num_steps=4000, batch_size=64, step_size=0.5)
    w = npg_direction(chain, policy, 0.8, ev.q, np.random.default_rng(0), settings)
    error = _weighted_distance(chain, ev, lift_to_pairs(chain, w - expected), 0.0)
    # averaged SGD on one-hot cells ~ per-cell means of the targets: the error is about
    # rms(A - w*) sqrt(cells / averaged samples); allow four times that
    noise = _weighted_distance(chain, ev, advantage - lift_to_pairs(chain, expected), 0.0)
    averaged = (1 - settings.burn_in) * settings.num_steps * settings.batch_size
    assert error < 4 * noise * np.sqrt(expected.size / averaged)
    # the exact symmetric critic has the same target in expectation, Q(z, a) - sum pi Q(z, .) =
    # E[A | z], without the noise of s given z
    symmetric = lift_to_pairs(chain, ev.q_agent_state)
    w_sym = npg_direction(chain, policy, 0.8, symmetric, np.random.default_rng(0), settings)
    error_sym = _weighted_distance(chain, ev, lift_to_pairs(chain, w_sym - expected), 0.0)
    assert error_sym < 0.05 * _weighted_distance(chain, ev, lift_to_pairs(chain, expected), 0.0)


AC_SETTINGS = dict(
    iterations=8,
    actor_step_size=2.0,
    critic=SGDSettings(num_steps=400, batch_size=64, step_size=1.0),
    actor=SGDSettings(num_steps=100, batch_size=64, step_size=0.5),
)


def _k1_history(kind, m):
    chain = agent_state_chain(t_maze(1), 1)
    theta = np.zeros((chain.num_agent_states, 3))
    theta[chain.agent_states == 3, 1] = 0.5  # at the junction, lean to "up"
    rng = np.random.default_rng(0)
    return natural_actor_critic(chain, 0.9, kind, rng, m=m, theta=theta, **AC_SETTINGS)


def test_memoryless_agent_improves_only_with_an_unbiased_critic():
    """k = 1: a policy of the current observation gains by hurrying to the junction under the
    goal it leans to and dawdling at the other sign (discounting then favours the good payoff).
    Seeing this needs the goal at the junction: the asymmetric critic has it; the one-step
    symmetric critic averages the junction over both goals and gives the sign no gradient;
    m = 4 steps carry the junction reward back to the sign and mostly repair it."""
    asymmetric = _k1_history("asymmetric", 1)
    symmetric = _k1_history("symmetric", 1)
    symmetric_4 = _k1_history("symmetric", 4)
    assert abs(asymmetric.values[0]) < 1e-12
    assert asymmetric.values[-1] > 0.2
    assert np.abs(symmetric.values).max() < 0.02
    assert symmetric_4.values[-1] > 0.2
    assert (asymmetric.critic_errors < 0.1).all()
    assert (symmetric.critic_errors > 0.9 * symmetric.aliasing_floors).all()


def test_window_of_two_reaches_the_optimum_and_runs_reproduce():
    chain = agent_state_chain(t_maze(1), 2)
    gamma = 0.9
    optimum = gamma / (1 - gamma**2)  # the correct choice every second step
    runs = [
        natural_actor_critic(chain, gamma, "asymmetric", np.random.default_rng(7), **AC_SETTINGS)
        for _ in range(2)
    ]
    np.testing.assert_array_equal(runs[0].values, runs[1].values)
    np.testing.assert_array_equal(runs[0].theta, runs[1].theta)
    values = runs[0].values
    assert values[0] == pytest.approx(0.0, abs=1e-12)
    assert values[-1] > 0.9 * optimum
    assert (np.diff(values) > -0.05).all()
    assert values.shape == (9,) and runs[0].critic_errors.shape == (8,)


def test_softmax_policy():
    theta = np.array([[0.0, 0.0], [1000.0, 0.0], [np.log(3.0), 0.0]])
    np.testing.assert_allclose(softmax_policy(theta), [[0.5, 0.5], [1.0, 0.0], [0.75, 0.25]])
    with pytest.raises(ValueError, match="finite"):
        softmax_policy(np.array([[np.nan, 0.0]]))
    with pytest.raises(ValueError, match=r"\(n_z, A\)"):
        softmax_policy(np.zeros(3))


def test_bad_arguments():
    chain = agent_state_chain(t_maze(1), 1)
    policy = observation_policy(chain)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="'asymmetric' or 'symmetric'"):
        m_step_td(chain, policy, 0.9, "both", rng)
    with pytest.raises(ValueError, match="`m` must be >= 1"):
        m_step_td(chain, policy, 0.9, "symmetric", rng, m=0)
    with pytest.raises(TypeError, match="numpy Generator"):
        m_step_td(chain, policy, 0.9, "symmetric", 0)
    with pytest.raises(ValueError, match="`policy` must have shape"):
        m_step_td(chain, policy[:2], 0.9, "symmetric", rng)
    with pytest.raises(ValueError, match="`critic` must have shape"):
        npg_direction(chain, policy, 0.9, np.zeros((2, 3)), rng)
    with pytest.raises(ValueError, match="`theta` must have shape"):
        natural_actor_critic(chain, 0.9, "asymmetric", rng, 1, 1.0, theta=np.zeros((2, 3)))
    with pytest.raises(ValueError, match="`iterations` must be >= 1"):
        natural_actor_critic(chain, 0.9, "asymmetric", rng, 0, 1.0)
    with pytest.raises(ValueError, match="`actor_step_size` must be > 0"):
        natural_actor_critic(chain, 0.9, "asymmetric", rng, 1, 0.0)
    with pytest.raises(ValueError, match="`batch_size` must be >= 1"):
        SGDSettings(batch_size=0)
    with pytest.raises(ValueError, match="`radius` must be > 0"):
        SGDSettings(radius=-1.0)
    with pytest.raises(ValueError, match="`burn_in` must lie in"):
        SGDSettings(burn_in=1.0)
