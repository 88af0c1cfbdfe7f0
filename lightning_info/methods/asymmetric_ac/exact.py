"""Exact policy evaluation of an agent-state policy on the Markov chain of (state, window) pairs.

Under a policy ``pi(a | z)`` of the window agent state ``z``, the pair ``x = (s, z)`` is a Markov
chain even though ``z`` alone is not (Lambrechts, Ernst & Mahajan, ICML 2025):

    P(x' | x, a) = sum_{o'} P(s' | s, a) O(o' | s') 1[z' = U(z, a, o')].

On it, in float64 numpy (``x`` ranges over the pairs reachable from ``p_0`` under *some* action
sequence, so the index does not depend on the policy):

    V(x)    = sum_a pi(a|z) Q(x, a),   V = (I - gamma P_pi)^{-1} r_pi,
    Q(x, a) = R(s, a) + gamma sum_{x'} P(x' | x, a) V(x'),
    d(x)    = (1 - gamma) sum_t gamma^t Pr(x_t = x)   (discounted visitation from p_0),
    J(pi)   = sum_x p_0(x) V(x) = 1/(1 - gamma) sum_x d(x) r_pi(x),

and the best critic of ``(z, a)`` alone in the ``d(s, z) pi(a|z)``-weighted least-squares sense,
``Q(z, a) = E_d[Q(s, z, a) | z, a]``, whose error is the aliasing floor of a symmetric critic.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from lightning_info.core.validation import require_fraction, require_int
from lightning_info.methods.asymmetric_ac.agent_state import WindowEncoding
from lightning_info.methods.asymmetric_ac.tabular_pomdp import TabularPOMDP

_PROBABILITY_TOLERANCE = 1e-9


@dataclass(frozen=True)
class AgentStateChain:
    """The reachable (state, window) pairs of a tabular POMDP and their transition kernel.

    Attributes:
        pomdp: the model.
        encoding: window codes of length ``k``.
        states, windows: ``(n_pairs,)`` state and window code of each pair.
        agent_states: ``(n_z,)`` sorted window codes that occur in some pair; a policy is an
            ``(n_z, A)`` array whose row ``j`` is ``pi(. | agent_states[j])``.
        agent_state_of_pair: ``(n_pairs,)`` row of ``agent_states`` of each pair.
        initial: ``(n_pairs,)`` law of ``x_0 = (s_0, U(blank, o_0))``.
        successor: ``(n_pairs, S, n)`` pair reached on ``(s', o')``, ``-1`` where impossible.
        transition: ``(n_pairs, A, n_pairs)`` kernel ``P(x' | x, a)``.
        rewards: ``(n_pairs, A)`` ``R(s, a)``.
    """

    pomdp: TabularPOMDP
    encoding: WindowEncoding
    states: np.ndarray
    windows: np.ndarray
    agent_states: np.ndarray
    agent_state_of_pair: np.ndarray
    initial: np.ndarray
    successor: np.ndarray
    transition: np.ndarray
    rewards: np.ndarray

    @property
    def num_pairs(self) -> int:
        return self.states.shape[0]

    @property
    def num_agent_states(self) -> int:
        return self.agent_states.shape[0]

    @property
    def num_actions(self) -> int:
        return self.pomdp.num_actions


def agent_state_chain(env, k: int) -> AgentStateChain:
    """Enumerate the pairs ``(s, z)`` reachable from ``p_0`` with a window of ``k`` observations.

    ``env`` is a :class:`TabularPOMDP` or a wrapper around one. The enumeration is breadth-first
    over every action, so a pair missing from the chain has probability 0 under every policy and
    the pair index is the same for every policy. The kernel is a dense ``(n_pairs, A, n_pairs)``
    array, meant for small models (up to a few thousand pairs).
    """
    pomdp = getattr(env, "unwrapped", env)
    if not isinstance(pomdp, TabularPOMDP):
        raise TypeError(f"`env` must be (or wrap) a TabularPOMDP, got {type(pomdp).__name__}.")
    encoding = WindowEncoding(pomdp.num_observations, require_int(k, "k", 1))
    transitions, observations = pomdp.transitions, pomdp.observation_probs
    index: dict[tuple[int, int], int] = {}
    pairs: list[tuple[int, int]] = []

    def visit(state: int, window: int) -> int:
        key = (state, window)
        if key not in index:
            index[key] = len(pairs)
            pairs.append(key)
        return index[key]

    initial_mass: dict[int, float] = {}
    for state in np.flatnonzero(pomdp.initial):
        for obs in np.flatnonzero(observations[state]):
            pair = visit(int(state), int(encoding.update(encoding.empty, obs)))
            mass = pomdp.initial[state] * observations[state, obs]
            initial_mass[pair] = initial_mass.get(pair, 0.0) + mass

    edges: list[tuple[int, int, int, int]] = []
    frontier = 0
    while frontier < len(pairs):
        state, window = pairs[frontier]
        next_states = np.flatnonzero(transitions[state].sum(axis=0))
        for next_state in next_states:
            for obs in np.flatnonzero(observations[next_state]):
                next_window = int(encoding.update(window, obs))
                edges.append(
                    (frontier, int(next_state), int(obs), visit(int(next_state), next_window))
                )
        frontier += 1

    num_pairs = len(pairs)
    states = np.array([state for state, _ in pairs], dtype=np.int64)
    windows = np.array([window for _, window in pairs], dtype=np.int64)
    successor = np.full((num_pairs, pomdp.num_states, pomdp.num_observations), -1, np.int64)
    transition = np.zeros((num_pairs, pomdp.num_actions, num_pairs))
    for pair, next_state, obs, next_pair in edges:
        successor[pair, next_state, obs] = next_pair
        step = transitions[states[pair], :, next_state] * observations[next_state, obs]
        transition[pair, :, next_pair] += step
    initial = np.zeros(num_pairs)
    for pair, mass in initial_mass.items():
        initial[pair] = mass
    agent_states, agent_state_of_pair = np.unique(windows, return_inverse=True)
    arrays = (states, windows, agent_states, agent_state_of_pair, initial, successor, transition)
    for array in arrays:
        array.setflags(write=False)
    rewards = pomdp.rewards[states]
    rewards.setflags(write=False)
    return AgentStateChain(pomdp, encoding, *arrays, rewards)


def real_array(value, name: str) -> np.ndarray:
    """``value`` as a float64 array, or raise unless it holds real numbers (bools, ints or
    floats): strings such as ``"0.5"`` and complex or object arrays are refused, not parsed."""
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise TypeError(
            f"`{name}` must hold real numbers, got dtype {array.dtype}; convert it first."
        )
    return array.astype(np.float64)


def require_chain(chain) -> AgentStateChain:
    """Return ``chain``, or raise unless it is an :class:`AgentStateChain`."""
    if not isinstance(chain, AgentStateChain):
        raise TypeError(
            f"`chain` must be an AgentStateChain (from agent_state_chain(env, k)), got "
            f"{type(chain).__name__}."
        )
    return chain


def check_policy(chain: AgentStateChain, policy: np.ndarray) -> np.ndarray:
    """Return ``policy`` as float64, or raise unless it is ``(n_z, A)`` with rows on the simplex."""
    require_chain(chain)
    policy = real_array(policy, "policy")
    expected = (chain.num_agent_states, chain.num_actions)
    if policy.shape != expected:
        raise ValueError(
            f"`policy` must have shape (n_z, A) = {expected}, one row per entry of "
            f"`chain.agent_states`, got {policy.shape}."
        )
    if not np.isfinite(policy).all() or (policy < 0).any():
        raise ValueError("`policy` must hold finite probabilities >= 0.")
    if not np.allclose(policy.sum(axis=1), 1.0, rtol=0.0, atol=_PROBABILITY_TOLERANCE):
        raise ValueError("Every row of `policy` must sum to 1.")
    return policy


def lift_to_pairs(chain: AgentStateChain, values_z: np.ndarray) -> np.ndarray:
    """``(n_z, A)`` finite values of ``(z, a)`` as ``(n_pairs, A)`` values of ``(s, z, a)``."""
    require_chain(chain)
    values_z = real_array(values_z, "values_z")
    if values_z.shape != (chain.num_agent_states, chain.num_actions):
        raise ValueError(
            f"Expected (n_z, A) = {(chain.num_agent_states, chain.num_actions)} values, got "
            f"{values_z.shape}."
        )
    if not np.isfinite(values_z).all():
        raise ValueError("`values_z` must be finite; it holds NaN or inf.")
    return values_z[chain.agent_state_of_pair]


@dataclass(frozen=True)
class PolicyEvaluation:
    """Exact quantities of one policy; arrays are indexed like the chain's pairs/agent states.

    Attributes:
        policy: ``(n_z, A)`` ``pi(a | z)``.
        gamma: discount factor.
        q: ``(n_pairs, A)`` ``Q^pi(s, z, a)``.
        v: ``(n_pairs,)`` ``V^pi(s, z)``.
        visitation: ``(n_pairs,)`` ``d(s, z)``; ``visitation[:, None] * policy[z]`` is the
            ``(s, z, a)`` visitation that weights critic errors.
        value: ``J(pi)``.
        q_agent_state: ``(n_z, A)`` ``E_d[Q^pi(s, z, a) | z, a]`` (agent states never visited
            get the plain mean over their pairs).
        aliasing_floor: :func:`critic_error` of ``q_agent_state``, the least error any critic of
            ``(z, a)`` alone can reach.
    """

    policy: np.ndarray
    gamma: float
    q: np.ndarray
    v: np.ndarray
    visitation: np.ndarray
    value: float
    q_agent_state: np.ndarray
    aliasing_floor: float


def require_evaluation(chain: AgentStateChain, evaluation) -> PolicyEvaluation:
    """Return ``evaluation``, or raise unless it is a :class:`PolicyEvaluation` of a policy on
    ``chain`` (shapes ``(n_pairs, A)`` and ``(n_z, A)`` of this chain)."""
    require_chain(chain)
    if not isinstance(evaluation, PolicyEvaluation):
        raise TypeError(
            f"`evaluation` must be a PolicyEvaluation (from evaluate_policy), got "
            f"{type(evaluation).__name__}."
        )
    pairs = (chain.num_pairs, chain.num_actions)
    agent_states = (chain.num_agent_states, chain.num_actions)
    if evaluation.q.shape != pairs or evaluation.policy.shape != agent_states:
        raise ValueError(
            f"`evaluation` belongs to another chain: its Q has shape {evaluation.q.shape} and its "
            f"policy {evaluation.policy.shape}, this chain needs {pairs} and {agent_states}; "
            "evaluate the policy on this chain with evaluate_policy(chain, policy, gamma)."
        )
    return evaluation


def evaluate_policy(chain: AgentStateChain, policy: np.ndarray, gamma: float) -> PolicyEvaluation:
    """Solve the Bellman equation of ``pi`` on the pair chain (module docstring equations)."""
    policy = check_policy(chain, policy)
    gamma = require_fraction(gamma, "gamma")
    pi_pairs = policy[chain.agent_state_of_pair]
    kernel = np.einsum("xa,xay->xy", pi_pairs, chain.transition)
    system = np.eye(chain.num_pairs) - gamma * kernel
    v = np.linalg.solve(system, (pi_pairs * chain.rewards).sum(axis=1))
    q = chain.rewards + gamma * chain.transition @ v
    visitation = (1.0 - gamma) * np.linalg.solve(system.T, chain.initial)
    visitation = np.clip(visitation, 0.0, None)
    weights = np.zeros(chain.num_agent_states)
    np.add.at(weights, chain.agent_state_of_pair, visitation)
    counts = np.bincount(chain.agent_state_of_pair, minlength=chain.num_agent_states)
    pair_weight = np.where(
        weights[chain.agent_state_of_pair] > 0,
        visitation / np.maximum(weights[chain.agent_state_of_pair], np.finfo(float).tiny),
        1.0 / counts[chain.agent_state_of_pair],
    )
    q_agent_state = np.zeros((chain.num_agent_states, chain.num_actions))
    np.add.at(q_agent_state, chain.agent_state_of_pair, pair_weight[:, None] * q)
    evaluation = PolicyEvaluation(
        policy=policy,
        gamma=gamma,
        q=q,
        v=v,
        visitation=visitation,
        value=float(chain.initial @ v),
        q_agent_state=q_agent_state,
        aliasing_floor=0.0,
    )
    floor = critic_error(chain, evaluation, lift_to_pairs(chain, q_agent_state))
    return replace(evaluation, aliasing_floor=floor)


def critic_error(chain: AgentStateChain, evaluation: PolicyEvaluation, q_hat: np.ndarray) -> float:
    """Visitation-weighted RMS error of a critic given on pairs, ``(n_pairs, A)``:

        sqrt( sum_{s, z, a} d(s, z) pi(a | z) (Q_hat(s, z, a) - Q^pi(s, z, a))^2 ).

    Lift a critic of ``(z, a)`` with :func:`lift_to_pairs` first.
    """
    require_evaluation(chain, evaluation)
    q_hat = real_array(q_hat, "q_hat")
    if q_hat.shape != evaluation.q.shape:
        raise ValueError(f"`q_hat` must have shape (n_pairs, A) = {evaluation.q.shape}.")
    if not np.isfinite(q_hat).all():
        raise ValueError("`q_hat` must be finite; it holds NaN or inf.")
    weights = evaluation.visitation[:, None] * evaluation.policy[chain.agent_state_of_pair]
    return float(np.sqrt((weights * (q_hat - evaluation.q) ** 2).sum()))


def td_fixed_point(
    chain: AgentStateChain, evaluation: PolicyEvaluation, m: int, feature_index: np.ndarray
) -> np.ndarray:
    """Limit of m-step TD with one-hot features, as ``(n_pairs, A)`` values.

    With ``phi(x, a)`` the indicator of feature ``feature_index[x, a]`` and ``D`` the
    ``(s, z, a)`` visitation, the fixed point ``Q = Phi beta`` of the projected m-step Bellman
    operator ``Pi_D T_pi^m`` solves

        Phi^T D (I - gamma^m K^m) Phi beta = Phi^T D sum_{i<m} gamma^i K^i r,

    with ``K`` the kernel of ``(s, z, a) -> (s', z', a')`` under ``pi``. For the discounted
    visitation ``D = (1 - gamma) p_0 (I - gamma K)^{-1}`` one has ``D K <= D / gamma``, so
    ``gamma^m K^m`` is a ``gamma^{m/2}``-contraction in the ``D``-norm and the fixed point is
    unique. Asymmetric one-hot features give ``Q^pi`` itself (the pair chain is Markov); symmetric
    ones keep the aliasing bias of Lambrechts et al. (ICML 2025), which shrinks as ``m`` grows.
    Features never visited get 0.
    """
    require_evaluation(chain, evaluation)
    m = require_int(m, "m", 1)
    feature_index = np.asarray(feature_index)
    if feature_index.shape != evaluation.q.shape or not np.issubdtype(
        feature_index.dtype, np.integer
    ):
        raise ValueError(f"`feature_index` must be an int array of shape {evaluation.q.shape}.")
    if feature_index.size and feature_index.min() < 0:
        raise ValueError(
            f"`feature_index` must hold feature indices >= 0, got {int(feature_index.min())}."
        )
    gamma, policy = evaluation.gamma, evaluation.policy
    num_pairs, num_actions = evaluation.q.shape
    pi_pairs = policy[chain.agent_state_of_pair]
    kernel = np.einsum("xay,yb->xayb", chain.transition, pi_pairs).reshape(
        num_pairs * num_actions, num_pairs * num_actions
    )
    rewards = chain.rewards.reshape(-1)
    returns, power = np.zeros_like(rewards), np.eye(kernel.shape[0])
    for i in range(m):
        returns += gamma**i * power @ rewards
        power = power @ kernel
    weights = (evaluation.visitation[:, None] * pi_pairs).reshape(-1)
    features = np.zeros((rewards.shape[0], int(feature_index.max()) + 1))
    features[np.arange(rewards.shape[0]), feature_index.reshape(-1)] = 1.0
    visited = (weights @ features) > 0
    features = features[:, visited]
    weighted = features.T * weights
    lhs = weighted @ (features - gamma**m * power @ features)
    beta = np.linalg.solve(lhs, weighted @ returns)
    return (features @ beta).reshape(num_pairs, num_actions)
