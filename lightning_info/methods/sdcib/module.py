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
from dataclasses import dataclass

import lightning.pytorch as pl
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from lightning_info.core.sampling import keyed_generator
from lightning_info.core.validation import (
    require_bool,
    require_fraction,
    require_index,
    require_int,
    require_non_negative,
    require_positive,
)
from lightning_info.methods.sdcib.functional import sdcib_loss
from lightning_info.methods.sdcib.metrics import AlignedVoteClustering

__all__ = ["SDCIB", "SDCIBLossOptions", "ViewEncoder"]


class ViewEncoder(nn.Module):
    """Linear-BatchNorm-ReLU blocks, each followed by a Gaussian head ``(mu, sigma)``.

    ``widths`` holds the width of every block, the width of the representation of its layer.
    """

    def __init__(self, input_dim: int, hidden: Sequence[int] = (256, 256, 64)) -> None:
        super().__init__()
        self.input_dim = require_int(input_dim, "input_dim", 1)
        if isinstance(hidden, (str, bytes)) or not isinstance(hidden, Sequence):
            raise TypeError(
                f"`hidden` must be a sequence of layer widths, got {type(hidden).__name__} "
                f"{hidden!r}; one layer of width w is (w,)."
            )
        self.widths = tuple(require_int(w, "hidden", 1) for w in hidden)
        if not self.widths:
            raise ValueError("`hidden` needs at least one layer width.")
        widths = [input_dim, *hidden]
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(a, b), nn.BatchNorm1d(b), nn.ReLU())
            for a, b in zip(widths[:-1], widths[1:])
        )
        self.heads = nn.ModuleList(nn.Linear(width, 2 * width) for width in hidden)

    def forward(self, x: Tensor, generator: torch.Generator | None = None) -> list[Tensor]:
        """The representation ``h^k`` of every layer: sampled with the noise of ``generator``
        (a CPU generator), or the mean ``mu^k`` without one. ``x`` is a floating-point
        ``(B, input_dim)`` batch."""
        if x.dim() != 2 or x.shape[1] != self.input_dim or not x.is_floating_point():
            raise ValueError(
                f"`x` must be a floating-point (batch, {self.input_dim}) tensor, got shape "
                f"{tuple(x.shape)} of {x.dtype}."
            )
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(
                f"`generator` must be a torch.Generator or None, got {type(generator).__name__}; "
                "pass torch.Generator().manual_seed(seed)."
            )
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
        self.net = nn.Sequential(
            nn.Linear(clusters + width, hidden), nn.ReLU(), nn.Linear(hidden, 1)
        )

    def forward(self, c: Tensor, h: Tensor) -> Tensor:
        return self.net(torch.cat([c, h], dim=1)).squeeze(1)


@dataclass(frozen=True)
class SDCIBLossOptions:
    """The weights and temperatures of (SD), the arguments of the same names of
    :func:`~lightning_info.methods.sdcib.functional.sdcib_loss`.

    Args:
        alpha, beta: the weights of (SD); ``alpha`` in ``[0, 1)``, ``beta >= 0``.
        temperature, cluster_temperature: of NT-Xent between views and of ``CC``.
    """

    alpha: float = 0.1
    beta: float = 1.0
    temperature: float = 0.1
    cluster_temperature: float = 0.1

    def __post_init__(self) -> None:
        checked = {
            "alpha": require_fraction(self.alpha, "loss.alpha"),
            "beta": require_non_negative(self.beta, "loss.beta"),
            "temperature": require_positive(self.temperature, "loss.temperature"),
            "cluster_temperature": require_positive(
                self.cluster_temperature, "loss.cluster_temperature"
            ),
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)


# the options live in checkpoints' hyperparameters, which torch.load reads weights-only
torch.serialization.add_safe_globals([SDCIBLossOptions])


