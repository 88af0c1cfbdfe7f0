"""``CACTI``: the context-aware masked-autoencoder imputer of Gorla et al. (ICML 2025).

The network (by default :class:`~lightning_info.methods.cacti.networks.CACTINetwork`, the paper's
encoder-decoder transformer with value and context tokens) predicts every column of a row from
the values of a layout's slots (:mod:`~lightning_info.methods.cacti.functional`); training draws
the layouts by median truncated copy masking and minimises
:func:`~lightning_info.methods.cacti.functional.reconstruction_loss`, the mean squared error over
the visible values plus that over the observed values MT-CM hid. Batches are dicts with
``values`` (B, d) (any number at unobserved entries; never read), ``observed`` (B, d) bool and,
for scoring, ``truth`` (B, d) and ``target`` (B, d) bool, the entries whose truth is known but
hidden. Validation and test log ``{val,test}/r2``, ``/rmse``, ``/mae`` and ``/wasserstein`` over
``target`` through the DDP-ready Metrics of :mod:`~lightning_info.methods.cacti.metrics`.

``masking="random"`` with ``use_context=False`` is ReMasker (Du et al., 2023), the masked
autoencoder CACTI builds on: a share ``mask_ratio`` of each row's observed values re-masked at
random (:func:`~lightning_info.methods.cacti.functional.random_masking`) instead of MT-CM, the
same network, loss and optimizer otherwise.

A training step reads no value back from the device. Its layout is drawn on the host in
``on_before_batch_transfer``, before the batch moves to the device: MT-CM's encoder length, the
batch's median visible count, is a shape, which read on the device would wait for it. (Where the
hook does not run -- a ``training_step`` called without a Trainer, or a data module with its own
``on_before_batch_transfer``, which Lightning calls instead -- the step draws the same layout
itself, with that read.) Lightning's notice that a module's transfer hook runs beside a data
module asks nothing of the user here and is filtered (that message only). With
``validate_args=True`` the step also refuses NaN or infinity at observed entries (one host read,
a device synchronisation on an accelerator); shapes and dtypes are always checked. Validation,
test, predict and :meth:`CACTI.impute` always check their batches.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Mapping
from dataclasses import fields, replace
from typing import Any, Literal

import lightning.pytorch as pl
import numpy as np
import torch
from torch import Tensor, nn

from lightning_info.core.options import AdamWOptions
from lightning_info.core.sampling import keyed_generator
from lightning_info.core.validation import (
    all_finite,
    require_bool,
    require_choice,
    require_fraction,
    require_int,
)
from lightning_info.methods.cacti.functional import (
    copy_masks,
    inference_layout,
    kept_mask,
    median_truncation,
    random_masking,
    reconstruction_loss,
)
from lightning_info.methods.cacti.metrics import imputation_metrics
from lightning_info.methods.cacti.networks import CACTINetwork

__all__ = ["CACTI", "CACTI_OPTIMIZER", "build_cacti", "check_batch", "context_tensor"]


warnings.filterwarnings(
    "ignore",
    message="You have overridden `on_before_batch_transfer` in `LightningModule` but have passed",
    category=UserWarning,
)

_LAYOUT = ("training_positions", "training_padding")
"""The batch keys of the training layout drawn in ``on_before_batch_transfer``."""

#: CACTI's default AdamW: betas (0.9, 0.95), weight decay 0.01, a linear warmup from ``min_lr``
#: over the first 10% of the steps, then a cosine decay to ``min_lr``.
CACTI_OPTIMIZER = AdamWOptions(
    lr=1e-3, weight_decay=0.01, betas=(0.9, 0.95), warmup_fraction=0.1, min_lr=5e-6
)


def check_batch(
    values: Tensor, observed: Tensor, num_columns: int, *, validate_args: bool = True
) -> None:
    """Refuse a batch CACTI would silently learn or predict nonsense from: wrong shapes, a
    non-boolean mask, a non-floating ``values``, and with ``validate_args`` NaN / infinity at
    an entry the mask calls observed (one host read)."""
    if values.ndim != 2 or values.shape != observed.shape or values.shape[1] != num_columns:
        raise ValueError(
            f"`values` and `observed` must both be (rows, {num_columns}), got "
            f"{tuple(values.shape)} and {tuple(observed.shape)}."
        )
    if observed.dtype != torch.bool:
        raise ValueError(f"`observed` must be a boolean mask, got {observed.dtype}.")
    if not values.is_floating_point():
        raise TypeError(
            f"`values` must be a floating-point tensor, got dtype {values.dtype}: the imputed "
            "entries would be truncated to it; pass `values.float()`."
        )
    if validate_args and not all_finite(torch.where(observed, values, 0.0)):
        raise ValueError(
            "`values` hold NaN or infinity at entries `observed` marks as observed: mark them "
            "unobserved (False) or fix the data."
        )


def context_tensor(embeddings: Any, num_columns: int) -> Tensor:
    """The columns' text embeddings as a finite float32 ``(num_columns, E)`` tensor, or a
    ValueError saying what is wrong."""
    context = torch.as_tensor(np.asarray(embeddings), dtype=torch.float32)
    if context.ndim != 2 or context.shape[0] != num_columns:
        raise ValueError(
            f"`context_embeddings` must be (num_columns={num_columns}, E), "
            f"got {tuple(context.shape)}."
        )
    if not torch.isfinite(context).all():
        raise ValueError("`context_embeddings` hold NaN or infinite values.")
    return context


class CACTI(pl.LightningModule):
    """Context-aware copy-masked tabular imputer (see the module docstring).

    Args:
        num_columns: columns of the table.
        context_embeddings: ``(num_columns, E)`` text embeddings of the columns' descriptions
            (e.g. ``TabularImputationDataModule.context_embeddings``); ``None`` with
            ``use_context=False``, or when loading a checkpoint (``context_dim``, or the
            network's, rebuilds it).
        context_dim: ``E`` when no embeddings are given (a checkpoint fills the buffer).
        use_context: context tokens on (CACTI) or off (the no-context ablation).
        network: any ``nn.Module`` called as ``network(values, observed, positions, padding,
            context)`` (``context`` the ``(num_columns, E)`` embeddings, or ``None`` without
            context) that returns ``(B, num_columns)`` predictions in ``[0, 1]``; ``None``:
            ``CACTINetwork(num_columns, E)`` (D 64, 10 encoder and 4 decoder blocks, the
            paper's size). Its ``num_columns`` and ``context_dim``, where it has them, must
            match. Not saved in the hyperparameters: pass it again to ``load_from_checkpoint``.
        copy_probability: ``p_cm`` of MT-CM.
        masking: ``copy`` (MT-CM, CACTI's) or ``random`` (ReMasker's: ``mask_ratio`` of the
            observed values re-masked at random; ``copy_probability`` unused).
        mask_ratio: the re-masked share of ``masking="random"``, in ``[0, 1)``.
        optimizer: AdamW and its warmup-cosine schedule (:data:`CACTI_OPTIMIZER`); with
            ``schedule_steps=None`` the schedule's length is the trainer's estimate for its
            ``max_epochs`` / ``max_steps`` (a run continued to a larger ``max_epochs`` than it
            started with then follows another schedule: fix it here).
        seed: keys the MT-CM draws (with the step and rank), so a resumed run draws the same.
        validate_args: refuse training batches with NaN or infinity at observed entries (module
            docstring); default ``False``.
    """

    def __init__(
        self,
        num_columns: int,
        context_embeddings: Any = None,
        context_dim: int | None = None,
        use_context: bool = True,
        network: nn.Module | None = None,
        copy_probability: float = 0.9,
        optimizer: AdamWOptions = CACTI_OPTIMIZER,
        seed: int = 0,
        masking: Literal["copy", "random"] = "copy",
        mask_ratio: float = 0.5,
        validate_args: bool = False,
    ) -> None:
        super().__init__()
        self.num_columns = require_int(num_columns, "num_columns", 2)
        self.copy_probability = require_fraction(copy_probability, "copy_probability")
        self.masking = require_choice(masking, "masking", ("copy", "random"))
        self.mask_ratio = require_fraction(mask_ratio, "mask_ratio")
        if not isinstance(optimizer, AdamWOptions):
            raise TypeError(
                f"`optimizer` must be an AdamWOptions (e.g. dataclasses.replace(CACTI_OPTIMIZER, "
                f"lr=3e-3)), got {type(optimizer).__name__}."
            )
        self.optimizer_options = optimizer
        self.seed = require_int(seed, "seed", 0)
        self.validate_args = require_bool(validate_args, "validate_args")
        if network is not None and context_embeddings is None and context_dim is None:
            context_dim = getattr(network, "context_dim", None) if use_context else None
        context = self._context_buffer(context_embeddings, context_dim, use_context)
        # The context width is recorded after the fact (a checkpoint rebuilds the buffer from it)
        # and kept out of the logged hyperparameters: loggers refuse a `context_dim` that differs
        # from the data module's (its TF-IDF width, or None here with use_context=False).
        self.save_hyperparameters(ignore=["context_embeddings", "network", "context_dim"])
        self.hparams["context_dim"] = None if context is None else int(context.shape[1])
        self.use_context = context is not None
        if context is not None:
            self.register_buffer("context", context)
        if network is None:
            network = CACTINetwork(num_columns, self.hparams["context_dim"])
        self._check_network(network)
        self.network = network
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
        return context_tensor(embeddings, self.num_columns)

    def _check_network(self, network: nn.Module) -> None:
        if not isinstance(network, nn.Module):
            raise TypeError(f"`network` must be an nn.Module, got {type(network).__name__}.")
        columns = getattr(network, "num_columns", self.num_columns)
        if columns != self.num_columns:
            raise ValueError(
                f"the network was built for {columns} columns, CACTI for num_columns="
                f"{self.num_columns}: build both for the table's columns."
            )
        width = self.hparams["context_dim"]
        if getattr(network, "context_dim", width) != width:
            raise ValueError(
                f"the network's context_dim ({network.context_dim}) must be the context "
                f"embeddings' width ({width}; None without context): build it with "
                f"context_dim={width}."
            )

    # ----------------------------------------------------------------------------- forward
    def forward(
        self, values: Tensor, observed: Tensor, positions: Tensor, padding: Tensor
    ) -> Tensor:
        """Predictions ``(B, d)`` in ``[0, 1]`` of every column from the values of the layout's
        unpadded slots; unobserved values are never read."""
        context = self.context if self.use_context else None
        return self.network(values, observed, positions, padding, context)

    @torch.no_grad()
    def impute(self, values: Tensor, observed: Tensor) -> Tensor:
        """``values`` with every unobserved entry replaced by the model's prediction from the
        row's observed values (no copy mask, no truncation); observed entries are returned
        as given.

        A row with no observed value has nothing to be imputed from: it is filled with the
        prediction from an empty layout (the encoder sees its CLS token alone), the same values
        for every such row, and a ``UserWarning`` gives their count and indices.
        """
        check_batch(values, observed, self.num_columns)
        empty = (~observed.any(1)).nonzero().flatten()
        if empty.numel():
            warnings.warn(
                f"{empty.numel()} row(s) of `observed` have no observed value (rows "
                f"{empty[:10].tolist()}{' ...' if empty.numel() > 10 else ''}): each is filled "
                "with the prediction from an empty layout, the same values for every such row; "
                "drop these rows, or observe at least one value in each.",
                UserWarning,
                stacklevel=2,
            )
        return self._fill(values, observed)

    def _impute(self, values: Tensor, observed: Tensor) -> Tensor:
        """:meth:`impute` without looking for empty rows (no device synchronisation): the
        validation, test and predict steps."""
        check_batch(values, observed, self.num_columns)
        return self._fill(values, observed)

    def _fill(self, values: Tensor, observed: Tensor) -> Tensor:
        positions, padding = inference_layout(~observed)
        prediction = self(values, observed, positions, padding)
        return torch.where(observed, values, prediction.to(values.dtype))

    # ---------------------------------------------------------------------------- training
    def training_layout(self, observed: Tensor) -> tuple[Tensor, Tensor]:
        """The encoder's layout of a training batch: MT-CM (``masking="copy"``) or ReMasker's
        random re-masking (``"random"``), drawn from the (seed, step, rank) generator."""
        generator = keyed_generator(self.seed, self.global_step, self.global_rank)
        if self.masking == "random":
            return random_masking(~observed, self.mask_ratio, generator)
        return median_truncation(copy_masks(~observed, self.copy_probability, generator), generator)

    def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        """A training batch gets its layout here, drawn on the host (the batch is still there,
        so its encoder length is read without waiting for the device) from the generator the
        step would use: the same layout as :meth:`training_layout` in the step."""
        if (
            self._trainer is not None
            and self.trainer.training
            and isinstance(batch, Mapping)
            and isinstance(batch.get("observed"), Tensor)
        ):
            positions, padding = self.training_layout(batch["observed"])
            batch = {**batch, _LAYOUT[0]: positions, _LAYOUT[1]: padding}
        return batch

    def training_step(self, batch: dict[str, Tensor], batch_index: int) -> Tensor:
        values, observed = batch["values"], batch["observed"]
        check_batch(values, observed, self.num_columns, validate_args=self.validate_args)
        if _LAYOUT[0] in batch:
            positions, padding = batch[_LAYOUT[0]], batch[_LAYOUT[1]]
        else:  # a step called without a Trainer's batch hooks
            positions, padding = self.training_layout(observed)
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

    @torch.no_grad()
    def _score(self, batch: dict[str, Tensor], metrics) -> None:
        imputed = self._impute(batch["values"], batch["observed"])
        metrics.update(imputed, batch["truth"], batch["target"])
        self.log_dict(metrics, batch_size=imputed.shape[0])

    def validation_step(self, batch: dict[str, Tensor], batch_index: int) -> None:
        self._score(batch, self.val_metrics)

    def test_step(self, batch: dict[str, Tensor], batch_index: int) -> None:
        self._score(batch, self.test_metrics)

    @torch.no_grad()
    def predict_step(self, batch: dict[str, Tensor], batch_index: int) -> Tensor:
        return self._impute(batch["values"], batch["observed"])

    def configure_optimizers(self):
        return self.optimizer_options.configure(self.parameters(), self.trainer)


def build_cacti(
    num_columns: int,
    context_embeddings: Any = None,
    settings: Mapping[str, Any] | None = None,
    *,
    use_context: bool = True,
    seed: int = 0,
) -> CACTI:
    """CACTI for a table whose width and context are known only at fit time (the study's and
    ``CACTIImputer``'s ``model`` settings), from one flat mapping: ``CACTINetwork``'s
    architecture arguments (``embed_dim``, ``encoder_depth``, ``decoder_depth``, ``num_heads``,
    ``mlp_ratio``; its columns and context width come from the table), ``AdamWOptions``' fields
    over :data:`CACTI_OPTIMIZER` (``lr``, ``min_lr``, ``weight_decay``, ``betas``,
    ``warmup_fraction``, ``schedule_steps``) and any other ``CACTI`` argument
    (``copy_probability``, or a whole ``network`` / ``optimizer``), e.g.
    ``{"embed_dim": 32, "encoder_depth": 4, "decoder_depth": 2, "lr": 3e-3}``."""
    settings = dict(settings or {})
    network_names = set(inspect.signature(CACTINetwork).parameters) - {"num_columns", "context_dim"}
    optimizer_names = {field.name for field in fields(AdamWOptions)}
    architecture = {k: settings.pop(k) for k in list(settings) if k in network_names}
    schedule = {k: settings.pop(k) for k in list(settings) if k in optimizer_names}
    for name, given in (("network", architecture), ("optimizer", schedule)):
        if given and name in settings:
            raise ValueError(
                f"give either `{name}` or its arguments {sorted(given)} in the settings, not both."
            )
    context = None
    if use_context and context_embeddings is not None:
        context = context_tensor(context_embeddings, num_columns)
    if architecture:
        width = None if context is None else int(context.shape[1])
        settings["network"] = CACTINetwork(num_columns, width, **architecture)
    if schedule:
        settings["optimizer"] = replace(CACTI_OPTIMIZER, **schedule)
    return CACTI(num_columns, context, use_context=use_context, seed=seed, **settings)
