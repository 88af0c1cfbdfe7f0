"""Exact evaluation on the (state, window) chain against Monte Carlo and its own equations."""

import numpy as np
import pytest

from lightning_info.methods.asymmetric_ac.exact import (
    agent_state_chain,
    critic_error,
    evaluate_policy,
    lift_to_pairs,
    td_fixed_point,
)
from lightning_info.methods.asymmetric_ac.functional import critic_feature_index
from lightning_info.methods.asymmetric_ac.rollouts import ChainSampler
from lightning_info.methods.asymmetric_ac.tabular_pomdp import cumulative_distribution, t_maze
from lightning_info.methods.asymmetric_ac.wrappers import ObservationWindow
from tests.methods.asymmetric_ac.policies import observation_policy, random_policy

GAMMA = 0.8
HORIZON = 40  # gamma^40 * max|Q| < 1e-3, far below the Monte Carlo standard errors


def _maze():
    return t_maze(1, sign_accuracy=0.8, penalty=-0.5)


def _monte_carlo(chain, policy, rollouts, seed):
    """Discounted returns from ``(x, a)``, ``x ~ d`` and ``a`` uniform, with the gymnasium env.

    The rollout follows ``policy`` for a geometric number of steps, records the pair from
    ``info["state"]`` and ``info["agent_state"]``, takes a uniform action, then follows ``policy``
    for ``HORIZON`` steps.
    """
    env = ObservationWindow(_maze(), chain.encoding.length)
    rng = np.random.default_rng(seed)
    row = {int(z): j for j, z in enumerate(chain.agent_states)}
    pair_of = {(int(s), int(z)): i for i, (s, z) in enumerate(zip(chain.states, chain.windows))}
    cdf = cumulative_distribution(policy)

    def act(info):
        return int(cdf[row[info["agent_state"]]].searchsorted(rng.random(), side="right"))

    pairs, actions, returns = [], [], []
    _, info = env.reset(seed=seed)
    for _ in range(rollouts):
        _, info = env.reset()
        for _ in range(rng.geometric(1 - GAMMA) - 1):
            _, _, _, _, info = env.step(act(info))
        pairs.append(pair_of[info["state"], info["agent_state"]])
        action = int(rng.integers(chain.num_actions))
        actions.append(action)
        total = 0.0
        for t in range(HORIZON):
            _, reward, _, _, info = env.step(action)
            total += GAMMA**t * reward
            action = act(info)
        returns.append(total)
    return np.array(pairs), np.array(actions), np.array(returns)


def test_exact_q_matches_monte_carlo_returns():
    """Per (s, z, a) cell with >= 30 rollouts, |mean - Q| <= 4 standard errors (+ truncation)."""
    chain = agent_state_chain(_maze(), 2)
    policy = random_policy(chain, seed=0)
    evaluation = evaluate_policy(chain, policy, GAMMA)
    pairs, actions, returns = _monte_carlo(chain, policy, rollouts=3000, seed=0)
    truncation = GAMMA**HORIZON * np.abs(chain.rewards).max() / (1 - GAMMA)
    z_scores, checked = [], 0
    for pair in range(chain.num_pairs):
        for action in range(chain.num_actions):
            cell = returns[(pairs == pair) & (actions == action)]
            if cell.size < 30:
                continue
            error = abs(cell.mean() - evaluation.q[pair, action])
            standard_error = cell.std(ddof=1) / np.sqrt(cell.size)
            assert error <= 4 * standard_error + truncation, (pair, action, error, standard_error)
            z_scores.append(error / standard_error)
            checked += 1
    assert checked >= 12
    # pooled: E[z^2] = 1 for unbiased cells; a wrong Q in any cell would inflate it
    assert np.mean(np.square(z_scores)) < 2.0


