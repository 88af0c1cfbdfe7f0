"""Failure-prediction, OOD-detection and calibration metrics for arbitrary confidence scores.

A score ``s_i`` is any real number where higher means "more confident the prediction is right"
(failure prediction) or "more in-distribution" (OOD detection): max-softmax, negative entropy,
energy, PVI, a Mahalanobis distance with its sign flipped... Only the ORDER of the scores enters
the ranking metrics (AUROC, AUPR, AURC, FPR@TPR), so they accept ``+-inf`` but reject NaN. The
calibration metrics (ECE, adaptive ECE, NLL, Brier) need probabilities.

Conventions. A sample is a positive when ``y_i = 1``: a correct prediction for failure prediction
(``correct``), an in-distribution input for OOD detection. For a threshold ``t`` the samples with
``s_i >= t`` are predicted positive; thresholds run over the distinct scores, so tied samples are
always accepted or rejected together, as in scikit-learn. With ``P`` positives, ``Q`` negatives,
``TP(t) = #{y_i = 1, s_i >= t}`` and ``FP(t) = #{y_i = 0, s_i >= t}``:

    AUROC     = P(s+ > s-) + 1/2 P(s+ = s-)       (trapezoid under the ROC curve through the tie
                                                  groups; equals sklearn ``roc_auc_score``)
    AP        = sum_k (R_k - R_{k-1}) * Prec_k,    R_k = TP(t_k)/P, Prec_k = TP/(TP + FP) at the
                                                  k-th highest distinct score t_k, R_0 = 0 (equals
                                                  sklearn ``average_precision_score``)
    FPR@TPR   = min { FP(t)/Q : TP(t)/P >= level } (the FPR at the highest threshold whose TPR
                                                  reaches ``level``; with sklearn's ``roc_curve``
                                                  this is ``fpr[argmax(tpr >= level)]``, as in
                                                  OpenOOD; pass ``drop_intermediate=False`` there
                                                  when scores tie, or a collinear point it drops
                                                  can move the answer)

AUPR-success is AP with the correct predictions as positives ranked by ``s``; AUPR-error is AP
with the errors as positives ranked by ``-s``.

Risk-coverage (Geifman and El-Yaniv 2017; Geifman et al. 2019). Sort the ``N`` samples by score,
highest first; the selective risk at coverage ``i/N`` is the error rate among the top ``i``:

    AURC = (1/N) sum_{i=1..N} err(i) / i

Ties: the order of tied samples is not defined by the scores, so ``err(i)`` inside a tie group is
its EXPECTATION over a uniformly random order of the group: a group of ``m`` samples holding ``e``
errors, preceded by ``E`` errors, contributes ``err = E + j e / m`` after its first ``j`` samples.
The result is the mean AURC over all tie-breaking orders, does not depend on input order, and is
the plain definition when there are no ties.

The optimal AURC ranks every error after every correct prediction. With ``C`` correct predictions
its exact value on ``N`` samples is (the DEFAULT, ``"discrete"``)

    AURC*_discrete   = (1/N) sum_{i=C+1..N} (i - C) / i,

and its continuous approximation ``(N -> inf``, accuracy ``a = C/N``), the formula of Geifman et
al. (2019) quoted in most papers, is ``AURC*_continuous = (1 - a) + a ln a``. Since the selective
risk ``1 - a/c`` grows with coverage ``c`` the discrete value is a right Riemann sum of that
integral: ``0 <= AURC*_discrete - AURC*_continuous <= (1 - a)/N``. ``E-AURC = AURC - AURC*``
uses the exact discrete optimum by default, so that the best possible ranking scores exactly 0;
``optimal="continuous"`` gives the papers' number (larger by at most ``(1 - a)/N``).

Calibration, from the confidence ``c_i in [0, 1]`` of the predicted class and correctness
``y_i``: with bins ``B_m``,

    ECE = sum_m (|B_m| / N) |acc(B_m) - conf(B_m)| = (1/N) sum_m |sum_{B_m} y_i - sum_{B_m} c_i|.

Equal-width bins (:func:`expected_calibration_error`) are ``B_m = {(m-1)/M < c <= m/M}`` (Guo et
al. 2017), with ``c = 0`` in the first bin and the edges ``m/M`` rounded to the dtype of the
confidences (a float32 ``0.2`` is on an edge, not above it). torchmetrics'
``MulticlassCalibrationError(norm="l1")`` uses left-closed bins and gives ``c = 1`` a bin of its
own, so the two agree unless a confidence sits exactly on a bin edge.

Equal-mass bins (:func:`adaptive_calibration_error`) sort the samples by confidence and cut them
into ``M`` runs of consecutive samples whose sizes differ by at most one (the first ``N mod M``
runs hold one more, as ``torch.tensor_split``). Tied confidences that straddle a cut count with
the mean correctness of their tie group, so the result does not depend on input order.

From a probability matrix ``p`` ``(N, K)`` and labels ``y`` ``(N,)``:
``NLL = -(1/N) sum_i ln p_{i, y_i}`` and ``Brier = (1/N) sum_i sum_k (p_ik - [k = y_i])^2``.

Every function returns a 0-dim float64 tensor on the device of its input. The Metric classes pool
their inputs over batches (``cat`` states for the ranking and adaptive metrics, ``sum`` states for
ECE, NLL and Brier, so they all work under DDP) and apply the same function to the pooled data.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities.data import dim_zero_cat

from lightning_info.core.validation import require_finite, require_int

ArrayLike = Tensor | Sequence[float]
Optimal = Literal["discrete", "continuous"]

_FAILURE = ("correct", "wrong")
_OOD = ("in-distribution", "out-of-distribution")


# --------------------------------------------------------------------------------------------
# Generic binary ranking metrics (positives: labels == 1)
# --------------------------------------------------------------------------------------------


def binary_auroc(scores: ArrayLike, labels: ArrayLike) -> Tensor:
    """Area under the ROC curve, ``P(s+ > s-) + 1/2 P(s+ = s-)``; positives are ``labels == 1``.

    Equal to sklearn's ``roc_auc_score(labels, scores)`` (ties as a diagonal ROC segment).
    Raises ``ValueError`` when only one class is present.
    """
    scores, labels = _scores_and_labels(scores, labels, "scores", "labels")
    return _auroc(scores, labels, "labels", ("positive", "negative"), "AUROC")


def average_precision(scores: ArrayLike, labels: ArrayLike) -> Tensor:
    """Average precision ``sum_k (R_k - R_{k-1}) Prec_k`` over distinct thresholds, highest first.

    Equal to sklearn's ``average_precision_score(labels, scores)``. Needs at least one positive.
    """
    scores, labels = _scores_and_labels(scores, labels, "scores", "labels")
    return _average_precision(scores, labels, "labels", "positive", "AP")


def fpr_at_tpr(scores: ArrayLike, labels: ArrayLike, *, tpr_level: float = 0.95) -> Tensor:
    """``min { FPR(t) : TPR(t) >= tpr_level }`` over thresholds ``t`` (``s >= t`` = positive).

    Equal to ``fpr[argmax(tpr >= tpr_level)]`` on sklearn's
    ``roc_curve(labels, scores, drop_intermediate=False)``. Needs both classes.
    """
    level = _tpr_level(tpr_level)
    scores, labels = _scores_and_labels(scores, labels, "scores", "labels")
    return _fpr_at_tpr(scores, labels, level, "labels", ("positive", "negative"))


class UndefinedMetricError(ValueError):
    """A ranking metric has no value on these labels (e.g. AUROC when every prediction is right)."""


# --------------------------------------------------------------------------------------------
# Failure prediction: scores (N,), correct (N,) bool or 0/1
# --------------------------------------------------------------------------------------------


def failure_auroc(scores: ArrayLike, correct: ArrayLike) -> Tensor:
    """Failure-prediction AUROC: the chance a correct prediction outscores a wrong one (ties 1/2).

    Args:
        scores: confidence scores ``(N,)``, any real numbers, higher = more confident.
        correct: whether each prediction is right, ``(N,)`` bool or 0/1.

    Raises ``ValueError`` if all predictions are correct or all wrong (AUROC is undefined).
    """
    scores, correct = _scores_and_labels(scores, correct, "scores", "correct")
    return _auroc(scores, correct, "correct", _FAILURE, "failure-prediction AUROC")


def aupr_success(scores: ArrayLike, correct: ArrayLike) -> Tensor:
    """AUPR-success: average precision with correct predictions as positives, ranked by score."""
    scores, correct = _scores_and_labels(scores, correct, "scores", "correct")
    return _average_precision(scores, correct, "correct", "correct", "AUPR-success")


def aupr_error(scores: ArrayLike, correct: ArrayLike) -> Tensor:
    """AUPR-error: average precision with errors as positives, ranked by ``-score``."""
    scores, correct = _scores_and_labels(scores, correct, "scores", "correct")
    return _average_precision(-scores, ~correct, "correct", "wrong", "AUPR-error")


def failure_fpr_at_95_tpr(
    scores: ArrayLike, correct: ArrayLike, *, tpr_level: float = 0.95
) -> Tensor:
    """FPR@95TPR for failure prediction: the fraction of errors accepted at the highest threshold
    that still accepts ``tpr_level`` of the correct predictions (see :func:`fpr_at_tpr`)."""
    level = _tpr_level(tpr_level)
    scores, correct = _scores_and_labels(scores, correct, "scores", "correct")
    return _fpr_at_tpr(scores, correct, level, "correct", _FAILURE)


def aurc(scores: ArrayLike, correct: ArrayLike) -> Tensor:
    """Area under the risk-coverage curve, ``(1/N) sum_{i=1..N} err(i) / i``.

    ``err(i)`` counts the errors among the ``i`` highest scores; inside a tie group it is the
    expectation over a random order of the group (see the module docstring), so the result does
    not depend on input order. In ``[0, 1]``; 0 when every prediction is correct.
    """
    scores, correct = _scores_and_labels(scores, correct, "scores", "correct")
    return _aurc(scores, correct)


def optimal_aurc(correct: ArrayLike, *, kind: Optimal = "discrete") -> Tensor:
    """AURC of the ideal ranking (every error after every correct prediction).

    Args:
        correct: whether each prediction is right, ``(N,)`` bool or 0/1; only ``N`` and the
            number ``C`` of correct ones matter.
        kind: ``"discrete"`` (default), the exact value ``(1/N) sum_{i=C+1..N} (i - C)/i``, or
            ``"continuous"``, the large-``N`` approximation ``(1 - a) + a ln a`` with
            ``a = C/N`` (``0 ln 0 = 0``) of Geifman et al. (2019).
    """
    correct = _binary(correct, "correct")
    _require_nonempty(correct.numel(), "correct")
    return _optimal_aurc(correct, _optimal_kind(kind, "kind"))


def e_aurc(scores: ArrayLike, correct: ArrayLike, *, optimal: Optimal = "discrete") -> Tensor:
    """Excess AURC, ``AURC - AURC*``; ``optimal`` picks the optimum (see :func:`optimal_aurc`).

    With the default exact ``"discrete"`` optimum the ideal ranking scores exactly 0; the
    ``"continuous"`` one, ``(1 - a) + a ln a``, gives a value larger by at most ``(1 - a)/N``.
    """
    kind = _optimal_kind(optimal, "optimal")
    scores, correct = _scores_and_labels(scores, correct, "scores", "correct")
    return _aurc(scores, correct) - _optimal_aurc(correct, kind)


# --------------------------------------------------------------------------------------------
# OOD detection: in-distribution = positive
# --------------------------------------------------------------------------------------------


def ood_auroc(scores_in: ArrayLike, scores_out: ArrayLike) -> Tensor:
    """OOD AUROC: the chance an in-distribution score exceeds an OOD one (ties count 1/2).

    Args:
        scores_in: scores of in-distribution inputs ``(N_in,)``, higher = more in-distribution.
        scores_out: scores of out-of-distribution inputs ``(N_out,)``.
    """
    scores, is_in = _in_out(scores_in, scores_out)
    return _auroc(scores, is_in, "is_in_distribution", _OOD, "OOD AUROC")


def fpr_at_95_tpr(
    scores_in: ArrayLike, scores_out: ArrayLike, *, tpr_level: float = 0.95
) -> Tensor:
    """FPR@95TPR for OOD detection: the fraction of OOD inputs scoring at or above the highest
    threshold that keeps ``tpr_level`` of the in-distribution inputs (see :func:`fpr_at_tpr`)."""
    level = _tpr_level(tpr_level)
    scores, is_in = _in_out(scores_in, scores_out)
    return _fpr_at_tpr(scores, is_in, level, "is_in_distribution", _OOD)


# --------------------------------------------------------------------------------------------
# Calibration
# --------------------------------------------------------------------------------------------


def top_label_confidence(probs: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """Confidence of the predicted class ``max_k p_ik`` (in the dtype of ``probs``, which sets the
    rounding of the ECE bin edges) and whether ``argmax_k p_ik == y_i``."""
    _, labels = _probs_and_labels(probs, labels)
    confidences, predictions = torch.as_tensor(probs).detach().max(dim=1)
    return confidences, predictions == labels


def expected_calibration_error(
    confidences: ArrayLike, correct: ArrayLike, *, n_bins: int = 10
) -> Tensor:
    """ECE with ``n_bins`` equal-width bins ``((m-1)/M, m/M]``:
    ``(1/N) sum_m |sum_{B_m} y_i - sum_{B_m} c_i|``.

    Args:
        confidences: confidence of the predicted class ``(N,)``, in ``[0, 1]``.
        correct: whether each prediction is right, ``(N,)`` bool or 0/1.
        n_bins: number of bins ``M``.
    """
    n_bins = require_int(n_bins, "n_bins", 1)
    edges = _inner_edges(confidences, n_bins)
    confidences, correct = _confidences_and_correct(confidences, correct)
    counts, conf_sums, correct_sums = _equal_width_bins(confidences, correct, edges)
    return _calibration_error(conf_sums, correct_sums, counts.sum())


def adaptive_calibration_error(
    confidences: ArrayLike, correct: ArrayLike, *, n_bins: int = 10
) -> Tensor:
    """Adaptive (equal-mass) ECE: the ECE formula over ``n_bins`` runs of samples sorted by
    confidence, of sizes differing by at most one; tied confidences across a cut count with the
    mean correctness of their tie group (see the module docstring). Bins left empty when
    ``N < n_bins`` weigh nothing."""
    n_bins = require_int(n_bins, "n_bins", 1)
    confidences, correct = _confidences_and_correct(confidences, correct)
    n = confidences.numel()
    order = torch.argsort(confidences, stable=True)
    sorted_conf = confidences[order]
    tie_mean_correct = _tie_group_means(sorted_conf, correct[order].double())
    sizes = torch.full((n_bins,), n // n_bins, dtype=torch.long, device=confidences.device)
    sizes[: n % n_bins] += 1
    bins = torch.repeat_interleave(torch.arange(n_bins, device=confidences.device), sizes)
    conf_sums = _bin_sums(sorted_conf, bins, n_bins)
    correct_sums = _bin_sums(tie_mean_correct, bins, n_bins)
    return _calibration_error(conf_sums, correct_sums, n)


def negative_log_likelihood(probs: Tensor, labels: Tensor, *, eps: float = 0.0) -> Tensor:
    """``NLL = -(1/N) sum_i ln max(p_{i, y_i}, eps)``, in nats.

    Args:
        probs: class probabilities ``(N, K)``, rows summing to 1 (apply softmax to logits).
        labels: true classes ``(N,)``, integers in ``[0, K)``.
        eps: floor on the probability of the true class; the default 0 keeps the definition (a
            zero probability gives ``inf``); sklearn's ``log_loss`` clips at the dtype's eps.
    """
    eps = _eps(eps)
    probs, labels = _probs_and_labels(probs, labels)
    return _nll_terms(probs, labels, eps).mean()


def brier_score(probs: Tensor, labels: Tensor) -> Tensor:
    """Multiclass Brier score ``(1/N) sum_i sum_k (p_ik - [k = y_i])^2``, in ``[0, 2]``."""
    probs, labels = _probs_and_labels(probs, labels)
    return _brier_terms(probs, labels).mean()


# --------------------------------------------------------------------------------------------
# Metric classes
# --------------------------------------------------------------------------------------------


class _PooledScores(Metric):
    """Concatenates ``(scores, labels)`` over batches (and processes, with ``cat``)."""

    is_differentiable = False
    full_state_update = False
    _labels_name = "labels"

    scores: list[Tensor] | Tensor
    labels: list[Tensor] | Tensor

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.add_state("scores", default=[], dist_reduce_fx="cat")
        self.add_state("labels", default=[], dist_reduce_fx="cat")
        # a process that saw no batch sends an empty tensor of the metric's dtype to the gather;
        # every cat state is float64 so that it matches the others
        self.set_dtype(torch.float64)

    def _append(self, scores: ArrayLike, labels: ArrayLike) -> None:
        scores, labels = _scores_and_labels(
            scores, labels, "scores", self._labels_name, allow_empty=True
        )
        self.scores.append(scores)
        self.labels.append(labels.double())

    def _pooled(self) -> tuple[Tensor, Tensor]:
        if isinstance(self.scores, list) and not self.scores:
            raise ValueError(
                f"{type(self).__name__} has no samples: call `update(...)` before `compute()`."
            )
        scores = dim_zero_cat(self.scores)
        labels = dim_zero_cat(self.labels).bool()
        _require_nonempty(scores.numel(), "scores")
        return scores, labels


class _FailureMetric(_PooledScores):
    _labels_name = "correct"

    def update(self, scores: Tensor, correct: Tensor) -> None:
        """Add a batch: confidence scores ``(N,)`` and whether each prediction is right."""
        self._append(scores, correct)


class _OODMetric(_PooledScores):
    _labels_name = "is_in_distribution"

    def update(self, scores: Tensor, is_in_distribution: Tensor) -> None:
        """Add a batch: scores ``(N,)`` and whether each input is in-distribution (bool or 0/1)."""
        self._append(scores, is_in_distribution)


class FailureAUROC(_FailureMetric):
    """Failure-prediction AUROC of the pooled batches; see :func:`failure_auroc`."""

    higher_is_better = True

    def compute(self) -> Tensor:
        scores, correct = self._pooled()
        return _auroc(scores, correct, "correct", _FAILURE, "failure-prediction AUROC")


class AUPRSuccess(_FailureMetric):
    """AUPR with correct predictions as positives; see :func:`aupr_success`."""

    higher_is_better = True

    def compute(self) -> Tensor:
        scores, correct = self._pooled()
        return _average_precision(scores, correct, "correct", "correct", "AUPR-success")


class AUPRError(_FailureMetric):
    """AUPR with errors as positives, ranked by ``-score``; see :func:`aupr_error`."""

    higher_is_better = True

    def compute(self) -> Tensor:
        scores, correct = self._pooled()
        return _average_precision(-scores, ~correct, "correct", "wrong", "AUPR-error")


class FailureFPRAt95TPR(_FailureMetric):
    """FPR@95TPR for failure prediction; see :func:`failure_fpr_at_95_tpr`.

    Args:
        tpr_level: the TPR to reach, in ``(0, 1]``.
        **kwargs: passed to :class:`torchmetrics.Metric`.
    """

    higher_is_better = False

    def __init__(self, tpr_level: float = 0.95, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tpr_level = _tpr_level(tpr_level)

    def compute(self) -> Tensor:
        scores, correct = self._pooled()
        return _fpr_at_tpr(scores, correct, self.tpr_level, "correct", _FAILURE)


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


class OODAUROC(_OODMetric):
    """OOD AUROC (in-distribution = positive) of the pooled batches; see :func:`ood_auroc`."""

    higher_is_better = True

    def compute(self) -> Tensor:
        scores, is_in = self._pooled()
        return _auroc(scores, is_in, "is_in_distribution", _OOD, "OOD AUROC")


class OODFPRAt95TPR(_OODMetric):
    """OOD FPR@95TPR (in-distribution = positive); see :func:`fpr_at_95_tpr`.

    Args:
        tpr_level: the TPR to reach, in ``(0, 1]``.
        **kwargs: passed to :class:`torchmetrics.Metric`.
    """

    higher_is_better = False

    def __init__(self, tpr_level: float = 0.95, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tpr_level = _tpr_level(tpr_level)

    def compute(self) -> Tensor:
        scores, is_in = self._pooled()
        return _fpr_at_tpr(scores, is_in, self.tpr_level, "is_in_distribution", _OOD)


class ExpectedCalibrationError(Metric):
    """Equal-width ECE of the pooled batches; see :func:`expected_calibration_error`.

    Keeps per-bin counts and sums (``sum`` states), so memory does not grow with the data.

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
        self.bin_count += counts
        self.bin_confidence += conf_sums
        self.bin_correct += correct_sums

    def compute(self) -> Tensor:
        total = self.bin_count.sum()
        _require_nonempty(int(total), "confidences")
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
        self.set_dtype(torch.float64)  # as in _PooledScores: empty processes gather float64

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
        self.total += self._terms(probs, labels).sum()
        self.count += labels.numel()

    def compute(self) -> Tensor:
        _require_nonempty(int(self.count), "probs")
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


