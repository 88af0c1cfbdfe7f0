"""Diffusion Fisher: the Hessian of ``-log q_t`` without autodiff (Wang et al., ICML 2025).

For data ``y_1..y_N`` with weights ``pi_i`` (uniform by default) noised as
``x_t = alpha_t y + sigma_t eps``, the density of ``x_t`` is the Gaussian mixture

    q_t(x) = sum_i pi_i N(x; alpha y_i, sigma^2 I),                                   (DF-q)

with posterior weights ``w_i(x) ∝ pi_i exp(-||x - alpha y_i||^2 / 2 sigma^2)`` and posterior mean
``y_hat = E_w[y]``. Its score and diffusion Fisher ``F = -Hessian log q_t`` are

    s(x) = (alpha y_hat - x) / sigma^2,                                               (DF-score)
    F(x) = I / sigma^2 - (alpha^2 / sigma^4) (E_w[y y^T] - y_hat y_hat^T),            (DF)
    tr F = d / sigma^2 - (alpha^2 / sigma^4) E_w[||y||^2] + ||x / sigma^2 + s||^2,     (DF-trace)
    F v  = v / sigma^2 - (alpha^2 / sigma^4) (E_w[y (y^T v)] - y_hat (y_hat^T v)),     (DF-MVP)

using ``(alpha / sigma^2) y_hat = x / sigma^2 + s``. Trace and MVP cost ``O(N d)`` per point and
need no ``d x d`` matrix (Wang et al., "Efficiently Access Diffusion Fisher: Within the Outer
Product Span Space", ICML 2025, eqs. 6-9). All posterior means come from one streamed pass of
:func:`~lightning_info.measures.kernel_moments.kernel_moments`; the posterior variance
``E_w[||y||^2] - ||y_hat||^2`` is clipped at 0 (``F <= I / sigma^2`` holds exactly).

Without the data set, only a trained network:

- DF-TM (trace matching): a scalar network ``T(x_t, t) ~ E[||x_0||^2 | x_t]``, trained by
  regressing ``||x_0||^2`` on ``x_t`` (:func:`trace_matching_loss`), replaces ``E_w[||y||^2]``
  in (DF-trace) (:func:`trace_matching_fisher_trace`);
- DF-EA (endpoint approximation): ``E_w[y y^T]`` is replaced by ``x_0 x_0^T`` for the endpoint
  ``x_0`` of the probability-flow trajectory through ``x_t`` (the generated sample when
  sampling, the data point itself when computing a likelihood) (:func:`endpoint_fisher_trace`,
  :func:`endpoint_fisher_mvp`). The endpoint must not be the Tweedie estimate
  ``(x + sigma^2 s) / alpha`` of the same network: that is ``y_hat`` itself, so the covariance
  term cancels and the estimate collapses to ``F = I / sigma^2``.

Arguments ``alpha`` and ``sigma`` are scalars or one value per query point ``(B,)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from lightning_info.core.validation import (
    all_finite,
    require_finite_tensor,
    require_int,
    require_real_floating,
    require_real_tensor,
)
from lightning_info.diffusion.noise_schedules import NoiseSchedule
from lightning_info.measures.kernel_moments import kernel_pass, per_point_column

__all__ = [
    "check_data",
    "diffusion_fisher_matrix",
    "diffusion_fisher_mvp",
    "diffusion_fisher_terms",
    "diffusion_fisher_trace",
    "diffusion_log_density",
    "diffusion_score",
    "DiffusionFisherTerms",
    "endpoint_fisher_mvp",
    "endpoint_fisher_trace",
    "score_from_epsilon",
    "trace_matching_fisher_trace",
    "trace_matching_loss",
]

ScoreFn = Callable[[Tensor, float | Tensor], Tensor]


@dataclass(frozen=True)
class DiffusionFisherTerms:
    """Everything one pass over the data gives at ``B`` query points.

    Attributes:
        log_density: ``log q_t(x)``, ``(B,)``.
        posterior_mean: ``y_hat = E_w[y]``, ``(B, d)``.
        score: ``grad log q_t(x)`` (DF-score), ``(B, d)``.
        trace: ``tr F`` (DF-trace), ``(B,)``.
        mvp: ``F v`` (DF-MVP), ``(B, d)``, when vectors were given.
        matrix: ``F`` (DF), ``(B, d, d)``, when asked for.
    """

    log_density: Tensor
    posterior_mean: Tensor
    score: Tensor
    trace: Tensor
    mvp: Tensor | None = None
    matrix: Tensor | None = None


def _points(x: Tensor, name: str) -> Tensor:
    require_real_tensor(x, name)
    if x.dim() != 2:
        raise ValueError(f"`{name}` must be 2-D (points, d), got shape {tuple(x.shape)}.")
    if not x.is_floating_point():
        raise TypeError(f"`{name}` must be a floating-point tensor, got {x.dtype}.")
    if x.numel() == 0:
        raise ValueError(f"`{name}` is empty (shape {tuple(x.shape)}).")
    return require_finite_tensor(x, name)


def check_data(data: Tensor, data_weights: Tensor | None = None) -> None:
    """Raise unless ``data`` is a finite non-empty ``(N, d)`` float tensor and ``data_weights``
    (if given) finite, non-negative, of shape ``(N,)`` and not all zero."""
    _points(data, "data")
    if data_weights is None:
        return
    if not isinstance(data_weights, Tensor) or data_weights.shape != (data.shape[0],):
        raise ValueError(f"`data_weights` must be a tensor of shape ({data.shape[0]},).")
    require_finite_tensor(data_weights, "data_weights")
    if (data_weights < 0).any() or not (data_weights > 0).any():
        raise ValueError("`data_weights` must be non-negative and not all zero.")


def _check(x: Tensor, data: Tensor, data_weights: Tensor | None, chunk_size: int) -> None:
    _points(x, "x")
    check_data(data, data_weights)
    if x.shape[1] != data.shape[1]:
        raise ValueError(
            f"`x` (B, d) and `data` (N, d) must share d, got {tuple(x.shape)} and "
            f"{tuple(data.shape)}."
        )
    require_int(chunk_size, "chunk_size", 1)


def _vectors(v: Tensor, x: Tensor, name: str = "v") -> Tensor:
    if not isinstance(v, Tensor) or v.shape != x.shape:
        raise ValueError(f"`{name}` must be a tensor with the shape of `x` {tuple(x.shape)}.")
    return require_finite_tensor(v.to(x.dtype), name)


def _checked_terms(
    x: Tensor,
    data: Tensor,
    alpha: float | Tensor,
    sigma: float | Tensor,
    data_weights: Tensor | None,
    chunk_size: int,
    vectors: Tensor | None = None,
    *,
    vectors_name: str = "vectors",
    matrix: bool = False,
) -> DiffusionFisherTerms:
    """:func:`_terms` for the public functions: their arguments checked, scalar or ``(B,)``
    ``alpha, sigma`` turned into columns (``vectors_name`` names ``vectors`` in error messages)."""
    _check(x, data, data_weights, chunk_size)
    batch = x.shape[0]
    alpha_b = per_point_column(alpha, batch, x, "alpha", positive=False)
    sigma_b = per_point_column(sigma, batch, x, "sigma", positive=True)
    smallest = _min_sigma(x.dtype)
    if float(sigma_b.min()) < smallest:
        raise ValueError(
            f"`sigma` must be >= {smallest:.3g} in {x.dtype} (sigma^2 must be a normal number), "
            f"got {float(sigma_b.min()):.3g}; pass a larger sigma or float64 points."
        )
    vectors = None if vectors is None else _vectors(vectors, x, vectors_name)
    terms = _terms(x, data, alpha_b, sigma_b, data_weights, vectors, matrix, chunk_size)
    if not (all_finite(terms.trace) and all_finite(terms.score)):
        raise ValueError(
            f"The diffusion Fisher overflowed {x.dtype} at sigma >= {float(sigma_b.min()):.3g}: "
            "alpha^2 ||x|| ||y|| / sigma^2 is too large for the dtype; use float64 points or a "
            "larger sigma."
        )
    return terms


def _min_sigma(dtype: torch.dtype) -> float:
    """Smallest ``sigma`` the data-set functions accept in ``dtype``: ``sqrt(finfo.tiny)``, so
    that ``sigma^2`` is a normal number (1.1e-19 in float32, 1.5e-154 in float64)."""
    return math.sqrt(torch.finfo(dtype).tiny)


def _terms(
    x: Tensor,
    data: Tensor,
    alpha: Tensor,
    sigma: Tensor,
    data_weights: Tensor | None,
    vectors: Tensor | None,
    matrix: bool,
    chunk_size: int,
) -> DiffusionFisherTerms:
    """(DF-score), (DF-trace), (DF-MVP), (DF) from one kernel pass; ``alpha, sigma`` are columns."""
    m = kernel_pass(x, data, alpha, sigma, data_weights, vectors, matrix, chunk_size)
    # F = (I - (alpha / sigma)^2 Cov_w) / sigma^2: never forms sigma^4, which underflows to 0
    # (and alpha^2 / sigma^4 to inf, then inf * 0 = NaN) at sigma ~ 1e-10 in float32.
    var = sigma * sigma
    snr = (alpha / sigma) ** 2  # alpha^2 / sigma^2, (B, 1)
    mean = m.mean
    score = (alpha * mean - x) / var
    spread = (m.sq_norm - (mean * mean).sum(1)).clamp_min(0)  # E_w ||y - y_hat||^2
    trace = (x.shape[1] - snr[:, 0] * spread) / var[:, 0]
    mvp = None
    if vectors is not None:
        along = (mean * vectors).sum(1, keepdim=True)
        mvp = (vectors - snr * (m.projected - mean * along)) / var
    dense = None
    if m.second is not None:
        eye = torch.eye(x.shape[1], dtype=x.dtype, device=x.device)
        covariance = m.second - mean[:, :, None] * mean[:, None, :]
        dense = (eye - snr[:, :, None] * covariance) / var[:, :, None]
    return DiffusionFisherTerms(m.log_density, mean, score, trace, mvp, dense)


def diffusion_fisher_terms(
    x: Tensor,
    data: Tensor,
    alpha: float | Tensor,
    sigma: float | Tensor,
    *,
    vectors: Tensor | None = None,
    matrix: bool = False,
    data_weights: Tensor | None = None,
    chunk_size: int = 4096,
) -> DiffusionFisherTerms:
    """Log density, score, ``tr F`` and optionally ``F v`` and ``F`` in one pass over the data.

    Implements (DF-q), (DF-score), (DF-trace), (DF-MVP) and (DF) of the module docstring for the
    mixture of ``data`` ``(N, d)`` at query points ``x`` ``(B, d)``. ``vectors`` ``(B, d)`` gives
    ``F v``; ``matrix=True`` gives the dense ``(B, d, d)`` ``F`` (``B d^2`` memory).
    """
    return _checked_terms(x, data, alpha, sigma, data_weights, chunk_size, vectors, matrix=matrix)


def diffusion_log_density(
    x: Tensor,
    data: Tensor,
    alpha: float | Tensor,
    sigma: float | Tensor,
    *,
    data_weights: Tensor | None = None,
    chunk_size: int = 4096,
) -> Tensor:
    """``log q_t(x) = log sum_i pi_i N(x; alpha y_i, sigma^2 I)`` (DF-q), ``(B,)``."""
    return _checked_terms(x, data, alpha, sigma, data_weights, chunk_size).log_density


def diffusion_score(
    x: Tensor,
    data: Tensor,
    alpha: float | Tensor,
    sigma: float | Tensor,
    *,
    data_weights: Tensor | None = None,
    chunk_size: int = 4096,
) -> Tensor:
    """Score ``grad log q_t(x) = (alpha E_w[y] - x) / sigma^2`` (DF-score), ``(B, d)``."""
    return _checked_terms(x, data, alpha, sigma, data_weights, chunk_size).score


def diffusion_fisher_trace(
    x: Tensor,
    data: Tensor,
    alpha: float | Tensor,
    sigma: float | Tensor,
    *,
    data_weights: Tensor | None = None,
    chunk_size: int = 4096,
) -> Tensor:
    """Trace of the diffusion Fisher, ``(B,)``:

        tr F = d / sigma^2 - (alpha^2 / sigma^4) E_w[||y||^2] + ||x / sigma^2 + s||^2   (DF-trace)

    evaluated as ``d / sigma^2 - (alpha^2 / sigma^4) E_w[||y - y_hat||^2]``.
    """
    return _checked_terms(x, data, alpha, sigma, data_weights, chunk_size).trace


def diffusion_fisher_mvp(
    x: Tensor,
    v: Tensor,
    data: Tensor,
    alpha: float | Tensor,
    sigma: float | Tensor,
    *,
    data_weights: Tensor | None = None,
    chunk_size: int = 4096,
) -> Tensor:
    """Diffusion-Fisher-vector products, one ``v_b`` per point, ``(B, d)``:

        F v = v / sigma^2 - (alpha^2 / sigma^4) (E_w[y (y^T v)] - y_hat (y_hat^T v))   (DF-MVP)

    ``O(N d)`` per point. In float32 the difference of the two uncentred terms loses about
    ``eps_32 alpha^2 ||y||^2 / sigma^2`` of relative accuracy when the posterior concentrates on
    one data point (small ``sigma``); use float64 there.
    """
    return _checked_terms(x, data, alpha, sigma, data_weights, chunk_size, v, vectors_name="v").mvp


def diffusion_fisher_matrix(
    x: Tensor,
    data: Tensor,
    alpha: float | Tensor,
    sigma: float | Tensor,
    *,
    data_weights: Tensor | None = None,
    chunk_size: int = 4096,
) -> Tensor:
    """Dense diffusion Fisher ``(B, d, d)``:

        F = I / sigma^2 - (alpha^2 / sigma^4) (E_w[y y^T] - y_hat y_hat^T)             (DF)

    ``B d^2`` memory; prefer :func:`diffusion_fisher_trace` and :func:`diffusion_fisher_mvp`.
    """
    return _checked_terms(x, data, alpha, sigma, data_weights, chunk_size, matrix=True).matrix


def _network_terms(
    x: Tensor, t: float | Tensor, score_fn: ScoreFn, alpha: float | Tensor, sigma: float | Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """``(alpha, sigma)`` columns and ``u = x / sigma^2 + s(x, t)`` from the score network."""
    _points(x, "x")
    if not callable(score_fn):
        raise TypeError(
            f"`score_fn` must be a callable (x, t) -> Tensor, got {type(score_fn).__name__}."
        )
    batch = x.shape[0]
    alpha_b = per_point_column(alpha, batch, x, "alpha", positive=True)
    sigma_b = per_point_column(sigma, batch, x, "sigma", positive=True)
    score = score_fn(x, t)
    if not isinstance(score, Tensor) or score.shape != x.shape:
        raise ValueError(f"`score_fn` must return a tensor with the shape of `x` {tuple(x.shape)}.")
    return alpha_b, sigma_b, x / sigma_b**2 + score


def _per_point_values(value: Tensor, batch: int, name: str) -> Tensor:
    if not isinstance(value, Tensor) or value.numel() != batch or value.dim() > 2:
        raise ValueError(
            f"`{name}` must give one value per point, shape ({batch},) or ({batch}, 1)."
        )
    return value.reshape(batch)


def trace_matching_fisher_trace(
    x: Tensor,
    t: float | Tensor,
    score_fn: ScoreFn,
    sq_norm_fn: Callable[[Tensor, float | Tensor], Tensor],
    alpha: float | Tensor,
    sigma: float | Tensor,
) -> Tensor:
    """DF-TM trace from a score network and a trace-matching network, ``(B,)``:

        tr F ~ d / sigma^2 - (alpha^2 / sigma^4) T(x, t) + ||x / sigma^2 + s(x, t)||^2

    with ``T(x, t) = sq_norm_fn(x, t) ~ E[||x_0||^2 | x_t = x]`` (Wang et al., 2025, DF-TM).
    ``score_fn(x, t)`` returns ``(B, d)`` (see :func:`score_from_epsilon` for an
    epsilon-prediction network); ``t`` is passed to both networks unchanged. With the exact
    ``T`` and score of a data set it equals :func:`diffusion_fisher_trace`.
    """
    if not callable(sq_norm_fn):
        raise TypeError(
            f"`sq_norm_fn` must be a callable (x, t) -> Tensor, got {type(sq_norm_fn).__name__}."
        )
    alpha_b, sigma_b, u = _network_terms(x, t, score_fn, alpha, sigma)
    expected = _per_point_values(sq_norm_fn(x, t), x.shape[0], "sq_norm_fn(x, t)")
    var = sigma_b[:, 0] ** 2
    return x.shape[1] / var - alpha_b[:, 0] ** 2 / var**2 * expected + (u * u).sum(1)


def endpoint_fisher_trace(
    x: Tensor,
    t: float | Tensor,
    score_fn: ScoreFn,
    endpoint: Tensor,
    alpha: float | Tensor,
    sigma: float | Tensor,
) -> Tensor:
    """DF-EA trace: (DF-trace) with ``E_w[||y||^2]`` replaced by ``||x_0||^2``, ``(B,)``:

        tr F ~ d / sigma^2 - (alpha^2 / sigma^4) ||x_0||^2 + ||x / sigma^2 + s(x, t)||^2

    ``endpoint`` ``x_0`` ``(B, d)`` is the end of the probability-flow trajectory through ``x``
    (see the module docstring; not the Tweedie estimate of the same network). Exact when the data
    set is one point ``x_0``.
    """
    _points(x, "x")
    endpoint = _vectors(endpoint, x, "endpoint")
    return trace_matching_fisher_trace(
        x, t, score_fn, lambda *_: (endpoint * endpoint).sum(1), alpha, sigma
    )


def endpoint_fisher_mvp(
    x: Tensor,
    v: Tensor,
    t: float | Tensor,
    score_fn: ScoreFn,
    endpoint: Tensor,
    alpha: float | Tensor,
    sigma: float | Tensor,
) -> Tensor:
    """DF-EA matrix-vector products, ``(B, d)``:

        F v ~ v / sigma^2 - (alpha^2 / sigma^4) x_0 (x_0^T v) + u (u^T v),  u = x / sigma^2 + s

    (DF-MVP) with ``E_w[y y^T] -> x_0 x_0^T`` and ``(alpha^2 / sigma^4) y_hat y_hat^T = u u^T``.
    """
    _points(x, "x")
    v = _vectors(v, x)
    endpoint = _vectors(endpoint, x, "endpoint")
    alpha_b, sigma_b, u = _network_terms(x, t, score_fn, alpha, sigma)
    var = sigma_b**2
    along_endpoint = (endpoint * v).sum(1, keepdim=True)
    along_u = (u * v).sum(1, keepdim=True)
    return v / var - alpha_b**2 / var**2 * endpoint * along_endpoint + u * along_u


def score_from_epsilon(
    epsilon_fn: Callable[[Tensor, float | Tensor], Tensor], schedule: NoiseSchedule
) -> ScoreFn:
    """Score ``s(x, t) = -epsilon(x, t) / sigma_t`` of an epsilon-prediction network; a number
    ``t`` must lie in the schedule's ``[t_min, t_max]`` (``sigma_0 = 0`` has no score)."""

    def score(x: Tensor, t: float | Tensor) -> Tensor:
        if not isinstance(t, Tensor):
            schedule.check_time(t, "t")
        sigma = torch.as_tensor(schedule.sigma(t), dtype=x.dtype, device=x.device)
        return -epsilon_fn(x, t) / (sigma[:, None] if sigma.dim() == 1 else sigma)

    return score


