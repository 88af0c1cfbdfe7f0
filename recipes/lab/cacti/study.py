"""The imputation recipe's study: CACTI, its no-context ablation, ReMasker and classical imputers
on the same tables, masks, splits and seeds.

For every table x mechanism x missing rate x seed one :class:`TabularImputationDataModule`
simulates the missingness and splits the rows 80/20 (rows the simulation leaves empty dropped);
every method is fit on the training rows (their observed values only) and imputes the held-out
rows (inductive), scored over the held-out rows' simulated entries by
:func:`~lightning_info.methods.cacti.functional.imputation_scores` on the training split's min-max
scale. Baselines: column mean, ``KNNImputer`` and ``IterativeImputer`` (scikit-learn). ReMasker
(Du et al., 2023) is CACTI's network and budget without context and with random re-masking
instead of copy masking (``masking="random"``). Runs are independent, so ``workers`` processes
share them.
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
from sklearn.experimental import enable_iterative_imputer  # noqa: F401 (enables IterativeImputer)
from sklearn.impute import IterativeImputer, KNNImputer, SimpleImputer

from lab.study import Study, StudyResult, run_jobs
from lightning_info.core.logging import mean_std
from lightning_info.core.plotting import pyplot
from lightning_info.core.trainers import quiet_trainer
from lightning_info.methods.cacti.datamodule import TabularImputationDataModule, load_table
from lightning_info.methods.cacti.functional import imputation_scores
from lightning_info.methods.cacti.missingness import MECHANISMS, MissingnessOptions
from lightning_info.methods.cacti.module import CACTI, build_cacti

METHODS = {
    "mean": "mean",
    "knn": "KNN (5)",
    "iterative": "IterativeImputer",
    "cacti": "CACTI",
    "cacti_no_context": "CACTI (no context)",
    "remasker": "ReMasker",
}
BASELINES = ("mean", "knn", "iterative")
#: The baselines' default settings (``ImputationStudy.baselines`` overrides them).
BASELINE_SETTINGS = {"knn": {"n_neighbors": 5}, "iterative": {"max_iter": 10}}
#: ReMasker's settings over CACTI's ``model``: its paper's mask ratio.
REMASKER_SETTINGS = {"mask_ratio": 0.5}


def baseline_imputer(method: str, seed: int, settings: dict[str, Any] | None = None):
    """A scikit-learn imputer by name; ``settings`` are its keyword arguments over
    :data:`BASELINE_SETTINGS`."""
    settings = {**BASELINE_SETTINGS.get(method, {}), **(settings or {})}
    if method == "mean":
        return SimpleImputer(strategy="mean", **settings)
    if method == "knn":
        return KNNImputer(**settings)
    return IterativeImputer(random_state=seed, **settings)


def method_label(
    method: str, baselines: dict[str, dict[str, Any]] | None = None, per_cell: bool = False
) -> str:
    """A method's column name; KNN's names its number of neighbours (``per_cell``: set per
    table and rate, "tuned k")."""
    if method == "knn" and per_cell:
        return "KNN (tuned k)"
    if method == "knn":
        settings = {**BASELINE_SETTINGS["knn"], **(baselines or {}).get("knn", {})}
        return f"KNN ({settings['n_neighbors']})"
    return METHODS[method]


def train_cacti(
    data: TabularImputationDataModule,
    use_context: bool,
    seed: int,
    model: dict[str, Any],
    max_epochs: int,
    max_steps: int | None = None,
) -> CACTI:
    """CACTI (or ReMasker: ``model`` with ``masking="random"``) fit on the training rows (no
    logger, no checkpoints, clipping 5); ``max_steps`` (when given) replaces ``max_epochs``."""
    pl.seed_everything(seed, verbose=False)
    module = build_cacti(
        data.num_columns,
        data.context_embeddings if use_context else None,
        model,
        use_context=use_context,
        seed=seed,
    )
    trainer = quiet_trainer(
        max_epochs=max_epochs if max_steps is None else -1,
        max_steps=-1 if max_steps is None else max_steps,
        accelerator="cpu",
        devices=1,
        gradient_clip_val=5.0,
        limit_val_batches=0,
    )
    trainer.fit(module, train_dataloaders=data.train_dataloader())
    return module.eval()


@dataclass(frozen=True)
class ImputationJob:
    """One ``(table, mechanism, rate, seed)`` of an :class:`ImputationStudy`: the methods run on
    it (the no-context ablation only under its mechanisms) and the study's settings of them."""

    table: str
    mechanism: str
    seed: int
    rate: float
    methods: list[str]
    model: dict[str, Any]
    remasker: dict[str, Any]
    baselines: dict[str, dict[str, Any]]
    max_epochs: int
    max_steps: int | None
    context: str
    batch_size: int


