"""DataModules used by several methods: sklearn's digits, Gaussian-mixture point clouds,
multi-view clustering data."""

from lightning_info.data.digits import DigitsDataModule, load_digits_images
from lightning_info.data.multiview import MultiViewDataModule, TensorViewsDataModule
from lightning_info.data.synthetic import GaussianMixtureDataModule, ring_mixture

__all__ = [
    "DigitsDataModule",
    "GaussianMixtureDataModule",
    "MultiViewDataModule",
    "TensorViewsDataModule",
    "load_digits_images",
    "ring_mixture",
]
