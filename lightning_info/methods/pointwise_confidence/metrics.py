"""Failure-prediction and calibration metrics as torchmetrics ``Metric``s (DDP-reducible): each
pools its batches and applies the function of the same name in ``functional``."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities.data import dim_zero_cat

from lightning_info.core.validation import require_int
from lightning_info.measures.ranking import (
    PooledScores,
    ranked_average_precision,
    require_nonempty,
)
from lightning_info.methods.pointwise_confidence.functional import (
    FAILURE_CLASSES,
    Optimal,
    _aurc,
    _brier_terms,
    _calibration_error,
    _confidences_and_correct,
    _eps,
    _equal_width_bins,
    _inner_edges,
    _nll_terms,
    _optimal_aurc,
    _optimal_kind,
    _probs_and_labels,
    adaptive_calibration_error,
)
from lightning_info.scoring.metrics import PooledAUROCMixin, PooledFPRAtTPRMixin


class _FailureMetric(PooledScores):
    _labels_name = "correct"
    _classes = FAILURE_CLASSES

    def update(self, scores: Tensor, correct: Tensor) -> None:
        """Add a batch: confidence scores ``(N,)`` and whether each prediction is right."""
        self._append(scores, correct)


class FailureAUROC(PooledAUROCMixin, _FailureMetric):
    """Failure-prediction AUROC of the pooled batches; see :func:`failure_auroc`."""

    _metric = "failure-prediction AUROC"


class AUPRSuccess(_FailureMetric):
    """AUPR with correct predictions as positives; see :func:`aupr_success`."""

    higher_is_better = True

    def compute(self) -> Tensor:
        scores, correct = self._pooled()
        return ranked_average_precision(scores, correct, "correct", "correct", "AUPR-success")


class AUPRError(_FailureMetric):
    """AUPR with errors as positives, ranked by ``-score``; see :func:`aupr_error`."""

    higher_is_better = True

    def compute(self) -> Tensor:
        scores, correct = self._pooled()
        return ranked_average_precision(-scores, ~correct, "correct", "wrong", "AUPR-error")


class FailureFPRAt95TPR(PooledFPRAtTPRMixin, _FailureMetric):
    """FPR@95TPR for failure prediction; see :func:`failure_fpr_at_95_tpr`.

    Args:
        tpr_level: the TPR to reach, in ``(0, 1]``.
        **kwargs: passed to :class:`torchmetrics.Metric`.
    """


class AURC(_FailureMetric):
    """Area under the risk-coverage curve of the pooled batches; see :func:`aurc`."""

    higher_is_better = False

    def compute(self) -> Tensor:
        return _aurc(*self._pooled())


class EAURC(_FailureMetric):
    """Excess AURC; see :func:`e_aurc`.

    Args:
        optimal: ``"discrete"`` (default, exact) or ``"continuous"`` (``(1 - a) + a ln a``).
        **kwargs: passed to :class:`torchmetrics.Metric`.
    """

    higher_is_better = False

    def __init__(self, optimal: Optimal = "discrete", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.optimal = _optimal_kind(optimal, "optimal")

    def compute(self) -> Tensor:
        scores, correct = self._pooled()
        return _aurc(scores, correct) - _optimal_aurc(correct, self.optimal)


class ExpectedCalibrationError(Metric):
    """Equal-width ECE of the pooled batches; see :func:`expected_calibration_error`.

    Keeps per-bin counts and sums (``sum`` states), so memory does not grow with the data
    (torchmetrics' ``BinaryCalibrationError`` keeps every confidence in ``cat`` states and bins
    them left-closed; see :func:`expected_calibration_error`).

    Args:
        n_bins: number of equal-width bins.
        **kwargs: passed to :class:`torchmetrics.Metric`.
    """

    is_differentiable = False
    higher_is_better = False
    full_state_update = False

    bin_count: Tensor
    bin_confidence: Tensor
    bin_correct: Tensor

    def __init__(self, n_bins: int = 10, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.n_bins = require_int(n_bins, "n_bins", 1)
        zeros = torch.zeros(self.n_bins, dtype=torch.float64)
        self.add_state(
            "bin_count", torch.zeros(self.n_bins, dtype=torch.long), dist_reduce_fx="sum"
        )
        self.add_state("bin_confidence", zeros.clone(), dist_reduce_fx="sum")
        self.add_state("bin_correct", zeros.clone(), dist_reduce_fx="sum")

    def update(self, confidences: Tensor, correct: Tensor) -> None:
        """Add a batch: predicted-class confidences ``(N,)`` in ``[0, 1]`` and correctness."""
        edges = _inner_edges(confidences, self.n_bins)
        confidences, correct = _confidences_and_correct(confidences, correct, allow_empty=True)
        counts, conf_sums, correct_sums = _equal_width_bins(confidences, correct, edges)
        self.bin_count = self.bin_count + counts
        self.bin_confidence = self.bin_confidence + conf_sums
        self.bin_correct = self.bin_correct + correct_sums

    def compute(self) -> Tensor:
        total = self.bin_count.sum()
        require_nonempty(int(total), "confidences")
        return _calibration_error(self.bin_confidence, self.bin_correct, total)


class AdaptiveCalibrationError(Metric):
    """Equal-mass ECE of the pooled batches (``cat`` states); see
    :func:`adaptive_calibration_error`.

    Args:
        n_bins: number of equal-mass bins.
        **kwargs: passed to :class:`torchmetrics.Metric`.
    """

    is_differentiable = False
    higher_is_better = False
    full_state_update = False

    confidences: list[Tensor] | Tensor
    correct: list[Tensor] | Tensor

    def __init__(self, n_bins: int = 10, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.n_bins = require_int(n_bins, "n_bins", 1)
        self.add_state("confidences", default=[], dist_reduce_fx="cat")
        self.add_state("correct", default=[], dist_reduce_fx="cat")
        self.set_dtype(torch.float64)  # as in PooledScores: empty processes gather float64

    def update(self, confidences: Tensor, correct: Tensor) -> None:
        """Add a batch: predicted-class confidences ``(N,)`` in ``[0, 1]`` and correctness."""
        confidences, correct = _confidences_and_correct(confidences, correct, allow_empty=True)
        self.confidences.append(confidences)
        self.correct.append(correct.double())

    def compute(self) -> Tensor:
        if isinstance(self.confidences, list) and not self.confidences:
            raise ValueError(
                "AdaptiveCalibrationError has no samples: call `update(...)` before `compute()`."
            )
        confidences = dim_zero_cat(self.confidences)
        correct = dim_zero_cat(self.correct).bool()
        return adaptive_calibration_error(confidences, correct, n_bins=self.n_bins)


class _MeanOverSamples(Metric):
    is_differentiable = False
    higher_is_better = False
    full_state_update = False

    total: Tensor
    count: Tensor

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.add_state("total", torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("count", torch.tensor(0), dist_reduce_fx="sum")

    def _terms(self, probs: Tensor, labels: Tensor) -> Tensor:
        raise NotImplementedError

    def update(self, probs: Tensor, labels: Tensor) -> None:
        """Add a batch: class probabilities ``(N, K)`` and true classes ``(N,)``."""
        probs, labels = _probs_and_labels(probs, labels, allow_empty=True)
        self.total = self.total + self._terms(probs, labels).sum()
        self.count = self.count + labels.numel()

    def compute(self) -> Tensor:
        require_nonempty(int(self.count), "probs")
        return self.total / self.count


class NegativeLogLikelihood(_MeanOverSamples):
    """Mean NLL of the pooled batches; see :func:`negative_log_likelihood`.

    Args:
        eps: floor on the probability of the true class (default 0: no clipping).
        **kwargs: passed to :class:`torchmetrics.Metric`.
    """

    def __init__(self, eps: float = 0.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.eps = _eps(eps)

    def _terms(self, probs: Tensor, labels: Tensor) -> Tensor:
        return _nll_terms(probs, labels, self.eps)


class BrierScore(_MeanOverSamples):
    """Multiclass Brier score of the pooled batches; see :func:`brier_score`."""

    def _terms(self, probs: Tensor, labels: Tensor) -> Tensor:
        return _brier_terms(probs, labels)
