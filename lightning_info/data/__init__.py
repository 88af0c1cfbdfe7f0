"""DataModules used by several methods: sklearn's digits, Gaussian-mixture point clouds."""

from lightning_info.data.digits import DigitsDataModule, load_digits_images
from lightning_info.data.synthetic import GaussianMixtureDataModule, ring_mixture

__all__ = ["DigitsDataModule", "GaussianMixtureDataModule", "load_digits_images", "ring_mixture"]
