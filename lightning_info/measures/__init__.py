"""Information-theoretic math shared by several methods: variational MI bounds and the
streamed Gaussian-kernel moments."""

from lightning_info.measures.kernel_moments import KernelMoments, kernel_moments
from lightning_info.measures.mutual_information import (
    donsker_varadhan,
    gaussian_kl_standard_normal,
    infonce,
    jensen_shannon_mi,
    mean_embedding_distance,
    mmd2,
    nt_xent,
)

__all__ = [
    "KernelMoments",
    "donsker_varadhan",
    "gaussian_kl_standard_normal",
    "infonce",
    "jensen_shannon_mi",
    "kernel_moments",
    "mean_embedding_distance",
    "mmd2",
    "nt_xent",
]
