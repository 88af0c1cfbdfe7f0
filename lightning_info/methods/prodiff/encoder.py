"""ProDiff's prototype encoder: the trajectory transformer that maps a window to one feature.

``f = LayerNorm(sum_t LayerNorm(Enc(LayerNorm(W x_t) + pos_t)))`` (the paper's trajectory
transformer): every ``(time, lat, lng)`` point is projected to ``embed_dim`` by ``Linear(3 ->
D)`` and layer-normalised, a learned position is added, ``num_layers`` post-norm transformer
encoder layers mix the points, a LayerNorm follows, the points are summed over time and the sum
is layer-normalised. Xavier-uniform weights and zero biases for the projections, as the
reference initialises them.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from lightning_info.core.validation import require_fraction, require_int

__all__ = ["DEFAULT_EMBED_DIM", "TrajectoryEncoder"]

#: ``D``, the paper's feature width.
DEFAULT_EMBED_DIM = 512


class TrajectoryEncoder(nn.Module):
    """Windows ``(B, k, input_dim)`` to features ``(B, embed_dim)`` (module docstring).

    Args:
        window_length: ``k`` (the learned positions' length).
        input_dim: channels per point (3: time, lat, lng).
        embed_dim: ``D`` (512 in the paper), a multiple of ``num_heads``.
        num_layers, num_heads, feedforward_dim, dropout: the transformer encoder's.
    """

    def __init__(
        self,
        window_length: int,
        input_dim: int = 3,
        embed_dim: int = DEFAULT_EMBED_DIM,
        num_layers: int = 4,
        num_heads: int = 8,
        feedforward_dim: int = 256,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        window_length = require_int(window_length, "window_length", 1)
        embed_dim = require_int(embed_dim, "embed_dim", 1)
        num_heads = require_int(num_heads, "num_heads", 1)
        if embed_dim % num_heads:
            raise ValueError(
                f"`embed_dim` ({embed_dim}) must be a multiple of `num_heads` ({num_heads})."
            )
        self.window_length, self.embed_dim = window_length, embed_dim
        self.input_dim = require_int(input_dim, "input_dim", 1)
        self.project = nn.Linear(self.input_dim, embed_dim)
        self.project_norm = nn.LayerNorm(embed_dim)
        self.positions = nn.Parameter(torch.randn(1, window_length, embed_dim))
        layer = nn.TransformerEncoderLayer(
            embed_dim,
            num_heads,
            require_int(feedforward_dim, "feedforward_dim", 1),
            dropout=require_fraction(dropout, "dropout"),
            batch_first=True,
        )
        self.encoder = nn.TransformerEncoder(
            layer, require_int(num_layers, "num_layers", 1), enable_nested_tensor=False
        )
        self.output_norm = nn.LayerNorm(embed_dim)
        self.feature_norm = nn.LayerNorm(embed_dim)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)

    def forward(self, window: Tensor) -> Tensor:
        shape = (self.window_length, self.input_dim)
        if window.ndim != 3 or window.shape[1:] != shape or not window.is_floating_point():
            raise ValueError(
                f"the encoder takes floating (B, {shape[0]}, C) windows with C = {shape[1]}, "
                f"got {tuple(window.shape)} of dtype {window.dtype}."
            )
        tokens = self.project_norm(self.project(window)) + self.positions
        encoded = self.output_norm(self.encoder(tokens))
        return self.feature_norm(encoded.sum(dim=1))
