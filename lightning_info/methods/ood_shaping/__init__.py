"""OOD detection with shaped penultimate features (Mondal, Jiang & Sundaramoorthi).

See README.md in this folder."""

from lightning_info.methods.ood_shaping.callback import OODShapingReport
from lightning_info.methods.ood_shaping.functional import (
    PLF,
    SHAPERS,
    VRA,
    FeatureQuantiles,
    Identity,
    PiecewiseLinear,
    ReAct,
    Shaper,
    energy_score,
    make_shaper,
    piecewise_linear,
)
from lightning_info.methods.ood_shaping.metrics import (
    OODAUROC,
    OODFPRAt95TPR,
    fpr_at_95_tpr,
    ood_auroc,
)
from lightning_info.methods.ood_shaping.scorers import FeatureShapingScorer, TuneResult, tune

__all__ = [
    "PLF",
    "SHAPERS",
    "VRA",
    "FeatureQuantiles",
    "FeatureShapingScorer",
    "Identity",
    "OODAUROC",
    "OODFPRAt95TPR",
    "OODShapingReport",
    "PiecewiseLinear",
    "ReAct",
    "Shaper",
    "TuneResult",
    "energy_score",
    "fpr_at_95_tpr",
    "make_shaper",
    "ood_auroc",
    "piecewise_linear",
    "tune",
]
