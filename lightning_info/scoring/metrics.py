"""The pooled ranking metrics shared by the confidence and OOD-shaping methods: AUROC and FPR@TPR
of the ``(scores, labels)`` that :class:`~lightning_info.measures.ranking.PooledScores` pools
over batches and processes.

Each is a mixin listed before a method's own ``PooledScores`` base, which names the labels
(``_labels_name``, the argument of its ``update``: ``correct``, ``is_in_distribution``) and their
two classes (``_classes``, positive first) for the error raised when only one class is present::

    class OODAUROC(PooledAUROCMixin, _OODMetric):
        _metric = "OOD AUROC"
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from lightning_info.measures.ranking import check_tpr_level, ranked_auroc, ranked_fpr_at_tpr

__all__ = ["PooledAUROCMixin", "PooledFPRAtTPRMixin"]


class PooledAUROCMixin:
    """``compute``: AUROC ``P(s+ > s-) + 1/2 P(s+ = s-)`` of the pooled batches (positives:
    ``labels == 1``); ``_metric`` names it in the error raised when one class is missing."""

    higher_is_better = True
    _metric = "AUROC"

    def compute(self) -> Tensor:
        scores, labels = self._pooled()
        return ranked_auroc(scores, labels, self._labels_name, self._classes, self._metric)


class PooledFPRAtTPRMixin:
    """``compute``: ``min { FPR(t) : TPR(t) >= tpr_level }`` over the thresholds ``t`` of the
    pooled batches.

    Args:
        tpr_level: the TPR to reach, in ``(0, 1]``.
        **kwargs: passed to the ``PooledScores`` base.
    """

    higher_is_better = False

    def __init__(self, tpr_level: float = 0.95, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tpr_level = check_tpr_level(tpr_level)

    def compute(self) -> Tensor:
        scores, labels = self._pooled()
        return ranked_fpr_at_tpr(scores, labels, self.tpr_level, self._labels_name, self._classes)
