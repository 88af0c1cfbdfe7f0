"""Offline multi-view clustering data: sklearn's digits seen through views, and synthetic views of
a shared latent cluster structure.

- ``digits``: the 1,797 bundled 8x8 digits (no download), three views of each image: its left
  half (32 pixels), its right half (32) and its 4x4 average-pooled thumbnail (16);
- ``synthetic``: ``num_samples`` points of ``num_clusters`` Gaussian clusters in a latent space of
  ``latent_dim``; view ``v`` is ``tanh(z A_v) B_v + noise * N(0, I)`` with random ``A_v, B_v``
  (seeded), so every view holds the clusters through its own nonlinear map, with noise; with
  ``private_clusters >= 2`` each view also carries its own nuisance cluster structure,
  independent of the labels and of the other views (:func:`view_specific_parts`).

Both are :class:`~lightning_info.data.multiview.MultiViewDataModule` s;
``ClusteringViewsDataModule`` chooses one by ``name`` (a recipe's grid over data sets).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import Tensor
from torch.nn import functional as F

from lightning_info.core.options import as_options
from lightning_info.core.validation import (
    require_bool,
    require_int,
    require_non_negative,
    require_positive,
)
from lightning_info.data.digits import load_digits_images
from lightning_info.data.multiview import MultiViewDataModule

__all__ = [
    "ClusteringViewsDataModule",
    "SyntheticViewsOptions",
    "digits_views",
    "shared_latent_views",
    "view_specific_parts",
]

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
    private_clusters: int = 0,
    private_separation: float = 3.0,
) -> tuple[list[Tensor], Tensor]:
    """Views ``tanh(z A_v) B_v + noise * N(0, I)`` of latent points ``z = m_y + N(0, I)`` whose
    cluster means ``m_y`` are ``separation`` times standard normal draws; labels balanced.

    With ``private_clusters >= 2`` (``0``, the default: none) view ``v`` gains the term
    ``P_v`` of :func:`view_specific_parts` (its own nuisance clusters, ``private_separation``
    apart), drawn after everything else from the same generator, so the views without it are
    exactly the default ones of the same seed."""
    views, labels, _ = _synthetic_views(
        num_samples,
        num_clusters,
        num_views,
        latent_dim,
        view_dim,
        separation,
        noise,
        seed,
        private_clusters,
        private_separation,
    )
    return views, labels


def view_specific_parts(
    num_samples: int,
    num_views: int,
    latent_dim: int,
    view_dim: int,
    clusters: int,
    separation: float,
    generator: torch.Generator,
) -> tuple[list[Tensor], Tensor]:
    """Each view's own nuisance structure: for view ``v``, labels ``u_v`` uniform over
    ``clusters`` (drawn independently of every other view and of the classes), latent points
    ``w_v = n_{v, u_v} + N(0, I)`` around means ``n_v`` that are ``separation`` times standard
    normal draws, and the part ``P_v = tanh(w_v C_v) D_v`` with random ``C_v, D_v`` (scaled as
    ``A_v, B_v``). Returns ``([P_1, ..., P_V], u)`` with ``u`` of shape ``(V, N)``."""
    parts, nuisance = [], []
    for _ in range(num_views):
        labels = torch.randint(clusters, (num_samples,), generator=generator)
        means = separation * torch.randn(clusters, latent_dim, generator=generator)
        w = means[labels] + torch.randn(num_samples, latent_dim, generator=generator)
        inner = torch.randn(latent_dim, view_dim, generator=generator) / latent_dim**0.5
        outer = torch.randn(view_dim, view_dim, generator=generator) / view_dim**0.5
        parts.append(torch.tanh(w @ inner) @ outer)
        nuisance.append(labels)
    return parts, torch.stack(nuisance)


def _synthetic_views(
    num_samples: int,
    num_clusters: int,
    num_views: int,
    latent_dim: int,
    view_dim: int,
    separation: float,
    noise: float,
    seed: int,
    private_clusters: int = 0,
    private_separation: float = 3.0,
) -> tuple[list[Tensor], Tensor, tuple[list[Tensor], Tensor] | None]:
    """:func:`shared_latent_views` and its view-specific parts and nuisance labels (``None``
    without them)."""
    num_samples = require_int(num_samples, "num_samples", 2)
    num_clusters = require_int(num_clusters, "num_clusters", 2)
    num_views = require_int(num_views, "num_views", 1)
    latent_dim = require_int(latent_dim, "latent_dim", 1)
    view_dim = require_int(view_dim, "view_dim", 1)
    separation = require_positive(separation, "separation")
    noise = require_non_negative(noise, "noise")
    private_clusters = require_int(private_clusters, "private_clusters", 0)
    if private_clusters == 1:
        raise ValueError(
            "`private_clusters` must be 0 (no view-specific structure) or at least 2, got 1."
        )
    private_separation = require_positive(private_separation, "private_separation")
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
    if not private_clusters:
        return views, labels, None
    private = view_specific_parts(
        num_samples, num_views, latent_dim, view_dim, private_clusters, private_separation, g
    )
    return [v + p for v, p in zip(views, private[0])], labels, private


@dataclass(frozen=True)
class SyntheticViewsOptions:
    """The draw of the ``synthetic`` source, :func:`shared_latent_views`'s arguments:
    ``num_samples``, ``latent_clusters`` (its ``num_clusters``, named apart from a model's
    ``num_clusters``, since both sit in one logger's hyperparameters), ``num_views``,
    ``latent_dim``, ``view_dim``, ``separation``, ``noise``, and ``private_clusters`` /
    ``private_separation`` (``>= 2`` gives every view its own nuisance clusters, 0 none)."""

    num_samples: int = 1500
    latent_clusters: int = 5
    num_views: int = 3
    latent_dim: int = 8
    view_dim: int = 32
    separation: float = 3.0
    noise: float = 0.5
    private_clusters: int = 0
    private_separation: float = 3.0

    def __post_init__(self) -> None:
        require_int(self.num_samples, "num_samples", 2)
        require_int(self.latent_clusters, "latent_clusters", 2)
        require_int(self.num_views, "num_views", 1)
        require_int(self.latent_dim, "latent_dim", 1)
        require_int(self.view_dim, "view_dim", 1)
        require_positive(self.separation, "separation")
        require_non_negative(self.noise, "noise")
        if require_int(self.private_clusters, "private_clusters", 0) == 1:
            raise ValueError(
                "`private_clusters` must be 0 (no view-specific structure) or at least 2, got 1."
            )
        require_positive(self.private_separation, "private_separation")


torch.serialization.add_safe_globals([SyntheticViewsOptions])  # checkpoints load weights-only


class ClusteringViewsDataModule(MultiViewDataModule):
    """``digits`` or ``synthetic`` multi-view clustering data (see the module docstring).

    Args:
        name: ``"digits"`` or ``"synthetic"``.
        classes: digit classes kept (``digits``).
        synthetic: the draw of ``synthetic`` (:class:`SyntheticViewsOptions`, or a mapping of
            its fields; in a YAML ``synthetic: {num_samples: 320, noise: 1.0}``).
        batch_size, standardize: as in ``MultiViewDataModule``.
        data_seed: its ``seed`` (the shuffling, and the draw of the synthetic data), named apart
            from a model's ``seed``.
    """

    def __init__(
        self,
        name: str = "digits",
        classes: int = 10,
        synthetic: SyntheticViewsOptions = SyntheticViewsOptions(),
        batch_size: int = 128,
        data_seed: int = 0,
        standardize: bool = True,
    ) -> None:
        if name not in SOURCES:
            raise ValueError(f"`name` must be one of {SOURCES}, got {name!r}.")
        synthetic = as_options(synthetic, "synthetic", SyntheticViewsOptions)
        self.name = name
        options = asdict(synthetic)
        options["num_clusters"] = options.pop("latent_clusters")
        self._synthetic = options
        self.classes = classes
        super().__init__(batch_size, data_seed, require_bool(standardize, "standardize"))
        self.save_hyperparameters()

    def build_views(self) -> tuple[list[Tensor], Tensor]:
        if self.name == "digits":
            return digits_views(self.classes)
        return shared_latent_views(**self._synthetic, seed=self.seed)
