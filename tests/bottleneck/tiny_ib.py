"""A tiny classifier with an encoder and a head, and its information-bottleneck version."""

from __future__ import annotations

import torch
from lightning.pytorch import LightningModule
from torch import nn

from lightning_info.bottleneck.mixin import InformationBottleneckMixin


class TinyEncoderClassifier(LightningModule):
    """``head(encoder(x))`` on ``(x, y)`` batches; the head takes ``latent_dim`` features."""

    def __init__(
        self,
        in_features: int = 6,
        hidden: int = 16,
        latent_dim: int = 4,
        num_classes: int = 3,
        lr: float = 0.1,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.encoder = nn.Sequential(nn.Linear(in_features, hidden), nn.Tanh())
        self.head = nn.Linear(latent_dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train/loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val/loss", nn.functional.cross_entropy(self(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)


class TinyIBClassifier(InformationBottleneckMixin, TinyEncoderClassifier):
    """The encoder's 16 features pass through a 4-dimensional Gaussian bottleneck."""

    ib_encoder = "encoder"
    ib_latent_dim = 4
    ib_beta = 0.1
