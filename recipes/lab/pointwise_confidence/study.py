"""``FailurePredictionStudy``: the post-hoc scoring recipe's confidence table, over seeds.

For each seed an MLP is trained on sklearn's digits ``0..classes-1`` (``DigitsDataModule``, the
split seeded by the seed too) with :class:`~lightning_info.methods.pointwise_confidence.
PosthocScoring` attached, which fits every confidence scorer (MSP, MSP (temperature), PMI, PVI,
PSI) on the ``fit_on`` split at the end of ``fit`` and scores the ``evaluate_on`` split. The
study's table is the callback's, each cell mean ± std over the seeds
(``lightning_info.core.logging.mean_std_rows`` of the callback's per-seed cells); the
per-seed rows are the study's records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lab.digits_mlp import DigitsMLPStudy, SeedJob, fit_digits_mlp
from lab.study import StudyResult, run_jobs
from lightning_info.core.logging import mean_std, mean_std_rows
from lightning_info.methods.pointwise_confidence.callback import PosthocScoring

__all__ = ["FailurePredictionStudy", "run_seed"]


@dataclass
class FailurePredictionStudy(DigitsMLPStudy):
    """Failure prediction and calibration of each confidence scorer, mean ± std over seeds.

    The seeds, data, network and worker settings are
    :class:`~lab.digits_mlp.DigitsMLPStudy`'s.

    Args:
        fit_on, evaluate_on, bins: the ``PosthocScoring`` callback.
    """

    fit_on: str = "val"
    evaluate_on: str = "test"
    bins: int = 10

    def run(self, cli=None) -> StudyResult:
        jobs = self.seed_jobs(cli)

        def describe(r: dict[str, Any]) -> str:
            auroc = ", ".join(f"{name} {v['AUROC']:.4f}" for name, v in r["rows"].items())
            return f"seed={r['seed']}: test accuracy {r['test_acc']:.4f}; AUROC {auroc}"

        records = run_jobs(run_seed, jobs, self.workers, describe)
        n = len(records)
        over = f"mean ± std over {n} seed{'s' if n > 1 else ''}"
        accuracy = (
            ["model", "test accuracy", "test digits", "seeds"],
            [["MLP", mean_std([r["test_acc"] for r in records]), records[0]["test_size"], n]],
        )
        title = f"failure prediction on {self.evaluate_on} (scorers fit on {self.fit_on}; {over})"
        tables = {f"classifier ({over})": accuracy, title: mean_std_rows(records)}
        return StudyResult(tables, records=records)


def run_seed(job: SeedJob) -> dict[str, Any]:
    """One seed: train the MLP with ``PosthocScoring`` attached, test it; the callback's rows."""
    config = job.settings
    report = PosthocScoring(fit_on=config.fit_on, evaluate_on=config.evaluate_on, bins=config.bins)
    data, logged = fit_digits_mlp(job, [report])
    columns, rows = report.tables["failure"]
    return {
        "seed": job.seed,
        "test_acc": float(logged["test/acc"]),
        "test_size": len(data.test_images),
        "columns": columns,
        "rows": {row[0]: dict(zip(columns[1:], map(float, row[1:]))) for row in rows},
    }