# --------------------------------------------------------------------------------------------
# Internals
# --------------------------------------------------------------------------------------------


def _tie_group_ends(sorted_values: Tensor) -> Tensor:
    """Index of the last element of each run of equal values in a sorted 1-D tensor."""
    last = torch.tensor([sorted_values.numel() - 1], device=sorted_values.device)
    changes = torch.nonzero(sorted_values[1:] != sorted_values[:-1]).flatten()
    return torch.cat([changes, last])


def _threshold_counts(scores: Tensor, positive: Tensor) -> tuple[Tensor, Tensor]:
    """``TP(t_k)`` and ``FP(t_k)`` at each distinct score ``t_k``, highest first (float64)."""
    order = torch.argsort(scores, descending=True, stable=True)
    ends = _tie_group_ends(scores[order])
    tp = torch.cumsum(positive[order].long(), 0)[ends]
    fp = ends + 1 - tp
    return tp.double(), fp.double()


def _auroc(
    scores: Tensor, labels: Tensor, labels_name: str, classes: tuple[str, str], metric: str
) -> Tensor:
    _require_both_classes(labels, labels_name, classes, metric)
    tp, fp = _threshold_counts(scores, labels)
    zero = tp.new_zeros(1)
    tp, fp = torch.cat([zero, tp]), torch.cat([zero, fp])
    area = ((fp[1:] - fp[:-1]) * (tp[1:] + tp[:-1])).sum() / 2
    return area / (tp[-1] * fp[-1])


