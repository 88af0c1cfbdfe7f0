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

from lightning_info.core.validation import (
    require_non_negative,
    require_positive,
    require_real_tensor,
)

__all__ = [
    "constrain_fisher_trace_",
    "empirical_fisher_trace",
    "fisher_penalty",
    "gradient_norm",
]


def _with_grad(parameters: Iterable[Tensor] | Tensor) -> list[Tensor]:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    if isinstance(parameters, (str, bytes, torch.nn.Module)) or not isinstance(
        parameters, Iterable
    ):
        raise TypeError(
            f"`parameters` must be a tensor or an iterable of tensors, got "
            f"{type(parameters).__name__}; pass e.g. `model.parameters()`."
        )
    params = []
    for k, p in enumerate(parameters):
        if not isinstance(p, Tensor):
            raise TypeError(
                f"`parameters[{k}]` must be a tensor, got {type(p).__name__}; pass e.g. "
                "`model.parameters()`."
            )
        if p.grad is not None:
            require_real_tensor(p.grad, f"parameters[{k}].grad")
            params.append(p)
    return params


def empirical_fisher_trace(parameters: Iterable[Tensor] | Tensor) -> Tensor:
    """Trace of the empirical diagonal Fisher from the stored gradients, ``sum_p ||p.grad||^2``.

    Returns a 0-dim tensor (0 when no parameter has a gradient). Non-finite gradients give a
    non-finite trace; nothing is changed.
    """
    return gradient_norm(parameters).pow(2)


def _is_dtensor(tensor: Tensor) -> bool:
    if not torch.distributed.is_available():
        return False
    from torch.distributed.tensor import DTensor

    return isinstance(tensor, DTensor)


def gradient_norm(parameters: Iterable[Tensor] | Tensor) -> Tensor:
    """``||g||_2`` over the stored gradients as a plain 0-dim tensor, the same on every rank.

    Gradients that are DTensors (sharded by FSDP2 ``fully_shard`` or tensor parallelism, as
    under Lightning's ``ModelParallelStrategy``) are reduced over their shards by
    ``torch.nn.utils.get_total_norm`` itself; plain gradients are taken as they are (whole, or
    already averaged by DDP). Both kinds may be mixed. With one kind only, the result is
    ``get_total_norm`` of it unchanged (so a float16 norm that fits in float16 stays finite);
    mixed kinds add their squared norms in at least float32.
    """
    grads = [p.grad for p in _with_grad(parameters)]
    sharded = [g for g in grads if _is_dtensor(g)]
    plain = [g for g in grads if not _is_dtensor(g)]
    norms = []
    if sharded:
        norms.append(torch.nn.utils.get_total_norm(sharded, norm_type=2.0).full_tensor())
    if plain:
        norms.append(torch.nn.utils.get_total_norm(plain, norm_type=2.0))
    if not norms:
        return torch.zeros(())
    if len(norms) == 1:
        return norms[0]
    wide = torch.promote_types(norms[0].dtype, torch.float32)
    squares = [n.to(device=norms[0].device, dtype=wide).pow(2) for n in norms]
    return torch.stack(squares).sum().sqrt()


def constrain_fisher_trace_(
    parameters: Iterable[Tensor] | Tensor, max_fisher: float, total_norm: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Rescale gradients in place so that ``tr F_hat <= max_fisher`` (eq. FIC rescale).

    The rescaling is ``torch.nn.utils.clip_grads_with_norm_`` at ``sqrt(max_fisher)``, so the
    result equals ``clip_grad_norm_(parameters, sqrt(max_fisher))`` to the last bit. If the trace
    is not finite (an overflowing AMP step, a diverged loss) the gradients are left untouched, so
    that a ``GradScaler`` can still skip the step on the original values.

    ``total_norm`` is ``||g||_2`` when the caller has it from its strategy (FSDP's own
    reduction over flat-parameter shards); otherwise :func:`gradient_norm` computes it, also over
    DTensor shards. Every rank then scales its own gradient (or shard) by the same coefficient.

    Runs without a host-device synchronisation. Returns ``(trace_before, trace_after)`` as 0-dim
    tensors.
    """
    max_fisher = require_positive(max_fisher, "max_fisher")
    return _rescale_to_fisher_bound_(parameters, max_fisher, total_norm)


def _rescale_to_fisher_bound_(
    parameters: Iterable[Tensor] | Tensor, max_fisher: float, total_norm: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """:func:`constrain_fisher_trace_` for a ``max_fisher`` already checked (> 0, finite)."""
    params = _with_grad(parameters)
    if not params:
        zero = torch.zeros(())
        return zero, zero
    if total_norm is None:
        total_norm = gradient_norm(params)
    finite = torch.isfinite(total_norm)
    # A zero norm makes the clip coefficient clamp to 1: a no-op on non-finite steps.
    effective_norm = torch.where(finite, total_norm, torch.zeros_like(total_norm))
    max_norm = math.sqrt(max_fisher)
    coefficient = torch.clamp(max_norm / (effective_norm + 1e-6), max=1.0)
    sharded = [p for p in params if _is_dtensor(p.grad)]
    plain = [p for p in params if not _is_dtensor(p.grad)]
    if plain:
        torch.nn.utils.clip_grads_with_norm_(plain, max_norm, effective_norm)
    if sharded:
        from torch.distributed.tensor import DTensor, Replicate

        mesh = sharded[0].grad.device_mesh
        replicated = DTensor.from_local(
            effective_norm.to(sharded[0].grad.device), mesh, [Replicate()] * mesh.ndim
        )
        torch.nn.utils.clip_grads_with_norm_(sharded, max_norm, replicated)
    trace_before = total_norm.pow(2)
    trace_after = torch.where(finite, (total_norm * coefficient).pow(2), trace_before)
    return trace_before, trace_after


def fisher_penalty(
    loss: Tensor, parameters: Iterable[Tensor] | Tensor, max_fisher: float = 0.0
) -> Tensor:
    """Differentiable Fisher term ``max(0, tr F_hat - max_fisher)``, ``tr F_hat = ||grad L||^2``.

    ``parameters`` is an iterable of tensors or one tensor (taken whole, as by
    ``clip_grad_norm_``, not row by row).

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
    max_fisher = require_non_negative(max_fisher, "max_fisher")
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    params = [p for p in parameters if p.requires_grad]
    if not params:
        raise ValueError("fisher_penalty needs at least one parameter with requires_grad=True.")
    grads = torch.autograd.grad(loss, params, create_graph=True, allow_unused=True)
    squares = [g.pow(2).sum() for g in grads if g is not None]
    if not squares:
        raise ValueError("`loss` does not depend on any of the given parameters.")
    trace = torch.stack(squares).sum()
    return torch.clamp(trace - max_fisher, min=0.0) if max_fisher > 0 else trace
