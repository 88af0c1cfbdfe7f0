"""Pointwise information measures for confidence: PMI, PVI and PSI (Wongso, Ghosh & Motani).

See README.md in this folder."""

from lightning_info.methods.pointwise_confidence.callback import PosthocScoring, default_scorers
from lightning_info.methods.pointwise_confidence.functional import (
    adaptive_calibration_error,
    aupr_error,
    aupr_success,
    aurc,
    brier_score,
    e_aurc,
    expected_calibration_error,
    failure_auroc,
    failure_fpr_at_95_tpr,
    negative_log_likelihood,
    optimal_aurc,
)
from lightning_info.methods.pointwise_confidence.metrics import (
    AURC,
    EAURC,
    AdaptiveCalibrationError,
    AUPRError,
    AUPRSuccess,
    BrierScore,
    ExpectedCalibrationError,
    FailureAUROC,
    FailureFPRAt95TPR,
    NegativeLogLikelihood,
)
from lightning_info.methods.pointwise_confidence.scorers import (
    MSPScorer,
    PMIScorer,
    PSIScorer,
    PVIScorer,
    fit_temperature,
)

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
    "MSPScorer",
    "NegativeLogLikelihood",
    "PMIScorer",
    "PSIScorer",
    "PVIScorer",
    "PosthocScoring",
    "adaptive_calibration_error",
    "aupr_error",
    "aupr_success",
    "aurc",
    "brier_score",
    "default_scorers",
    "e_aurc",
    "expected_calibration_error",
    "failure_auroc",
    "failure_fpr_at_95_tpr",
    "fit_temperature",
    "negative_log_likelihood",
    "optimal_aurc",
]