def _average_precision(
    scores: Tensor, positive: Tensor, labels_name: str, positive_word: str, metric: str
) -> Tensor:
    if not positive.any():
        raise UndefinedMetricError(
            f"{metric} is undefined: no sample in `{labels_name}` is {positive_word}, so recall "
            "has no denominator; it needs at least one."
        )
    tp, fp = _threshold_counts(scores, positive)
    recall_steps = torch.diff(tp, prepend=tp.new_zeros(1)) / tp[-1]
    return (recall_steps * tp / (tp + fp)).sum()


def _fpr_at_tpr(
    scores: Tensor, labels: Tensor, level: float, labels_name: str, classes: tuple[str, str]
) -> Tensor:
    _require_both_classes(labels, labels_name, classes, f"FPR@{100 * level:g}TPR")
    tp, fp = _threshold_counts(scores, labels)
    first = torch.nonzero(tp / tp[-1] >= level)[0, 0]
    return fp[first] / fp[-1]


def _aurc(scores: Tensor, correct: Tensor) -> Tensor:
    n = scores.numel()
    order = torch.argsort(scores, descending=True, stable=True)
    ends = _tie_group_ends(scores[order])
    sizes = torch.diff(ends, prepend=ends.new_full((1,), -1))
    errors_through = torch.cumsum((~correct[order]).double(), 0)[ends]
    group_errors = torch.diff(errors_through, prepend=errors_through.new_zeros(1))
    group = torch.repeat_interleave(torch.arange(ends.numel(), device=scores.device), sizes)
    position = torch.arange(1, n + 1, device=scores.device, dtype=torch.float64)
    into_group = position - (ends[group] + 1 - sizes[group])
    expected_errors = (errors_through - group_errors)[group] + (
        into_group * group_errors[group] / sizes[group]
    )
    return (expected_errors / position).mean()


