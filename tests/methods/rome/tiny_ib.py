"""A tiny classifier with an encoder and a head, and its information-bottleneck version."""

from __future__ import annotations

from torch import nn

from lightning_info.methods.rome.bottleneck import InformationBottleneckMixin
from tests.tiny import TinyClassifier


class TinyEncoderClassifier(TinyClassifier):
    """``head(encoder(x))``: the tiny classifier split so the head takes ``latent_dim`` features."""

    def __init__(
        self,
        in_features: int = 6,
        hidden: int = 16,
        latent_dim: int = 4,
        num_classes: int = 3,
        lr: float = 0.1,
    ) -> None:
        super().__init__(in_features, hidden, num_classes, lr)
        self.save_hyperparameters()
        self.encoder = nn.Sequential(nn.Linear(in_features, hidden), nn.Tanh())
        self.head = nn.Linear(latent_dim, num_classes)
        self.net = nn.Sequential(self.encoder, self.head)


class TinyIBClassifier(InformationBottleneckMixin, TinyEncoderClassifier):
    """The encoder's 16 features pass through a 4-dimensional Gaussian bottleneck."""

    ib_encoder = "encoder"
    ib_latent_dim = 4
    ib_beta = 0.1
