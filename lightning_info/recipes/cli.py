"""``ComparisonCLI``: one LightningCLI config run as a grid of data sets x seeds x arms.

A recipe is a few lines::

    ComparisonCLI(MyModule, MyDataModule, default_config=Path(__file__).with_suffix(".yaml")).run()

Everything a LightningCLI accepts works (``--config``, ``--trainer.*``, ``--model.*``, ``--data.*``,
``--trainer.logger=CSVLogger``, ``--trainer.callbacks+=...``). The ``compare`` group adds the grid:

- ``compare.datasets``: values for the data module's ``compare.data_field`` (default ``name``);
- ``compare.seeds``: seeds passed to ``seed_everything`` before each run;
- ``compare.method_callbacks``: callbacks added to ``trainer.callbacks`` in the method arm only;
- ``compare.metric``: the test metric collected into the results table.

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

    dataset: str
    seed: int
    arm: str
    metric: str
    value: float


def summarize(results: list[RunResult], arm_names: dict[str, str]) -> tuple[list[str], list[list]]:
    """Table rows ``dataset | baseline mean ± std | method mean ± std | difference | n``."""
    columns = ["dataset", arm_names[BASELINE], arm_names[METHOD], "difference", "seeds"]
    rows = []
    for dataset in dict.fromkeys(r.dataset for r in results):
        per_arm = {
            arm: [r.value for r in results if r.dataset == dataset and r.arm == arm]
            for arm in (BASELINE, METHOD)
        }
        means = {arm: statistics.fmean(v) if v else float("nan") for arm, v in per_arm.items()}
        rows.append(
            [
                dataset,
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
        parser.add_argument(
            "--compare.name",
            type=str,
            default="comparison",
            help="Name of the comparison (W&B group, output file names).",
        )
        parser.add_argument(
            "--compare.datasets",
            type=list[str],
            default=[],
            help="Values of the data module's `data_field`; empty: the configured one.",
        )
        parser.add_argument("--compare.data_field", type=str, default="name")
        parser.add_argument("--compare.seeds", type=list[int], default=[0])
        parser.add_argument(
            "--compare.method_callbacks",
            type=list[Callback],
            default=[],
            help="Callbacks that make the method arm; the baseline runs without them.",
        )
        parser.add_argument("--compare.metric", type=str, default="test/acc")
        parser.add_argument("--compare.baseline_name", type=str, default="baseline")
        parser.add_argument("--compare.method_name", type=str, default="method")
        parser.add_argument("--compare.output_dir", type=str, default="results")

    def before_instantiate_classes(self) -> None:
        compare = self.config.compare
        if not compare.seeds:
            raise ValueError("`compare.seeds` is empty: give at least one seed, e.g. [0].")
        if not compare.method_callbacks:
            raise ValueError(
                "`compare.method_callbacks` is empty, so both arms would be identical: "
                "list the callbacks of the method (see recipes/*.yaml)."
            )

    def run(self) -> list[RunResult]:
        """Run every grid cell, then print and save the results table."""
        base = self.config
        compare = base.compare
        datasets = list(compare.datasets) or [self._data_args(base)[compare.data_field]]
        self._check_datasets(base, datasets)
        cells = [(d, s, a) for d in datasets for s in compare.seeds for a in (BASELINE, METHOD)]
        for index, (dataset, seed, arm) in enumerate(cells, start=1):
            value = self._run_cell(base, dataset, seed, arm)
            self.results.append(RunResult(dataset, seed, arm, compare.metric, value))
            print(
                f"[{index}/{len(cells)}] {dataset} seed={seed} {self._arm_names[arm]}: "
                f"{compare.metric}={value:.4f}",
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

    def _check_datasets(self, config: Namespace, datasets: list[str]) -> None:
        """Build the data module for every data set first, so a typo fails before any training."""
        data = config.data
        data_class = self.datamodule_class
        if "class_path" in data:
            module, _, name = data.class_path.rpartition(".")
            data_class = getattr(importlib.import_module(module), name)
        for dataset in datasets:
            init_args = {**vars(self._data_args(config)), config.compare.data_field: dataset}
            data_class(**init_args)

    def _run_cell(self, base: Namespace, dataset: str, seed: int, arm: str) -> float:
        config = copy.deepcopy(base)
        self._data_args(config)[config.compare.data_field] = dataset
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
            logger.init_args.name = f"{dataset}-{self._arm_names[arm]}-seed{seed}"
            logger.init_args.group = config.compare.name
        self.config = config
        seed_everything(seed, workers=True)
        self.instantiate_classes()
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
        columns, rows = summarize(self.results, self._arm_names)
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
