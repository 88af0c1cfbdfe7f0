"""A multilayer-perceptron image/vector classifier whose last layer is the linear ``head``.

Post-hoc scorers read the classifier through the head: its input is the penultimate feature
vector and its output the logits (see
:class:`~lightning_info.methods.pointwise_confidence.PosthocScoring`).
"""

from __future__ import annotations

from collections.abc import Sequence

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics.classification import MulticlassAccuracy

from lightning_info.core.validation import require_in_range, require_int, require_positive

__all__ = ["MLPClassifier"]


class MLPClassifier(pl.LightningModule):
    """``logits = head(body(flatten(x)))``; ``body`` = Linear-ReLU blocks of ``hidden`` widths.

    Trained with cross-entropy and AdamW; logs ``{train,val,test}/loss`` and ``/acc``.
    """

    def __init__(
        self,
        input_dim: int,
        num_classes: int,
        hidden: Sequence[int] = (128, 64),
        lr: float = 1e-3,
        weight_decay: float = 1e-4,
    ) -> None:
        super().__init__()
        require_int(input_dim, "input_dim", 1)
        require_int(num_classes, "num_classes", 2)
        require_positive(lr, "lr")
        require_in_range(weight_decay, "weight_decay", 0.0)
        self.save_hyperparameters()
        layers: list[nn.Module] = [nn.Flatten()]
        width = input_dim
        for size in hidden:
            layers += [nn.Linear(width, require_int(size, "hidden width", 1)), nn.ReLU()]
            width = size
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width, num_classes)
        self.accuracy = nn.ModuleDict(
            {
                f"{stage}_acc": MulticlassAccuracy(num_classes, average="micro")
                for stage in ("train", "val", "test")
            }
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))

    def _step(self, batch, stage: str) -> torch.Tensor:
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        self.accuracy[f"{stage}_acc"](logits, y)
        self.log(f"{stage}/loss", loss, prog_bar=stage == "train", sync_dist=True)
        self.log(f"{stage}/acc", self.accuracy[f"{stage}_acc"], prog_bar=stage != "train")
        return loss

    def training_step(self, batch, batch_idx):
        return self._step(batch, "train")

    def validation_step(self, batch, batch_idx):
        self._step(batch, "val")

    def test_step(self, batch, batch_idx):
        self._step(batch, "test")

    def configure_optimizers(self):
        return torch.optim.AdamW(
            self.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay
        )
