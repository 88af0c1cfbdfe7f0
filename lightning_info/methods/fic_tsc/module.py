"""The FIC-TSC classifier: InceptionTime features, then a two-layer MLP head, trained with
cross-entropy (Chen et al., ICML 2025, after Ismail Fawaz et al., 2020).
"""

from __future__ import annotations

import lightning.pytorch as pl
import torch
from torch import nn
from torch.nn import functional as F
from torchmetrics.classification import MulticlassAccuracy

from lightning_info.core.options import AdamWOptions
from lightning_info.core.validation import require_in_range, require_int
from lightning_info.methods.fic_tsc.networks import InceptionTime, check_input_dtype

__all__ = ["InceptionTimeClassifier"]


_ADAMW = AdamWOptions(lr=5e-3, weight_decay=1e-4)
_NETWORK_DEFAULTS = {"num_filters": 32, "depth": 6, "kernel_size": 40}


class InceptionTimeClassifier(pl.LightningModule):
    """InceptionTime with an MLP head, trained with cross-entropy (FIC-TSC architecture).

    ``logits = W_2 Dropout(ReLU(W_1 InceptionTime(x) + b_1)) + b_2`` with
    ``W_1: 4 * num_filters -> head_hidden`` and ``W_2: head_hidden -> num_classes``. All
    Conv1d and Linear weights use Xavier-uniform initialisation (Glorot & Bengio, 2010) and
    all their biases start at zero. Optimised with AdamW.

    Batches are ``(x, y)`` with ``x`` float ``(batch, in_channels, length)`` in the weights'
    dtype (float32 unless the Trainer's precision converts both) and ``y`` long ``(batch,)``
    holding class indices in ``[0, num_classes)``. ``forward`` refuses another input dtype
    (no cast). At ``setup`` a data module that tells its ``num_classes`` or ``num_channels``
    (:class:`~lightning_info.methods.fic_tsc.datamodule.UCRUEADataModule`) must match the model.
    Every step checks the shapes of ``x`` and ``y`` and that ``y`` holds integers (metadata only,
    no synchronisation). With ``validate_args=True`` it also checks that the labels lie in
    ``[0, num_classes)``, with one host read of their minimum and maximum (a device
    synchronisation on an accelerator), which replaces the accuracy metrics' own per-step check
    (torchmetrics' ``validate_args``, which they then skip); the default ``False`` reads nothing.

    Args:
        in_channels: channels ``C`` of the inputs.
        num_classes: number of classes.
        network: the feature extractor, mapping ``(batch, in_channels, length)`` to
            ``(batch, out_features)`` and telling its ``out_features`` (as
            :class:`~lightning_info.methods.fic_tsc.networks.InceptionTime`); ``None`` builds
            ``InceptionTime(in_channels, num_filters, depth, kernel_size)``. Its Conv1d and
            Linear layers are re-initialised as above.
        num_filters, depth, kernel_size: of the default network (give an injected network its
            own).
        head_hidden: width of the head's hidden layer.
        dropout: the head's dropout probability.
        optimizer: AdamW's settings (default: learning rate 5e-3, weight decay 1e-4).
        validate_args: check the label values of every batch (above); default ``False``.
    """

    def __init__(
        self,
        in_channels: int,
        num_classes: int,
        network: nn.Module | None = None,
        num_filters: int = 32,
        depth: int = 6,
        kernel_size: int = 40,
        head_hidden: int = 128,
        dropout: float = 0.2,
        optimizer: AdamWOptions = _ADAMW,
        validate_args: bool = False,
    ) -> None:
        super().__init__()
        require_int(in_channels, "in_channels", 1)
        require_int(num_classes, "num_classes", 2)
        require_int(head_hidden, "head_hidden", 1)
        require_in_range(dropout, "dropout", 0.0, 1.0)
        if not isinstance(validate_args, bool):
            raise TypeError(f"`validate_args` must be a bool, got {validate_args!r}.")
        self.validate_args = validate_args
        if not isinstance(optimizer, AdamWOptions):
            raise TypeError(f"`optimizer` must be an AdamWOptions, got {type(optimizer).__name__}.")
        self.optimizer_options = optimizer
        self.save_hyperparameters(ignore=["network"])

        if network is None:
            network = InceptionTime(
                in_channels, num_filters=num_filters, depth=depth, kernel_size=kernel_size
            )
        else:
            _check_network(network, in_channels, num_filters, depth, kernel_size)
        self.features = network
        self.head = nn.Sequential(
            nn.Linear(self.features.out_features, head_hidden),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(head_hidden, num_classes),
        )
        self.reset_parameters()

        self.num_classes = num_classes
        accuracy = dict(num_classes=num_classes, average="micro", validate_args=False)
        self.train_acc = MulticlassAccuracy(**accuracy)
        self.val_acc = MulticlassAccuracy(**accuracy)
        self.test_acc = MulticlassAccuracy(**accuracy)

    def reset_parameters(self) -> None:
        """Xavier-uniform weights and zero biases for every Conv1d and Linear layer."""
        for module in self.modules():
            if isinstance(module, (nn.Conv1d, nn.Linear)):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)

    def setup(self, stage: str) -> None:
        """Refuse a data module whose classes or channels differ from the model's."""
        datamodule = getattr(self.trainer, "datamodule", None)
        pairs = (("num_classes", "num_classes"), ("num_channels", "in_channels"))
        for attribute, argument in pairs:
            told = getattr(datamodule, attribute, None)
            expected = self.hparams[argument]
            if isinstance(told, int) and told != expected:
                what = attribute.removeprefix("num_")
                raise ValueError(
                    f"the data module has {told} {what} but the model was built for "
                    f"`{argument}`={expected}; build it with {argument}={told}."
                )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_input_dtype(x, self.head[-1].weight.dtype)
        return self.head(self.features(x))

    def _shared_step(
        self, batch: tuple[torch.Tensor, torch.Tensor], stage: str, metric: MulticlassAccuracy
    ) -> torch.Tensor:
        x, y = batch
        if y.ndim != 1 or y.shape[0] != x.shape[0]:
            raise ValueError(
                f"Expected targets of shape ({x.shape[0]},) matching the batch, "
                f"got {tuple(y.shape)}."
            )
        _check_label_dtype(y)
        if self.validate_args:
            _check_label_range(y, self.num_classes)
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        metric(logits, y)
        batch_size = x.shape[0]
        on_step = stage == "train"
        logged = dict(on_epoch=True, batch_size=batch_size)
        self.log(f"{stage}/loss", loss, on_step=on_step, sync_dist=True, **logged)
        self.log(f"{stage}/acc", metric, on_step=False, **logged)
        return loss

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int):
        return self._shared_step(batch, "train", self.train_acc)

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int):
        return self._shared_step(batch, "val", self.val_acc)

    def test_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int):
        return self._shared_step(batch, "test", self.test_acc)

    def configure_optimizers(self):
        options = self.optimizer_options
        # only the warmup-cosine schedule reads the trainer (its estimated steps)
        trainer = None if options.warmup_fraction is None else self.trainer
        return options.configure(self.parameters(), trainer)