def run_setting(job: ImputationJob) -> dict[str, Any]:
    """Every method on one ``(table, mechanism, rate, seed)``: scores and fit-and-impute
    seconds."""
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", module="sklearn")
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)  # no per-fit banners
    warnings.filterwarnings("ignore", message=".*(no `val_dataloader`|LeafSpec).*")
    data = TabularImputationDataModule(
        job.table,
        mechanism=job.mechanism,
        missingness=MissingnessOptions(rate=job.rate, drop_empty_rows=True),
        data_seed=job.seed,
        context=job.context,
        batch_size=job.batch_size,
    )
    train, _, _ = data.arrays("train")
    test, truth, target = data.arrays("test")
    scores, seconds = {}, {}
    for method in job.methods:
        start = time.perf_counter()
        if method in BASELINES:
            settings = job.baselines.get(method)
            imputed = baseline_imputer(method, job.seed, settings).fit(train).transform(test)
        else:
            model = job.model
            if method == "remasker":
                model = {**model, **REMASKER_SETTINGS, **job.remasker}
                model["masking"] = "random"
            module = train_cacti(
                data, method == "cacti", job.seed, model, job.max_epochs, job.max_steps
            )
            rows = data.dataset("test").tensors
            imputed = module.impute(rows["values"], rows["observed"]).double().numpy()
        seconds[method] = time.perf_counter() - start
        scores[method] = imputation_scores(truth, imputed, target)
    return {
        "table": job.table,
        "mechanism": job.mechanism,
        "rate": job.rate,
        "seed": job.seed,
        "scores": scores,
        "seconds": seconds,
        "rows": int(data.table.shape[0]),
        "dropped_rows": data.dropped_rows,
    }