class SDCIB(pl.LightningModule):
    """Super deep contrastive information bottleneck for multi-view clustering.

    Args:
        view_dims: input width of each view (at least 2 views).
        num_clusters: ``K``.
        encoders: one encoder per view, mapping ``(B, view_dims[i])`` (and an optional CPU
            ``generator`` for the sampling noise) to the list of its layers' representations,
            with a ``widths`` attribute giving their widths, the same in every view (as
            :class:`ViewEncoder`); ``None`` builds ``ViewEncoder(view_dims[i], hidden)``.
        hidden: widths of the default encoders' blocks (the reference: 1024, 1024, 1024, 128).
        loss: the weights and temperatures of (SD).
        deep: all layers' terms (``True``) or the last layer's only (the ablation).
        critic_hidden: hidden width of the critics.
        lr, weight_decay: Adam's (3e-4 with batches of 32 trained digits stably; 1e-3 with
            batches of 128 drifted down, see the card).
        reference_view: the view the others are aligned to at inference.
        seed: seeds the training noise (with the step and the rank).
        validate_args: check every training batch's representations, assignments and critic
            scores for NaN and infinity (one host read per term, a device synchronisation on an
            accelerator); ``False`` (the default) checks shapes only, so a NaN flows into the
            loss as in any torch model.
    """

    def __init__(
        self,
        view_dims: Sequence[int],
        num_clusters: int,
        encoders: list[nn.Module] | None = None,
        hidden: Sequence[int] = (256, 256, 64),
        loss: SDCIBLossOptions = SDCIBLossOptions(),
        deep: bool = True,
        critic_hidden: int = 64,
        lr: float = 3e-4,
        weight_decay: float = 0.0,
        reference_view: int = 0,
        seed: int = 0,
        validate_args: bool = False,
    ) -> None:
        super().__init__()
        view_dims = [require_int(d, "view_dims", 1) for d in view_dims]
        if len(view_dims) < 2:
            raise ValueError(f"SDCIB needs at least 2 views, got view_dims={view_dims}.")
        self.num_clusters = require_int(num_clusters, "num_clusters", 2)
        hidden = [require_int(w, "hidden", 1) for w in hidden]
        if not hidden:
            raise ValueError("`hidden` needs at least one layer width.")
        if not isinstance(loss, SDCIBLossOptions):
            raise TypeError(f"`loss` must be an SDCIBLossOptions, got {type(loss).__name__}.")
        self.loss_options = loss
        self.lr = require_positive(lr, "lr")
        self.weight_decay = require_non_negative(weight_decay, "weight_decay")
        reference_view = require_index(reference_view, "reference_view", len(view_dims))
        if not isinstance(deep, bool):
            raise TypeError(f"`deep` must be a bool, got {type(deep).__name__} {deep!r}.")
        self.deep = deep
        self.seed = require_int(seed, "seed", 0)
        self.validate_args = require_bool(validate_args, "validate_args")
        self.save_hyperparameters(ignore=["encoders"])
        if encoders is None:
            encoders = [ViewEncoder(d, hidden) for d in view_dims]
        else:
            hidden = _encoder_widths(encoders, view_dims)
        self.encoders = nn.ModuleList(encoders)
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
            alpha=self.loss_options.alpha,
            beta=self.loss_options.beta,
            temperature=self.loss_options.temperature,
            cluster_temperature=self.loss_options.cluster_temperature,
            deep=self.deep,
            generator=generator,
            validate_args=self.validate_args,
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


def _encoder_widths(encoders: Sequence[nn.Module], view_dims: Sequence[int]) -> list[int]:
    """The layer widths the injected ``encoders`` share (one encoder per view)."""
    if len(encoders) != len(view_dims):
        raise ValueError(
            f"`encoders` needs one encoder per view ({len(view_dims)}), got {len(encoders)}."
        )
    widths = []
    for i, (encoder, dim) in enumerate(zip(encoders, view_dims)):
        if not isinstance(encoder, nn.Module) or not getattr(encoder, "widths", None):
            raise TypeError(
                f"`encoders[{i}]` must be an nn.Module with the `widths` of its layers "
                f"(as ViewEncoder), got {type(encoder).__name__}."
            )
        if getattr(encoder, "input_dim", dim) != dim:
            raise ValueError(
                f"`encoders[{i}]` takes inputs of width {encoder.input_dim}, but view {i} has "
                f"{dim} columns (`view_dims`)."
            )
        widths.append([require_int(w, f"encoders[{i}].widths", 1) for w in encoder.widths])
    if any(w != widths[0] for w in widths):
        raise ValueError(f"every view's encoder needs the same layer widths, got {widths}.")
    return widths[0]
