"""``PosthocScoring``: after fitting, score the trained classifier's confidence without changing it.

Each confidence scorer (MSP, temperature-scaled MSP, PMI, PVI, PSI by default) is fitted on the
data module's ``fit_on`` split and evaluated on ``evaluate_on``: AUROC, AUPR of successes and of
errors, AURC, E-AURC, FPR at 95% TPR, ECE, NLL and Brier of the scorer's class distribution, and
a reliability diagram. The report mechanics (hook on the head, setup checks, printing, logging,
W&B tables) are :class:`~lightning_info.scoring.report.PosthocReport`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

import lightning.pytorch as pl
import torch
from lightning.pytorch.utilities import rank_zero_warn
from torch import Tensor, nn

from lightning_info.core.logging import metric_key
from lightning_info.core.plotting import pyplot
from lightning_info.core.validation import require_int
from lightning_info.measures.ranking import UndefinedMetricError
from lightning_info.methods.pointwise_confidence import functional as metrics
from lightning_info.methods.pointwise_confidence.scorers import (
    MSPScorer,
    PMIScorer,
    PSIScorer,
    PVIScorer,
)
from lightning_info.scoring.base import PosthocScorer
from lightning_info.scoring.report import Outputs, PosthocReport, Table

FAILURE_COLUMNS = [
    "scorer",
    "AUROC",
    "AUPR-success",
    "AUPR-error",
    "AURC",
    "E-AURC",
    "FPR@95TPR",
    "ECE",
    "NLL",
    "Brier",
]


def default_scorers() -> list[PosthocScorer]:
    return [MSPScorer(), MSPScorer(temperature_scaled=True), PMIScorer(), PVIScorer(), PSIScorer()]


def failure_row(scorer: PosthocScorer, features: Tensor, logits: Tensor, labels: Tensor) -> list:
    """The failure-prediction metrics of a fitted scorer on labelled outputs.

    A ranking metric that is undefined on these labels (every prediction right, or every one
    wrong) is reported as NaN with a warning.
    """
    confidence = scorer.score(features, logits)
    correct = logits.argmax(1) == labels
    probabilities = scorer.class_probabilities(features, logits)
    computations = [
        lambda: metrics.failure_auroc(confidence, correct),
        lambda: metrics.aupr_success(confidence, correct),
        lambda: metrics.aupr_error(confidence, correct),
        lambda: metrics.aurc(confidence, correct),
        lambda: metrics.e_aurc(confidence, correct),
        lambda: metrics.failure_fpr_at_95_tpr(confidence, correct),
        lambda: metrics.expected_calibration_error(confidence, correct),
        lambda: metrics.negative_log_likelihood(probabilities, labels, eps=1e-12),
        lambda: metrics.brier_score(probabilities, labels),
    ]
    values = [_value_or_nan(compute, scorer.name) for compute in computations]
    return [scorer.name, *(f"{v:.4f}" for v in values)]


def _value_or_nan(compute, scorer_name: str) -> float:
    try:
        return float(compute())
    except UndefinedMetricError as err:
        rank_zero_warn(f"PosthocScoring ({scorer_name}): {err} Reported as NaN.")
        return float("nan")


class PosthocScoring(PosthocReport):
    """Fit confidence scorers on a trained classifier and report failure prediction.

    Args:
        scorers: confidence scorers (default :func:`default_scorers`); each needs a
            ``class_probabilities(features, logits)`` method for NLL and Brier.
        head, fit_on, evaluate_on, output_dir: see
            :class:`~lightning_info.scoring.report.PosthocReport` (``posthoc_scoring.md`` and
            ``posthoc_reliability.png`` are written to ``output_dir``).
        bins: bins of ECE and of the reliability diagram.
    """

    kind = "posthoc_scoring"
    makes_figures = True

    def __init__(
        self,
        scorers: Sequence[PosthocScorer] | None = None,
        head: str | None = None,
        fit_on: str = "val",
        evaluate_on: str = "test",
        bins: int = 10,
        output_dir: str | None = None,
    ) -> None:
        super().__init__(head, fit_on, evaluate_on, output_dir)
        if isinstance(scorers, (str, PosthocScorer)):
            raise TypeError(
                f"`scorers` must be a list of scorers, got {scorers!r}; wrap one scorer in a "
                "list: scorers=[MSPScorer()]."
            )
        self.scorers = list(default_scorers() if scorers is None else scorers)
        if not self.scorers:
            raise ValueError(
                "`scorers` is empty; pass at least one scorer, or None for the defaults."
            )
        not_scorers = [repr(s) for s in self.scorers if not isinstance(s, PosthocScorer)]
        if not_scorers:
            raise TypeError(f"`scorers` must hold PosthocScorer objects, got {not_scorers}.")
        missing = [type(s).__name__ for s in self.scorers if not hasattr(s, "class_probabilities")]
        if missing:
            raise TypeError(f"scorers {missing} have no `class_probabilities(features, logits)`.")
        names = [s.name for s in self.scorers]
        logged = [metric_key(n) for n in names]
        repeated = sorted({n for n, key in zip(names, logged) if logged.count(key) > 1})
        if repeated:
            raise ValueError(
                f"`scorers` holds several scorers named {repeated} (logged names are lowercase, "
                "punctuation as `_`); their rows and logged values would be indistinguishable: "
                "keep one of each, or set `name` on each copy."
            )
        self.bins = require_int(bins, "bins", 1)

    def build_tables(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        head: nn.Linear,
        fit: Outputs,
        test: Outputs,
    ) -> dict[str, tuple[str, Table]]:
        rows = [failure_row(scorer.fit(*fit), *test) for scorer in self.scorers]
        title = f"failure prediction on {self.evaluate_on} (scorers fit on {self.fit_description})"
        return {"failure": (title, (FAILURE_COLUMNS, rows))}

    def figures(self, test: Outputs) -> dict:
        return {"reliability": reliability_diagram(self.scorers, *test, self.bins)}


def reliability_diagram(scorers, features: Tensor, logits: Tensor, labels: Tensor, bins: int):
    """Accuracy against mean confidence in ``bins`` equal-width bins, one line per scorer."""
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(5, 5))
    axis.plot([0, 1], [0, 1], "k--", linewidth=0.8, label="calibrated")
    correct = (logits.argmax(1) == labels).float()
    edges = torch.linspace(0, 1, bins + 1)
    for scorer in scorers:
        confidence = scorer.score(features, logits)
        index = torch.bucketize(confidence, edges[1:-1], right=False)
        points = [
            (confidence[index == b].mean(), correct[index == b].mean())
            for b in range(bins)
            if (index == b).any()
        ]
        axis.plot(*zip(*points), marker="o", label=scorer.name)
    axis.set(xlabel="confidence", ylabel="accuracy", title="reliability", xlim=(0, 1), ylim=(0, 1))
    axis.legend(fontsize=7)
    figure.tight_layout()
    return figure
