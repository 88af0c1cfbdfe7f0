"""Natural actor-critic with linear (one-hot) features, asymmetric or symmetric critic.

Lambrechts, Ernst & Mahajan (ICML 2025), after Cayci, He & Srikant (2024):

* actor ``pi_theta(a | z) ∝ exp(theta^T psi(z, a))``, ``psi`` one-hot in ``(z, a)``, so
  ``theta`` is stored as an ``(n_z, A)`` array of logits;
* critic ``Q_beta(x, a) = beta^T phi(x, a)``, ``phi`` one-hot in ``(s, z, a)`` (asymmetric) or in
  ``(z, a)`` (symmetric), learned by projected m-step TD on ``(x_0, a_0) ~ d pi``:

      beta <- Proj_B(beta + alpha (sum_{i<m} gamma^i r_i + gamma^m Q_beta(x_m, a_m)
                                   - Q_beta(x_0, a_0)) phi(x_0, a_0)),

  returning the average of the iterates (after a burn-in, :class:`SGDSettings`); the
  asymmetric features are one-hot over the reachable pairs, i.e. ``phi(s, z, a)`` restricted to
  where it can be non-zero;
* natural policy gradient ``w ≈ argmin_w E_{d pi} (w^T psi(z, a) - Â(x, a))^2`` by projected
  SGD with ``Â(x, a) = Q_beta(x, a) - sum_a' pi(a' | z) Q_beta(x, a')``, then
  ``theta <- theta + eta w``.

Mini-batches average the per-sample updates (batch size 1 is the single-sample algorithm).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from lightning_info.core.validation import (
    require_fraction,
    require_int,
    require_positive,
)
from lightning_info.methods.asymmetric_ac.exact import (
    AgentStateChain,
    critic_error,
    evaluate_policy,
    real_array,
    require_chain,
)
from lightning_info.methods.asymmetric_ac.rollouts import ChainSampler

__all__ = [
    "ActorCriticHistory",
    "critic_feature_index",
    "m_step_td",
    "natural_actor_critic",
    "npg_direction",
    "SGDSettings",
    "softmax_policy",
]

CriticKind = Literal["asymmetric", "symmetric"]


def critic_feature_index(chain: AgentStateChain, kind: CriticKind) -> tuple[np.ndarray, int]:
    """Index of the one-hot critic feature of every ``(x, a)``, ``(n_pairs, A)``, and the count.

    ``"asymmetric"``: ``phi(s, z, a)``, one feature per (pair, action); ``"symmetric"``:
    ``phi(z, a)``, one feature per (agent state, action), shared by the pairs with that window.
    """
    require_chain(chain)
    actions = np.arange(chain.num_actions)
    if kind == "asymmetric":
        rows, size = np.arange(chain.num_pairs), chain.num_pairs
    elif kind == "symmetric":
        rows, size = chain.agent_state_of_pair, chain.num_agent_states
    else:
        raise ValueError(f"`kind` must be 'asymmetric' or 'symmetric', got {kind!r}.")
    return rows[:, None] * chain.num_actions + actions, size * chain.num_actions


def softmax_policy(theta: np.ndarray) -> np.ndarray:
    """``pi(a | z) = exp(theta[z, a]) / sum_b exp(theta[z, b])`` for ``(n_z, A)`` logits."""
    theta = real_array(theta, "theta")
    if theta.ndim != 2 or not np.isfinite(theta).all():
        raise ValueError(f"`theta` must be a finite (n_z, A) array, got shape {theta.shape}.")
    if theta.shape[1] == 0:
        raise ValueError("`theta` has no actions (shape (n_z, 0)); give at least one column.")
    shifted = np.exp(theta - theta.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


@dataclass(frozen=True)
class SGDSettings:
    """Projected averaged SGD: ``num_steps`` mini-batches of ``batch_size`` samples.

    ``radius`` is the ``B`` of the ball the iterate is projected on (``None``: a radius that holds
    every target of the problem, see the caller). The output averages the iterates after the
    first ``burn_in`` fraction of steps: ``0`` averages them all, as in the analysis; the default
    ``0.5`` drops the transient from the zero start, which a uniform average forgets only as
    ``1 / num_steps``.
    """

    num_steps: int = 2000
    batch_size: int = 64
    step_size: float = 0.5
    radius: float | None = None
    burn_in: float = 0.5

    def __post_init__(self) -> None:
        require_int(self.num_steps, "num_steps", 1)
        require_int(self.batch_size, "batch_size", 1)
        require_positive(self.step_size, "step_size")
        if self.radius is not None:
            require_positive(self.radius, "radius")
        require_fraction(self.burn_in, "burn_in")


def _settings(settings: SGDSettings | None, name: str) -> SGDSettings:
    """``settings`` (``None``: the defaults), or raise unless it is an :class:`SGDSettings`."""
    if settings is None:
        return SGDSettings()
    if not isinstance(settings, SGDSettings):
        raise TypeError(
            f"`{name}` must be an SGDSettings (e.g. SGDSettings(num_steps=500)) or None, got "
            f"{type(settings).__name__}."
        )
    return settings


def _project(vector: np.ndarray, radius: float) -> np.ndarray:
    norm = math.sqrt(float(vector @ vector))
    return vector * (radius / norm) if norm > radius else vector


def _reward_bound(chain: AgentStateChain, gamma: float) -> float:
    """``max |R| / (1 - gamma)``, a bound on ``|Q^pi|`` for every policy."""
    return float(np.abs(chain.rewards).max()) / (1.0 - gamma)


_SAMPLES_PER_DRAW = 1 << 16


def _averaged_sgd(settings: SGDSettings, size: int, radius: float, draw, gradient) -> np.ndarray:
    """Run ``w <- Proj(w - step * gradient(w, batch))`` and return the (tail-)averaged iterate.

    ``draw(n)`` returns a tuple of arrays of ``n`` samples; the policy is fixed during the run,
    so drawing many batches at once changes nothing but the speed.
    """
    w = np.zeros(size)
    average = np.zeros(size)
    start = int(settings.burn_in * settings.num_steps)
    b = settings.batch_size
    steps_per_draw = max(1, _SAMPLES_PER_DRAW // b)
    for first in range(0, settings.num_steps, steps_per_draw):
        steps = min(steps_per_draw, settings.num_steps - first)
        samples = draw(steps * b)
        for j in range(steps):
            batch = tuple(array[j * b : (j + 1) * b] for array in samples)
            w = _project(w - settings.step_size * gradient(w, batch), radius)
            step = first + j
            if step >= start:
                average += (w - average) / (step - start + 1)
    return average


def _one_hot_mean(index: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """``mean_b values_b e_{index_b}``: a mini-batch mean of one-hot updates."""
    return np.bincount(index, weights=values, minlength=size) / index.shape[0]


def m_step_td(
    chain: AgentStateChain,
    policy: np.ndarray,
    gamma: float,
    kind: CriticKind,
    rng: np.random.Generator,
    m: int = 1,
    settings: SGDSettings | None = None,
) -> np.ndarray:
    """Averaged projected m-step TD critic of ``policy``, returned as ``(n_pairs, A)`` values.

    Each step draws ``settings.batch_size`` fresh ``(x_0, a_0) ~ d pi`` and their m-step
    continuations (module docstring). ``radius=None`` takes ``B = sqrt(p) max|R| / (1 - gamma)``
    for ``p`` features, a ball that holds the exact ``Q^pi`` of every policy.
    """
    settings = _settings(settings, "settings")
    m = require_int(m, "m", 1)
    sampler = ChainSampler(chain, policy, gamma, rng)
    index, size = critic_feature_index(chain, kind)
    radius = settings.radius or math.sqrt(size) * _reward_bound(chain, sampler.gamma)
    discount = sampler.gamma**m

    def draw(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        pairs, actions = sampler.visitation(n)
        partial, last_pairs, last_actions = sampler.m_step(pairs, actions, m)
        return index[pairs, actions], partial, index[last_pairs, last_actions]

    def gradient(beta: np.ndarray, batch: tuple[np.ndarray, ...]) -> np.ndarray:
        features, partial, bootstrap = batch
        td_error = partial + discount * beta[bootstrap] - beta[features]
        return -_one_hot_mean(features, td_error, size)

    return _averaged_sgd(settings, size, radius, draw, gradient)[index]


def npg_direction(
    chain: AgentStateChain,
    policy: np.ndarray,
    gamma: float,
    critic: np.ndarray,
    rng: np.random.Generator,
    settings: SGDSettings | None = None,
) -> np.ndarray:
    """Natural-gradient direction ``w`` as ``(n_z, A)`` (module docstring), by averaged SGD.

    ``critic`` holds ``Q_beta`` on pairs, ``(n_pairs, A)`` (a symmetric critic lifted, i.e.
    constant over the states of a window). ``radius=None`` takes
    ``B = sqrt(n_z A) 2 max|R| / (1 - gamma)``, which holds every advantage.
    """
    settings = _settings(settings, "settings")
    sampler = ChainSampler(chain, policy, gamma, rng)
    critic = real_array(critic, "critic")
    if critic.shape != (chain.num_pairs, chain.num_actions):
        raise ValueError(
            f"`critic` must have shape (n_pairs, A) = {(chain.num_pairs, chain.num_actions)}, "
            f"got {critic.shape}."
        )
    if not np.isfinite(critic).all():
        raise ValueError("`critic` must be finite; it holds NaN or inf.")
    pi_pairs = sampler.policy[chain.agent_state_of_pair]
    advantage = critic - (pi_pairs * critic).sum(axis=1, keepdims=True)
    size = chain.num_agent_states * chain.num_actions
    radius = settings.radius or 2.0 * math.sqrt(size) * _reward_bound(chain, sampler.gamma)

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        pairs, actions = sampler.visitation(n)
        features = chain.agent_state_of_pair[pairs] * chain.num_actions + actions
        return features, advantage[pairs, actions]

    def gradient(w: np.ndarray, batch: tuple[np.ndarray, ...]) -> np.ndarray:
        features, target = batch
        return _one_hot_mean(features, w[features] - target, size)

    return _averaged_sgd(settings, size, radius, draw, gradient).reshape(
        chain.num_agent_states, chain.num_actions
    )


@dataclass(frozen=True)
class ActorCriticHistory:
    """Trace of :func:`natural_actor_critic` over ``T`` iterations.

    Attributes:
        values: ``(T + 1,)`` exact ``J(pi_t)``, ``t = 0 .. T``.
        critic_errors: ``(T,)`` :func:`~lightning_info.methods.asymmetric_ac.exact.critic_error` of
        the TD
            critic of ``pi_t`` against the exact ``Q^{pi_t}(s, z, a)``.
        aliasing_floors: ``(T,)`` the least such error of any critic of ``(z, a)`` alone.
        theta: ``(n_z, A)`` final logits.
    """

    values: np.ndarray
    critic_errors: np.ndarray
    aliasing_floors: np.ndarray
    theta: np.ndarray


def natural_actor_critic(
    chain: AgentStateChain,
    gamma: float,
    kind: CriticKind,
    rng: np.random.Generator,
    iterations: int,
    actor_step_size: float,
    m: int = 1,
    critic: SGDSettings | None = None,
    actor: SGDSettings | None = None,
    theta: np.ndarray | None = None,
) -> ActorCriticHistory:
    """Run ``iterations`` rounds of critic (:func:`m_step_td`), NPG direction, ``theta += eta w``.

    Starts from ``theta`` (default zeros: the uniform policy); each round's critic starts from 0.
    Every policy is evaluated exactly
    (:func:`~lightning_info.methods.asymmetric_ac.exact.evaluate_policy`).
    """
    require_chain(chain)
    iterations = require_int(iterations, "iterations", 1)
    eta = require_positive(actor_step_size, "actor_step_size")
    critic, actor = _settings(critic, "critic"), _settings(actor, "actor")
    shape = (chain.num_agent_states, chain.num_actions)
    theta = np.zeros(shape) if theta is None else real_array(theta, "theta")
    if theta.shape != shape:
        raise ValueError(f"`theta` must have shape (n_z, A) = {shape}, got {theta.shape}.")
    values, errors, floors = [], [], []
    for _ in range(iterations):
        policy = softmax_policy(theta)
        evaluation = evaluate_policy(chain, policy, gamma)
        q_hat = m_step_td(chain, policy, gamma, kind, rng, m, critic)
        values.append(evaluation.value)
        errors.append(critic_error(chain, evaluation, q_hat))
        floors.append(evaluation.aliasing_floor)
        theta = theta + eta * npg_direction(chain, policy, gamma, q_hat, rng, actor)
    values.append(evaluate_policy(chain, softmax_policy(theta), gamma).value)
    return ActorCriticHistory(np.array(values), np.array(errors), np.array(floors), theta)
