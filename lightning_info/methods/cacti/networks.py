"""``CACTINetwork``: the masked-autoencoder transformer of CACTI (Gorla et al., ICML 2025).

Tokens: the value ``x_ij`` of column ``j`` becomes ``Conv1d(1 -> 3D/4)(x_ij)`` (a per-scalar
linear map), joined to the context token ``Linear(E -> D/4)(c_j)`` of the column's text embedding
``c_j``, plus a fixed sin-cos position of index ``j + 1`` (0 is the CLS token). Without context
(``context_dim=None``, the paper's no-context ablation) the value token takes all ``D`` channels.

Encoder: CLS and the tokens of a layout's slots (:mod:`~lightning_info.methods.cacti.functional`)
through ``encoder_depth`` pre-norm transformer blocks, padded slots masked out of attention.
Decoder: ``Linear(D -> D)`` of the encoder output, a learnable mask token in every column the
encoder did not see, ``Linear(D -> 3D/4)`` joined to the decoder's own context projection, fixed
positions, ``decoder_depth`` blocks, ``Linear(D -> 1)`` and ``tanh / 2 + 1/2`` (values live in
``[0, 1]`` after the data module's min-max scaling).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from lightning_info.core.validation import require_int

__all__ = ["CACTINetwork", "sincos_positions"]


def sincos_positions(length: int, dim: int, scale: float = 10000.0) -> Tensor:
    """Fixed 1-D sin-cos positions ``(length, dim)``: ``[sin(p w_k), cos(p w_k)]`` with
    ``w_k = scale^(-2k/dim)``, ``k < dim/2`` (the MAE / ViT convention)."""
    omega = scale ** (-torch.arange(dim // 2, dtype=torch.float64) / (dim / 2))
    angles = torch.arange(length, dtype=torch.float64)[:, None] * omega[None, :]
    return torch.cat([angles.sin(), angles.cos()], dim=1).float()


def _blocks(dim: int, heads: int, depth: int, mlp_ratio: float) -> nn.ModuleList:
    return nn.ModuleList(
        nn.TransformerEncoderLayer(
            dim,
            heads,
            int(dim * mlp_ratio),
            dropout=0.0,
            activation="gelu",
            layer_norm_eps=1e-6,
            batch_first=True,
            norm_first=True,
        )
        for _ in range(depth)
    )


class CACTINetwork(nn.Module):
    """CACTI's encoder-decoder transformer over a table's columns (see the module docstring).

    Args:
        num_columns: columns of the table (the positions run over them and the CLS token).
        context_dim: ``E``, the width of the columns' text embeddings the context projections
            read; ``None``: no context tokens (the no-context ablation).
        embed_dim: ``D`` (a multiple of 4 and of ``num_heads``).
        encoder_depth, decoder_depth: transformer blocks.
        num_heads: attention heads; ``None``: ``D // 8`` from ``D = 64`` on, else 4 (the
            reference's rule).
        mlp_ratio: the blocks' feed-forward width over ``D``.
    """

    def __init__(
        self,
        num_columns: int,
        context_dim: int | None = None,
        embed_dim: int = 64,
        encoder_depth: int = 10,
        decoder_depth: int = 4,
        num_heads: int | None = None,
        mlp_ratio: float = 4.0,
    ) -> None:
        super().__init__()
        self.num_columns = require_int(num_columns, "num_columns", 2)
        if context_dim is not None:
            context_dim = require_int(context_dim, "context_dim", 1)
        self.context_dim = context_dim
        embed_dim = require_int(embed_dim, "embed_dim", 4)
        heads = num_heads if num_heads is not None else (embed_dim // 8 if embed_dim >= 64 else 4)
        if embed_dim % 4 or embed_dim % heads:
            raise ValueError(
                f"`embed_dim` ({embed_dim}) must be a multiple of 4 and of the "
                f"number of heads ({heads})."
            )
        value_dim = 3 * embed_dim // 4 if context_dim is not None else embed_dim
        self.value_embed = nn.Conv1d(1, value_dim, kernel_size=1)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.mask_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.register_buffer(
            "positions", sincos_positions(num_columns + 1, embed_dim), persistent=False
        )
        self.encoder = _blocks(
            embed_dim, heads, require_int(encoder_depth, "encoder_depth", 1), mlp_ratio
        )
        self.encoder_norm = nn.LayerNorm(embed_dim, eps=1e-6)
        self.decoder_embed = nn.Linear(embed_dim, embed_dim)
        self.decoder_project = nn.Linear(embed_dim, value_dim)
        self.decoder = _blocks(
            embed_dim, heads, require_int(decoder_depth, "decoder_depth", 1), mlp_ratio
        )
        self.decoder_norm = nn.LayerNorm(embed_dim, eps=1e-6)
        self.head = nn.Linear(embed_dim, 1)
        if context_dim is not None:
            self.context_encoder = nn.Linear(context_dim, embed_dim // 4)
            self.context_decoder = nn.Linear(context_dim, embed_dim // 4)
        self._initialise()

    def _initialise(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)
        nn.init.normal_(self.cls_token, std=0.02)
        nn.init.normal_(self.mask_token, std=0.02)

    def _column_tokens(self, values: Tensor, context: Tensor | None) -> Tensor:
        """``(B, d, D)`` value (and context) tokens with their positions."""
        tokens = self.value_embed(values[:, None, :]).transpose(1, 2)
        if context is not None:
            context = self.context_encoder(context).expand(values.shape[0], -1, -1)
            tokens = torch.cat([tokens, context], dim=2)
        return tokens + self.positions[1:]

    def forward(
        self,
        values: Tensor,
        observed: Tensor,
        positions: Tensor,
        padding: Tensor,
        context: Tensor | None = None,
    ) -> Tensor:
        """Predictions ``(B, d)`` in ``[0, 1]`` of every column from the values of the layout's
        unpadded slots; unobserved values are never read. ``context``: the ``(d, E)`` column
        embeddings, given exactly when the network was built with a ``context_dim``."""
        if context is None and self.context_dim is not None:
            raise ValueError(
                f"this network was built with context_dim={self.context_dim}: pass the columns' "
                "(num_columns, E) embeddings as `context`."
            )
        if context is not None and self.context_dim is None:
            raise ValueError(
                "this network was built without context tokens (context_dim=None): call it "
                "without `context`, or build it with the embeddings' width."
            )
        rows, columns = values.shape
        values = torch.where(observed, values, 0.0)
        tokens = self._column_tokens(values, context)
        pad_row = tokens.new_zeros(rows, 1, tokens.shape[2])  # the frozen pad token
        slots = positions.masked_fill(padding, columns)
        encoded = torch.gather(
            torch.cat([tokens, pad_row], 1), 1, slots[..., None].expand(-1, -1, tokens.shape[2])
        )
        cls = (self.cls_token + self.positions[:1]).expand(rows, -1, -1)
        sequence = torch.cat([cls, encoded], dim=1)
        key_padding = torch.cat([padding.new_zeros(rows, 1), padding], dim=1)
        for block in self.encoder:
            sequence = block(sequence, src_key_padding_mask=key_padding)
        latent = self.decoder_embed(self.encoder_norm(sequence))
        full = self.mask_token.expand(rows, columns + 1, -1).clone()
        full = full.scatter(1, slots[..., None].expand(-1, -1, full.shape[2]), latent[:, 1:])
        full = self.decoder_project(full[:, :columns])
        if context is not None:
            context = self.context_decoder(context).expand(rows, -1, -1)
            full = torch.cat([full, context], dim=2)
        sequence = torch.cat([latent[:, :1], full], dim=1) + self.positions
        for block in self.decoder:
            sequence = block(sequence)
        prediction = self.head(self.decoder_norm(sequence[:, 1:])).squeeze(2)
        return torch.tanh(prediction) / 2 + 0.5
