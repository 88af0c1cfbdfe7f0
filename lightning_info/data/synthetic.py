"""Generated low-dimensional data sets (nothing to download)."""

from __future__ import annotations

import math

import lightning.pytorch as pl
import torch
from torch import Tensor
from torch.utils.data import DataLoader, TensorDataset

from lightning_info.core.resume import ResumableDataLoader
from lightning_info.core.sampling import EpochShuffleSampler
from lightning_info.core.validation import require_fraction, require_int, require_positive

__all__ = ["GaussianMixtureDataModule", "ring_mixture"]


def ring_mixture(
    num_samples: int, components: int = 8, radius: float = 2.0, std: float = 0.15, seed: int = 0
) -> Tensor:
    """``num_samples`` 2-D points from ``components`` equal Gaussians (``std``) on a circle."""
    num_samples = require_int(num_samples, "num_samples", 1)
    components = require_int(components, "components", 1)
    radius, std = require_positive(radius, "radius"), require_positive(std, "std")
    generator = torch.Generator().manual_seed(require_int(seed, "seed", 0))
    angle = (
        2 * math.pi * torch.randint(components, (num_samples,), generator=generator) / components
    )
    centres = radius * torch.stack([angle.cos(), angle.sin()], dim=1)
    return centres + std * torch.randn(num_samples, 2, generator=generator)


class GaussianMixtureDataModule(pl.LightningDataModule):
    """:func:`ring_mixture` samples split into train / validation / test, unlabelled ``(x,)``.

    ``train_data`` / ``test_data`` exist after construction (e.g. as the data set of an exact
    diffusion-Fisher reference).
    """

    def __init__(
        self,
        num_samples: int = 4000,
        components: int = 8,
        radius: float = 2.0,
        std: float = 0.15,
        val_fraction: float = 0.1,
        test_fraction: float = 0.1,
        batch_size: int = 256,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        data = ring_mixture(num_samples, components, radius, std, seed)
        val_n = round(require_fraction(val_fraction, "val_fraction") * num_samples)
        test_n = round(require_fraction(test_fraction, "test_fraction") * num_samples)
        if val_n + test_n >= num_samples:
            raise ValueError("`val_fraction + test_fraction` must leave training samples.")
        self.test_data = data[:test_n]
        self.val_data = data[test_n : test_n + val_n]
        self.train_data = data[test_n + val_n :]
        self.batch_size = require_int(batch_size, "batch_size", 1)
        self.seed = seed

    def _loader(self, data: Tensor, shuffle: bool = False) -> DataLoader:
        sampler = EpochShuffleSampler(len(data), self.seed) if shuffle else None
        return ResumableDataLoader(
            TensorDataset(data), trainer=self.trainer, batch_size=self.batch_size, sampler=sampler
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_data, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_data)

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.test_data)
