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

from lightning_info.core.resume import ResumableDataLoader
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


def _stratified_mask(labels: Tensor, fraction: float, generator: torch.Generator) -> Tensor:
    """A seeded mask holding ``round(fraction * n_c)`` (at least 1) samples of every class."""
    mask = torch.zeros(len(labels), dtype=torch.bool)
    for c in labels.unique().tolist():
        members = torch.nonzero(labels == c).flatten()
        members = members[torch.randperm(len(members), generator=generator)]
        mask[members[: max(1, round(fraction * len(members)))]] = True
    return mask


class DigitsDataModule(pl.LightningDataModule):
    """Digits ``0..classes-1`` with a stratified, seeded train/test split.

    ``train_images`` / ``train_labels`` and ``test_images`` / ``test_labels`` exist right after
    construction (the set is tiny), so a LightningCLI can link them into a model, e.g.
    ``data.train_images -> model.real_images``. The train loader shuffles with
    :class:`EpochShuffleSampler` (exact resume). With ``val_fraction > 0`` a stratified share of
    the training images becomes the validation split (``val_images`` / ``val_labels``);
    otherwise validation uses the test split.

    Args:
        classes: number of digit classes kept, ``2..10``.
        test_fraction: share of each class held out for testing, in ``(0, 1)``.
        val_fraction: share of each class's remaining images held out for validation.
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
        val_fraction: float = 0.0,
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
        val_fraction = require_fraction(val_fraction, "val_fraction")
        generator = torch.Generator().manual_seed(self.split_seed)
        test = _stratified_mask(labels, test_fraction, generator)
        self.test_images, self.test_labels = images[test], labels[test]
        rest_images, rest_labels = images[~test], labels[~test]
        if val_fraction > 0:
            val = _stratified_mask(rest_labels, val_fraction, generator)
            self.val_images, self.val_labels = rest_images[val], rest_labels[val]
            rest_images, rest_labels = rest_images[~val], rest_labels[~val]
        else:
            self.val_images, self.val_labels = self.test_images, self.test_labels
        self.train_images, self.train_labels = rest_images, rest_labels

    def ood_images(self, split: str = "test") -> dict[str, Tensor]:
        """Out-of-distribution images for the kept classes, in ``[0, 1]``, by kind.

        ``"digits"``: the digits of the classes not kept (only when ``classes < 10``);
        ``"noise"``: Gaussian pixels with the mean and standard deviation of the training
        images, clipped to ``[0, 1]``; ``"shuffled"``: test images with their 64 pixels permuted
        (a fresh permutation per image), same pixel values, no digit shape. ``split`` ``"val"``
        and ``"test"`` are two disjoint, seeded halves of each set (tune on one, report the other).
        """
        if split not in ("val", "test"):
            raise ValueError(f"`split` must be 'val' or 'test', got {split!r}.")
        generator = torch.Generator().manual_seed(self.split_seed + 1)
        images, labels = load_digits_images(10)
        sets = {}
        if self.num_classes < 10:
            sets["digits"] = images[labels >= self.num_classes]
        count = len(self.test_images)
        mean, std = self.train_images.mean(), self.train_images.std()
        noise = mean + std * torch.randn(count, *self.train_images.shape[1:], generator=generator)
        sets["noise"] = noise.clamp(0.0, 1.0)
        flat = self.test_images.flatten(1)
        order = torch.argsort(torch.rand(flat.shape, generator=generator), dim=1)
        sets["shuffled"] = flat.gather(1, order).view_as(self.test_images)
        halves = {}
        for name, batch in sets.items():
            permutation = torch.randperm(len(batch), generator=generator)
            half = len(batch) // 2
            pick = permutation[:half] if split == "val" else permutation[half:]
            halves[name] = batch[pick]
        return halves

    def ood_dataloaders(self, split: str = "test") -> dict[str, DataLoader]:
        """:meth:`ood_images` as loaders of 1-tuples ``(x,)``."""
        return {
            name: DataLoader(TensorDataset(images), batch_size=self.batch_size)
            for name, images in self.ood_images(split).items()
        }

    def train_dataloader(self) -> DataLoader:
        dataset = TensorDataset(self.train_images, self.train_labels)
        sampler = EpochShuffleSampler(len(dataset), seed=self.split_seed)
        return ResumableDataLoader(
            dataset, trainer=self.trainer, batch_size=self.batch_size, sampler=sampler
        )

    def val_dataloader(self) -> DataLoader:
        dataset = TensorDataset(self.val_images, self.val_labels)
        return DataLoader(dataset, batch_size=self.batch_size)

    def test_dataloader(self) -> DataLoader:
        dataset = TensorDataset(self.test_images, self.test_labels)
        return DataLoader(dataset, batch_size=self.batch_size)
