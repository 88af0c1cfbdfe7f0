"""sklearn's bundled handwritten digits as 8x8 images in ``[0, 1]``, split into train and test.

``sklearn.datasets.load_digits`` reads the 1,797 digits (UCI optical recognition set) from a file
inside the scikit-learn package, so nothing is downloaded. Pixels are integers 0..16 and are
divided by 16; the images are ``(N, 1, 8, 8)`` float32 tensors, never normalised further, so
attacks and distillation can work in pixel space with bounds ``[0, 1]``.
"""

from __future__ import annotations

import lightning.pytorch as pl
import torch
from torch import Tensor
from torch.utils.data import DataLoader, TensorDataset

from lightning_info.core.sampling import EpochShuffleSampler
from lightning_info.core.validation import require_fraction, require_int

__all__ = ["DigitsDataModule", "load_digits_images"]


def load_digits_images(classes: int = 10) -> tuple[Tensor, Tensor]:
    """The digits of labels ``0..classes-1``, images ``(N, 1, 8, 8)`` in ``[0, 1]`` and labels."""
    classes = require_int(classes, "classes", 2)
    if classes > 10:
        raise ValueError(f"digits has 10 classes; `classes` must be <= 10, got {classes}.")
    from sklearn.datasets import load_digits

    features, labels = load_digits(return_X_y=True)
    keep = labels < classes
    images = torch.tensor(features[keep] / 16.0, dtype=torch.float32).view(-1, 1, 8, 8)
    return images, torch.tensor(labels[keep], dtype=torch.long)


class DigitsDataModule(pl.LightningDataModule):
    """Digits ``0..classes-1`` with a stratified, seeded train/test split.

    ``train_images`` / ``train_labels`` and ``test_images`` / ``test_labels`` exist right after
    construction (the set is tiny), so a LightningCLI can link them into a model, e.g.
    ``data.train_images -> model.real_images``. The train loader shuffles with
    :class:`EpochShuffleSampler` (exact resume); validation and test use the test split.

    Args:
        classes: number of digit classes kept, ``2..10``.
        test_fraction: share of each class held out for testing, in ``(0, 1)``.
        batch_size: batch size of every loader.
        split_seed: seeds the split and the shuffling (named apart from a model's ``seed``, so
            both can sit in one logger's hyperparameters).
    """

    def __init__(
        self,
        classes: int = 10,
        test_fraction: float = 0.3,
        batch_size: int = 128,
        split_seed: int = 0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        test_fraction = require_fraction(test_fraction, "test_fraction")
        if not 0 < test_fraction < 1:
            raise ValueError(f"`test_fraction` must lie in (0, 1), got {test_fraction!r}.")
        self.batch_size = require_int(batch_size, "batch_size", 1)
        self.split_seed = require_int(split_seed, "split_seed", 0)
        images, labels = load_digits_images(classes)
        self.num_classes = int(labels.max()) + 1
        generator = torch.Generator().manual_seed(self.split_seed)
        test_mask = torch.zeros(len(labels), dtype=torch.bool)
        for c in range(self.num_classes):
            members = torch.nonzero(labels == c).flatten()
            members = members[torch.randperm(len(members), generator=generator)]
            test_mask[members[: max(1, round(test_fraction * len(members)))]] = True
        self.train_images, self.train_labels = images[~test_mask], labels[~test_mask]
        self.test_images, self.test_labels = images[test_mask], labels[test_mask]

    def train_dataloader(self) -> DataLoader:
        dataset = TensorDataset(self.train_images, self.train_labels)
        sampler = EpochShuffleSampler(len(dataset), seed=self.split_seed)
        return DataLoader(dataset, batch_size=self.batch_size, sampler=sampler)

    def val_dataloader(self) -> DataLoader:
        return self.test_dataloader()

    def test_dataloader(self) -> DataLoader:
        dataset = TensorDataset(self.test_images, self.test_labels)
        return DataLoader(dataset, batch_size=self.batch_size)
