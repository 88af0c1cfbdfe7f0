"""ProDiff: prototype-guided diffusion for trajectory imputation from two endpoints (Bu et al.,
ICML 2025). In progress: the geometry (haversine, great-circle interpolation), the evaluation
Metrics, the interpolation baselines and k-means pseudo-labels (``functional``) and the
trajectory DataModule (see README.md).
"""

from lightning_info.methods.prodiff.datamodule import (
    ARCHETYPES,
    TrajectoryDataModule,
    cut_windows,
    read_trajectory_csv,
    synthetic_city,
)
from lightning_info.methods.prodiff.functional import (
    great_circle_interpolation,
    interior_fractions,
    kmeans,
    linear_interpolation,
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

__all__ = [
    "ARCHETYPES",
    "DEFAULT_THRESHOLDS_KM",
    "EARTH_RADIUS_M",
    "METRES_PER_DEGREE",
    "MaxTrajectoryDeviation",
    "MeanTrajectoryDeviation",
    "TimeMAE",
    "TrajectoryCoverage",
    "TrajectoryDataModule",
    "cut_windows",
    "great_circle_interpolate",
    "great_circle_interpolation",
    "haversine_metres",
    "kmeans",
    "interior_fractions",
    "linear_interpolation",
    "read_trajectory_csv",
    "synthetic_city",
    "trajectory_metrics",
    "trajectory_scores",
]
