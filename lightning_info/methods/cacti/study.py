"""The imputation recipe's study: CACTI, its no-context ablation and classical imputers on the
same tables, masks, splits and seeds.

For every table x mechanism x seed one :class:`TabularImputationDataModule` simulates the
missingness at ``rate`` and splits the rows 80/20; every method is fit on the training rows (their
observed values only) and imputes the held-out rows (inductive), scored over the held-out rows'
simulated entries by :func:`~lightning_info.methods.cacti.functional.imputation_scores` on the
training split's min-max scale. Baselines: column mean, ``KNNImputer(5)`` and
``IterativeImputer`` (scikit-learn). Runs are independent, so ``workers`` processes share them.
"""

from __future__ import annotations

import logging
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch

from lightning_info.core.logging import mean_std
from lightning_info.core.plotting import pyplot
from lightning_info.core.trainers import quiet_trainer
from lightning_info.experiments.study import Study, StudyResult, run_jobs
from lightning_info.methods.cacti.datamodule import TabularImputationDataModule
from lightning_info.methods.cacti.functional import imputation_scores
from lightning_info.methods.cacti.missingness import MECHANISMS, MissingnessOptions
from lightning_info.methods.cacti.module import CACTI, build_cacti

METHODS = {
    "mean": "mean",
    "knn": "KNN (5)",
    "iterative": "IterativeImputer",
    "cacti": "CACTI",
    "cacti_no_context": "CACTI (no context)",
}
BASELINES = ("mean", "knn", "iterative")


def baseline_imputer(method: str, seed: int):
    """A scikit-learn imputer by name."""
    from sklearn.experimental import enable_iterative_imputer  # noqa: F401
    from sklearn.impute import IterativeImputer, KNNImputer, SimpleImputer

    if method == "mean":
        return SimpleImputer(strategy="mean")
    if method == "knn":
        return KNNImputer(n_neighbors=5)
    return IterativeImputer(max_iter=10, random_state=seed)


def train_cacti(
    data: TabularImputationDataModule,
    use_context: bool,
    seed: int,
    model: dict[str, Any],
    max_epochs: int,
) -> CACTI:
    """CACTI fit on the training rows (no logger, no checkpoints, clipping 5)."""
    pl.seed_everything(seed, verbose=False)
    module = build_cacti(
        data.num_columns,
        data.context_embeddings if use_context else None,
        model,
        use_context=use_context,
        seed=seed,
    )
    trainer = quiet_trainer(
        max_epochs=max_epochs,
        accelerator="cpu",
        devices=1,
        gradient_clip_val=5.0,
        limit_val_batches=0,
    )
    trainer.fit(module, train_dataloaders=data.train_dataloader())
    return module.eval()


def run_setting(job: dict[str, Any]) -> dict[str, Any]:
    """Every method on one ``(table, mechanism, seed)``: scores and fit-and-impute seconds."""
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", module="sklearn")
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)  # no per-fit banners
    warnings.filterwarnings("ignore", message=".*(no `val_dataloader`|LeafSpec).*")
    table, mechanism, seed = job["table"], job["mechanism"], job["seed"]
    data = TabularImputationDataModule(
        table,
        mechanism=mechanism,
        missingness=MissingnessOptions(rate=job["rate"]),
        data_seed=seed,
        context=job["context"],
        batch_size=job.get("batch_size", 128),
    )
    train, _, _ = data.arrays("train")
    test, truth, target = data.arrays("test")
    scores, seconds = {}, {}
    for method in job["methods"]:
        start = time.perf_counter()
        if method in BASELINES:
            imputed = baseline_imputer(method, seed).fit(train).transform(test)
        else:
            module = train_cacti(data, method == "cacti", seed, job["model"], job["max_epochs"])
            rows = data.dataset("test").tensors
            imputed = module.impute(rows["values"], rows["observed"]).double().numpy()
        seconds[method] = time.perf_counter() - start
        scores[method] = imputation_scores(truth, imputed, target)
    return {
        "table": table,
        "mechanism": mechanism,
        "seed": seed,
        "scores": scores,
        "seconds": seconds,
    }


