"""``SDCIB``: the multi-view clustering LightningModule of (SD) (see ``functional.py``).

One MLP encoder per view (Linear + BatchNorm + ReLU blocks of the widths ``hidden``, the same
widths in every view so that layers can be contrasted across views); after every block a Gaussian
head gives ``mu`` and ``sigma = softplus(.) + 1e-7`` and the sampled ``h = mu + sigma eps``
(training) or ``mu`` (evaluation); a cluster head ``softmax(Linear(h^L))`` per view; one critic
``T(c, h) = MLP([c, h])`` per (view, layer). Validation and test fuse the views by
:func:`~lightning_info.methods.sdcib.functional.aligned_vote` over the whole split and log
``{val,test}/acc``, ``/nmi`` and ``/ari`` against the labels (never used for training).
"""

from __future__ import annotations

from collections.abc import Sequence

import lightning.pytorch as pl
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from lightning_info.core.sampling import keyed_generator
from lightning_info.core.validation import (
    require_fraction,
    require_int,
    require_non_negative,
    require_positive,
)
from lightning_info.methods.sdcib.functional import sdcib_loss
from lightning_info.methods.sdcib.metrics import AlignedVoteClustering

__all__ = ["SDCIB", "ViewEncoder"]


class ViewEncoder(nn.Module):
    """Linear-BatchNorm-ReLU blocks, each followed by a Gaussian head ``(mu, sigma)``."""

    def __init__(self, input_dim: int, hidden: Sequence[int]) -> None:
        super().__init__()
        widths = [input_dim, *hidden]
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(a, b), nn.BatchNorm1d(b), nn.ReLU())
            for a, b in zip(widths[:-1], widths[1:])
        )
        self.heads = nn.ModuleList(nn.Linear(width, 2 * width) for width in hidden)

    def forward(self, x: Tensor, generator: torch.Generator | None = None) -> list[Tensor]:
        """The representation ``h^k`` of every layer: sampled with the noise of ``generator``
        (a CPU generator), or the mean ``mu^k`` without one."""
        layers, activation = [], x
        for block, head in zip(self.blocks, self.heads):
            activation = block(activation)
            mu, raw_sigma = head(activation).chunk(2, dim=1)
            if generator is None:
                layers.append(mu)
                continue
            sigma = F.softplus(raw_sigma) + 1e-7
            eps = torch.randn(mu.shape, generator=generator, dtype=mu.dtype).to(mu.device)
            layers.append(mu + sigma * eps)
        return layers


class _Critic(nn.Module):
    def __init__(self, clusters: int, width: int, hidden: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(clusters + width, hidden), nn.ReLU(),
                                 nn.Linear(hidden, 1))  # fmt: skip

    def forward(self, c: Tensor, h: Tensor) -> Tensor:
        return self.net(torch.cat([c, h], dim=1)).squeeze(1)


