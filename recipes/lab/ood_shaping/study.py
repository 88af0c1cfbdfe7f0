"""``OODShapingStudy``: the post-hoc scoring recipe's OOD table, over seeds.

For each seed an MLP is trained on sklearn's digits ``0..classes-1`` (``DigitsDataModule``, its
split and OOD halves seeded by the seed too) with
:class:`~lightning_info.methods.ood_shaping.OODShapingReport` attached, which tunes every shaper
(random search seeded by the seed) on the ``val`` OOD sets at the end of ``fit`` and reports
AUROC and FPR@95 against each ``test`` OOD set. The study's table is the callback's, each cell
mean ± std over the seeds (``lightning_info.core.logging.mean_std_rows`` of the callback's per-seed
cells); the per-seed rows are the study's records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lab.digits_mlp import DigitsMLPStudy, SeedJob, fit_digits_mlp
from lab.study import StudyResult, run_jobs
from lightning_info.core.logging import mean_std_rows
from lightning_info.methods.ood_shaping.callback import OODShapingReport

__all__ = ["OODShapingStudy", "run_seed"]


@dataclass
class OODShapingStudy(DigitsMLPStudy):
    """OOD detection with each feature shaper, mean ± std over seeds.

    The seeds, data, network and worker settings are
    :class:`~lab.digits_mlp.DigitsMLPStudy`'s.

    Args:
        seeds: also seed the OOD halves and the shapers' tuning.
        shapers, fit_on, evaluate_on, tune_trials: the ``OODShapingReport`` callback.
    """

    shapers: list[str] = field(default_factory=lambda: ["identity", "react", "vra", "plf"])
    fit_on: str = "val"
    evaluate_on: str = "test"
    tune_trials: int = 200

    def run(self, cli=None) -> StudyResult:
        jobs = self.seed_jobs(cli)

        def describe(r: dict[str, Any]) -> str:
            aurocs = {
                shaper: [v for k, v in row.items() if k.endswith("AUROC")]
                for shaper, row in r["rows"].items()
            }
            shown = ", ".join(f"{s} {sum(v) / len(v):.4f}" for s, v in aurocs.items())
            return f"seed={r['seed']}: test accuracy {r['test_acc']:.4f}; mean AUROC {shown}"

        records = run_jobs(run_seed, jobs, self.workers, describe)
        n = len(records)
        over = f"mean ± std over {n} seed{'s' if n > 1 else ''}"
        title = f"OOD detection: ID {self.evaluate_on} vs each OOD test set (energy score; {over})"
        return StudyResult({title: mean_std_rows(records)}, records=records)


def run_seed(job: SeedJob) -> dict[str, Any]:
    """One seed: train the MLP with ``OODShapingReport`` attached, test it; the callback's rows."""
    config = job.settings
    report = OODShapingReport(
        shapers=config.shapers,
        fit_on=config.fit_on,
        evaluate_on=config.evaluate_on,
        tune_trials=config.tune_trials,
        seed=job.seed,
    )
    data, logged = fit_digits_mlp(job, [report])
    columns, rows = report.tables["ood"]
    return {
        "seed": job.seed,
        "test_acc": float(logged["test/acc"]),
        "columns": columns,
        "rows": {row[0]: dict(zip(columns[1:], map(float, row[1:]))) for row in rows},
    }
