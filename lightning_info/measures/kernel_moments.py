"""Softmax-weighted Gaussian-kernel means over a data set, streamed in chunks.

For query points ``x_b`` and data ``y_1..y_N`` (optionally weighted by ``pi_i``), the Gaussian
mixture ``q(x) = sum_i pi_i N(x; alpha y_i, sigma^2 I)`` has posterior weights

    w_bi = pi_i k(x_b, y_i) / sum_j pi_j k(x_b, y_j), k(x, y) = exp(-||x - alpha y||^2 / 2 sigma^2)

and everything the diffusion Fisher, the score and the smoothed-density estimators need is a
``w``-weighted mean over the data: ``E_w[y]``, ``E_w[||y||^2]``, ``E_w[y y^T]`` and, for vectors
``v_b``, ``E_w[y (y^T v_b)]``. :func:`kernel_moments` computes them in one pass over chunks of the
data with a running log-sum-exp (the online-softmax recurrence), so memory is
``O(B * chunk_size)`` whatever ``N``, and it also returns ``log q(x)``.

Used by :mod:`lightning_info.methods.diffusion_fisher.functional` (the diffusion Fisher) and
:mod:`lightning_info.methods.smoothed_information.functional` (Fisher information, entropy and MI
of ``f * phi_t``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from lightning_info.core.validation import require_int


@dataclass(frozen=True)
class KernelMoments:
    """Posterior moments at ``B`` query points (see the module docstring).

    Attributes:
        log_density: ``log q(x_b)``, ``(B,)``.
        mean: ``E_w[y]``, ``(B, d)``.
        sq_norm: ``E_w[||y||^2]``, ``(B,)``.
        second: ``E_w[y y^T]``, ``(B, d, d)``, when asked for.
        projected: ``E_w[y (y^T v_b)]``, ``(B, d)``, when vectors were given.
    """

    log_density: Tensor
    mean: Tensor
    sq_norm: Tensor
    second: Tensor | None = None
    projected: Tensor | None = None


def per_point_column(
    value: float | Tensor, batch: int, like: Tensor, name: str, positive: bool = False
) -> Tensor:
    """A scalar or ``(B,)`` value (e.g. ``alpha_t`` per query point) as a finite ``(B, 1)``
    column with ``like``'s dtype and device; ``positive`` also requires it to be > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Tensor)):
        raise TypeError(f"`{name}` must be a number or a tensor, got {type(value).__name__}.")
    if not isinstance(value, Tensor):  # a number: checked in Python, one tensor made
        if not math.isfinite(value):
            raise ValueError(f"`{name}` must be finite.")
        if positive and value <= 0:
            raise ValueError(f"`{name}` must be > 0.")
        return torch.full((batch, 1), float(value), dtype=like.dtype, device=like.device)
    column = torch.as_tensor(value, dtype=like.dtype, device=like.device)
    if column.dim() == 0:
        column = column.expand(batch)
    if column.shape != (batch,):
        raise ValueError(
            f"`{name}` must be a scalar or have shape ({batch},), got {tuple(column.shape)}."
        )
    if not torch.isfinite(column).all():
        raise ValueError(f"`{name}` must be finite.")
    if positive and (column <= 0).any():
        raise ValueError(f"`{name}` must be > 0.")
    return column[:, None]


def kernel_moments(
    x: Tensor,
    data: Tensor,
    alpha: float | Tensor,
    sigma: float | Tensor,
    *,
    data_weights: Tensor | None = None,
    vectors: Tensor | None = None,
    second_moment: bool = False,
    chunk_size: int = 4096,
) -> KernelMoments:
    """Moments of the posterior ``w`` of ``sum_i pi_i N(alpha y_i, sigma^2 I)`` at ``x``.

    Args:
        x: query points ``(B, d)``.
        data: ``(N, d)`` data points ``y_i``.
        alpha, sigma: scalars or ``(B,)``, one per query point (e.g. a diffusion time per
            point); ``sigma > 0``.
        data_weights: ``pi_i >= 0``, ``(N,)``; ``None`` is uniform ``1/N``.
        vectors: ``v_b`` ``(B, d)`` for ``E_w[y (y^T v_b)]``.
        second_moment: also return ``E_w[y y^T]`` (``B d^2`` memory).
        chunk_size: data points per chunk.
    """
    if x.dim() != 2 or data.dim() != 2 or x.shape[1] != data.shape[1]:
        raise ValueError(
            f"`x` (B, d) and `data` (N, d) must share d, got {tuple(x.shape)} and "
            f"{tuple(data.shape)}."
        )
    if data.shape[0] == 0:
        raise ValueError("`data` is empty: the mixture needs at least one point.")
    chunk_size = require_int(chunk_size, "chunk_size", 1)
    batch = x.shape[0]
    alpha_b = per_point_column(alpha, batch, x, "alpha")
    sigma_b = per_point_column(sigma, batch, x, "sigma", positive=True)
    if data_weights is not None and (
        data_weights.shape != (data.shape[0],) or (data_weights < 0).any()
    ):
        raise ValueError("`data_weights` must be non-negative with shape (N,).")
    if vectors is not None and vectors.shape != x.shape:
        raise ValueError(f"`vectors` must have the shape of `x` {tuple(x.shape)}.")
    return kernel_pass(x, data, alpha_b, sigma_b, data_weights, vectors, second_moment, chunk_size)


