"""Binary ranking metrics shared by the methods that score confidence, OOD inputs or attacks.

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
                                                  this is ``fpr[argmax(tpr >= level)]``, the
                                                  rule of OpenOOD's ``fpr_recall``; pass
                                                  ``drop_intermediate=False`` there when scores
                                                  tie, or a collinear point it drops can move
                                                  the answer). Which class is positive is the
                                                  caller's: OOD detection here takes the
                                                  in-distribution inputs as positive
                                                  (``ood_shaping.metrics``)

Every function returns a 0-dim float64 tensor on the device of its input; ``PooledScores`` is the
torchmetrics base that pools ``(scores, labels)`` over batches and processes (``cat`` states).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torchmetrics.utilities.data import dim_zero_cat

from lightning_info.core.metrics import DtypeKeepingMetric
from lightning_info.core.validation import require_finite

ArrayLike = Tensor | Sequence[float]


def binary_auroc(scores: ArrayLike, labels: ArrayLike) -> Tensor:
    """Area under the ROC curve, ``P(s+ > s-) + 1/2 P(s+ = s-)``; positives are ``labels == 1``.

    Equal to sklearn's ``roc_auc_score(labels, scores)`` (ties as a diagonal ROC segment).
    Raises ``ValueError`` when only one class is present.
    """
    scores, labels = scores_and_labels(scores, labels, "scores", "labels")
    return ranked_auroc(scores, labels, "labels", ("positive", "negative"), "AUROC")


def average_precision(scores: ArrayLike, labels: ArrayLike) -> Tensor:
    """Average precision ``sum_k (R_k - R_{k-1}) Prec_k`` over distinct thresholds, highest first.

    Equal to sklearn's ``average_precision_score(labels, scores)``. Needs at least one positive.
    """
    scores, labels = scores_and_labels(scores, labels, "scores", "labels")
    return ranked_average_precision(scores, labels, "labels", "positive", "AP")


def fpr_at_tpr(scores: ArrayLike, labels: ArrayLike, *, tpr_level: float = 0.95) -> Tensor:
    """``min { FPR(t) : TPR(t) >= tpr_level }`` over thresholds ``t`` (``s >= t`` = positive).

    Equal to ``fpr[argmax(tpr >= tpr_level)]`` on sklearn's
    ``roc_curve(labels, scores, drop_intermediate=False)``. Needs both classes.
    """
    level = check_tpr_level(tpr_level)
    scores, labels = scores_and_labels(scores, labels, "scores", "labels")
    return ranked_fpr_at_tpr(scores, labels, level, "labels", ("positive", "negative"))


class UndefinedMetricError(ValueError):
    """A ranking metric has no value on these labels (e.g. AUROC when every prediction is right)."""


class PooledScores(DtypeKeepingMetric):
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
        scores, labels = scores_and_labels(
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
        require_nonempty(scores.numel(), "scores")
        return scores, labels


def tie_group_ends(sorted_values: Tensor) -> Tensor:
    """Index of the last element of each run of equal values in a sorted 1-D tensor."""
    last = torch.tensor([sorted_values.numel() - 1], device=sorted_values.device)
    changes = torch.nonzero(sorted_values[1:] != sorted_values[:-1]).flatten()
    return torch.cat([changes, last])


# Not torchmetrics' binary_auroc / binary_average_precision / binary_roc (1.9): they count TP and
# FP in float32 whatever the input dtype (AUROC and AP up to 1e-7 from sklearn on the tests'
# cases, against 2e-16 here; FPR@TPR off by up to 7e-3 in 3 of 7,000 seeded cases, at a level
# that a float32 TPR misses) and pass scores outside [0, 1] through a sigmoid, which ties every
# score above ~37 in float64 (AUROC 0.5 where it is 1). Not sklearn either: it refuses +-inf
# scores and runs on the CPU.
def threshold_counts(scores: Tensor, positive: Tensor) -> tuple[Tensor, Tensor]:
    """``TP(t_k)`` and ``FP(t_k)`` at each distinct score ``t_k``, highest first (float64)."""
    order = torch.argsort(scores, descending=True, stable=True)
    ends = tie_group_ends(scores[order])
    tp = torch.cumsum(positive[order].long(), 0)[ends]
    fp = ends + 1 - tp
    return tp.double(), fp.double()


def ranked_auroc(
    scores: Tensor, labels: Tensor, labels_name: str, classes: tuple[str, str], metric: str
) -> Tensor:
    require_both_classes(labels, labels_name, classes, metric)
    tp, fp = threshold_counts(scores, labels)
    zero = tp.new_zeros(1)
    tp, fp = torch.cat([zero, tp]), torch.cat([zero, fp])
    area = ((fp[1:] - fp[:-1]) * (tp[1:] + tp[:-1])).sum() / 2
    return area / (tp[-1] * fp[-1])


def ranked_average_precision(
    scores: Tensor, positive: Tensor, labels_name: str, positive_word: str, metric: str
) -> Tensor:
    if not positive.any():
        raise UndefinedMetricError(
            f"{metric} is undefined: no sample in `{labels_name}` is {positive_word}, so recall "
            "has no denominator; it needs at least one."
        )
    tp, fp = threshold_counts(scores, positive)
    recall_steps = torch.diff(tp, prepend=tp.new_zeros(1)) / tp[-1]
    return (recall_steps * tp / (tp + fp)).sum()


def ranked_fpr_at_tpr(
    scores: Tensor, labels: Tensor, level: float, labels_name: str, classes: tuple[str, str]
) -> Tensor:
    require_both_classes(labels, labels_name, classes, f"FPR@{100 * level:g}TPR")
    tp, fp = threshold_counts(scores, labels)
    first = torch.nonzero(tp / tp[-1] >= level)[0, 0]
    return fp[first] / fp[-1]


def as_1d(values: ArrayLike, name: str) -> Tensor:
    """``values`` as a 1-D tensor (not copied when it is one); text is refused by name."""
    if isinstance(values, (str, bytes, bytearray)):
        raise TypeError(f"`{name}` must be a sequence of numbers, got the text {values!r}.")
    # numpy keeps Python floats in float64, where torch.as_tensor would round them to float32
    array = values if isinstance(values, Tensor) else np.asarray(values)
    if isinstance(array, np.ndarray) and array.dtype.kind in "USO":
        raise TypeError(
            f"`{name}` must hold numbers, got numpy dtype {array.dtype} (text or objects); "
            "convert it to numbers first."
        )
    tensor = array if isinstance(array, Tensor) else torch.as_tensor(array)
    if tensor.dim() != 1:
        raise ValueError(f"`{name}` must have shape (N,), got {tuple(tensor.shape)}.")
    return tensor.detach()


def require_nonempty(n: int, name: str) -> None:
    if n == 0:
        raise ValueError(f"`{name}` is empty: pass at least one sample.")


def require_same_length(a: Tensor, b: Tensor, name_a: str, name_b: str) -> None:
    if a.numel() != b.numel():
        raise ValueError(
            f"`{name_a}` and `{name_b}` must have the same length, got {a.numel()} and {b.numel()}."
        )


def real_scores(values: ArrayLike, name: str) -> Tensor:
    scores = as_1d(values, name)
    if scores.dtype == torch.bool or scores.is_complex():
        raise TypeError(f"`{name}` must hold real numbers, got dtype {scores.dtype}.")
    nan = int(torch.isnan(scores).sum()) if scores.is_floating_point() else 0
    if nan:
        raise ValueError(
            f"`{name}` contains {nan} NaN value(s); drop or impute them before scoring."
        )
    return scores.double()


def binary_labels(values: ArrayLike, name: str) -> Tensor:
    labels = as_1d(values, name)
    if labels.dtype == torch.bool:
        return labels
    if labels.is_complex() or not ((labels == 0) | (labels == 1)).all():
        found = torch.unique(labels[(labels != 0) & (labels != 1)])[:5].tolist()
        raise ValueError(f"`{name}` must hold only 0/1 or True/False, found {found}.")
    return labels == 1


def scores_and_labels(
    scores: ArrayLike,
    labels: ArrayLike,
    scores_name: str,
    labels_name: str,
    *,
    allow_empty: bool = False,
) -> tuple[Tensor, Tensor]:
    scores_t = as_1d(scores, scores_name)
    labels_t = as_1d(labels, labels_name).to(scores_t.device)
    require_same_length(scores_t, labels_t, scores_name, labels_name)
    if not allow_empty:
        require_nonempty(scores_t.numel(), scores_name)
    return real_scores(scores_t, scores_name), binary_labels(labels_t, labels_name)


def require_both_classes(
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


def check_tpr_level(value: float) -> float:
    level = require_finite(value, "tpr_level")
    if not 0 < level <= 1:
        raise ValueError(f"`tpr_level` must lie in (0, 1], got {value!r} (0.95, not 95).")
    return level