def trace_matching_loss(
    sq_norm_fn: Callable[[Tensor, Tensor], Tensor],
    x0: Tensor,
    t: Tensor,
    noise: Tensor,
    schedule: NoiseSchedule,
) -> Tensor:
    """Regression loss of DF-TM's network ``T(x_t, t) ~ E[||x_0||^2 | x_t]``:

        L = mean_b (T(alpha_t x_0 + sigma_t eps, t) - ||x_0||^2)^2

    over a batch of data ``x0`` ``(B, d)``, times ``t`` ``(B,)`` and noise ``eps`` ``(B, d)``; its
    minimiser over all functions is the conditional mean ``E[||x_0||^2 | x_t]``. ``t`` must be a
    floating-point tensor; its values are not range-checked (that would synchronise the device),
    so draw them from the schedule's ``[t_min, t_max]``.
    """
    _points(x0, "x0")
    noise = _vectors(noise, x0, "noise")
    if not isinstance(t, Tensor) or t.shape != (x0.shape[0],):
        raise ValueError(f"`t` must be a tensor of shape ({x0.shape[0]},).")
    require_real_floating(t, "t")
    if not isinstance(schedule, NoiseSchedule):
        raise TypeError(
            f"`schedule` must be a NoiseSchedule, got {type(schedule).__name__}; build one with "
            "lightning_info.diffusion.noise_schedules.noise_schedule(name)."
        )
    alpha = schedule.alpha(t).to(x0.dtype)[:, None]
    sigma = schedule.sigma(t).to(x0.dtype)[:, None]
    x_t = alpha * x0 + sigma * noise
    predicted = _per_point_values(sq_norm_fn(x_t, t), x0.shape[0], "sq_norm_fn(x_t, t)")
    return (predicted - (x0 * x0).sum(1)).pow(2).mean()
