"""Functional core of the Fisher-information constraint (FIC-TSC, Chen et al., ICML 2025).

For a mini-batch loss ``L(theta)`` with gradient ``g = grad L``, the empirical diagonal Fisher is
``diag F_hat = g * g`` and its trace is

    tr F_hat = sum_p ||g_p||^2 = ||g||_2^2.                                      (FIC trace)

The constraint ``tr F_hat <= eps`` is enforced after backward by rescaling the gradient,

    g <- g * min(1, sqrt(eps) / (||g||_2 + 1e-6)),                               (FIC rescale)

which is the paper's ``g * sqrt(min(1, eps / (tr F_hat + 1e-6)))`` with the stabiliser moved out
from under the square root (onto ``||g||``), i.e. exactly global gradient-norm clipping at
``sqrt(eps)``. The alternative of the paper adds the Fisher term to the objective instead,
``L + lambda * max(0, tr F_hat - eps)``, whose gradient needs a double backward
(``g + 2 lambda H g`` when the hinge is active).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import Tensor

from lightning_info.core.validation import require_real_tensor


def _with_grad(parameters: Iterable[Tensor] | Tensor) -> list[Tensor]:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    params = []
    for k, p in enumerate(parameters):
        if p.grad is not None:
            require_real_tensor(p.grad, f"parameters[{k}].grad")
            params.append(p)
    return params


def empirical_fisher_trace(parameters: Iterable[Tensor] | Tensor) -> Tensor:
    """Trace of the empirical diagonal Fisher from the stored gradients, ``sum_p ||p.grad||^2``.

    Returns a 0-dim tensor (0 when no parameter has a gradient). Non-finite gradients give a
    non-finite trace; nothing is changed.
    """
    grads = [p.grad for p in _with_grad(parameters)]
    if not grads:
        return torch.zeros(())
    return torch.nn.utils.get_total_norm(grads, norm_type=2.0).pow(2)


def constrain_fisher_trace_(
    parameters: Iterable[Tensor] | Tensor, max_fisher: float
) -> tuple[Tensor, Tensor]:
    """Rescale gradients in place so that ``tr F_hat <= max_fisher`` (eq. FIC rescale).

    The rescaling is ``torch.nn.utils.clip_grads_with_norm_`` at ``sqrt(max_fisher)``, so the
    result equals ``clip_grad_norm_(parameters, sqrt(max_fisher))`` to the last bit. If the trace
    is not finite (an overflowing AMP step, a diverged loss) the gradients are left untouched, so
    that a ``GradScaler`` can still skip the step on the original values.

    Runs without a host-device synchronisation. Returns ``(trace_before, trace_after)`` as 0-dim
    tensors.
    """
    if not (isinstance(max_fisher, (int, float)) and math.isfinite(max_fisher) and max_fisher > 0):
        raise ValueError(f"`max_fisher` must be a finite number > 0, got {max_fisher!r}.")
    params = _with_grad(parameters)
    if not params:
        zero = torch.zeros(())
        return zero, zero
    total_norm = torch.nn.utils.get_total_norm([p.grad for p in params], norm_type=2.0)
    finite = torch.isfinite(total_norm)
    # A zero norm makes the clip coefficient clamp to 1: a no-op on non-finite steps.
    effective_norm = torch.where(finite, total_norm, torch.zeros_like(total_norm))
    max_norm = math.sqrt(max_fisher)
    torch.nn.utils.clip_grads_with_norm_(params, max_norm, effective_norm)
    coefficient = torch.clamp(max_norm / (effective_norm + 1e-6), max=1.0)
    trace_before = total_norm.pow(2)
    trace_after = torch.where(finite, (total_norm * coefficient).pow(2), trace_before)
    return trace_before, trace_after


def fisher_penalty(loss: Tensor, parameters: Iterable[Tensor], max_fisher: float = 0.0) -> Tensor:
    """Differentiable Fisher term ``max(0, tr F_hat - max_fisher)``, ``tr F_hat = ||grad L||^2``.

    The gradient is taken with ``create_graph=True`` so that ``backward`` on
    ``loss + weight * fisher_penalty(loss, params)`` differentiates through it (double backward).
    ``.grad`` of the parameters is not touched.
    """
    require_real_tensor(loss, "loss")
    if loss.dim() != 0:
        raise ValueError(
            f"`loss` must be a scalar, got shape {tuple(loss.shape)}; reduce it first."
        )
    if not loss.requires_grad:
        raise ValueError(
            "`loss` has no autograd graph (requires_grad=False): compute it from `parameters` "
            "with grad enabled, outside torch.no_grad() / inference_mode and without .detach()."
        )
    if max_fisher < 0 or not math.isfinite(max_fisher):
        raise ValueError(f"`max_fisher` must be a finite number >= 0, got {max_fisher!r}.")
    params = [p for p in parameters if p.requires_grad]
    if not params:
        raise ValueError("fisher_penalty needs at least one parameter with requires_grad=True.")
    grads = torch.autograd.grad(loss, params, create_graph=True, allow_unused=True)
    squares = [g.pow(2).sum() for g in grads if g is not None]
    if not squares:
        raise ValueError("`loss` does not depend on any of the given parameters.")
    trace = torch.stack(squares).sum()
    return torch.clamp(trace - max_fisher, min=0.0) if max_fisher > 0 else trace