def test_exact_value_matches_monte_carlo_from_reset():
    chain = agent_state_chain(_maze(), 2)
    policy = random_policy(chain, seed=1)
    evaluation = evaluate_policy(chain, policy, GAMMA)
    env = ObservationWindow(_maze(), 2)
    rng = np.random.default_rng(1)
    row = {int(z): j for j, z in enumerate(chain.agent_states)}
    cdf = cumulative_distribution(policy)
    returns = []
    env.reset(seed=1)
    for _ in range(1500):
        _, info = env.reset()
        total = 0.0
        for t in range(HORIZON):
            action = int(cdf[row[info["agent_state"]]].searchsorted(rng.random(), side="right"))
            _, reward, _, _, info = env.step(action)
            total += GAMMA**t * reward
        returns.append(total)
    standard_error = np.std(returns, ddof=1) / np.sqrt(len(returns))
    assert abs(np.mean(returns) - evaluation.value) <= 4 * standard_error + 1e-3
    assert abs(evaluation.value) > 2 * standard_error  # a non-trivial value was checked


@pytest.mark.parametrize("k", [1, 2, 3])
def test_bellman_equation_and_value_identities(k):
    chain = agent_state_chain(t_maze(2, sign_accuracy=0.9, penalty=-0.3), k)
    policy = random_policy(chain, seed=k)
    gamma = 0.9
    ev = evaluate_policy(chain, policy, gamma)
    pi_pairs = policy[chain.agent_state_of_pair]
    # Q(x, a) = R(s, a) + gamma sum_{s', o'} P(s'|s, a) O(o'|s') sum_a' pi(a'|z') Q(x', a')
    pomdp = chain.pomdp
    backup = np.array(chain.rewards)
    for x in range(chain.num_pairs):
        for a in range(chain.num_actions):
            for s_next in range(pomdp.num_states):
                for o_next in range(pomdp.num_observations):
                    weight = pomdp.transitions[chain.states[x], a, s_next]
                    weight *= pomdp.observation_probs[s_next, o_next]
                    if weight == 0:
                        continue
                    x_next = chain.successor[x, s_next, o_next]
                    backup[x, a] += gamma * weight * pi_pairs[x_next] @ ev.q[x_next]
    np.testing.assert_allclose(backup, ev.q, rtol=0, atol=1e-10)
    np.testing.assert_allclose(ev.v, (pi_pairs * ev.q).sum(axis=1), rtol=0, atol=1e-10)
    # J = sum_x p0(x) V(x) = 1/(1 - gamma) sum_x d(x) r_pi(x); d is a distribution
    assert ev.value == pytest.approx(chain.initial @ ev.v, abs=1e-12)
    r_pi = (pi_pairs * chain.rewards).sum(axis=1)
    assert ev.value == pytest.approx(ev.visitation @ r_pi / (1 - gamma), abs=1e-10)
    assert ev.visitation.sum() == pytest.approx(1.0, abs=1e-12)
    assert (ev.visitation >= 0).all()


def test_visitation_matches_the_sampler():
    chain = agent_state_chain(_maze(), 2)
    policy = random_policy(chain, seed=2)
    ev = evaluate_policy(chain, policy, GAMMA)
    pairs, actions = ChainSampler(chain, policy, GAMMA, np.random.default_rng(0)).visitation(
        200_000
    )
    joint = np.zeros((chain.num_pairs, chain.num_actions))
    np.add.at(joint, (pairs, actions), 1.0 / pairs.size)
    expected = ev.visitation[:, None] * policy[chain.agent_state_of_pair]
    # multinomial standard error sqrt(p (1 - p) / n) <= 1.2e-3; 5 of them
    np.testing.assert_allclose(joint, expected, rtol=0, atol=5 * 1.2e-3)


def test_chain_enumerates_reachable_pairs():
    chain = agent_state_chain(t_maze(1), 2)
    windows = {
        (int(s), tuple(chain.encoding.decode(z))) for s, z in zip(chain.states, chain.windows)
    }
    # states 0/2 are the sign of goal up/down, 1/3 the junction; observation 4 is the blank
    assert windows == {
        (0, (4, 0)),
        (2, (4, 1)),  # reset
        (0, (0, 0)),
        (2, (1, 1)),  # waited at the sign
        (1, (0, 3)),
        (3, (1, 3)),  # reached the junction from the sign
        (1, (3, 3)),
        (3, (3, 3)),  # waited at the junction: the aliased window
        (0, (3, 0)),
        (2, (3, 1)),  # restarted after a choice
    }
    np.testing.assert_allclose(chain.transition.sum(axis=2), 1.0, atol=1e-12)
    assert chain.initial.sum() == pytest.approx(1.0)