class SDCIB(pl.LightningModule):
    """Super deep contrastive information bottleneck for multi-view clustering.

    Args:
        view_dims: input width of each view (at least 2 views).
        num_clusters: ``K``.
        hidden: widths of every view's encoder blocks (the reference: 1024, 1024, 1024, 128).
        alpha, beta, temperature, cluster_temperature: the weights and temperatures of (SD).
        deep: all layers' terms (``True``) or the last layer's only (the ablation).
        critic_hidden: hidden width of the critics.
        lr, weight_decay: Adam's (3e-4 with batches of 32 trained digits stably; 1e-3 with
            batches of 128 drifted down, see the card).
        reference_view: the view the others are aligned to at inference.
        seed: seeds the training noise (with the step and the rank).
    """

    def __init__(
        self,
        view_dims: Sequence[int],
        num_clusters: int,
        hidden: Sequence[int] = (256, 256, 64),
        alpha: float = 0.1,
        beta: float = 1.0,
        temperature: float = 0.1,
        cluster_temperature: float = 0.1,
        deep: bool = True,
        critic_hidden: int = 64,
        lr: float = 3e-4,
        weight_decay: float = 0.0,
        reference_view: int = 0,
        seed: int = 0,
    ) -> None:
        super().__init__()
        view_dims = [require_int(d, "view_dims", 1) for d in view_dims]
        if len(view_dims) < 2:
            raise ValueError(f"SDCIB needs at least 2 views, got view_dims={view_dims}.")
        self.num_clusters = require_int(num_clusters, "num_clusters", 2)
        hidden = [require_int(w, "hidden", 1) for w in hidden]
        if not hidden:
            raise ValueError("`hidden` needs at least one layer width.")
        self.alpha = require_fraction(alpha, "alpha")
        self.beta = require_non_negative(beta, "beta")
        self.temperature = require_positive(temperature, "temperature")
        self.cluster_temperature = require_positive(cluster_temperature, "cluster_temperature")
        self.lr = require_positive(lr, "lr")
        self.weight_decay = require_non_negative(weight_decay, "weight_decay")
        if not 0 <= reference_view < len(view_dims):
            raise ValueError(f"`reference_view` must index one of the {len(view_dims)} views.")
        self.deep = bool(deep)
        self.seed = require_int(seed, "seed", 0)
        self.save_hyperparameters()
        self.encoders = nn.ModuleList(ViewEncoder(d, hidden) for d in view_dims)
        self.cluster_heads = nn.ModuleList(
            nn.Linear(hidden[-1], self.num_clusters) for _ in view_dims
        )
        critic_hidden = require_int(critic_hidden, "critic_hidden", 1)
        self.critics = nn.ModuleList(
            nn.ModuleList(_Critic(self.num_clusters, w, critic_hidden) for w in hidden)
            for _ in view_dims
        )
        self.val_clustering = AlignedVoteClustering(len(view_dims), reference_view)
        self.test_clustering = AlignedVoteClustering(len(view_dims), reference_view)

    def _check_views(self, views: Sequence[Tensor]) -> None:
        if len(views) != len(self.encoders):
            raise ValueError(f"expected {len(self.encoders)} views, got {len(views)}.")

    def forward(
        self, views: Sequence[Tensor], generator: torch.Generator | None = None
    ) -> tuple[list[list[Tensor]], list[Tensor]]:
        """Per view: the representations of every layer (sampled with ``generator``'s noise, the
        means without it) and the soft assignment ``(B, K)``."""
        self._check_views(views)
        layers = [encoder(x, generator) for encoder, x in zip(self.encoders, views)]
        assignments = [
            F.softmax(head(view_layers[-1]), dim=1)
            for head, view_layers in zip(self.cluster_heads, layers)
        ]
        return layers, assignments

    def training_step(self, batch, batch_idx: int) -> Tensor:
        views, _ = batch
        # Noise from (seed, step, rank): a resumed run draws what the uninterrupted one drew.
        generator = keyed_generator(self.seed, self.global_step, self.global_rank)
        layers, assignments = self(views, generator)
        loss = sdcib_loss(
            layers,
            assignments,
            self.critics,
            alpha=self.alpha,
            beta=self.beta,
            temperature=self.temperature,
            cluster_temperature=self.cluster_temperature,
            deep=self.deep,
            generator=generator,
        )
        self.log("train/loss", loss.total, prog_bar=True, sync_dist=True)
        self.log_dict(
            {
                "train/prior_kl": loss.prior,
                "train/assignment_mi": loss.mutual_information,
                "train/view_contrast": loss.view_contrast,
                "train/cluster_contrast": loss.cluster_contrast,
            },
            sync_dist=True,
        )
        return loss.total

    def _evaluate(self, batch, metric: AlignedVoteClustering) -> None:
        views, labels = batch
        _, assignments = self(views)
        metric.update(assignments, labels)

    def validation_step(self, batch, batch_idx: int) -> None:
        self._evaluate(batch, self.val_clustering)

    def test_step(self, batch, batch_idx: int) -> None:
        self._evaluate(batch, self.test_clustering)

    def _log_clustering(self, stage: str, metric: AlignedVoteClustering) -> None:
        scores = metric.compute()
        self.log_dict({f"{stage}/{name}": value for name, value in scores.items()})
        metric.reset()

    def on_validation_epoch_end(self) -> None:
        self._log_clustering("val", self.val_clustering)

    def on_test_epoch_end(self) -> None:
        self._log_clustering("test", self.test_clustering)

    def predict_step(self, batch, batch_idx: int) -> dict[str, Tensor]:
        """Per-view soft assignments ``(V, B, K)`` and the views' last-layer means, joined."""
        views, _ = batch
        layers, assignments = self(views)
        embedding = torch.cat([view_layers[-1] for view_layers in layers], dim=1)
        return {"assignments": torch.stack(assignments), "embedding": embedding}

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr, weight_decay=self.weight_decay)