def kernel_pass(
    x: Tensor,
    data: Tensor,
    alpha_b: Tensor,
    sigma_b: Tensor,
    data_weights: Tensor | None,
    vectors: Tensor | None,
    second_moment: bool,
    chunk_size: int,
) -> KernelMoments:
    """:func:`kernel_moments` on arguments its caller has already checked: ``alpha_b`` and
    ``sigma_b`` are ``(B, 1)`` columns (:func:`per_point_column`), ``data`` non-empty with the
    ``d`` of ``x``, ``data_weights`` non-negative ``(N,)`` or ``None``, ``vectors`` ``(B, d)`` or
    ``None``. For callers that validate once and call often (the diffusion Fisher)."""
    batch, dim = x.shape
    data = data.to(x.dtype)
    log_pi = None  # uniform weights: log(1/N) is added to the log density at the end
    if data_weights is not None:
        log_pi = (data_weights / data_weights.sum()).to(x.dtype).log()

    # -||x_b - alpha_b y_n||^2 / (2 sigma_b^2)
    #     = [alpha_b x_b / sigma_b^2, -alpha_b^2 / (2 sigma_b^2)] . [y_n, ||y_n||^2] - c_b,
    # c_b = ||x_b||^2 / (2 sigma_b^2): one matrix product gives the logits up to c_b, which
    # cancels in the weights and is added back to the log density at the end. The weighted sums
    # of y, ||y||^2 and 1 are one more product with the same augmented chunk [y, ||y||^2, 1], and
    # E_w[y (y^T v)] two more ((v^T y), then ((v^T y) w) y): a few in-place passes over the
    # (B, n) logits, where the expanded distance took a dozen elementwise passes.
    inverse_var = 1 / sigma_b**2
    queries = torch.cat([x * (alpha_b * inverse_var), -0.5 * alpha_b**2 * inverse_var], 1)
    running_max = torch.full((batch, 1), -math.inf, dtype=x.dtype, device=x.device)
    sums = torch.zeros(batch, dim + 2, dtype=x.dtype, device=x.device)  # y, ||y||^2, 1
    sum_outer = (
        torch.zeros(batch, dim, dim, dtype=x.dtype, device=x.device) if second_moment else None
    )
    sum_proj = (
        torch.zeros(batch, dim, dtype=x.dtype, device=x.device) if vectors is not None else None
    )
    for start in range(0, data.shape[0], chunk_size):
        y = data[start : start + chunk_size]
        y_sq = (y * y).sum(1, keepdim=True)
        augmented = torch.cat([y, y_sq, torch.ones_like(y_sq)], 1)  # [y, ||y||^2, 1]
        logits = queries @ augmented[:, : dim + 1].T  # (B, n)
        if log_pi is not None:
            logits = logits + log_pi[start : start + chunk_size]
        new_max = torch.maximum(running_max, logits.amax(1, keepdim=True))
        rescale = torch.exp(running_max - new_max)
        # In place of the logits, unless autograd needs them (a score or Hessian through q_t).
        weights = (
            torch.exp(logits - new_max) if logits.requires_grad else logits.sub_(new_max).exp_()
        )
        sums = sums * rescale + weights @ augmented
        if sum_outer is not None:
            sum_outer = sum_outer * rescale[:, :, None] + torch.einsum(
                "bn,ni,nj->bij", weights, y, y
            )
        if sum_proj is not None:
            along = vectors @ y.T  # (v_b^T y_n), weighted in place when no gradient flows
            along = along * weights if weights.requires_grad else along.mul_(weights)
            sum_proj = sum_proj * rescale + along @ y
        running_max = new_max
    sum_y, sum_sq, total = sums[:, :dim], sums[:, dim : dim + 1], sums[:, dim + 1 :]
    # the constant left out of the logits: c_b, and log(1/N) for uniform weights
    offset = -0.5 * (x * x).sum(1, keepdim=True) * inverse_var
    if data_weights is None:
        offset = offset - math.log(data.shape[0])
    log_normal = -0.5 * dim * torch.log(2 * math.pi * sigma_b**2)
    return KernelMoments(
        log_density=(running_max + total.log() + log_normal + offset).squeeze(1),
        mean=sum_y / total,
        sq_norm=(sum_sq / total).squeeze(1),
        second=None if sum_outer is None else sum_outer / total[:, :, None],
        projected=None if sum_proj is None else sum_proj / total,
    )
