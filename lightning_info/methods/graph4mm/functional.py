"""The pure core of Graph4MM's hop-diffused attention (Ning et al., ICML 2025).

Attention weights ``S`` (rows summing to one, ``(B, N, N)`` or ``(B, H, N, N)``) are masked by
the graph's adjacency ``G`` and renormalised per row, a transition matrix

    T = (S ⊙ G) / rowsum(S ⊙ G),

then diffused over hops by a truncated personalised-PageRank series

    A = sum_{i=0}^{K-1} theta_i T^i + r T^K,   theta_i = alpha (1 - alpha)^i,

where the remainder ``r = 1 - sum_i theta_i = (1 - alpha)^K`` (``remainder=True``) keeps every
row of ``A`` summing to one; as ``K`` grows, ``A X`` tends to ``alpha (I - (1 - alpha) T)^-1 X``.
At ``alpha = 0.1, K = 4`` the remainder is 0.66 of the mass, on the farthest hop. ``rescale=True``
instead divides the truncated weights by their sum: the rows also sum to one, and the hops keep
the series' own proportions (0.29, 0.26, 0.24, 0.21 on ``T^0 .. T^3``).

Differences from the reference code, on purpose:

- The mask is applied per sample: ``G`` is ``(N, N)`` or ``(B, N, N)`` and broadcasts over the
  heads only. The reference multiplies ``(B, N, N)`` scores by ``(B, 1, N, N)`` masks, which
  broadcasts to ``(B, B, N, N)``, and then averages over that axis, so each sample mixes the
  attention of every other sample in the batch.
- The rows sum to one, by the remainder term or by rescaling (the reference's weights sum to
  ``1 - (1 - alpha)^K``, shrinking the features by that factor; ``remainder=False`` keeps it).
- A node without edges keeps its own features (its transition row is a self loop) instead of
  collapsing to ``alpha X``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from lightning_info.core.validation import (
    require_finite,
    require_finite_tensor,
    require_int,
    require_real_floating,
)

__all__ = [
    "adjacency_mask",
    "renormalised_rows",
    "check_hop_weights",
    "diffuse",
    "hop_diffused_attention",
    "masked_softmax_transition",
    "masked_transition",
    "ppr_weights",
]


def ppr_weights(
    alpha: float = 0.1, steps: int = 4, remainder: bool = True, rescale: bool = False
) -> Tensor:
    """The hop weights ``theta_0 .. theta_{K-1}`` (module docstring), float64: with the remainder
    ``(1 - alpha)^K`` appended as the weight of ``T^K`` when ``remainder``, divided by their sum
    when ``rescale``, as they are (the reference's series) with neither."""
    alpha = require_finite(alpha, "alpha")
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha (the restart probability) must be in (0, 1], got {alpha}")
    steps = require_int(steps, "steps", 1)
    theta = alpha * (1.0 - alpha) ** torch.arange(steps, dtype=torch.float64)
    return _complete(theta, remainder, rescale)


def check_hop_weights(weights: Tensor, name: str = "theta") -> Tensor:
    """``weights``, or raise if any is NaN, infinite or negative (a diffusion mixes hops with
    non-negative weights); an empty tensor or a bool/integer one is refused."""
    if not isinstance(weights, Tensor):
        raise TypeError(f"`{name}` must be a tensor of hop weights, got {type(weights).__name__}.")
    require_real_floating(weights, name)
    if weights.numel() == 0:
        raise ValueError(f"`{name}` must hold at least one hop weight.")
    require_finite_tensor(weights, name)
    if bool((weights < 0).any()):
        raise ValueError(
            f"`{name}` holds a negative hop weight ({weights.tolist()}); hop weights must be >= 0."
        )
    return weights


def _complete(theta: Tensor, remainder: bool, rescale: bool) -> Tensor:
    """Hop weights made to sum to one: the missing mass on the next power, or rescaled."""
    if remainder and rescale:
        raise ValueError("choose remainder or rescale: both make the hop weights sum to one")
    if remainder:
        total = float(theta.sum())
        if total > 1.0 + 1e-12:
            raise ValueError(
                f"hop weights {theta.tolist()} sum to {total:.6g} > 1, so the remainder on the "
                "next power would be negative; give weights summing to at most 1, or pass "
                "remainder=False, rescale=True to divide them by their sum."
            )
        return torch.cat([theta, (1.0 - theta.sum()).clamp(min=0.0).reshape(1)])
    if rescale:
        total = float(theta.sum())
        if total <= 0:
            raise ValueError("hop weights summing to 0 or less cannot be rescaled to sum to one")
        return theta / total
    return theta


def adjacency_mask(scores: Tensor, adjacency: Tensor) -> Tensor:
    """``adjacency`` checked against ``scores`` and shaped to broadcast over its heads only."""
    if not isinstance(scores, Tensor) or not isinstance(adjacency, Tensor):
        raise TypeError(
            f"`scores` and `adjacency` must be tensors, got {type(scores).__name__} and "
            f"{type(adjacency).__name__}; wrap them with torch.as_tensor."
        )
    if scores.dim() not in (3, 4) or scores.shape[-1] != scores.shape[-2]:
        raise ValueError(
            f"scores must be (batch, N, N) or (batch, heads, N, N), got {tuple(scores.shape)}"
        )
    n, batch = scores.shape[-1], scores.shape[0]
    if adjacency.shape[-2:] != (n, n) or adjacency.dim() not in (2, 3):
        raise ValueError(
            f"adjacency must be ({n}, {n}) or (batch, {n}, {n}) for scores over {n} nodes, "
            f"got {tuple(adjacency.shape)}"
        )
    if adjacency.dim() == 3 and adjacency.shape[0] != batch:
        raise ValueError(
            f"adjacency holds {adjacency.shape[0]} graphs for a batch of {batch}: pass one graph "
            "per sample, or one (N, N) graph for all"
        )
    if adjacency.dtype != torch.bool and bool(((adjacency != 0) & (adjacency != 1)).any()):
        raise ValueError("adjacency must be binary (0/1 or bool): it masks the attention")
    adjacency = adjacency.to(scores.dtype)
    if adjacency.dim() == 3 and scores.dim() == 4:
        adjacency = adjacency.unsqueeze(1)
    return adjacency


def masked_transition(scores: Tensor, adjacency: Tensor) -> Tensor:
    """``T = (S ⊙ G) / rowsum(S ⊙ G)`` per sample and head; a row whose masked weights are all
    zero (a node without edges) becomes a self loop, so that node keeps its own features."""
    require_finite_tensor(scores, "scores")
    if bool((scores < 0).any()):
        raise ValueError("scores must be attention weights (non-negative, e.g. a softmax)")
    return renormalised_rows(scores, adjacency_mask(scores, adjacency))


def renormalised_rows(scores: Tensor, adjacency: Tensor) -> Tensor:
    """:func:`masked_transition` of checked inputs (``adjacency`` from :func:`adjacency_mask`);
    only the shapes are checked here, so that no value check synchronises the device."""
    if adjacency.dim() > scores.dim() or adjacency.shape[-2:] != scores.shape[-2:]:
        raise ValueError(
            f"adjacency {tuple(adjacency.shape)} does not fit scores {tuple(scores.shape)}: "
            "pass it through adjacency_mask(scores, adjacency) first."
        )
    masked = scores * adjacency
    total = masked.sum(-1, keepdim=True)
    isolated = total == 0
    eye = torch.eye(scores.shape[-1], dtype=scores.dtype, device=scores.device)
    return torch.where(isolated, eye, masked / torch.where(isolated, 1.0, total))


def masked_softmax_transition(logits: Tensor, adjacency: Tensor) -> Tensor:
    """``T`` from attention *logits*: each row's softmax over its edges only (``-inf`` off the
    graph), a node without edges a self loop. In exact arithmetic this is
    :func:`renormalised_rows` of ``softmax(logits)``; in floating point it is the stable form:
    when a row's weight falls almost all off the graph, ``softmax`` underflows on the edges and
    renormalising those weights divides by a vanishing sum (an infinite gradient, or a row
    mistaken for an isolated one), while the masked softmax subtracts the largest *edge* logit.
    ``adjacency`` as :func:`adjacency_mask` returns it (0/1, broadcastable to ``logits``)."""
    if not logits.is_floating_point() or logits.dim() < 2 or logits.shape[-1] != logits.shape[-2]:
        raise ValueError(
            f"`logits` must be a floating (..., N, N) tensor, got dtype {logits.dtype} and shape "
            f"{tuple(logits.shape)}."
        )
    if adjacency.shape[-2:] != logits.shape[-2:]:
        raise ValueError(
            f"`adjacency` must be a (..., {logits.shape[-1]}, {logits.shape[-1]}) mask like "
            f"`logits` (see adjacency_mask), got shape {tuple(adjacency.shape)}."
        )
    edges = adjacency.bool().expand_as(logits)
    isolated = ~edges.any(-1, keepdim=True)
    # an isolated row's logits are zeroed, not -inf, so that no NaN enters the graph
    masked = logits.masked_fill(~edges & ~isolated, float("-inf")).masked_fill(isolated, 0.0)
    eye = torch.eye(logits.shape[-1], dtype=logits.dtype, device=logits.device)
    return torch.where(isolated, eye, torch.softmax(masked, dim=-1))


def diffuse(
    transition: Tensor,
    values: Tensor,
    weights: Tensor | Sequence[float],
    *,
    validate_args: bool = True,
) -> Tensor:
    """``sum_i weights_i T^i V`` by ``len(weights) - 1`` products with ``V`` (never a power of
    ``T``): ``transition (..., N, N)``, ``values (..., N, D)``. With ``validate_args`` weights
    on the CPU (or not a tensor) are checked to be finite and non-negative; weights on an
    accelerator are taken as given, since checking them would synchronise, and so are weights
    already checked (``validate_args=False``: a module's buffer, checked when built)."""
    if validate_args and (not isinstance(weights, Tensor) or weights.device.type == "cpu"):
        check_hop_weights(torch.as_tensor(weights, dtype=torch.float64), "weights")
    weights = torch.as_tensor(weights, dtype=values.dtype, device=values.device)
    if weights.dim() != 1 or weights.numel() == 0:
        raise ValueError("weights must be a non-empty 1-d sequence of hop weights")
    out = weights[0] * values
    hop = values
    for w in weights[1:]:
        hop = transition @ hop
        out = out + w * hop
    return out


def hop_diffused_attention(
    scores: Tensor,
    adjacency: Tensor,
    alpha: float = 0.1,
    steps: int = 4,
    remainder: bool = True,
    theta: Tensor | Sequence[float] | None = None,
    rescale: bool = False,
) -> Tensor:
    """The diffused attention matrix ``A`` (module docstring), the shape of ``scores``.

    ``theta`` replaces the PageRank weights ``theta_0, theta_1, ...`` (the weights of
    ``T^0, T^1, ...``); with ``remainder`` the missing mass ``1 - sum(theta)`` goes on the next
    power, with ``rescale`` the weights are divided by their sum. ``theta = [0, 1]`` gives the
    masked attention ``T`` itself."""
    transition = masked_transition(scores, adjacency)
    if theta is None:
        weights = ppr_weights(alpha, steps, remainder, rescale)
    else:
        weights = torch.as_tensor(theta, dtype=torch.float64).flatten()
        if weights.numel() == 0:
            raise ValueError("theta must hold at least one hop weight")
        weights = _complete(check_hop_weights(weights), remainder, rescale)
    eye = torch.eye(scores.shape[-1], dtype=scores.dtype, device=scores.device)
    return diffuse(transition, eye.expand_as(transition), weights.to(scores.dtype))
