"""``HopDiffusedAttention``: multi-head self-attention over a graph's nodes whose weights are
masked by the adjacency and diffused over hops (``functional.py``)."""

from __future__ import annotations

import math

from torch import Tensor, nn

from lightning_info.core.validation import require_int
from lightning_info.methods.graph4mm.functional import (
    adjacency_mask,
    diffuse,
    masked_softmax_transition,
    ppr_weights,
)

__all__ = ["HopDiffusedAttention"]


class HopDiffusedAttention(nn.Module):
    """Self-attention over ``x (B, N, dim)`` on a graph ``adjacency`` (``(N, N)`` or
    ``(B, N, N)``, binary): per head ``S = softmax(Q K^T / sqrt(d))``, ``T`` its masked and
    renormalised transition (computed as the softmax over each row's edges,
    ``functional.masked_softmax_transition``: the same matrix without the underflow), output
    ``sum_i theta_i T^i V`` (truncated personalised PageRank made to sum to one by the remainder
    term, or by ``rescale``; ``functional.ppr_weights``), heads
    concatenated and projected. The diffusion is ``steps`` products with ``V``; no power of
    ``T`` is formed."""

    def __init__(
        self,
        dim: int,
        heads: int = 4,
        alpha: float = 0.1,
        steps: int = 4,
        remainder: bool = True,
        rescale: bool = False,
    ):
        super().__init__()
        dim, heads = require_int(dim, "dim", 1), require_int(heads, "heads", 1)
        if dim % heads:
            raise ValueError(f"dim ({dim}) must be divisible by heads ({heads})")
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.register_buffer("weights", ppr_weights(alpha, steps, remainder, rescale).float())

    def forward(self, x: Tensor, adjacency: Tensor) -> Tensor:
        if x.dim() != 3:
            raise ValueError(f"x must be (batch, nodes, dim), got {tuple(x.shape)}")
        b, n, dim = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        logits = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        transition = masked_softmax_transition(logits, adjacency_mask(logits, adjacency))
        # the weights were checked when built (ppr_weights): no read of their values here
        mixed = diffuse(transition, v, self.weights.to(v.dtype), validate_args=False)
        return self.out(mixed.transpose(1, 2).reshape(b, n, dim))
