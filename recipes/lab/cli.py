"""``ComparisonCLI``: one LightningCLI config run as a grid of values x seeds x {baseline, method}.

A recipe is a few lines::

    ComparisonCLI(MyModule, MyDataModule, default_config=Path(__file__).with_suffix(".yaml")).run()

Everything a LightningCLI accepts works (``--config``, ``--trainer.*``, ``--model.*``, ``--data.*``,
``--trainer.logger=CSVLogger``, ``--trainer.callbacks+=...``). The ``compare`` group adds the grid:

- ``compare.grid``: values of the data module's argument ``compare.grid_field`` (default
  ``name``: data sets; or budgets, sizes, ...);
- ``compare.seeds``: seeds passed to ``seed_everything`` before each run (and to the argument
  ``compare.seed_field``, if set: a data-module one, or ``model.<arg>``);
- the arms: ``compare.method_callbacks`` are added to ``trainer.callbacks`` in the method arm
  only; ``compare.baseline_data`` / ``compare.method_data`` override data-module arguments;
- or any number of arms: ``compare.arms`` maps each arm's name to its overrides of ``model``,
  ``data`` and ``trainer`` arguments (``{"ROME": {"model": {"attack": {"robust": true}}}, ...}``:
  a nested mapping changes the named fields of an option group or network and keeps the others,
  :func:`merge_override`; ``trainer: {callbacks+: [...]}`` adds callbacks to the config's list,
  where ``callbacks`` replaces it); the first arm is the reference the others are compared with;
- ``compare.metric`` (or several, ``compare.metrics``): the test metrics in the results table.
- ``compare.resume``: keep every study job's outcome in ``<output_dir>/<compare.name>_jobs`` and
  read the saved ones back, so that a long study interrupted and run again resumes where it
  stopped (:func:`~lab.study.saved_jobs`).

``compare.grid_field`` names a data-module argument (``name``) or, with a prefix, a model one
(``model.images_per_class``). A single arm is allowed when the comparison lives in callbacks
(e.g. a report over several scorers) or in a study.

What a method measures beyond fit/test (extra tables, plots) is a
:class:`~lab.study.Study`
named under ``studies`` in the YAML; the studies run
after the grid and their tables and figures are printed, written and logged the same way for every
recipe (see :mod:`lab.study`). A recipe that trains nothing through the grid
passes no model class (``ComparisonCLI(None, None, ...)``): then the config has no ``model`` or
``data`` section and only the studies run.

Classes are instantiated afresh for every grid cell (not once up front), so a recipe may prepare
what the config points at (e.g. pretrain a base model) between parsing and :meth:`run`.

Each run is fitted, then tested (on the best checkpoint when a monitored ``ModelCheckpoint`` is
configured). The logger defaults to W&B, offline unless W&B is configured, one W&B run per grid
cell grouped under ``compare.name``. The table is printed and written to ``compare.output_dir``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import statistics
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml
from jsonargparse import Namespace
from lightning.pytorch import Callback, seed_everything
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI, SaveConfigCallback
from scipy.stats import wilcoxon

from lab.study import Study, StudyResult, saved_jobs
from lab.wandb_runs import (
    cell_run_config,
    invocation_group,
    log_grid_summary,
    run_tags,
    study_run_config,
)
from lightning_info.core.files import atomic_savefig, atomic_write_text
from lightning_info.core.logging import (
    announce_wandb_runs,
    default_wandb_logger_config,
    finish_wandb_runs,
    log_wandb_line_plots,
    log_wandb_tables,
    markdown_table,
    mean_std,
    metric_key,
)
from lightning_info.core.optional import import_object
from lightning_info.core.threads import deterministic_algorithms, run_environment, torch_threads
from lightning_info.core.trainers import lightning_notices_hidden

BASELINE, METHOD = "baseline", "method"
_ARM_SECTIONS = ("model", "data", "trainer")
APPEND_CALLBACKS = "callbacks+"
"""An arm's ``trainer`` key whose callbacks join the config's (as ``--trainer.callbacks+=``)."""


@dataclass(frozen=True)
class Arm:
    """One arm of the comparison: its id in the results, its display name and its overrides."""

    id: str
    name: str
    overrides: dict[str, dict[str, Any]]
    with_method_callbacks: bool = False


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
    """Table rows ``grid value [| metric] | mean ± std per arm [| difference] | seeds``.

    The metric column appears when the results hold several metrics; the difference (second arm
    minus first, in means) when there are exactly two arms. With two arms and two or more grid
    values a last row per metric pools the grid: each arm's mean ± std over the grid values'
    means, the mean difference, how many grid values the second arm raised, and the two-sided
    p-value of scipy's paired Wilcoxon signed-rank test over the grid values' mean differences
    (exact for small samples; zero differences dropped).
    """
    arms = list(arm_names)
    metrics = list(dict.fromkeys(r.metric for r in results))
    several = len(metrics) > 1
    columns = [grid_label, *(["metric"] if several else []), *arm_names.values()]
    columns += ["difference"] if len(arms) == 2 else []
    columns.append("seeds")
    rows = []
    for grid_value in dict.fromkeys(r.grid_value for r in results):
        for metric in metrics:
            per_arm = {
                arm: [
                    r.value
                    for r in results
                    if r.grid_value == grid_value and r.arm == arm and r.metric == metric
                ]
                for arm in arms
            }
            row = [grid_value, *([metric] if several else [])]
            row += [mean_std(per_arm[arm]) for arm in arms]
            if len(arms) == 2:
                means = [statistics.fmean(v) if v else float("nan") for v in per_arm.values()]
                row.append(f"{means[1] - means[0]:+.4f}")
            row.append(max(len(v) for v in per_arm.values()))
            rows.append(row)
    grid_values = list(dict.fromkeys(r.grid_value for r in results))
    if len(arms) == 2 and len(grid_values) >= 2:
        for metric in metrics:
            rows.append(_paired_row(results, arms, grid_values, metric, several))
    return columns, rows


WIDE_AFTER = 4
"""With more metrics than this, the printed table has one row per grid value and arm and one
column per metric (a metric per row would run to dozens of lines)."""


def _cell(values: list[float]) -> str:
    """A wide table's cell: an integer count as an integer, one seed's value alone, several as
    ``mean ± std``."""
    if not values:
        return "-"
    if len(values) == 1:
        value = values[0]
        return str(int(value)) if float(value).is_integer() else f"{value:.4f}"
    return mean_std(values)


def wide_table(
    results: list[RunResult], arm_names: dict[str, str], grid_label: str = "dataset"
) -> tuple[list[str], list[list]]:
    """Rows ``grid value | arm | one cell per metric | seeds``; each cell as :func:`_cell`."""
    metrics = list(dict.fromkeys(r.metric for r in results))
    rows = []
    for grid_value in dict.fromkeys(r.grid_value for r in results):
        for arm, name in arm_names.items():
            mine = [r for r in results if r.grid_value == grid_value and r.arm == arm]
            if not mine:
                continue
            cells = [_cell([r.value for r in mine if r.metric == m]) for m in metrics]
            rows.append([grid_value, name, *cells, len({r.seed for r in mine})])
    return [grid_label, "arm", *metrics, "seeds"], rows


def _paired_row(results, arms, grid_values, metric, several) -> list:
    """The pooled row of :func:`summarize`: arms over grid values, with the Wilcoxon test."""
    means = {
        arm: [
            statistics.fmean(
                r.value
                for r in results
                if r.grid_value == g and r.arm == arm and r.metric == metric
            )
            for g in grid_values
        ]
        for arm in arms
    }
    differences = [b - a for a, b in zip(means[arms[0]], means[arms[1]])]
    raised = sum(d > 0 for d in differences)
    p = "n/a"  # every difference zero: no signed rank to test
    if any(d != 0 for d in differences):
        p = f"{wilcoxon(differences).pvalue:.3g}"
    row = [f"all {len(grid_values)} (paired Wilcoxon)", *([metric] if several else [])]
    row += [mean_std(means[arm]) for arm in arms]
    row.append(f"{statistics.fmean(differences):+.4f} ({raised}/{len(differences)} up, p = {p})")
    row.append(len(grid_values))
    return row


SILENT_WANDB = {"settings": {"silent": True}}
"""``wandb.init`` arguments of a run without banner or run summary."""


DEFAULT_THREADS = 2
"""torch threads of a recipe when neither ``compare.threads`` nor ``OMP_NUM_THREADS`` says."""


def recipe_threads(threads: int | None) -> int:
    """``threads`` when given, else ``OMP_NUM_THREADS`` (the variable every BLAS and torch read),
    else :data:`DEFAULT_THREADS`."""
    if threads is not None:
        return threads
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    if not value:
        return DEFAULT_THREADS
    if not value.isdigit() or int(value) < 1:
        raise ValueError(
            f"OMP_NUM_THREADS={value!r} is not a positive integer; set it to a thread count "
            "(e.g. 2) or unset it, or pass --compare.threads."
        )
    return int(value)


@contextmanager
def hub_progress_bars_off() -> Iterator[None]:
    """No Hugging Face (transformers, datasets) progress bars inside the block: a recipe prints
    one line per cell, and loading a model or mapping a data set per cell would add bars."""
    import datasets
    from transformers.utils import logging as transformers_logging

    datasets_on = not datasets.are_progress_bars_disabled()
    transformers_on = transformers_logging.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if datasets_on:
            datasets.enable_progress_bars()
        if transformers_on:
            transformers_logging.enable_progress_bar()


TABLE_KEY_LENGTH = 64
"""The longest W&B key of a study's table or chart (W&B names the artifact that holds a table
after its key, and refuses names over 128 characters)."""


def table_key(study: str, title: str) -> str:
    """The W&B key of a study's table or chart: :func:`metric_key` of the study and the title;
    a key past :data:`TABLE_KEY_LENGTH` is cut, with a digest of the whole title to keep two
    long titles apart."""
    key = metric_key(study, title)
    if len(key) <= TABLE_KEY_LENGTH:
        return key
    digest = hashlib.sha1(key.encode()).hexdigest()[:6]
    return f"{key[: TABLE_KEY_LENGTH - 7].rstrip('_/.-')}_{digest}"


def merge_override(section: Namespace, key: str, value: Any) -> None:
    """``section[key] = value``, where a mapping merges into the group it overrides field by field
    (into the ``init_args`` of a ``class_path`` group unless it names another class), so that an
    arm's ``model: {attack: {robust: false}}`` keeps the group's other fields. ``key`` may be
    dotted (``attack.robust``)."""
    current = section.get(key) if key in section else None
    if isinstance(value, Namespace):
        value = value.as_dict()
    if not (isinstance(value, dict) and isinstance(current, Namespace)):
        section[key] = value
        return
    fields = dict(value)
    if "class_path" in current:
        if fields.pop("class_path", current.class_path) != current.class_path:
            section[key] = value  # another class: its own arguments only
            return
        fields = dict(fields.pop("init_args", {}), **fields)
        if "init_args" not in current:
            current.init_args = Namespace()
        current = current.init_args
    for name, item in fields.items():
        merge_override(current, name, item)


def _append_callbacks(trainer: Namespace, added: Any) -> None:
    """``trainer.callbacks`` with ``added`` (a callback spec or a list of them) after its own."""
    existing = trainer.get("callbacks") or []
    existing = list(existing) if isinstance(existing, list) else [existing]
    added = added if isinstance(added, list) else [added]
    trainer["callbacks"] = existing + list(added)


class _SavesWithoutCheck:
    """A parser whose ``save`` skips jsonargparse's type check; everything else is the parser's."""

    def __init__(self, parser: LightningArgumentParser) -> None:
        self._parser = parser

    def save(self, *args: Any, **kwargs: Any) -> None:
        return self._parser.save(*args, skip_check=True, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._parser, name)


class CellConfigCallback(SaveConfigCallback):
    """Lightning's ``SaveConfigCallback`` (each cell's ``config.yaml`` in its log folder), saving
    without type-checking the config again: jsonargparse's check walks every arm's nested class
    configs and took most of a cell's time (6.8 s against 0.46 s unchecked for the SFT
    pipeline's config on 2 cores). The grid checks each arm's cell config once
    (``parser.check_config``) before its first cell, and the cell's classes are built from it
    before this saves it."""

    def __init__(self, parser: LightningArgumentParser, config: Any, **kwargs: Any) -> None:
        super().__init__(_SavesWithoutCheck(parser), config, **kwargs)


class ComparisonCLI(LightningCLI):
    """LightningCLI that fits and tests a baseline and a method arm over data sets and seeds,
    then runs the recipe's studies."""

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
        self.has_grid = model_class is not None
        if not self.has_grid and datamodule_class is not None:
            raise ValueError("A recipe without a model class has no grid: pass no data module.")
        parser_kwargs = dict(kwargs.pop("parser_kwargs", {}))
        if default_config is not None:
            parser_kwargs.setdefault("default_config_files", [str(default_config)])
        trainer_defaults = {
            "logger": default_wandb_logger_config(),
            # checkpoints and the saved config of a run without a logger go here too
            "default_root_dir": "lightning_logs",
            "enable_model_summary": False,  # one progress line per cell instead
            **kwargs.pop("trainer_defaults", {}),
        }
        super().__init__(
            model_class,
            datamodule_class,
            run=False,
            args=args,
            parser_kwargs=parser_kwargs,
            trainer_defaults=trainer_defaults,
            save_config_callback=CellConfigCallback,
            save_config_kwargs={"overwrite": True},
            seed_everything_default=0,
            **kwargs,
        )
        self.results: list[RunResult] = []
        self._checked_arms: set[str] = set()
        self._wandb_silent = False
        self._group = invocation_group(self.config.compare.name)
        self.study_results: dict[str, StudyResult] = {}

    def add_core_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        """The trainer, model and data sections; only the trainer's (its logger) without a grid."""
        if self.has_grid:
            super().add_core_arguments_to_parser(parser)
            return
        parser.add_lightning_class_args(self.trainer_class, "trainer")
        parser.set_defaults(
            {"trainer." + k: v for k, v in self.trainer_defaults.items() if k != "callbacks"}
        )

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
            help="Argument set to each run's seed: a data-module one (`seed`, `data.seed`) or "
            "a model one (`model.seed`).",
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
        add(
            "--compare.arms",
            type=dict[str, dict[str, dict[str, Any]]],
            default={},
            help="Arm name -> overrides of `model`, `data` and `trainer` arguments (any number "
            "of arms; replaces the baseline/method pair).",
        )
        add("--compare.metric", type=str, default="test/acc")
        add(
            "--compare.metrics",
            type=list[str],
            default=[],
            help="Several test metrics for the table; empty: `compare.metric`.",
        )
        add("--compare.baseline_name", type=str, default="baseline")
        add("--compare.method_name", type=str, default="method")
        add("--compare.output_dir", type=str, default="results")
        add(
            "--compare.threads",
            type=int | None,
            default=None,
            help="torch threads for the whole recipe; none: OMP_NUM_THREADS when it is set, "
            "else 2 (0: torch's default, the core count). A float reduction's order follows the "
            "thread count, so the same seeds give the same table only at the same count; it is "
            "printed above the table.",
        )
        add(
            "--compare.resume",
            type=bool,
            default=False,
            help="Keep each study job's outcome in <output_dir>/<compare.name>_jobs/ as it "
            "finishes and reuse the saved ones: a study interrupted and run again resumes where "
            "it stopped (delete the folder after changing the code).",
        )
        add(
            "--compare.deterministic",
            type=bool,
            default=True,
            help="torch.use_deterministic_algorithms(True, warn_only=True) for the recipe.",
        )
        parser.add_argument(
            "--studies",
            type=dict[str, Study | None],
            default={},
            help="Name -> a Study (class_path, init_args) run after the grid; null skips one.",
        )

    def before_instantiate_classes(self) -> None:
        compare = self.config.compare
        if not self.has_grid:
            if not any(self.config.studies.values()):
                raise ValueError("A recipe without a model class needs at least one study.")
            return
        if not compare.seeds:
            raise ValueError("`compare.seeds` is empty: give at least one seed, e.g. [0].")
        if compare.arms:
            if compare.method_callbacks or compare.baseline_data or compare.method_data:
                raise ValueError(
                    "Give either `compare.arms` or the baseline/method fields "
                    "(`method_callbacks`, `baseline_data`, `method_data`), not both."
                )
            for name, overrides in compare.arms.items():
                unknown = set(overrides) - set(_ARM_SECTIONS)
                if unknown:
                    raise ValueError(
                        f"Arm {name!r} overrides unknown sections {sorted(unknown)}; "
                        f"use {list(_ARM_SECTIONS)}."
                    )
            specs = [repr(sorted(o.items())) for o in compare.arms.values()]
            if len(set(specs)) < len(specs):
                raise ValueError("Two arms of `compare.arms` have the same overrides.")
        elif not compare.method_callbacks and compare.method_data == compare.baseline_data:
            raise ValueError(
                "The baseline and method arms are identical: give `compare.method_callbacks` "
                "or different `compare.method_data` / `compare.baseline_data` (see recipes/*.yaml)."
            )

    def instantiate_classes(self) -> None:
        """Deferred: LightningCLI calls this once after parsing; each grid cell calls it again."""
        if self._instantiate_now:
            super().instantiate_classes()

    @property
    def output_dir(self) -> Path:
        """``compare.output_dir``, created: where tables, figures and studies' files go."""
        out = Path(self.config.compare.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        return out

    def run(self) -> list[RunResult]:
        """Run every grid cell, print and save the results table, then run the studies, at
        ``compare.threads`` torch threads and with deterministic algorithms."""
        compare = self.config.compare
        with (
            torch_threads(recipe_threads(compare.threads)),
            deterministic_algorithms(compare.deterministic),
            lightning_notices_hidden(),
            hub_progress_bars_off(),
        ):
            self._wandb_silent = announce_wandb_runs(*self._wandb_settings())
            self.environment = run_environment(compare.deterministic)
            if self.has_grid:
                self._run_grid()
            for name, study in self._studies().items():
                print(f"{compare.name}: study {name!r} ...", flush=True)
                with self._saved_jobs():
                    self.study_results[name] = result = study.run(self)
                self._report_study(name, result)
        return self.results

    def _saved_jobs(self):
        """:func:`~lab.study.saved_jobs` in ``<output_dir>/<compare.name>_jobs`` with
        ``compare.resume``, else nothing."""
        compare = self.config.compare
        if not compare.resume:
            return nullcontext()
        return saved_jobs(Path(compare.output_dir) / f"{compare.name}_jobs")

    def _run_grid(self) -> None:
        base = self.config
        compare = base.compare
        grid = list(compare.grid) or [self._grid_default(base)]
        self._check_data_modules(base, grid)
        arms = self._arms
        metrics = list(compare.metrics) or [compare.metric]
        cells = [(g, s, a) for g in grid for s in compare.seeds for a in arms]
        for index, (grid_value, seed, arm) in enumerate(cells, start=1):
            values = self._run_cell(base, grid_value, seed, arm, metrics)
            self.results += [
                RunResult(grid_value, seed, arm.id, metric, value)
                for metric, value in zip(metrics, values)
            ]
            shown = ", ".join(f"{m}={_cell([v])}" for m, v in zip(metrics, values))
            print(
                f"[{index}/{len(cells)}] {compare.grid_field}={grid_value} seed={seed} "
                f"{arm.name}: {shown}",
                flush=True,
            )
        self.config = base
        self._report()

    def _studies(self) -> dict[str, Study]:
        """The configured studies, instantiated (their arguments are plain values)."""
        studies = {}
        for name, spec in self.config.studies.items():
            if spec is None:
                continue
            study_class = import_object(spec.class_path)
            init_args = spec.get("init_args")
            studies[name] = study_class(**(init_args.as_dict() if init_args else {}))
        return studies

    @property
    def _arms(self) -> list[Arm]:
        compare = self.config.compare
        if compare.arms:
            return [Arm(name, name, dict(overrides)) for name, overrides in compare.arms.items()]
        return [
            Arm(BASELINE, compare.baseline_name, {"data": dict(compare.baseline_data)}),
            Arm(METHOD, compare.method_name, {"data": dict(compare.method_data)}, True),
        ]

    @property
    def _arm_names(self) -> dict[str, str]:
        return {arm.id: arm.name for arm in self._arms}

    @staticmethod
    def _init_args(section: Namespace) -> Namespace:
        return section.init_args if "init_args" in section else section

    def _data_args(self, config: Namespace) -> Namespace:
        """The data module's arguments; empty when the model brings its own loaders."""
        data = config.get("data")
        return Namespace() if data is None else self._init_args(data)

    @staticmethod
    def _target(field: str, option: str) -> tuple[str, str]:
        """``("data" | "model", argument)`` named by ``arg``, ``data.arg`` or ``model.arg``."""
        section, _, name = field.rpartition(".")
        if section not in ("", "data", "model"):
            raise ValueError(
                f"`compare.{option}` must be a data argument, `data.<arg>` or `model.<arg>`; "
                f"got {field!r}."
            )
        return section or "data", name

    def _grid_target(self, config: Namespace) -> tuple[str, str]:
        return self._target(config.compare.grid_field, "grid_field")

    def _seed_target(self, config: Namespace) -> tuple[str, str] | None:
        field = config.compare.seed_field
        return None if not field else self._target(field, "seed_field")

    def _grid_default(self, config: Namespace) -> Any:
        section, name = self._grid_target(config)
        arguments = self._init_args(config[section])
        if name not in arguments:
            raise ValueError(
                f"`compare.grid_field` is {config.compare.grid_field!r}, which is not an argument "
                f"of the {section} section; name one of {sorted(vars(arguments))}."
            )
        return arguments[name]

    def _cell_config(self, base: Namespace, grid_value: Any, seed: int, arm: Arm) -> Namespace:
        """The parsed config of one grid cell: ``base`` with the arm's overrides merged into its
        sections, the grid value and the seed set, the method callbacks added."""
        config = copy.deepcopy(base)
        sections = {"model": self._init_args(config.model), "trainer": config.trainer}
        if config.get("data") is not None:
            sections["data"] = self._data_args(config)
        for section, overrides in arm.overrides.items():
            if section == "data" and "data" not in sections:
                raise ValueError(f"Arm {arm.name!r} overrides `data`, but the recipe has none.")
            for key, value in overrides.items():
                if section == "trainer" and key == APPEND_CALLBACKS:
                    _append_callbacks(sections["trainer"], value)
                else:
                    merge_override(sections[section], key, value)
        for target, value in (
            (self._grid_target(base), grid_value),
            (self._seed_target(base), seed),
        ):
            if target is not None and target[0] in sections:
                sections[target[0]][target[1]] = value
        config.seed_everything = seed
        if arm.with_method_callbacks:
            existing = config.trainer.callbacks or []
            if not isinstance(existing, list):
                existing = [existing]
            config.trainer.callbacks = existing + list(config.compare.method_callbacks)
        return config

    def _check_data_modules(self, config: Namespace, grid: list[Any]) -> None:
        """Build every cell's data module first, through the parser as the cell will build it,
        so that a bad value fails before any training."""
        if config.get("data") is None:
            return
        # The data section alone, parsed (types checked) and built as LightningCLI builds it;
        # the recipe's links all run from the data module to the model.
        parser = LightningArgumentParser(exit_on_error=False)
        parser.add_lightning_class_args(
            self.datamodule_class, "data", subclass_mode=self.subclass_mode_data
        )
        instantiate = getattr(parser, "instantiate", None) or parser.instantiate_classes  # 4.49+
        for grid_value in grid:
            for arm in self._arms:
                cell = self._cell_config(config, grid_value, config.compare.seeds[0], arm)
                parsed = parser.parse_object({"data": cell.data.as_dict()})
                instantiate(parsed)

    def _run_cell(
        self, base: Namespace, grid_value: Any, seed: int, arm: Arm, metrics: list[str]
    ) -> list[float]:
        config = self._cell_config(base, grid_value, seed, arm)
        logger = config.trainer.logger
        if isinstance(logger, Namespace) and str(logger.get("class_path", "")).endswith(
            "WandbLogger"
        ):
            compare = config.compare
            label = f"{compare.grid_field}={grid_value}"
            logger.init_args.name = f"{label}-{arm.name}-seed{seed}"
            logger.init_args.group = logger.init_args.get("group") or self._group
            identity = {"grid_field": compare.grid_field, "grid_value": grid_value, "seed": seed}
            run = {
                "config": cell_run_config(config, recipe=compare.name, arm=arm.name, **identity),
                "job_type": arm.name[:64],
                "tags": run_tags(compare.name, arm.name, **identity),
            }
            if self._wandb_silent:  # per run: W&B ignores its environment once it has started
                run.update(SILENT_WANDB)
            logger.dict_kwargs = {**(logger.get("dict_kwargs") or {}), **run}
        if arm.name not in self._checked_arms:  # the arm's overrides, type-checked once
            self.parser.check_config(config)
            self._checked_arms.add(arm.name)
        self.config = config
        # LightningCLI caches the config it records as hyperparameters (`config_dump`) on first
        # use: every cell records its own arguments, dumped without a second check (see
        # CellConfigCallback).
        self.config_dump = yaml.safe_load(
            self.parser.dump(
                config, skip_link_targets=False, skip_none=False, format="yaml", skip_check=True
            )
        )
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
            (logged,) = self.trainer.test(
                self.model, datamodule=self.datamodule, ckpt_path=ckpt_path, verbose=False
            )
        finally:
            finish_wandb_runs(self.trainer.loggers)
        missing = [metric for metric in metrics if metric not in logged]
        if missing:
            raise KeyError(f"Test metrics {missing} were not logged; logged: {sorted(logged)}.")
        return [float(logged[metric]) for metric in metrics]

    def _report(self) -> None:
        """Write and log the results table, then print it: the table is the run's last output
        (W&B prints its own summary when its run closes, so that happens first)."""
        compare = self.config.compare
        columns, rows = summarize(self.results, self._arm_names, compare.grid_field)
        table = markdown_table(columns, rows)
        if len(compare.metrics) > WIDE_AFTER:
            table = markdown_table(*wide_table(self.results, self._arm_names, compare.grid_field))
        out = self.output_dir
        text = f"{self.environment}\n\n{table}"
        atomic_write_text(out / f"{compare.name}.md", text + "\n")
        atomic_write_text(
            out / f"{compare.name}.json",
            json.dumps([asdict(r) for r in self.results], indent=2) + "\n",
        )
        self._log_table_to_wandb(columns, rows)
        shown = ", ".join(compare.metrics or [compare.metric])
        print(f"\n{compare.name}: {shown} on the test split (mean ± std over seeds)\n")
        print(text, flush=True)

    def _log_table_to_wandb(self, columns: list[str], rows: list[list]) -> None:
        """The summary run: the printed table, the per-cell and mean/std tables as numbers, the
        charts (:func:`~lab.wandb_runs.log_grid_summary`)."""
        summary = self.wandb_run("summary")
        if summary is not None:
            compare = self.config.compare
            log_wandb_tables([summary], {"results": (columns, rows)})
            log_grid_summary(
                summary,
                self.results,
                self._arm_names,
                compare.grid_field,
                list(compare.metrics) or [compare.metric],
                self.output_dir,
                compare.name,
            )
            finish_wandb_runs([summary])

    def _report_study(self, name: str, result: StudyResult) -> None:
        """Write, log, then print a study's tables (and save and log its figures)."""
        stem = f"{self.config.compare.name}_{name}"
        out = self.output_dir
        text = "\n\n".join(
            f"{title}\n\n{markdown_table(*table)}" for title, table in result.tables.items()
        )
        atomic_write_text(out / f"{stem}.md", text + "\n")
        tables = {title: {"columns": c, "rows": r} for title, (c, r) in result.tables.items()}
        atomic_write_text(
            out / f"{stem}.json",
            json.dumps({"tables": tables, "records": result.records}, indent=1) + "\n",
        )
        paths = {}
        for key, figure in result.figures.items():
            paths[key] = out / f"{stem}_{key}.png"
            atomic_savefig(figure, paths[key], dpi=120)
        run = self.wandb_run(name)
        if run is not None:
            for key, path in paths.items():
                run.log_image(key=f"{name}/{key}", images=[str(path)])
            keyed = {table_key(name, title): table for title, table in result.tables.items()}
            log_wandb_tables([run], keyed)
            plots = {table_key(name, key): plot for key, plot in result.line_plots.items()}
            log_wandb_line_plots([run], plots)
            finish_wandb_runs([run])
        print(f"\n{self.config.compare.name}: {name}\n\n{text}\n", flush=True)

    def _wandb_settings(self) -> tuple[str | None, bool]:
        """The W&B logger's ``save_dir`` (``None`` when the logger is not W&B) and offline flag."""
        logger = self.config.trainer.logger
        if not (isinstance(logger, Namespace) and str(logger.class_path).endswith("WandbLogger")):
            return None, True
        return str(logger.init_args.save_dir or "."), bool(logger.init_args.offline)

    def wandb_run(self, suffix: str):
        """A ``WandbLogger`` run ``<compare.name>-<suffix>`` in the recipe's group, configured as
        the trainer's logger, or ``None`` when the logger is not W&B. The caller finishes it."""
        logger = self.config.trainer.logger
        if not (isinstance(logger, Namespace) and str(logger.class_path).endswith("WandbLogger")):
            return None
        init_args = {
            **vars(logger.init_args),
            **(SILENT_WANDB if self._wandb_silent else {}),
            "name": f"{self.config.compare.name}-{suffix}",
            "group": logger.init_args.get("group") or self._group,
            "job_type": "summary" if suffix == "summary" else "study",
            "config": study_run_config(self.config, recipe=self.config.compare.name, study=suffix),
        }
        logger_class = import_object(str(logger.class_path))
        return logger_class(**{k: v for k, v in init_args.items() if v is not None})


def run_study_recipe(recipe_file: str | Path, args: Any = None) -> ComparisonCLI:
    """Run a recipe without a grid, only its studies, configured by the YAML next to
    ``recipe_file`` (``recipes/x.py`` reads ``recipes/x.yaml``); returns the CLI."""
    cli = ComparisonCLI(
        None, None, default_config=Path(recipe_file).with_suffix(".yaml"), args=args
    )
    cli.run()
    return cli
