"""Data modules and loaders."""

from lightning_info.data.ucr_uea import (
    UCRUEADataModule,
    available_bundled_datasets,
    load_bundled_dataset,
)

__all__ = ["UCRUEADataModule", "available_bundled_datasets", "load_bundled_dataset"]
