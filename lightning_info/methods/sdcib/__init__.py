"""SDCIB: super deep contrastive information bottleneck for multi-view clustering (ICML 2025)."""

from lightning_info.methods.sdcib.datamodule import ClusteringViewsDataModule, SyntheticViewsOptions
from lightning_info.methods.sdcib.functional import (
    aligned_vote,
    assignment_mi,
    cluster_contrast,
    prior_kl,
    sdcib_loss,
)
from lightning_info.methods.sdcib.metrics import AlignedVoteClustering
from lightning_info.methods.sdcib.module import SDCIB, SDCIBLossOptions, ViewEncoder

__all__ = [
    "SyntheticViewsOptions",
    "SDCIB",
    "SDCIBLossOptions",
    "AlignedVoteClustering",
    "ClusteringViewsDataModule",
    "aligned_vote",
    "assignment_mi",
    "cluster_contrast",
    "prior_kl",
    "sdcib_loss",
    "ViewEncoder",
]