@dataclass
class ImputationStudy(Study):
    """CACTI and baselines over tables x mechanisms x seeds (see the module docstring).

    Args:
        tables: bundled tables, ``synthetic:<rows>`` (or CSV paths of complete tables).
        mechanisms: of ``mcar``, ``mar``, ``mnar``.
        rate: the simulated missing rate, or a list of rates (each a row of the tables).
        seeds: seeds of the masks, splits and models.
        methods: of ``mean``, ``knn``, ``iterative``, ``cacti``, ``cacti_no_context``,
            ``remasker``.
        ablation_mechanisms: the mechanisms the no-context ablation runs under (``None``: all).
        model: CACTI's settings (:func:`~lightning_info.methods.cacti.module.build_cacti`):
            the network's ``embed_dim``, ``encoder_depth``, ``decoder_depth``, ``num_heads``,
            ``mlp_ratio``, AdamW's ``lr``, ``weight_decay``, ... and ``copy_probability``.
        remasker: ReMasker's settings over ``model`` (:data:`REMASKER_SETTINGS`: ``mask_ratio``
            0.5; e.g. its own ``lr``); it always runs without context and with
            ``masking="random"``.
        baselines: keyword arguments of the baselines over :data:`BASELINE_SETTINGS`, e.g.
            ``{"knn": {"n_neighbors": 10}, "iterative": {"max_iter": 25}}``.
        cell_baselines: settings per ``"<table>@<rate>"`` over ``baselines`` (each tuned on an
            unreported seed for that table and rate), e.g.
            ``{"synthetic:8000@0.5": {"knn": {"n_neighbors": 320}}}``.
        max_epochs, batch_size: CACTI's (and ReMasker's) epochs and batch size.
        max_steps: optimizer steps per fit instead of epochs (``None``: ``max_epochs``): the
            same training compute for every table, whatever its rows.
        context: the text encoder of the context tokens (see ``TabularImputationDataModule``).
        workers: processes running settings side by side (1: in this process).
    """

    tables: list[str] = field(default_factory=lambda: ["diabetes", "wine", "breast_cancer"])
    mechanisms: list[str] = field(default_factory=lambda: list(MECHANISMS))
    rate: float | list[float] = 0.3
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    methods: list[str] = field(default_factory=lambda: [m for m in METHODS if m != "remasker"])
    ablation_mechanisms: list[str] | None = None
    model: dict[str, Any] = field(default_factory=dict)
    remasker: dict[str, Any] = field(default_factory=dict)
    baselines: dict[str, dict[str, Any]] = field(default_factory=dict)
    cell_baselines: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    max_epochs: int = 300
    max_steps: int | None = None
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
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"`max_steps` must be at least 1 (or None), got {self.max_steps}.")
        self.rates = [self.rate] if isinstance(self.rate, (int, float)) else list(self.rate)
        if not self.rates:
            raise ValueError("`rate` must be a rate or a non-empty list of rates.")
        for rate in self.rates:
            MissingnessOptions(rate=rate)  # refuses a rate outside (0, 1)
        cells = [f"{table}@{rate:g}" for table in self.tables for rate in self.rates]
        for key in self.cell_baselines:
            if key not in cells:
                raise ValueError(
                    f"`cell_baselines` has settings for {key!r}, which is no cell of this study: "
                    f"use '<table>@<rate>' of its tables and rates ({', '.join(cells)})."
                )
        owners = {"`baselines`": self.baselines}
        owners.update({f"`cell_baselines[{k!r}]`": v for k, v in self.cell_baselines.items()})
        for owner, settings in owners.items():
            for name in settings:
                if name not in BASELINES:
                    raise ValueError(f"{owner} has settings for {name!r}: choose from {BASELINES}.")

    def _baselines(self, table: str, rate: float) -> dict[str, dict[str, Any]]:
        """The baselines' settings on one table and rate: ``cell_baselines`` over ``baselines``."""
        cell = self.cell_baselines.get(f"{table}@{rate:g}", {})
        # in a fixed order: a job's repr names its saved outcome (`--compare.resume`)
        return {
            name: {**self.baselines.get(name, {}), **cell.get(name, {})}
            for name in dict.fromkeys([*self.baselines, *cell])
        }

    def _jobs(self) -> list[ImputationJob]:
        jobs = []
        for table in self.tables:
            for mechanism, rate in [(m, r) for m in self.mechanisms for r in self.rates]:
                methods = [
                    m
                    for m in self.methods
                    if m != "cacti_no_context"
                    or self.ablation_mechanisms is None
                    or mechanism in self.ablation_mechanisms
                ]
                for seed in self.seeds:
                    jobs.append(
                        ImputationJob(
                            table=table,
                            mechanism=mechanism,
                            seed=seed,
                            rate=rate,
                            methods=methods,
                            model=self.model,
                            remasker=self.remasker,
                            baselines=self._baselines(table, rate),
                            max_epochs=self.max_epochs,
                            max_steps=self.max_steps,
                            context=self.context,
                            batch_size=self.batch_size,
                        )
                    )
        # the largest tables first, so that the workers finish together; records keep job order
        sizes = {table: int(np.prod(load_table(table)[0].shape)) for table in self.tables}
        order = sorted(range(len(jobs)), key=lambda k: -sizes[jobs[k].table])
        return [jobs[k] for k in order]

    def run(self, cli=None) -> StudyResult:
        def describe(outcome: dict[str, Any]) -> str:
            scores = outcome["scores"]
            shown = [
                f"{METHODS[m]} R^2 {scores[m]['r2']:.3f}"
                for m in ("cacti", "remasker")
                if m in scores
            ]
            return (
                f"{outcome['table']} {outcome['mechanism']} {outcome['rate']:.0%} "
                f"seed={outcome['seed']}: {', '.join(shown) or 'baselines'}"
            )

        records = run_jobs(run_setting, self._jobs(), self.workers, describe)
        missing = ", ".join(f"{rate:.0%}" for rate in self.rates)
        tables = {
            f"R^2 (squared Pearson over the missing entries), {missing} missing": self._table(
                records, "r2"
            ),
            f"RMSE on the [0, 1] training scale, {missing} missing": self._table(records, "rmse"),
            "seconds per fit and imputation": self._table(records, "seconds"),
        }
        return StudyResult(tables, {"r2": self._figure(records)}, records)

    def _label(self, method: str) -> str:
        per_cell = any(method in settings for settings in self.cell_baselines.values())
        return method_label(method, self.baselines, per_cell)

    def _cells(self) -> list[tuple[str, str, float]]:
        return [(t, m, r) for t in self.tables for m in self.mechanisms for r in self.rates]

    def _values(self, records, cell, method, metric) -> list[float]:
        values = []
        for r in records:
            if (r["table"], r["mechanism"], r["rate"]) == cell and method in r["scores"]:
                values.append(
                    r["seconds"][method] if metric == "seconds" else r["scores"][method][metric]
                )
        return values

    def _table(self, records, metric: str):
        several = len(self.rates) > 1
        columns = [
            "table",
            "mechanism",
            *(["missing"] if several else []),
            *(self._label(m) for m in self.methods),
        ]
        baselines = [m for m in self.methods if m in BASELINES and m != "mean"]
        compare = "cacti" in self.methods and metric != "seconds"
        if compare and baselines:
            columns.append("CACTI - best baseline")
        if compare and "remasker" in self.methods:
            columns.append("CACTI - ReMasker")
        better = max if metric == "r2" else min
        rows = []
        for cell in self._cells():
            cells = {m: self._values(records, cell, m, metric) for m in self.methods}
            row = [
                cell[0],
                cell[1],
                *([f"{cell[2]:.0%}"] if several else []),
                *(mean_std(v) if v and not np.isnan(v).all() else "-" for v in cells.values()),
            ]
            if compare and baselines:
                best = better(np.mean(cells[m]) for m in baselines)
                row.append(f"{np.mean(cells['cacti']) - best:+.3f}")
            if compare and "remasker" in self.methods:
                row.append(f"{np.mean(cells['cacti']) - np.mean(cells['remasker']):+.3f}")
            rows.append(row)
        return columns, rows

    def _figure(self, records):
        plt = pyplot()
        figure, axes = plt.subplots(
            1, len(self.tables), figsize=(4.5 * len(self.tables), 3.8), squeeze=False
        )
        methods = [m for m in self.methods if m != "mean"]  # a constant fill has no correlation
        width = 0.8 / max(len(methods), 1)
        groups = [(m, r) for m in self.mechanisms for r in self.rates]
        for axis, table in zip(axes[0], self.tables):
            for k, method in enumerate(methods):
                cells = [self._values(records, (table, m, r), method, "r2") for m, r in groups]
                means = [np.mean(v) if v else np.nan for v in cells]
                stds = [np.std(v, ddof=1) if len(v) > 1 else 0.0 for v in cells]  # as the table
                axis.bar(
                    np.arange(len(groups)) + k * width,
                    means,
                    width,
                    yerr=stds,
                    label=self._label(method),
                )
            axis.set_xticks(
                np.arange(len(groups)) + width * (len(methods) - 1) / 2,
                [m.upper() + (f" {r:.0%}" if len(self.rates) > 1 else "") for m, r in groups],
            )
            axis.set(title=table, ylabel="R^2 over missing entries")
        axes[0][0].legend(fontsize=8)
        figure.tight_layout()
        return figure