def _check_network(
    network: nn.Module, in_channels: int, num_filters: int, depth: int, kernel_size: int
) -> None:
    """Raise unless ``network`` is a feature extractor for ``in_channels`` inputs that the
    default network's options do not try to configure."""
    if not isinstance(network, nn.Module):
        raise TypeError(f"`network` must be an nn.Module, got {type(network).__name__}.")
    out_features = getattr(network, "out_features", None)
    if isinstance(out_features, bool) or not isinstance(out_features, int) or out_features < 1:
        raise TypeError(
            "`network` must tell the width of its features as an int `out_features` "
            f"(as InceptionTime), got {out_features!r}."
        )
    channels = getattr(network, "in_channels", in_channels)
    if channels != in_channels:
        raise ValueError(
            f"`network` takes {channels} input channels but `in_channels` is {in_channels}; "
            "build the network for the data's channels."
        )
    given = {"num_filters": num_filters, "depth": depth, "kernel_size": kernel_size}
    changed = sorted(name for name, value in given.items() if value != _NETWORK_DEFAULTS[name])
    if changed:
        raise ValueError(
            f"{', '.join(f'`{name}`' for name in changed)} configure the default network only; "
            "give them to the injected `network` instead."
        )


def _check_label_dtype(y: torch.Tensor) -> None:
    """``y`` must hold integer class indices (its dtype: no synchronisation)."""
    if y.is_floating_point() or y.is_complex() or y.dtype == torch.bool:
        raise TypeError(
            f"`y` must hold integer class indices, got dtype {y.dtype}; pass `y.long()`."
        )


def _check_label_range(y: torch.Tensor, num_classes: int) -> None:
    """``y`` must hold class indices in ``[0, num_classes)``: one host read."""
    if not y.numel():
        return
    low, high = torch.stack([y.min(), y.max()]).tolist()
    if low < 0 or high >= num_classes:
        raise ValueError(
            f"`y` must hold class indices in [0, {num_classes}), got values in [{low}, {high}]; "
            "build the model with the data's number of classes or re-encode the labels."
        )
