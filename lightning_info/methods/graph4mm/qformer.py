"""``MMQFormer``: learned query tokens that gather image and text-node information for a frozen
language model (Graph4MM's multimodal Q-Former).

Per layer, with ``M`` learned queries ``Q``, image features ``Z`` (one entity's image tokens) and
text-node features ``X`` (its graph neighbourhood):

    Q      <- LN(Q + SelfAttn(Q))
    Q      <- LN(Q + CrossAttn(Q, Z))
    [Q; X] <- LN([Q; X] + JointAttn([Q; X]))
    Q      <- LN(Q + FFN(Q))

The joint attention is ordinary multi-head attention over queries and text nodes, or, with
``hop`` (``{"alpha": ..., "steps": ...}``), :class:`~.attention.HopDiffusedAttention` on the graph
``[[all, all], [all, G]]``: queries see every node and are seen by every node, text nodes see
each other along the edges of ``G``. Padded image tokens and text nodes (``False`` in the masks)
are never attended to. Nothing depends on the order of the text nodes or of the image tokens (no
positions are added), so the queries' output is invariant to both. The output is ``(B, M,
out_dim)``: the queries projected to the language model's embedding width.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from lightning_info.core.validation import require_bool, require_int
from lightning_info.methods.graph4mm.attention import HopDiffusedAttention
from lightning_info.methods.graph4mm.functional import ppr_weights

HOP_SETTINGS = ("alpha", "steps", "remainder", "rescale")

__all__ = ["MMQFormer"]


class _Layer(nn.Module):
    def __init__(self, dim: int, heads: int, ffn_mult: int, hop: dict[str, Any] | None):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.cross_attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.hop = HopDiffusedAttention(dim, heads, **hop) if hop is not None else None
        self.joint_attn = (
            nn.MultiheadAttention(dim, heads, batch_first=True) if hop is None else None
        )
        self.ffn = nn.Sequential(
            nn.Linear(dim, ffn_mult * dim), nn.GELU(), nn.Linear(ffn_mult * dim, dim)
        )
        self.norms = nn.ModuleList(nn.LayerNorm(dim) for _ in range(4))

    def forward(self, q, image, image_mask, text, text_mask, joint_graph):
        q = self.norms[0](q + self.self_attn(q, q, q, need_weights=False)[0])
        cross = self.cross_attn(q, image, image, key_padding_mask=~image_mask, need_weights=False)
        q = self.norms[1](q + cross[0])
        joint = torch.cat([q, text], dim=1)
        if self.hop is not None:
            mixed = self.hop(joint, joint_graph)
        else:
            keep = torch.cat([torch.ones_like(q[..., 0], dtype=torch.bool), text_mask], dim=1)
            mixed = self.joint_attn(
                joint, joint, joint, key_padding_mask=~keep, need_weights=False
            )[0]
        joint = self.norms[2](joint + mixed)
        q, text = joint[:, : q.shape[1]], joint[:, q.shape[1] :]
        return self.norms[3](q + self.ffn(q)), text


class MMQFormer(nn.Module):
    """The multimodal Q-Former (module docstring).

    Args:
        dim: the Q-Former's width; image_dim, text_dim: the widths of the image and text-node
            features (projected to ``dim``; ``text_dim=None``: no text nodes, the image-only
            Q-Former, whose joint attention runs over the queries alone); out_dim: the
            language model's embedding width. Without ``image_dim`` and ``out_dim`` the
            Q-Former waits for :meth:`build` to be given the widths (``Graph4MM`` gives them
            from its language model and image encoder) and holds no parameters until then.
        num_queries, layers, heads, ffn_mult: its size.
        hop: ``HopDiffusedAttention`` arguments for the joint attention (``alpha``, ``steps``,
            ``remainder``, ``rescale``); ``None``: plain attention, blind to the graph.
        validate_args: refuse an ``image_mask`` that leaves a sample without an image token
            (whose cross-attention would be NaN), one host read per call (a device
            synchronisation on an accelerator); default ``False``: shapes only. ``Graph4MM``
            always appends its "no image" token, so its samples always have one.
    """

    def __init__(
        self,
        dim: int,
        image_dim: int | None = None,
        text_dim: int | None = None,
        out_dim: int | None = None,
        num_queries: int = 8,
        layers: int = 2,
        heads: int = 4,
        ffn_mult: int = 4,
        hop: dict[str, Any] | None = None,
        validate_args: bool = False,
    ):
        super().__init__()
        self.validate_args = require_bool(validate_args, "validate_args")
        self.dim, self.heads = require_int(dim, "dim", 1), require_int(heads, "heads", 1)
        if self.dim % self.heads:
            raise ValueError(f"dim ({self.dim}) must be divisible by heads ({self.heads})")
        self.num_queries = require_int(num_queries, "num_queries", 1)
        self.num_layers = require_int(layers, "layers", 1)
        self.ffn_mult = require_int(ffn_mult, "ffn_mult", 1)
        if hop is not None and not isinstance(hop, dict):
            raise TypeError(
                f"`hop` must be a dict of HopDiffusedAttention settings, got {type(hop).__name__}"
                "; e.g. hop={'alpha': 0.1, 'steps': 4}."
            )
        self.hop = None if hop is None else dict(hop)
        if self.hop is not None:
            unknown = sorted(set(self.hop) - set(HOP_SETTINGS))
            if unknown:
                raise ValueError(f"`hop` has unknown settings {unknown}: use {HOP_SETTINGS}.")
            ppr_weights(**self.hop)  # refuses bad hop settings before any parameter exists
        self.uses_graph = hop is not None
        self.widths: tuple[int, int | None, int] | None = None
        if image_dim is None and out_dim is None:
            if text_dim is not None:
                raise ValueError("give text_dim together with image_dim and out_dim")
            return
        if image_dim is None or out_dim is None:
            raise ValueError(
                "give image_dim and out_dim together, or neither (build() then takes them)"
            )
        self.build(image_dim, text_dim, out_dim)

    @property
    def built(self) -> bool:
        """Whether the widths are set and the parameters exist."""
        return self.widths is not None

    def build(self, image_dim: int, text_dim: int | None, out_dim: int) -> MMQFormer:
        """Creates the parameters for these widths (``__init__`` arguments); returns ``self``."""
        if self.built:
            raise ValueError(f"this MMQFormer is already built with widths {self.widths}")
        dim = self.dim
        self.queries = nn.Parameter(0.02 * torch.randn(self.num_queries, dim))
        self.image_in = nn.Sequential(
            nn.Linear(require_int(image_dim, "image_dim", 1), dim), nn.LayerNorm(dim)
        )
        if text_dim is None and self.hop is not None:
            raise ValueError("hop diffusion runs over the text nodes' graph: give text_dim")
        self.text_in = (
            None
            if text_dim is None
            else nn.Sequential(
                nn.Linear(require_int(text_dim, "text_dim", 1), dim), nn.LayerNorm(dim)
            )
        )
        self.layers = nn.ModuleList(
            _Layer(dim, self.heads, self.ffn_mult, self.hop) for _ in range(self.num_layers)
        )
        self.out = nn.Linear(dim, require_int(out_dim, "out_dim", 1))
        self.widths = (image_dim, text_dim, out_dim)
        return self

    def _joint_graph(self, text_mask: Tensor, adjacency: Tensor | None) -> Tensor:
        """``[[all, all], [all, G]]`` over queries and text nodes, padded nodes cut off."""
        b, n = text_mask.shape
        m = self.queries.shape[0]
        if adjacency is None:
            raise ValueError(
                "this MMQFormer diffuses over the graph: pass the text nodes' adjacency"
            )
        if adjacency.dim() == 2:
            adjacency = adjacency.expand(b, n, n)
        if adjacency.shape != (b, n, n):
            raise ValueError(
                f"adjacency must be ({n}, {n}) or ({b}, {n}, {n}), got {tuple(adjacency.shape)}"
            )
        graph = torch.ones(b, m + n, m + n, dtype=torch.bool, device=text_mask.device)
        graph[:, m:, m:] = adjacency.bool()
        keep = torch.cat(
            [torch.ones(b, m, dtype=torch.bool, device=text_mask.device), text_mask], dim=1
        )
        return graph & keep[:, None, :] & keep[:, :, None]

    def forward(
        self,
        image: Tensor,
        text: Tensor | None = None,
        image_mask: Tensor | None = None,
        text_mask: Tensor | None = None,
        adjacency: Tensor | None = None,
    ) -> Tensor:
        """``image (B, Ni, image_dim)``, ``text (B, Nt, text_dim)``, masks ``(B, Ni)`` /
        ``(B, Nt)`` (``True`` = real), ``adjacency`` over the text nodes (``(Nt, Nt)`` or
        ``(B, Nt, Nt)``) when ``hop`` is set; returns ``(B, num_queries, out_dim)``. ``text``
        is ``None`` exactly when the Q-Former was built with ``text_dim=None``."""
        if not self.built:
            raise ValueError(
                "this MMQFormer has no widths yet: call build(image_dim, text_dim, "
                "out_dim) first (Graph4MM does)"
            )
        if (text is None) != (self.text_in is None):
            raise ValueError("pass text-node features exactly when the Q-Former has a text_dim")
        if text is None:  # the joint attention runs over the queries alone
            text = image.new_zeros(image.shape[0], 0, 1)
        if image.dim() != 3 or text.dim() != 3 or image.shape[0] != text.shape[0]:
            raise ValueError(
                f"image and text must be (batch, tokens, features) with one batch, got "
                f"{tuple(image.shape)} and {tuple(text.shape)}"
            )
        b = image.shape[0]
        if image_mask is None:
            image_mask = torch.ones(image.shape[:2], dtype=torch.bool, device=image.device)
        if text_mask is None:
            text_mask = torch.ones(text.shape[:2], dtype=torch.bool, device=text.device)
        if self.validate_args and not bool(image_mask.any(1).all()):
            raise ValueError("every sample needs at least one image token (image_mask)")
        joint_graph = self._joint_graph(text_mask, adjacency) if self.uses_graph else None
        q = self.queries.expand(b, -1, -1)
        z = self.image_in(image)
        x = self.text_in(text) if self.text_in is not None else q[:, :0]
        for layer in self.layers:
            q, x = layer(q, z, image_mask, x, text_mask, joint_graph)
        return self.out(q)
