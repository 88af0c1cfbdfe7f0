"""``CACTI``: the context-aware masked-autoencoder imputer of Gorla et al. (ICML 2025).

Tokens: the value ``x_ij`` of column ``j`` becomes ``Conv1d(1 -> 3D/4)(x_ij)`` (a per-scalar
linear map), joined to the context token ``Linear(E -> D/4)(c_j)`` of the column's text embedding
``c_j``, plus a fixed sin-cos position of index ``j + 1`` (0 is the CLS token). Without context
(``use_context=False``, the paper's ablation) the value token takes all ``D`` channels.

Encoder: CLS and the tokens of a layout's slots (:mod:`~lightning_info.methods.cacti.functional`)
through ``encoder_depth`` pre-norm transformer blocks, padded slots masked out of attention.
Decoder: ``Linear(D -> D)`` of the encoder output, a learnable mask token in every column the
encoder did not see, ``Linear(D -> 3D/4)`` joined to the decoder's own context projection, fixed
positions, ``decoder_depth`` blocks, ``Linear(D -> 1)`` and ``tanh / 2 + 1/2`` (values live in
``[0, 1]`` after the data module's min-max scaling).

Loss (the paper's reconstruction objective): ``mean_{kept} (x_hat - x)^2 + mean_{observed, not
kept} (x_hat - x)^2`` — the visible values and the observed values MT-CM hid; a term over an empty
set is left out (the reference divides by zero there). Batches are dicts with ``values`` (B, d)
(any number at unobserved entries; never read), ``observed`` (B, d) bool and, for scoring,
``truth`` (B, d) and ``target`` (B, d) bool, the entries whose truth is known but hidden.
Validation and test log ``{val,test}/r2``, ``/rmse``, ``/mae`` and ``/wasserstein`` over
``target`` through the DDP-ready Metrics of :mod:`~lightning_info.methods.cacti.metrics`.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from torch import Tensor, nn

from lightning_info.core.sampling import keyed_generator
from lightning_info.core.schedules import warmup_cosine_config
from lightning_info.core.validation import (
    all_finite,
    require_fraction,
    require_int,
    require_positive,
)
from lightning_info.methods.cacti.functional import (
    copy_masks,
    inference_layout,
    kept_mask,
    median_truncation,
)
from lightning_info.methods.cacti.metrics import imputation_metrics

__all__ = ["CACTI", "check_batch", "reconstruction_loss", "sincos_positions"]


def sincos_positions(length: int, dim: int, scale: float = 10000.0) -> Tensor:
    """Fixed 1-D sin-cos positions ``(length, dim)``: ``[sin(p w_k), cos(p w_k)]`` with
    ``w_k = scale^(-2k/dim)``, ``k < dim/2`` (the MAE / ViT convention)."""
    omega = scale ** (-torch.arange(dim // 2, dtype=torch.float64) / (dim / 2))
    angles = torch.arange(length, dtype=torch.float64)[:, None] * omega[None, :]
    return torch.cat([angles.sin(), angles.cos()], dim=1).float()


def reconstruction_loss(
    prediction: Tensor, values: Tensor, observed: Tensor, kept: Tensor
) -> Tensor:
    """``mean_{kept} (x_hat - x)^2 + mean_{observed & ~kept} (x_hat - x)^2``, unobserved values
    never read; a term over no entry is dropped."""
    squared = torch.where(observed, prediction - values, 0.0) ** 2
    loss = prediction.new_zeros(())
    for where in (kept & observed, observed & ~kept):
        count = where.sum()
        if count > 0:
            loss = loss + torch.where(where, squared, 0.0).sum() / count
    return loss


def check_batch(values: Tensor, observed: Tensor, num_columns: int) -> None:
    """Refuse a batch CACTI would silently learn or predict nonsense from: wrong shapes, a
    non-boolean mask, or NaN / infinity at an entry the mask calls observed."""
    if values.ndim != 2 or values.shape != observed.shape or values.shape[1] != num_columns:
        raise ValueError(
            f"`values` and `observed` must both be (rows, {num_columns}), got "
            f"{tuple(values.shape)} and {tuple(observed.shape)}."
        )
    if observed.dtype != torch.bool:
        raise ValueError(f"`observed` must be a boolean mask, got {observed.dtype}.")
    if not all_finite(torch.where(observed, values, 0.0)):
        raise ValueError(
            "`values` hold NaN or infinity at entries `observed` marks as observed: mark them "
            "unobserved (False) or fix the data."
        )


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


class CACTI(pl.LightningModule):
    """Context-aware copy-masked tabular imputer (see the module docstring).

    Args:
        num_columns: columns of the table.
        context_embeddings: ``(num_columns, E)`` text embeddings of the columns' descriptions
            (e.g. ``TabularImputationDataModule.context_embeddings``); ``None`` with
            ``use_context=False``, or when loading a checkpoint (``context_dim`` rebuilds it).
        context_dim: ``E`` when no embeddings are given (a checkpoint fills the buffer).
        use_context: context tokens on (CACTI) or off (the no-context ablation).
        embed_dim: ``D`` (a multiple of 4 and of ``num_heads``).
        encoder_depth, decoder_depth: transformer blocks.
        num_heads: attention heads; ``None``: ``D // 8`` from ``D = 64`` on, else 4 (the
            reference's rule).
        copy_probability: ``p_cm`` of MT-CM.
        lr, min_lr, weight_decay, betas: AdamW with a linear warmup from ``min_lr`` over
            ``warmup_fraction`` of the steps, then a cosine decay to ``min_lr``.
        schedule_steps: the schedule's length in optimizer steps; ``None``: the trainer's
            estimate for its ``max_epochs`` / ``max_steps`` (a run continued to a larger
            ``max_epochs`` than it started with then follows another schedule: fix it here).
        seed: keys the MT-CM draws (with the step and rank), so a resumed run draws the same.
    """

    def __init__(
        self,
        num_columns: int,
        context_embeddings: Any = None,
        context_dim: int | None = None,
        use_context: bool = True,
        embed_dim: int = 64,
        encoder_depth: int = 10,
        decoder_depth: int = 4,
        num_heads: int | None = None,
        mlp_ratio: float = 4.0,
        copy_probability: float = 0.9,
        lr: float = 1e-3,
        min_lr: float = 5e-6,
        weight_decay: float = 0.01,
        betas: tuple[float, float] = (0.9, 0.95),
        warmup_fraction: float = 0.1,
        schedule_steps: int | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.num_columns = require_int(num_columns, "num_columns", 2)
        embed_dim = require_int(embed_dim, "embed_dim", 4)
        heads = num_heads if num_heads is not None else (embed_dim // 8 if embed_dim >= 64 else 4)
        if embed_dim % 4 or embed_dim % heads:
            raise ValueError(
                f"`embed_dim` ({embed_dim}) must be a multiple of 4 and of the "
                f"number of heads ({heads})."
            )
        self.copy_probability = require_fraction(copy_probability, "copy_probability")
        self.warmup_fraction = require_fraction(warmup_fraction, "warmup_fraction")
        self.lr = require_positive(lr, "lr")
        self.min_lr = min_lr
        self.seed = require_int(seed, "seed", 0)
        context = self._context_buffer(context_embeddings, context_dim, use_context)
        self.save_hyperparameters(ignore=["context_embeddings"])
        self.hparams["context_dim"] = None if context is None else int(context.shape[1])
        self.use_context = context is not None
        if context is not None:
            self.register_buffer("context", context)
        value_dim = 3 * embed_dim // 4 if self.use_context else embed_dim
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
        if self.use_context:
            self.context_encoder = nn.Linear(context.shape[1], embed_dim // 4)
            self.context_decoder = nn.Linear(context.shape[1], embed_dim // 4)
        self._initialise()
        self.val_metrics = imputation_metrics(num_columns, prefix="val/")
        self.test_metrics = imputation_metrics(num_columns, prefix="test/")

    def _context_buffer(self, embeddings: Any, dim: int | None, use_context: bool) -> Tensor | None:
        if not use_context:
            return None
        if embeddings is None:
            if dim is None:
                raise ValueError(
                    "CACTI needs the columns' `context_embeddings` (num_columns, E), e.g. from "
                    "TabularImputationDataModule.context_embeddings, or use_context=False."
                )
            return torch.zeros(self.num_columns, require_int(dim, "context_dim", 1))
        context = torch.as_tensor(np.asarray(embeddings), dtype=torch.float32)
        if context.ndim != 2 or context.shape[0] != self.num_columns:
            raise ValueError(
                f"`context_embeddings` must be (num_columns={self.num_columns}, E), "
                f"got {tuple(context.shape)}."
            )
        if not torch.isfinite(context).all():
            raise ValueError("`context_embeddings` hold NaN or infinite values.")
        return context

    def _initialise(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)
        nn.init.normal_(self.cls_token, std=0.02)
        nn.init.normal_(self.mask_token, std=0.02)

    # ----------------------------------------------------------------------------- forward
    def _column_tokens(self, values: Tensor) -> Tensor:
        """``(B, d, D)`` value (and context) tokens with their positions."""
        tokens = self.value_embed(values[:, None, :]).transpose(1, 2)
        if self.use_context:
            context = self.context_encoder(self.context).expand(values.shape[0], -1, -1)
            tokens = torch.cat([tokens, context], dim=2)
        return tokens + self.positions[1:]

    def forward(
        self, values: Tensor, observed: Tensor, positions: Tensor, padding: Tensor
    ) -> Tensor:
        """Predictions ``(B, d)`` in ``[0, 1]`` of every column from the values of the layout's
        unpadded slots; unobserved values are never read."""
        rows, columns = values.shape
        values = torch.where(observed, values, 0.0)
        tokens = self._column_tokens(values)
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
        if self.use_context:
            context = self.context_decoder(self.context).expand(rows, -1, -1)
            full = torch.cat([full, context], dim=2)
        sequence = torch.cat([latent[:, :1], full], dim=1) + self.positions
        for block in self.decoder:
            sequence = block(sequence)
        prediction = self.head(self.decoder_norm(sequence[:, 1:])).squeeze(2)
        return torch.tanh(prediction) / 2 + 0.5

    @torch.no_grad()
    def impute(self, values: Tensor, observed: Tensor) -> Tensor:
        """``values`` with every unobserved entry replaced by the model's prediction from the
        row's observed values (no copy mask, no truncation); observed entries are returned
        as given."""
        check_batch(values, observed, self.num_columns)
        positions, padding = inference_layout(~observed)
        prediction = self(values, observed, positions, padding)
        return torch.where(observed, values, prediction.to(values.dtype))

    # ---------------------------------------------------------------------------- training
    def training_step(self, batch: dict[str, Tensor], batch_index: int) -> Tensor:
        values, observed = batch["values"], batch["observed"]
        check_batch(values, observed, self.num_columns)
        generator = keyed_generator(self.seed, self.global_step, self.global_rank)
        mask = copy_masks(~observed, self.copy_probability, generator)
        positions, padding = median_truncation(mask, generator)
        prediction = self(values, observed, positions, padding)
        loss = reconstruction_loss(
            prediction, values, observed, kept_mask(positions, padding, self.num_columns)
        )
        self.log(
            "train/loss",
            loss,
            prog_bar=True,
            on_step=False,
            on_epoch=True,
            batch_size=values.shape[0],
            sync_dist=True,
        )
        return loss

    def _score(self, batch: dict[str, Tensor], metrics) -> None:
        imputed = self.impute(batch["values"], batch["observed"])
        metrics.update(imputed, batch["truth"], batch["target"])
        self.log_dict(metrics, batch_size=imputed.shape[0])

    def validation_step(self, batch: dict[str, Tensor], batch_index: int) -> None:
        self._score(batch, self.val_metrics)

    def test_step(self, batch: dict[str, Tensor], batch_index: int) -> None:
        self._score(batch, self.test_metrics)

    def predict_step(self, batch: dict[str, Tensor], batch_index: int) -> Tensor:
        return self.impute(batch["values"], batch["observed"])

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(
            self.parameters(),
            lr=self.lr,
            betas=tuple(self.hparams.betas),
            weight_decay=self.hparams.weight_decay,
        )
        return warmup_cosine_config(
            optimizer,
            self.trainer,
            self.warmup_fraction,
            self.hparams.schedule_steps,
            floor=self.min_lr / self.lr,
        )
