"""Multi-view data for clustering: every sample seen through several feature views.

A multi-view data set holds ``V`` float tensors ``views[v]`` of shape ``(N, d_v)`` over the same
``N`` samples and their labels ``(N,)`` (used only for evaluation). An item is
``(tuple of the V view rows, label)``, so a loader's batch is ``[[x_1, ..., x_V], y]``.

:class:`MultiViewDataModule` is the base of every multi-view source (sklearn's digits split into
views, synthetic shared-latent views, the hop views of a graph): a subclass implements
:meth:`MultiViewDataModule.build_views`. Clustering is transductive, so every split is the whole
set: the train loader shuffles it (:class:`~lightning_info.core.sampling.EpochShuffleSampler`,
exact resume), the validation, test and predict loaders read it in order. Each view is
standardised column by column (mean 0, variance 1; constant columns left at 0) when
``standardize`` is set; the labels are never seen by a model.
"""

from __future__ import annotations

from collections.abc import Sequence

import lightning.pytorch as pl
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from lightning_info.core.resume import ResumableDataLoader
from lightning_info.core.sampling import EpochShuffleSampler
from lightning_info.core.validation import require_finite_tensor, require_int

__all__ = [
    "MultiViewDataModule",
    "MultiViewDataset",
    "TensorViewsDataModule",
    "check_labels",
    "check_views",
    "standardize_columns",
]


def check_views(views: Sequence[Tensor], labels: Tensor | None = None) -> list[Tensor]:
    """Raise unless ``views`` are finite 2-D float tensors over the same samples (and ``labels``
    passes :func:`check_labels`); returns them as a list, unchanged."""
    views = list(views)
    if not views:
        raise ValueError("no views: a multi-view data set needs at least one (N, d) tensor.")
    for v, view in enumerate(views):
        if not isinstance(view, Tensor) or view.dim() != 2 or not view.is_floating_point():
            raise ValueError(f"view {v} must be a 2-D float tensor (N, d).")
        if view.shape[0] != views[0].shape[0]:
            raise ValueError(
                f"every view must hold the same samples: view 0 has {views[0].shape[0]} rows, "
                f"view {v} has {view.shape[0]}."
            )
        require_finite_tensor(view, f"view {v}")
    if views[0].shape[0] == 0:
        raise ValueError("the views are empty (0 samples).")
    if labels is not None:
        check_labels(labels, views[0].shape[0])
    return views


def check_labels(labels: Tensor, count: int) -> Tensor:
    """Raise unless ``labels`` is an integer ``(count,)`` tensor of class indices ``>= 0``:
    float labels would be truncated and negative ones would not count as classes."""
    if not isinstance(labels, Tensor) or labels.shape != (count,):
        raise ValueError(f"`labels` must be a tensor of shape ({count},).")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise TypeError(
            f"`labels` must be integer class indices, got dtype {labels.dtype}; map the classes "
            "to 0, 1, ... (e.g. torch.unique(labels, return_inverse=True)[1])."
        )
    if count and int(labels.min()) < 0:
        raise ValueError(
            f"`labels` must be class indices >= 0, got {int(labels.min())}; map the classes to "
            "0, 1, ... (e.g. torch.unique(labels, return_inverse=True)[1])."
        )
    return labels


def standardize_columns(view: Tensor) -> Tensor:
    """``(x - mean) / std`` per column (population std); constant columns become 0. A new tensor."""
    mean = view.mean(0, keepdim=True)
    std = view.std(0, unbiased=False, keepdim=True)
    return torch.where(std > 0, (view - mean) / std.clamp_min(1e-12), torch.zeros_like(view))


class MultiViewDataset(Dataset):
    """Items ``(tuple of the views' rows, label)`` over views ``(N, d_v)`` and labels ``(N,)``."""

    def __init__(self, views: Sequence[Tensor], labels: Tensor) -> None:
        self.views = check_views(views, labels)
        self.labels = labels

    def __len__(self) -> int:
        return self.views[0].shape[0]

    def __getitem__(self, index: int) -> tuple[tuple[Tensor, ...], Tensor]:
        return tuple(view[index] for view in self.views), self.labels[index]


class MultiViewDataModule(pl.LightningDataModule):
    """Base DataModule of multi-view clustering data (see the module docstring).

    The views are built once, at construction (the sets are small enough, and a LightningCLI can
    then link ``data.view_dims`` and ``data.num_classes`` into a model).

    Args:
        batch_size: batch size of every loader.
        seed: seeds the view construction (where random) and the shuffling.
        standardize: standardise each view's columns.
    """

    def __init__(self, batch_size: int = 128, seed: int = 0, standardize: bool = True) -> None:
        super().__init__()
        self.batch_size = require_int(batch_size, "batch_size", 1)
        self.seed = require_int(seed, "seed", 0)
        views, labels = self.build_views()
        views = check_views(views, labels)
        if standardize:
            views = [standardize_columns(view) for view in views]
        self.views = [view.float() for view in views]
        self.labels = labels.long()
        self.num_classes = int(self.labels.max()) + 1
        self.dataset = MultiViewDataset(self.views, self.labels)
        if self.batch_size > len(self.dataset):
            raise ValueError(
                f"`batch_size` {self.batch_size} exceeds the {len(self.dataset)} samples: the "
                "train loader drops incomplete batches (batch norm and the contrastive terms need "
                "full ones); lower it."
            )

    def build_views(self) -> tuple[list[Tensor], Tensor]:
        """The views ``[(N, d_1), ..., (N, d_V)]`` and the labels ``(N,)``."""
        raise NotImplementedError

    @property
    def view_dims(self) -> list[int]:
        return [view.shape[1] for view in self.views]

    @property
    def num_views(self) -> int:
        return len(self.views)

    def train_dataloader(self) -> DataLoader:
        sampler = EpochShuffleSampler(len(self.dataset), seed=self.seed)
        return ResumableDataLoader(
            self.dataset,
            trainer=self.trainer,
            sampler=sampler,
            batch_size=self.batch_size,
            drop_last=True,
        )

    def _in_order(self) -> DataLoader:
        return DataLoader(self.dataset, batch_size=self.batch_size)

    def val_dataloader(self) -> DataLoader:
        return self._in_order()

    def test_dataloader(self) -> DataLoader:
        return self._in_order()

    def predict_dataloader(self) -> DataLoader:
        return self._in_order()


class TensorViewsDataModule(MultiViewDataModule):
    """A user's own views (tensors already in memory) as a :class:`MultiViewDataModule`."""

    def __init__(
        self,
        views: Sequence[Tensor],
        labels: Tensor,
        batch_size: int = 128,
        seed: int = 0,
        standardize: bool = True,
    ) -> None:
        self._given = (list(views), labels)
        super().__init__(batch_size, seed, standardize)

    def build_views(self) -> tuple[list[Tensor], Tensor]:
        return self._given
