"""Fisher information, entropy and mutual information of Gaussian-smoothed densities.

See README.md in this folder."""

from lightning_info.methods.smoothed_information.callback import SmoothedInformationMonitor
from lightning_info.methods.smoothed_information.functional import (
    SmoothedEstimatorOptions,
    SmoothedInformation,
    fisher_from_mmse,
    mmse_from_fisher,
    smoothed_entropy,
    smoothed_fisher_information,
    smoothed_information,
    smoothed_mmse,
    smoothed_mutual_information,
)
from lightning_info.methods.smoothed_information.metrics import (
    SmoothedEntropy,
    SmoothedFisherInformation,
    SmoothedMutualInformation,
)

__all__ = [
    "SmoothedEntropy",
    "SmoothedEstimatorOptions",
    "SmoothedFisherInformation",
    "SmoothedInformation",
    "SmoothedInformationMonitor",
    "SmoothedMutualInformation",
    "fisher_from_mmse",
    "mmse_from_fisher",
    "smoothed_entropy",
    "smoothed_fisher_information",
    "smoothed_information",
    "smoothed_mmse",
    "smoothed_mutual_information",
]
