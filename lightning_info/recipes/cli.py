"""``ComparisonCLI``: one LightningCLI config run as a grid of values x seeds x {baseline, method}.

A recipe is a few lines::

    ComparisonCLI(MyModule, MyDataModule, default_config=Path(__file__).with_suffix(".yaml")).run()

Everything a LightningCLI accepts works (``--config``, ``--trainer.*``, ``--model.*``, ``--data.*``,
``--trainer.logger=CSVLogger``, ``--trainer.callbacks+=...``). The ``compare`` group adds the grid:

- ``compare.grid``: values of the data module's argument ``compare.grid_field`` (default
  ``name``: data sets; or budgets, sizes, ...);
- ``compare.seeds``: seeds passed to ``seed_everything`` before each run (and to the data
  module's ``compare.seed_field``, if set);
- the arms: ``compare.method_callbacks`` are added to ``trainer.callbacks`` in the method arm
  only; ``compare.baseline_data`` / ``compare.method_data`` override data-module arguments;
- ``compare.metric``: the test metric collected into the results table.

Classes are instantiated afresh for every grid cell (not once up front), so a recipe may prepare
what the config points at (e.g. pretrain a base model) between parsing and :meth:`run`.

Each run is fitted, then tested (on the best checkpoint when a monitored ``ModelCheckpoint`` is
configured). The logger defaults to W&B, offline unless W&B is configured, one W&B run per grid
cell grouped under ``compare.name``. The table is printed and written to ``compare.output_dir``.
"""

from __future__ import annotations

import copy
import importlib
import json
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from jsonargparse import Namespace
from lightning.pytorch import Callback, seed_everything
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from lightning_info.core.logging import (
    default_wandb_logger_config,
    finish_wandb_runs,
    markdown_table,
)

BASELINE, METHOD = "baseline", "method"


@dataclass
class RunResult:
    """Outcome of one grid cell."""

    grid_value: Any
    seed: int
    arm: str
    metric: str
    value: float


def summarize(
    results: list[RunResult], arm_names: dict[str, str], grid_label: str = "dataset"
) -> tuple[list[str], list[list]]:
    """Table rows ``grid value | baseline mean ± std | method mean ± std | difference | n``."""
    columns = [grid_label, arm_names[BASELINE], arm_names[METHOD], "difference", "seeds"]
    rows = []
    for grid_value in dict.fromkeys(r.grid_value for r in results):
        per_arm = {
            arm: [r.value for r in results if r.grid_value == grid_value and r.arm == arm]
            for arm in (BASELINE, METHOD)
        }
        means = {arm: statistics.fmean(v) if v else float("nan") for arm, v in per_arm.items()}
        rows.append(
            [
                grid_value,
                *(_mean_std(per_arm[arm]) for arm in (BASELINE, METHOD)),
                f"{means[METHOD] - means[BASELINE]:+.4f}",
                max(len(v) for v in per_arm.values()),
            ]
        )
    return columns, rows


def _mean_std(values: list[float]) -> str:
    if not values:
        return "-"
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.4f} ± {std:.4f}"


