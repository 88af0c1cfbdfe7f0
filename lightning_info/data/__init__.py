"""Data modules and loaders."""

from lightning_info.data.digits import DigitsDataModule, load_digits_images
from lightning_info.data.synthetic import GaussianMixtureDataModule, ring_mixture
from lightning_info.data.ucr_uea import (
    UCRUEADataModule,
    available_bundled_datasets,
    load_bundled_dataset,
)

__all__ = [
    "DigitsDataModule",
    "GaussianMixtureDataModule",
    "UCRUEADataModule",
    "load_digits_images",
    "ring_mixture",
    "available_bundled_datasets",
    "load_bundled_dataset",
]