def test_symmetric_target_is_the_best_critic_of_the_window():
    chain = agent_state_chain(_maze(), 2)
    policy = random_policy(chain, seed=3)
    ev = evaluate_policy(chain, policy, GAMMA)
    best = ev.aliasing_floor
    assert best == pytest.approx(critic_error(chain, ev, lift_to_pairs(chain, ev.q_agent_state)))
    assert best > 0.05  # the window (3, 3) hides the goal
    rng = np.random.default_rng(0)
    for _ in range(20):
        other = ev.q_agent_state + 0.05 * rng.standard_normal(ev.q_agent_state.shape)
        assert critic_error(chain, ev, lift_to_pairs(chain, other)) > best


def test_asymmetric_td_fixed_point_is_q_and_symmetric_floor_shrinks_with_m_and_k():
    maze = t_maze(1)
    floors, fixed_points = {}, {}
    for k in (1, 2, 3):
        chain = agent_state_chain(maze, k)
        policy = observation_policy(chain)
        ev = evaluate_policy(chain, policy, 0.9)
        asymmetric = td_fixed_point(chain, ev, 1, critic_feature_index(chain, "asymmetric")[0])
        np.testing.assert_allclose(asymmetric, ev.q, rtol=0, atol=1e-10)
        symmetric = critic_feature_index(chain, "symmetric")[0]
        fixed_points[k] = [
            critic_error(chain, ev, td_fixed_point(chain, ev, m, symmetric)) for m in (1, 2, 4, 8)
        ]
        floors[k] = ev.aliasing_floor
    for k in (1, 2, 3):
        errors = fixed_points[k]
        # the m-step TD bias over the best window critic falls with m, above the floor
        assert all(a > b for a, b in zip(errors, errors[1:]))
        assert errors[-1] >= floors[k] - 1e-12
        assert errors[-1] - floors[k] < 0.1 * (errors[0] - floors[k])
    # longer windows alias less: the policy sees only the newest observation, so the chain on
    # (state, observation history) is the same for every k and the floor can only fall
    assert floors[1] > 2 * floors[2] > 4 * floors[3] > 0


def test_bad_arguments():
    chain = agent_state_chain(_maze(), 2)
    good = random_policy(chain, seed=0)
    with pytest.raises(ValueError, match=r"shape \(n_z, A\) = \(11, 3\)"):
        evaluate_policy(chain, good[:, :2], GAMMA)
    with pytest.raises(ValueError, match="sum to 1"):
        evaluate_policy(chain, good * 2, GAMMA)
    with pytest.raises(ValueError, match=">= 0"):
        evaluate_policy(chain, np.where(good > 0, -good, good), GAMMA)
    with pytest.raises(ValueError, match=r"`gamma` must lie in \[0, 1\)"):
        evaluate_policy(chain, good, 1.0)
    with pytest.raises(ValueError, match="`k` must be >= 1"):
        agent_state_chain(_maze(), 0)
    with pytest.raises(TypeError, match="TabularPOMDP"):
        agent_state_chain(object(), 1)
    ev = evaluate_policy(chain, good, GAMMA)
    with pytest.raises(ValueError, match=r"`q_hat` must have shape"):
        critic_error(chain, ev, ev.q_agent_state)
    with pytest.raises(ValueError, match=r"\(n_z, A\)"):
        lift_to_pairs(chain, ev.q)
    with pytest.raises(ValueError, match="`m` must be >= 1"):
        td_fixed_point(chain, ev, 0, critic_feature_index(chain, "symmetric")[0])
    with pytest.raises(ValueError, match="`feature_index`"):
        td_fixed_point(chain, ev, 1, np.zeros(3, dtype=int))