@dataclass
class ImputationStudy(Study):
    """CACTI and baselines over tables x mechanisms x seeds (see the module docstring).

    Args:
        tables: bundled tables (or CSV paths of complete tables).
        mechanisms: of ``mcar``, ``mar``, ``mnar``.
        rate: the simulated missing rate.
        seeds: seeds of the masks, splits and models.
        methods: of ``mean``, ``knn``, ``iterative``, ``cacti``, ``cacti_no_context``.
        ablation_mechanisms: the mechanisms the no-context ablation runs under (``None``: all).
        model: CACTI's settings (:func:`~lightning_info.methods.cacti.module.build_cacti`):
            the network's ``embed_dim``, ``encoder_depth``, ``decoder_depth``, ``num_heads``,
            ``mlp_ratio``, AdamW's ``lr``, ``weight_decay``, ... and ``copy_probability``.
        max_epochs, batch_size: CACTI's epochs and batch size.
        context: the text encoder of the context tokens (see ``TabularImputationDataModule``).
        workers: processes running settings side by side (1: in this process).
    """

    tables: list[str] = field(default_factory=lambda: ["diabetes", "wine", "breast_cancer"])
    mechanisms: list[str] = field(default_factory=lambda: list(MECHANISMS))
    rate: float = 0.3
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    ablation_mechanisms: list[str] | None = None
    model: dict[str, Any] = field(default_factory=dict)
    max_epochs: int = 300
    batch_size: int = 128
    context: str = "auto"
    workers: int = 1

    def __post_init__(self) -> None:
        for method in self.methods:
            if method not in METHODS:
                raise ValueError(f"unknown method {method!r}: choose from {list(METHODS)}.")
        for mechanism in [*self.mechanisms, *(self.ablation_mechanisms or [])]:
            if mechanism not in MECHANISMS:
                raise ValueError(f"unknown mechanism {mechanism!r}: choose from {MECHANISMS}.")
        if not (self.tables and self.mechanisms and self.seeds and self.methods):
            raise ValueError("`tables`, `mechanisms`, `seeds` and `methods` must be non-empty.")
        if self.workers < 1:
            raise ValueError(f"`workers` must be at least 1, got {self.workers}.")

    def _jobs(self) -> list[dict[str, Any]]:
        jobs = []
        for table in self.tables:
            for mechanism in self.mechanisms:
                methods = [
                    m
                    for m in self.methods
                    if m != "cacti_no_context"
                    or self.ablation_mechanisms is None
                    or mechanism in self.ablation_mechanisms
                ]
                for seed in self.seeds:
                    jobs.append(
                        {
                            "table": table,
                            "mechanism": mechanism,
                            "seed": seed,
                            "rate": self.rate,
                            "methods": methods,
                            "model": self.model,
                            "max_epochs": self.max_epochs,
                            "context": self.context,
                            "batch_size": self.batch_size,
                        }
                    )
        return jobs

    def run(self, cli=None) -> StudyResult:
        def describe(outcome: dict[str, Any]) -> str:
            cacti = outcome["scores"].get("cacti", {}).get("r2", float("nan"))
            return (
                f"{outcome['table']} {outcome['mechanism']} seed={outcome['seed']}: "
                f"CACTI R^2 {cacti:.3f}"
            )

        records = run_jobs(run_setting, self._jobs(), self.workers, describe)
        tables = {
            f"R^2 (squared Pearson over the missing entries), {self.rate:.0%} missing": self._table(
                records, "r2"
            ),
            f"RMSE on the [0, 1] training scale, {self.rate:.0%} missing": self._table(
                records, "rmse"
            ),
            "seconds per fit and imputation": self._table(records, "seconds"),
        }
        return StudyResult(tables, {"r2": self._figure(records)}, records)

    def _values(self, records, table, mechanism, method, metric) -> list[float]:
        values = []
        for r in records:
            if r["table"] == table and r["mechanism"] == mechanism and method in r["scores"]:
                values.append(
                    r["seconds"][method] if metric == "seconds" else r["scores"][method][metric]
                )
        return values

    def _table(self, records, metric: str):
        columns = ["table", "mechanism", *(METHODS[m] for m in self.methods)]
        baselines = [m for m in self.methods if m in BASELINES and m != "mean"]
        compare = "cacti" in self.methods and baselines and metric != "seconds"
        if compare:
            columns.append("CACTI - best baseline")
        rows = []
        for table in self.tables:
            for mechanism in self.mechanisms:
                cells = {
                    m: self._values(records, table, mechanism, m, metric) for m in self.methods
                }
                row = [
                    table,
                    mechanism,
                    *(mean_std(v) if v and not np.isnan(v).all() else "-" for v in cells.values()),
                ]
                if compare:
                    best = (max if metric == "r2" else min)(np.mean(cells[m]) for m in baselines)
                    row.append(f"{np.mean(cells['cacti']) - best:+.3f}")
                rows.append(row)
        return columns, rows

    def _figure(self, records):
        plt = pyplot()
        figure, axes = plt.subplots(
            1, len(self.tables), figsize=(4.5 * len(self.tables), 3.8), squeeze=False
        )
        methods = [m for m in self.methods if m != "mean"]  # a constant fill has no correlation
        width = 0.8 / max(len(methods), 1)
        for axis, table in zip(axes[0], self.tables):
            for k, method in enumerate(methods):
                cells = [self._values(records, table, m, method, "r2") for m in self.mechanisms]
                means = [np.mean(v) if v else np.nan for v in cells]
                stds = [np.std(v, ddof=1) if len(v) > 1 else 0.0 for v in cells]  # as the table
                axis.bar(
                    np.arange(len(self.mechanisms)) + k * width,
                    means,
                    width,
                    yerr=stds,
                    label=METHODS[method],
                )
            axis.set_xticks(
                np.arange(len(self.mechanisms)) + width * (len(methods) - 1) / 2,
                [m.upper() for m in self.mechanisms],
            )
            axis.set(title=table, ylabel="R^2 over missing entries")
        axes[0][0].legend(fontsize=8)
        figure.tight_layout()
        return figure