class ComparisonCLI(LightningCLI):
    """LightningCLI that fits and tests a baseline and a method arm over data sets and seeds."""

    def __init__(
        self,
        model_class: Any,
        datamodule_class: Any,
        *,
        links: dict[str, str] | None = None,
        default_config: str | Path | None = None,
        args: Any = None,
        **kwargs: Any,
    ) -> None:
        self._links = dict(links or {})
        self._instantiate_now = False
        parser_kwargs = dict(kwargs.pop("parser_kwargs", {}))
        if default_config is not None:
            parser_kwargs.setdefault("default_config_files", [str(default_config)])
        trainer_defaults = {
            "logger": default_wandb_logger_config(),
            **kwargs.pop("trainer_defaults", {}),
        }
        super().__init__(
            model_class,
            datamodule_class,
            run=False,
            args=args,
            parser_kwargs=parser_kwargs,
            trainer_defaults=trainer_defaults,
            save_config_kwargs={"overwrite": True},
            seed_everything_default=0,
            **kwargs,
        )
        self.results: list[RunResult] = []

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        for source, target in self._links.items():
            parser.link_arguments(source, target, apply_on="instantiate")
        add = parser.add_argument
        add(
            "--compare.name",
            type=str,
            default="comparison",
            help="Name of the comparison (W&B group, output file names).",
        )
        add(
            "--compare.grid_field",
            type=str,
            default="name",
            help="Data-module argument varied along the grid.",
        )
        add(
            "--compare.grid",
            type=list[Any],
            default=[],
            help="Values of `grid_field`; empty: the configured one.",
        )
        add("--compare.seeds", type=list[int], default=[0])
        add(
            "--compare.seed_field",
            type=str | None,
            default=None,
            help="Data-module argument set to each run's seed (e.g. a sampling seed).",
        )
        add(
            "--compare.method_callbacks",
            type=list[Callback],
            default=[],
            help="Callbacks of the method arm; the baseline runs without them.",
        )
        add(
            "--compare.baseline_data",
            type=dict[str, Any],
            default={},
            help="Data-module arguments of the baseline arm.",
        )
        add(
            "--compare.method_data",
            type=dict[str, Any],
            default={},
            help="Data-module arguments of the method arm.",
        )
        add("--compare.metric", type=str, default="test/acc")
        add("--compare.baseline_name", type=str, default="baseline")
        add("--compare.method_name", type=str, default="method")
        add("--compare.output_dir", type=str, default="results")

    def before_instantiate_classes(self) -> None:
        compare = self.config.compare
        if not compare.seeds:
            raise ValueError("`compare.seeds` is empty: give at least one seed, e.g. [0].")
        if not compare.method_callbacks and compare.method_data == compare.baseline_data:
            raise ValueError(
                "The baseline and method arms are identical: give `compare.method_callbacks` "
                "or different `compare.method_data` / `compare.baseline_data` (see recipes/*.yaml)."
            )

    def instantiate_classes(self) -> None:
        """Deferred: LightningCLI calls this once after parsing; each grid cell calls it again."""
        if self._instantiate_now:
            super().instantiate_classes()

    def run(self) -> list[RunResult]:
        """Run every grid cell, then print and save the results table."""
        base = self.config
        compare = base.compare
        grid = list(compare.grid) or [self._data_args(base)[compare.grid_field]]
        self._check_data_modules(base, grid)
        cells = [(g, s, a) for g in grid for s in compare.seeds for a in (BASELINE, METHOD)]
        for index, (grid_value, seed, arm) in enumerate(cells, start=1):
            value = self._run_cell(base, grid_value, seed, arm)
            self.results.append(RunResult(grid_value, seed, arm, compare.metric, value))
            print(
                f"[{index}/{len(cells)}] {compare.grid_field}={grid_value} seed={seed} "
                f"{self._arm_names[arm]}: {compare.metric}={value:.4f}",
                flush=True,
            )
        self.config = base
        self._report()
        return self.results

    @property
    def _arm_names(self) -> dict[str, str]:
        compare = self.config.compare
        return {BASELINE: compare.baseline_name, METHOD: compare.method_name}

    @staticmethod
    def _data_args(config: Namespace) -> Namespace:
        data = config.data
        return data.init_args if "init_args" in data else data

    def _cell_data_args(self, config: Namespace, grid_value: Any, seed: int, arm: str) -> dict:
        compare = config.compare
        overrides = compare.method_data if arm == METHOD else compare.baseline_data
        args = {**vars(self._data_args(config)), **overrides, compare.grid_field: grid_value}
        if compare.seed_field:
            args[compare.seed_field] = seed
        return args

    def _check_data_modules(self, config: Namespace, grid: list[Any]) -> None:
        """Build every cell's data module first, so a bad value fails before any training."""
        data = config.data
        data_class = self.datamodule_class
        if "class_path" in data:
            module, _, name = data.class_path.rpartition(".")
            data_class = getattr(importlib.import_module(module), name)
        for grid_value in grid:
            for arm in (BASELINE, METHOD):
                seed = config.compare.seeds[0]
                data_class(**self._cell_data_args(config, grid_value, seed, arm))

    def _run_cell(self, base: Namespace, grid_value: Any, seed: int, arm: str) -> float:
        config = copy.deepcopy(base)
        data_args = self._data_args(config)
        for key, value in self._cell_data_args(base, grid_value, seed, arm).items():
            data_args[key] = value
        config.seed_everything = seed
        if arm == METHOD:
            existing = config.trainer.callbacks or []
            if not isinstance(existing, list):
                existing = [existing]
            config.trainer.callbacks = existing + list(config.compare.method_callbacks)
        logger = config.trainer.logger
        if isinstance(logger, Namespace) and str(logger.get("class_path", "")).endswith(
            "WandbLogger"
        ):
            label = f"{config.compare.grid_field}={grid_value}"
            logger.init_args.name = f"{label}-{self._arm_names[arm]}-seed{seed}"
            logger.init_args.group = config.compare.name
        self.config = config
        seed_everything(seed, workers=True)
        self._instantiate_now = True
        try:
            self.instantiate_classes()
        finally:
            self._instantiate_now = False
        try:
            self.trainer.fit(self.model, datamodule=self.datamodule)
            checkpoint = self.trainer.checkpoint_callback
            ckpt_path = "best" if checkpoint is not None and checkpoint.best_model_path else None
            (metrics,) = self.trainer.test(
                self.model, datamodule=self.datamodule, ckpt_path=ckpt_path
            )
        finally:
            finish_wandb_runs(self.trainer.loggers)
        metric = config.compare.metric
        if metric not in metrics:
            raise KeyError(f"Test metric {metric!r} was not logged; logged: {sorted(metrics)}.")
        return float(metrics[metric])

    def _report(self) -> None:
        compare = self.config.compare
        columns, rows = summarize(self.results, self._arm_names, compare.grid_field)
        table = markdown_table(columns, rows)
        print(f"\n{compare.name}: {compare.metric} on the test split (mean ± std over seeds)\n")
        print(table, flush=True)
        out = Path(compare.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{compare.name}.md").write_text(table + "\n")
        (out / f"{compare.name}.json").write_text(
            json.dumps([asdict(r) for r in self.results], indent=2) + "\n"
        )
        self._log_table_to_wandb(columns, rows)

    def _log_table_to_wandb(self, columns: list[str], rows: list[list]) -> None:
        logger = self.config.trainer.logger
        if not (isinstance(logger, Namespace) and str(logger.class_path).endswith("WandbLogger")):
            return
        from lightning.pytorch.loggers import WandbLogger

        init_args = {**vars(logger.init_args), "name": f"{self.config.compare.name}-summary"}
        summary = WandbLogger(**{k: v for k, v in init_args.items() if v is not None})
        summary.log_table(key="results", columns=columns, data=[[str(v) for v in r] for r in rows])
        finish_wandb_runs([summary])
