"""ProDiff: prototype-guided diffusion for trajectory imputation from two endpoints (Bu et al.,
ICML 2025): the ``ProDiff`` LightningModule, the trajectory DataModule, the evaluation Metrics
in metres, the interpolation baselines and the prototype math (see README.md).
"""

from lightning_info.methods.prodiff.datamodule import (
    ARCHETYPES,
    SyntheticCity,
    TrajectoryColumns,
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
    classifier_free_guidance,
    endpoints_only,
    epsilon_from_x0,
    great_circle_interpolation,
    interior_fractions,
    interior_l1_loss,
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
from lightning_info.methods.prodiff.module import (
    PRODIFF_OPTIMIZER,
    DiffusionOptions,
    GuidanceOptions,
    ProDiff,
    PrototypeOptions,
    SamplingOptions,
    WindowScaling,
    check_window,
)
from lightning_info.methods.prodiff.prototypes import prototype_usage, prototype_weights

__all__ = [
    "ARCHETYPES",
    "DEFAULT_THRESHOLDS_KM",
    "EARTH_RADIUS_M",
    "METRES_PER_DEGREE",
    "PRODIFF_OPTIMIZER",
    "DiffusionOptions",
    "EndpointCondition",
    "GuidanceOptions",
    "MaxTrajectoryDeviation",
    "MeanTrajectoryDeviation",
    "ProDiff",
    "PrototypeOptions",
    "SamplingOptions",
    "SyntheticCity",
    "TimeMAE",
    "TrajectoryColumns",
    "TrajectoryCoverage",
    "TrajectoryDataModule",
    "TrajectoryEncoder",
    "TrajectoryUNet",
    "WindowScaling",
    "check_window",
    "classifier_free_guidance",
    "endpoints_only",
    "epsilon_from_x0",
    "cut_windows",
    "great_circle_interpolate",
    "great_circle_interpolation",
    "haversine_metres",
    "kmeans",
    "interior_fractions",
    "interior_l1_loss",
    "linear_interpolation",
    "match_clusters",
    "prototype_attention",
    "prototype_contrastive_loss",
    "prototype_cross_entropy",
    "prototype_usage",
    "prototype_weights",
    "read_trajectory_csv",
    "synthetic_city",
    "trajectory_metrics",
    "timestep_embedding",
    "trajectory_scores",
]
