"""ProDiff: prototype-guided diffusion for trajectory imputation from two endpoints (Bu et al.,
ICML 2025): the ``ProDiff`` LightningModule, the trajectory DataModule, the evaluation Metrics
in metres, the interpolation baselines and the prototype math (see README.md).
"""

from lightning_info.methods.prodiff.datamodule import (
    ARCHETYPES,
    TrajectoryDataModule,
    cut_windows,
    read_trajectory_csv,
    synthetic_city,
)
from lightning_info.methods.prodiff.denoiser import (
    EndpointCondition,
    TrajectoryUNet,
    timestep_embedding,
)
from lightning_info.methods.prodiff.encoder import TrajectoryEncoder
from lightning_info.methods.prodiff.functional import (
    endpoints_only,
    great_circle_interpolation,
    interior_fractions,
    kmeans,
    linear_interpolation,
    match_clusters,
    prototype_attention,
    prototype_contrastive_loss,
    prototype_cross_entropy,
)
from lightning_info.methods.prodiff.geometry import (
    EARTH_RADIUS_M,
    METRES_PER_DEGREE,
    great_circle_interpolate,
    haversine_metres,
)
from lightning_info.methods.prodiff.metrics import (
    DEFAULT_THRESHOLDS_KM,
    MaxTrajectoryDeviation,
    MeanTrajectoryDeviation,
    TimeMAE,
    TrajectoryCoverage,
    trajectory_metrics,
    trajectory_scores,
)
from lightning_info.methods.prodiff.module import ProDiff, check_window

__all__ = [
    "ARCHETYPES",
    "DEFAULT_THRESHOLDS_KM",
    "EARTH_RADIUS_M",
    "METRES_PER_DEGREE",
    "EndpointCondition",
    "MaxTrajectoryDeviation",
    "MeanTrajectoryDeviation",
    "ProDiff",
    "TimeMAE",
    "TrajectoryCoverage",
    "TrajectoryDataModule",
    "TrajectoryEncoder",
    "TrajectoryUNet",
    "check_window",
    "endpoints_only",
    "cut_windows",
    "great_circle_interpolate",
    "great_circle_interpolation",
    "haversine_metres",
    "kmeans",
    "interior_fractions",
    "linear_interpolation",
    "match_clusters",
    "prototype_attention",
    "prototype_contrastive_loss",
    "prototype_cross_entropy",
    "read_trajectory_csv",
    "synthetic_city",
    "trajectory_metrics",
    "timestep_embedding",
    "trajectory_scores",
]
