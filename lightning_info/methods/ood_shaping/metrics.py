"""OOD-detection metrics (in-distribution = positive): functions and torchmetrics ``Metric``s."""

from __future__ import annotations

import torch
from torch import Tensor

from lightning_info.measures.ranking import (
    ArrayLike,
    PooledScores,
    check_tpr_level,
    ranked_auroc,
    ranked_fpr_at_tpr,
    real_scores,
)
from lightning_info.scoring.metrics import PooledAUROCMixin, PooledFPRAtTPRMixin

_OOD = ("in-distribution", "out-of-distribution")


def ood_auroc(scores_in: ArrayLike, scores_out: ArrayLike) -> Tensor:
    """OOD AUROC: the chance an in-distribution score exceeds an OOD one (ties count 1/2).

    Args:
        scores_in: scores of in-distribution inputs ``(N_in,)``, higher = more in-distribution.
        scores_out: scores of out-of-distribution inputs ``(N_out,)``.
    """
    scores, is_in = _in_out(scores_in, scores_out)
    return ranked_auroc(scores, is_in, "is_in_distribution", _OOD, "OOD AUROC")


def fpr_at_95_tpr(
    scores_in: ArrayLike, scores_out: ArrayLike, *, tpr_level: float = 0.95
) -> Tensor:
    """FPR@95TPR for OOD detection: the fraction of OOD inputs scoring at or above the highest
    threshold that keeps ``tpr_level`` of the in-distribution inputs (see :func:`fpr_at_tpr`).

    The in-distribution inputs are the positives (higher score = more in-distribution), as in
    OpenOOD's ``fpr_recall`` and most OOD papers' tables. OpenOOD's current evaluator
    (``auc_and_fpr_recall``) and pytorch-ood take the OOD inputs as positive: the fraction of
    in-distribution inputs flagged when 95% of the OOD ones are, a different number (the method
    card gives an example where they are 0.667 and 0.167)."""
    level = check_tpr_level(tpr_level)
    scores, is_in = _in_out(scores_in, scores_out)
    return ranked_fpr_at_tpr(scores, is_in, level, "is_in_distribution", _OOD)


def _in_out(scores_in: ArrayLike, scores_out: ArrayLike) -> tuple[Tensor, Tensor]:
    s_in = real_scores(scores_in, "scores_in")
    s_out = real_scores(scores_out, "scores_out").to(s_in.device)
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


class _OODMetric(PooledScores):
    _labels_name = "is_in_distribution"
    _classes = _OOD

    def update(self, scores: Tensor, is_in_distribution: Tensor) -> None:
        """Add a batch: scores ``(N,)`` and whether each input is in-distribution (bool or 0/1)."""
        self._append(scores, is_in_distribution)


class OODAUROC(PooledAUROCMixin, _OODMetric):
    """OOD AUROC (in-distribution = positive) of the pooled batches; see :func:`ood_auroc`."""

    _metric = "OOD AUROC"


class OODFPRAt95TPR(PooledFPRAtTPRMixin, _OODMetric):
    """OOD FPR@95TPR (in-distribution = positive); see :func:`fpr_at_95_tpr`.

    Args:
        tpr_level: the TPR to reach, in ``(0, 1]``.
        **kwargs: passed to :class:`torchmetrics.Metric`.
    """
