"""Post-hoc scoring of a trained classifier from its penultimate features and logits.

One scorer API (:class:`PosthocScorer`: fit on in-distribution outputs, score new ones,
save/load) for pointwise-information confidence (PMI, PVI, PSI; Wongso, Ghosh & Motani, ICML
2025) and OOD feature shaping (ReAct, VRA and the piecewise-linear shaper of Mondal, Jiang &
Sundaramoorthi, ICML 2025), failure-prediction and OOD metrics, and the :class:`PosthocScoring`
callback that reports both after training.
"""

from lightning_info.scoring.base import PosthocScorer
from lightning_info.scoring.callback import PosthocScoring, collect_outputs, default_scorers
from lightning_info.scoring.metrics import (
    AURC,
    EAURC,
    OODAUROC,
    AdaptiveCalibrationError,
    AUPRError,
    AUPRSuccess,
    BrierScore,
    ExpectedCalibrationError,
    FailureAUROC,
    FailureFPRAt95TPR,
    NegativeLogLikelihood,
    OODFPRAt95TPR,
)
from lightning_info.scoring.pointwise import (
    MSPScorer,
    PMIScorer,
    PSIScorer,
    PVIScorer,
    fit_temperature,
)
from lightning_info.scoring.shaping import PLF, VRA, FeatureShapingScorer, Identity, ReAct, tune

__all__ = [
    "AURC",
    "AUPRError",
    "AUPRSuccess",
    "AdaptiveCalibrationError",
    "BrierScore",
    "EAURC",
    "ExpectedCalibrationError",
    "FailureAUROC",
    "FailureFPRAt95TPR",
    "FeatureShapingScorer",
    "Identity",
    "MSPScorer",
    "NegativeLogLikelihood",
    "OODAUROC",
    "OODFPRAt95TPR",
    "PLF",
    "PMIScorer",
    "PSIScorer",
    "PVIScorer",
    "PosthocScorer",
    "PosthocScoring",
    "ReAct",
    "VRA",
    "collect_outputs",
    "default_scorers",
    "fit_temperature",
    "tune",
]
