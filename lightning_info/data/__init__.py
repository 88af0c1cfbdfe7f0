"""Data modules and loaders."""

from lightning_info.data.digits import DigitsDataModule, load_digits_images
from lightning_info.data.ucr_uea import (
    UCRUEADataModule,
    available_bundled_datasets,
    load_bundled_dataset,
)

__all__ = [
    "DigitsDataModule",
    "UCRUEADataModule",
    "load_digits_images",
    "available_bundled_datasets",
    "load_bundled_dataset",
]
