"""Offline multi-view clustering data: sklearn's digits seen through views, and synthetic views of
a shared latent cluster structure.

- ``digits``: the 1,797 bundled 8x8 digits (no download), three views of each image: its left
  half (32 pixels), its right half (32) and its 4x4 average-pooled thumbnail (16);
- ``synthetic``: ``num_samples`` points of ``num_clusters`` Gaussian clusters in a latent space of
  ``latent_dim``; view ``v`` is ``tanh(z A_v) B_v + noise * N(0, I)`` with random ``A_v, B_v``
  (seeded), so every view holds the clusters through its own nonlinear map, with noise.

Both are :class:`~lightning_info.data.multiview.MultiViewDataModule` s;
``ClusteringViewsDataModule`` chooses one by ``name`` (a recipe's grid over data sets).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional as F

from lightning_info.core.validation import require_int, require_non_negative, require_positive
from lightning_info.data.digits import load_digits_images
from lightning_info.data.multiview import MultiViewDataModule

__all__ = ["ClusteringViewsDataModule", "digits_views", "shared_latent_views"]

SOURCES = ("digits", "synthetic")


def digits_views(classes: int = 10) -> tuple[list[Tensor], Tensor]:
    """Left half, right half and 4x4 thumbnail of every digit of labels ``0..classes-1``."""
    images, labels = load_digits_images(classes)
    left = images[..., :4].flatten(1)
    right = images[..., 4:].flatten(1)
    thumbnail = F.avg_pool2d(images, 2).flatten(1)
    return [left, right, thumbnail], labels


def shared_latent_views(
    num_samples: int = 1500,
    num_clusters: int = 5,
    num_views: int = 3,
    latent_dim: int = 8,
    view_dim: int = 32,
    separation: float = 3.0,
    noise: float = 0.5,
    seed: int = 0,
) -> tuple[list[Tensor], Tensor]:
    """Views ``tanh(z A_v) B_v + noise * N(0, I)`` of latent points ``z = m_y + N(0, I)`` whose
    cluster means ``m_y`` are ``separation`` times standard normal draws; labels balanced."""
    num_samples = require_int(num_samples, "num_samples", 2)
    num_clusters = require_int(num_clusters, "num_clusters", 2)
    num_views = require_int(num_views, "num_views", 1)
    latent_dim = require_int(latent_dim, "latent_dim", 1)
    view_dim = require_int(view_dim, "view_dim", 1)
    separation = require_positive(separation, "separation")
    noise = require_non_negative(noise, "noise")
    g = torch.Generator().manual_seed(require_int(seed, "seed", 0))
    labels = torch.arange(num_samples) % num_clusters
    labels = labels[torch.randperm(num_samples, generator=g)]
    means = separation * torch.randn(num_clusters, latent_dim, generator=g)
    z = means[labels] + torch.randn(num_samples, latent_dim, generator=g)
    views = []
    for _ in range(num_views):
        inner = torch.randn(latent_dim, view_dim, generator=g) / latent_dim**0.5
        outer = torch.randn(view_dim, view_dim, generator=g) / view_dim**0.5
        clean = torch.tanh(z @ inner) @ outer
        views.append(clean + noise * torch.randn(num_samples, view_dim, generator=g))
    return views, labels


class ClusteringViewsDataModule(MultiViewDataModule):
    """``digits`` or ``synthetic`` multi-view clustering data (see the module docstring).

    Args:
        name: ``"digits"`` or ``"synthetic"``.
        classes: digit classes kept (``digits``).
        num_samples, latent_clusters, num_views, latent_dim, view_dim, separation, noise: of
            ``synthetic`` (:func:`shared_latent_views`; ``latent_clusters`` is its
            ``num_clusters``, named apart from a model's ``num_clusters``, since both sit in one
            logger's hyperparameters).
        batch_size, standardize: as in ``MultiViewDataModule``.
        data_seed: its ``seed`` (the shuffling, and the draw of the synthetic data), named apart
            from a model's ``seed``.
    """

    def __init__(
        self,
        name: str = "digits",
        classes: int = 10,
        num_samples: int = 1500,
        latent_clusters: int = 5,
        num_views: int = 3,
        latent_dim: int = 8,
        view_dim: int = 32,
        separation: float = 3.0,
        noise: float = 0.5,
        batch_size: int = 128,
        data_seed: int = 0,
        standardize: bool = True,
    ) -> None:
        if name not in SOURCES:
            raise ValueError(f"`name` must be one of {SOURCES}, got {name!r}.")
        self.name = name
        self._synthetic = dict(
            num_samples=num_samples,
            num_clusters=latent_clusters,
            num_views=num_views,
            latent_dim=latent_dim,
            view_dim=view_dim,
            separation=separation,
            noise=noise,
        )
        self.classes = classes
        super().__init__(batch_size, data_seed, standardize)
        self.save_hyperparameters()

    def build_views(self) -> tuple[list[Tensor], Tensor]:
        if self.name == "digits":
            return digits_views(self.classes)
        return shared_latent_views(**self._synthetic, seed=self.seed)