def _optimal_aurc(correct: Tensor, kind: str) -> Tensor:
    n = correct.numel()
    n_correct = int(correct.sum())
    if kind == "continuous":
        acc = torch.tensor(n_correct / n, dtype=torch.float64, device=correct.device)
        acc_log_acc = torch.special.xlogy(acc, acc)
        return 1 - acc + acc_log_acc
    i = torch.arange(n_correct + 1, n + 1, dtype=torch.float64, device=correct.device)
    return ((i - n_correct) / i).sum() / n


def _inner_edges(confidences: ArrayLike, n_bins: int) -> Tensor:
    """The edges ``m/M``, ``m = 1..M-1``, rounded to the floating dtype of ``confidences`` (so a
    float32 ``0.2`` lies ON the edge ``0.2``, not above it), returned as float64."""
    dtype = confidences.dtype if isinstance(confidences, Tensor) else torch.float64
    device = confidences.device if isinstance(confidences, Tensor) else None
    edges = torch.arange(1, n_bins, dtype=torch.float64, device=device) / n_bins
    return edges.to(dtype).double() if dtype.is_floating_point else edges


def _equal_width_bins(
    confidences: Tensor, correct: Tensor, inner_edges: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """Per-bin counts, confidence sums and correct counts for bins ``((m-1)/M, m/M]``."""
    n_bins = inner_edges.numel() + 1
    bins = torch.bucketize(confidences, inner_edges, right=False)
    counts = torch.bincount(bins, minlength=n_bins)
    return counts, _bin_sums(confidences, bins, n_bins), _bin_sums(correct.double(), bins, n_bins)


def _bin_sums(values: Tensor, bins: Tensor, n_bins: int) -> Tensor:
    sums = torch.zeros(n_bins, dtype=torch.float64, device=values.device)
    return sums.scatter_add_(0, bins, values)


def _calibration_error(conf_sums: Tensor, correct_sums: Tensor, n: int | Tensor) -> Tensor:
    return (correct_sums - conf_sums).abs().sum() / n


def _tie_group_means(sorted_values: Tensor, weights: Tensor) -> Tensor:
    """Each entry of ``weights`` replaced by its mean over the run of equal ``sorted_values``."""
    ends = _tie_group_ends(sorted_values)
    sizes = torch.diff(ends, prepend=ends.new_full((1,), -1))
    totals = torch.diff(torch.cumsum(weights, 0)[ends], prepend=weights.new_zeros(1))
    return torch.repeat_interleave(totals / sizes, sizes)


def _nll_terms(probs: Tensor, labels: Tensor, eps: float) -> Tensor:
    true_class = probs.gather(1, labels[:, None]).squeeze(1)
    return -torch.log(true_class.clamp_min(eps))


def _brier_terms(probs: Tensor, labels: Tensor) -> Tensor:
    onehot = torch.nn.functional.one_hot(labels, probs.shape[1]).double()
    return ((probs - onehot) ** 2).sum(dim=1)


# -- validation --------------------------------------------------------------------------------


def _as_1d(values: ArrayLike, name: str) -> Tensor:
    # numpy keeps Python floats in float64, where torch.as_tensor would round them to float32
    tensor = values if isinstance(values, Tensor) else torch.as_tensor(np.asarray(values))
    if tensor.dim() != 1:
        raise ValueError(f"`{name}` must have shape (N,), got {tuple(tensor.shape)}.")
    return tensor.detach()


def _require_nonempty(n: int, name: str) -> None:
    if n == 0:
        raise ValueError(f"`{name}` is empty: pass at least one sample.")


def _require_same_length(a: Tensor, b: Tensor, name_a: str, name_b: str) -> None:
    if a.numel() != b.numel():
        raise ValueError(
            f"`{name_a}` and `{name_b}` must have the same length, got {a.numel()} and {b.numel()}."
        )


def _real_scores(values: ArrayLike, name: str) -> Tensor:
    scores = _as_1d(values, name)
    if scores.dtype == torch.bool or scores.is_complex():
        raise TypeError(f"`{name}` must hold real numbers, got dtype {scores.dtype}.")
    nan = int(torch.isnan(scores).sum()) if scores.is_floating_point() else 0
    if nan:
        raise ValueError(
            f"`{name}` contains {nan} NaN value(s); drop or impute them before scoring."
        )
    return scores.double()


def _binary(values: ArrayLike, name: str) -> Tensor:
    labels = _as_1d(values, name)
    if labels.dtype == torch.bool:
        return labels
    if labels.is_complex() or not ((labels == 0) | (labels == 1)).all():
        found = torch.unique(labels[(labels != 0) & (labels != 1)])[:5].tolist()
        raise ValueError(f"`{name}` must hold only 0/1 or True/False, found {found}.")
    return labels == 1


def _scores_and_labels(
    scores: ArrayLike,
    labels: ArrayLike,
    scores_name: str,
    labels_name: str,
    *,
    allow_empty: bool = False,
) -> tuple[Tensor, Tensor]:
    scores_t = _as_1d(scores, scores_name)
    labels_t = _as_1d(labels, labels_name).to(scores_t.device)
    _require_same_length(scores_t, labels_t, scores_name, labels_name)
    if not allow_empty:
        _require_nonempty(scores_t.numel(), scores_name)
    return _real_scores(scores_t, scores_name), _binary(labels_t, labels_name)


def _require_both_classes(
    labels: Tensor, labels_name: str, classes: tuple[str, str], metric: str
) -> None:
    n_pos = int(labels.sum())
    if 0 < n_pos < labels.numel():
        return
    present = classes[0] if n_pos else classes[1]
    raise UndefinedMetricError(
        f"{metric} is undefined: only one class is present in `{labels_name}` (all "
        f"{labels.numel()} samples are {present}); it needs at least one {classes[0]} and one "
        f"{classes[1]} sample."
    )


def _in_out(scores_in: ArrayLike, scores_out: ArrayLike) -> tuple[Tensor, Tensor]:
    s_in = _real_scores(scores_in, "scores_in")
    s_out = _real_scores(scores_out, "scores_out").to(s_in.device)
    for name, values in (("scores_in", s_in), ("scores_out", s_out)):
        if values.numel() == 0:
            raise ValueError(
                f"`{name}` is empty, so only one class is present: OOD metrics need at least one "
                "in-distribution and one out-of-distribution score."
            )
    is_in = torch.cat(
        [torch.ones_like(s_in, dtype=torch.bool), torch.zeros_like(s_out, dtype=torch.bool)]
    )
    return torch.cat([s_in, s_out]), is_in


def _confidences_and_correct(
    confidences: ArrayLike, correct: ArrayLike, *, allow_empty: bool = False
) -> tuple[Tensor, Tensor]:
    conf, correct_t = _scores_and_labels(
        confidences, correct, "confidences", "correct", allow_empty=allow_empty
    )
    if not torch.isfinite(conf).all() or ((conf < 0) | (conf > 1)).any():
        bad = conf[~((conf >= 0) & (conf <= 1))][:3].tolist()
        raise ValueError(
            f"`confidences` must be probabilities in [0, 1] (e.g. the max softmax), found {bad}; "
            "calibration needs probabilities, not arbitrary scores."
        )
    return conf, correct_t


def _probs_and_labels(
    probs: Tensor, labels: Tensor, *, allow_empty: bool = False
) -> tuple[Tensor, Tensor]:
    probs = torch.as_tensor(probs).detach()
    if probs.dim() != 2 or not probs.is_floating_point():
        raise ValueError(
            f"`probs` must be a floating-point (N, K) tensor, got shape {tuple(probs.shape)} "
            f"and dtype {probs.dtype}."
        )
    labels = _as_1d(labels, "labels").to(probs.device)
    if labels.is_floating_point() or labels.dtype == torch.bool or labels.is_complex():
        raise TypeError(f"`labels` must hold integer classes, got dtype {labels.dtype}.")
    if labels.numel() != probs.shape[0]:
        raise ValueError(
            f"`probs` and `labels` must have the same length, got {probs.shape[0]} and "
            f"{labels.numel()}."
        )
    if not allow_empty:
        _require_nonempty(labels.numel(), "probs")
    probs = probs.double()
    if not torch.isfinite(probs).all() or ((probs < 0) | (probs > 1)).any():
        raise ValueError("`probs` must hold probabilities in [0, 1]; apply softmax to logits.")
    row_sums = probs.sum(dim=1)
    if not torch.allclose(row_sums, torch.ones_like(row_sums), atol=1e-4, rtol=0):
        worst = float((row_sums - 1).abs().max())
        raise ValueError(
            f"each row of `probs` must sum to 1 (off by up to {worst:.3g}); apply softmax to "
            "logits."
        )
    if labels.numel() and (labels.min() < 0 or labels.max() >= probs.shape[1]):
        raise ValueError(f"`labels` must lie in [0, {probs.shape[1]}).")
    return probs, labels.long()


def _tpr_level(value: float) -> float:
    level = require_finite(value, "tpr_level")
    if not 0 < level <= 1:
        raise ValueError(f"`tpr_level` must lie in (0, 1], got {value!r} (0.95, not 95).")
    return level


def _optimal_kind(value: str, name: str) -> str:
    if value not in ("discrete", "continuous"):
        raise ValueError(f"`{name}` must be 'discrete' or 'continuous', got {value!r}.")
    return value


def _eps(value: float) -> float:
    eps = require_finite(value, "eps")
    if not 0 <= eps < 1:
        raise ValueError(f"`eps` must lie in [0, 1), got {value!r}.")
    return eps
