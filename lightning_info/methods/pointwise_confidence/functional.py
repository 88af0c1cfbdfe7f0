"""Failure-prediction and calibration metrics of a confidence score (the functional core of the
pointwise-confidence evaluation).

A score ``s_i`` is any real number where higher means "more confident the prediction is right"
(max-softmax, PVI, ...); the ranking conventions (ties, AUROC, AP, FPR@TPR) are those of
:mod:`lightning_info.measures.ranking`.

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

Every function returns a 0-dim float64 tensor on the device of its input.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from lightning_info.core.validation import require_finite, require_int
from lightning_info.measures.ranking import (
    ArrayLike,
    as_1d,
    binary_labels,
    check_tpr_level,
    ranked_auroc,
    ranked_average_precision,
    ranked_fpr_at_tpr,
    require_nonempty,
    scores_and_labels,
    tie_group_ends,
)

__all__ = [
    "adaptive_calibration_error",
    "aupr_error",
    "aupr_success",
    "aurc",
    "brier_score",
    "e_aurc",
    "expected_calibration_error",
    "failure_auroc",
    "FAILURE_CLASSES",
    "failure_fpr_at_95_tpr",
    "negative_log_likelihood",
    "optimal_aurc",
    "top_label_confidence",
]

Optimal = Literal["discrete", "continuous"]

FAILURE_CLASSES = ("correct", "wrong")


def failure_auroc(scores: ArrayLike, correct: ArrayLike) -> Tensor:
    """Failure-prediction AUROC: the chance a correct prediction outscores a wrong one (ties 1/2).

    Args:
        scores: confidence scores ``(N,)``, any real numbers, higher = more confident.
        correct: whether each prediction is right, ``(N,)`` bool or 0/1.

    Raises ``ValueError`` if all predictions are correct or all wrong (AUROC is undefined).
    """
    scores, correct = scores_and_labels(scores, correct, "scores", "correct")
    return ranked_auroc(scores, correct, "correct", FAILURE_CLASSES, "failure-prediction AUROC")


def aupr_success(scores: ArrayLike, correct: ArrayLike) -> Tensor:
    """AUPR-success: average precision with correct predictions as positives, ranked by score."""
    scores, correct = scores_and_labels(scores, correct, "scores", "correct")
    return ranked_average_precision(scores, correct, "correct", "correct", "AUPR-success")


def aupr_error(scores: ArrayLike, correct: ArrayLike) -> Tensor:
    """AUPR-error: average precision with errors as positives, ranked by ``-score``."""
    scores, correct = scores_and_labels(scores, correct, "scores", "correct")
    return ranked_average_precision(-scores, ~correct, "correct", "wrong", "AUPR-error")


def failure_fpr_at_95_tpr(
    scores: ArrayLike, correct: ArrayLike, *, tpr_level: float = 0.95
) -> Tensor:
    """FPR@95TPR for failure prediction: the fraction of errors accepted at the highest threshold
    that still accepts ``tpr_level`` of the correct predictions (see :func:`fpr_at_tpr`)."""
    level = check_tpr_level(tpr_level)
    scores, correct = scores_and_labels(scores, correct, "scores", "correct")
    return ranked_fpr_at_tpr(scores, correct, level, "correct", FAILURE_CLASSES)


def aurc(scores: ArrayLike, correct: ArrayLike) -> Tensor:
    """Area under the risk-coverage curve, ``(1/N) sum_{i=1..N} err(i) / i``.

    ``err(i)`` counts the errors among the ``i`` highest scores; inside a tie group it is the
    expectation over a random order of the group (see the module docstring), so the result does
    not depend on input order. In ``[0, 1]``; 0 when every prediction is correct.
    """
    scores, correct = scores_and_labels(scores, correct, "scores", "correct")
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
    correct = binary_labels(correct, "correct")
    require_nonempty(correct.numel(), "correct")
    return _optimal_aurc(correct, _optimal_kind(kind, "kind"))


def e_aurc(scores: ArrayLike, correct: ArrayLike, *, optimal: Optimal = "discrete") -> Tensor:
    """Excess AURC, ``AURC - AURC*``; ``optimal`` picks the optimum (see :func:`optimal_aurc`).

    With the default exact ``"discrete"`` optimum the ideal ranking scores exactly 0; the
    ``"continuous"`` one, ``(1 - a) + a ln a``, gives a value larger by at most ``(1 - a)/N``.
    """
    kind = _optimal_kind(optimal, "optimal")
    scores, correct = scores_and_labels(scores, correct, "scores", "correct")
    return _aurc(scores, correct) - _optimal_aurc(correct, kind)


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
    # not torchmetrics' binary_calibration_error: its bins are left-closed with c = 1 alone, so
    # it gives 0.38 where this gives 0.32 for c = [0, .2, .15, 1, .95], y = [0, 1, 0, 1, 0], and
    # 0.0434 against 0.0460 on 1,000 confidences rounded to 2 decimals (3e-17 apart off the edges)
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


def _aurc(scores: Tensor, correct: Tensor) -> Tensor:
    n = scores.numel()
    order = torch.argsort(scores, descending=True, stable=True)
    ends = tie_group_ends(scores[order])
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
    ends = tie_group_ends(sorted_values)
    sizes = torch.diff(ends, prepend=ends.new_full((1,), -1))
    totals = torch.diff(torch.cumsum(weights, 0)[ends], prepend=weights.new_zeros(1))
    return torch.repeat_interleave(totals / sizes, sizes)


def _nll_terms(probs: Tensor, labels: Tensor, eps: float) -> Tensor:
    true_class = probs.gather(1, labels[:, None]).squeeze(1)
    return -torch.log(true_class.clamp_min(eps))


def _brier_terms(probs: Tensor, labels: Tensor) -> Tensor:
    onehot = torch.nn.functional.one_hot(labels, probs.shape[1]).double()
    return ((probs - onehot) ** 2).sum(dim=1)


def _confidences_and_correct(
    confidences: ArrayLike, correct: ArrayLike, *, allow_empty: bool = False
) -> tuple[Tensor, Tensor]:
    conf, correct_t = scores_and_labels(
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
    if isinstance(probs, (str, bytes)):
        raise TypeError(
            f"`probs` must be a floating-point (N, K) tensor, got {type(probs).__name__}."
        )
    probs = torch.as_tensor(probs).detach()
    if probs.dim() != 2 or not probs.is_floating_point():
        raise ValueError(
            f"`probs` must be a floating-point (N, K) tensor, got shape {tuple(probs.shape)} "
            f"and dtype {probs.dtype}."
        )
    labels = as_1d(labels, "labels").to(probs.device)
    if labels.is_floating_point() or labels.dtype == torch.bool or labels.is_complex():
        raise TypeError(f"`labels` must hold integer classes, got dtype {labels.dtype}.")
    if labels.numel() != probs.shape[0]:
        raise ValueError(
            f"`probs` and `labels` must have the same length, got {probs.shape[0]} and "
            f"{labels.numel()}."
        )
    if not allow_empty:
        require_nonempty(labels.numel(), "probs")
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


def _optimal_kind(value: str, name: str) -> str:
    if value not in ("discrete", "continuous"):
        raise ValueError(f"`{name}` must be 'discrete' or 'continuous', got {value!r}.")
    return value


def _eps(value: float) -> float:
    eps = require_finite(value, "eps")
    if not 0 <= eps < 1:
        raise ValueError(f"`eps` must lie in [0, 1), got {value!r}.")
    return eps
