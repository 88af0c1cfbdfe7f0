"""What a recipe puts in W&B beyond each cell's own metrics: the run config a person filters by,
and the summary run's numbers and charts.

- every run of one recipe invocation shares a ``group`` (:func:`invocation_group`); a cell's run
  has ``job_type`` = its arm, tags (recipe, arm, grid value, seed) and a config
  (:func:`cell_run_config`) that holds the cell's resolved LightningCLI config under ``cli`` and,
  at the top, ``recipe``, ``arm``, ``grid_field``, ``grid_value``, ``grid_seed`` (the seed in the
  run's name; not ``seed``, which Lightning's hyperparameter logging overwrites with a data
  module's own ``seed`` argument), ``callbacks`` and ``lightning_info`` (the package version);
- the summary run (:func:`log_grid_summary`) holds the results as numbers: ``results/cells``
  (one row per cell and metric value), ``results/mean_std`` (one row per grid value and arm),
  a bar chart of the means per metric, a line chart of the means against the grid value where
  the grid is numeric (NLL against the budget), and the error-bar figure
  (:func:`error_bar_figure`, saved as PNG beside the tables and logged as an image).
"""

from __future__ import annotations

import json
import secrets
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jsonargparse import Namespace

import lightning_info
from lightning_info.core.files import atomic_savefig
from lightning_info.core.logging import metric_key

CELL_KEYS = ("recipe", "arm", "grid_field", "grid_value", "grid_seed")
"""The top-level config keys of every cell's run (besides ``callbacks``, ``lightning_info`` and
``cli``)."""


def invocation_group(recipe: str) -> str:
    """``<recipe>-<YYYYmmdd-HHMMSS>-<4 hex digits>``: the W&B group of every run of one invocation
    (the digits tell apart two invocations started in the same second)."""
    return f"{recipe}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def _plain(value: Any) -> Any:
    """``value`` (a jsonargparse Namespace, possibly nested) as JSON-safe builtins."""
    if isinstance(value, Namespace):
        value = value.as_dict()
    return json.loads(json.dumps(value, default=str))


def callback_names(trainer: Namespace) -> list[str]:
    """The class paths of the callbacks configured in ``trainer.callbacks``."""
    callbacks = trainer.get("callbacks") or []
    callbacks = callbacks if isinstance(callbacks, list) else [callbacks]
    names = []
    for spec in callbacks:
        if isinstance(spec, (Namespace, dict)):
            names.append(str(spec.get("class_path")))
        else:
            names.append(f"{type(spec).__module__}.{type(spec).__qualname__}")
    return names


def cell_run_config(
    config: Namespace, *, recipe: str, arm: str, grid_field: str, grid_value: Any, seed: int
) -> dict[str, Any]:
    """The W&B config of one cell's run: its identity at the top, its resolved config below."""
    return {
        "recipe": recipe,
        "arm": arm,
        "grid_field": grid_field,
        "grid_value": _plain(grid_value),
        "grid_seed": int(seed),
        "callbacks": callback_names(config.trainer),
        "lightning_info": lightning_info.__version__,
        "cli": _plain(config),
    }


def study_run_config(config: Namespace, *, recipe: str, study: str) -> dict[str, Any]:
    """The W&B config of a study's (or the summary's) run."""
    return {
        "recipe": recipe,
        "study": study,
        "lightning_info": lightning_info.__version__,
        "cli": _plain(config),
    }


def run_tags(recipe: str, arm: str, grid_field: str, grid_value: Any, seed: int) -> list[str]:
    """A cell's W&B tags (each at most 64 characters, W&B's limit)."""
    tags = [recipe, arm, f"{grid_field}={grid_value}", f"seed{seed}"]
    return [tag[:64] for tag in tags]


def _cells(results: Sequence[Any], metrics: list[str]) -> dict[tuple, dict[str, float]]:
    """``{(arm, grid value, seed): {metric: value}}`` in the results' order."""
    cells: dict[tuple, dict[str, float]] = {}
    for r in results:
        cells.setdefault((r.arm, r.grid_value, r.seed), {})[r.metric] = float(r.value)
    return cells


def results_tables(
    results: Sequence[Any], arm_names: dict[str, str], grid_field: str, metrics: list[str]
) -> dict[str, tuple[list[str], list[list]]]:
    """The grid's results as numeric tables: ``cells`` (arm, grid value, seed, one column per
    metric) and ``mean_std`` (arm, grid value, seeds, ``<metric>/mean``, ``<metric>/std``; the
    sample standard deviation, 0 for one seed)."""
    cells = _cells(results, metrics)
    per_cell = [
        [arm_names[arm], grid_value, seed, *(values.get(m, float("nan")) for m in metrics)]
        for (arm, grid_value, seed), values in cells.items()
    ]
    groups: dict[tuple, list[dict[str, float]]] = {}
    for (arm, grid_value, _), values in cells.items():
        groups.setdefault((arm, grid_value), []).append(values)
    summary = []
    for (arm, grid_value), runs in groups.items():
        row = [arm_names[arm], grid_value, len(runs)]
        for metric in metrics:
            values = [run[metric] for run in runs if metric in run]
            row.append(statistics.fmean(values))
            row.append(statistics.stdev(values) if len(values) > 1 else 0.0)
        summary.append(row)
    stats = [f"{m}/{s}" for m in metrics for s in ("mean", "std")]
    return {
        "cells": (["arm", grid_field, "seed", *metrics], per_cell),
        "mean_std": (["arm", grid_field, "seeds", *stats], summary),
    }


def close_figure(figure: Any) -> None:
    """Release ``figure`` from pyplot's registry (a recipe draws many)."""
    from lightning_info.core.plotting import pyplot

    pyplot().close(figure)


def error_bar_figure(mean_std: tuple[list[str], list[list]], metric: str, grid_field: str):
    """Grouped bars of ``metric``'s mean per grid value and arm, with ± one standard deviation
    over seeds as error bars (matplotlib; ``None`` without the ``plots`` extra)."""
    try:
        from lightning_info.core.plotting import pyplot

        plt = pyplot()
    except ImportError:
        return None
    columns, rows = mean_std
    mean, std = columns.index(f"{metric}/mean"), columns.index(f"{metric}/std")
    arms = list(dict.fromkeys(row[0] for row in rows))
    grid = list(dict.fromkeys(row[1] for row in rows))
    width = 0.8 / len(arms)
    figure, axis = plt.subplots(figsize=(max(4.0, 1.2 * len(grid) * len(arms)), 3.2))
    for a, arm in enumerate(arms):
        found = {row[1]: row for row in rows if row[0] == arm}
        xs = [g + (a - (len(arms) - 1) / 2) * width for g in range(len(grid))]
        axis.bar(
            xs,
            [found[g][mean] if g in found else float("nan") for g in grid],
            width,
            yerr=[found[g][std] if g in found else 0.0 for g in grid],
            capsize=3,
            label=arm,
        )
    axis.set_xticks(range(len(grid)), [str(g) for g in grid])
    axis.set_xlabel(grid_field)
    axis.set_ylabel(metric)
    axis.set_title(f"{metric}: mean ± std over seeds")
    axis.legend(fontsize="small")
    figure.tight_layout()
    return figure


def log_grid_summary(
    logger: Any,
    results: Sequence[Any],
    arm_names: dict[str, str],
    grid_field: str,
    metrics: list[str],
    out_dir: Path,
    stem: str,
) -> list[Path]:
    """Log the grid's numeric tables and charts to the W&B ``logger`` (a ``WandbLogger``) and save
    the error-bar figures as ``<out_dir>/<stem>_<metric>.png``; returns the saved paths."""
    import wandb

    tables = results_tables(results, arm_names, grid_field, metrics)
    for name, (columns, rows) in tables.items():
        logger.log_table(key=f"results/{name}", columns=columns, data=rows)
    columns, rows = tables["mean_std"]
    experiment = logger.experiment
    numeric_grid = all(
        isinstance(row[1], (int, float)) and not isinstance(row[1], bool) for row in rows
    )
    saved = []
    for metric in metrics:
        key = metric_key("results", "chart", metric)
        mean = columns.index(f"{metric}/mean")
        bars = wandb.Table(
            columns=["arm and " + grid_field, "mean"],
            data=[[f"{row[1]} · {row[0]}", row[mean]] for row in rows],
        )
        title = f"{metric}: mean over seeds per {grid_field} and arm"
        experiment.log({key: wandb.plot.bar(bars, "arm and " + grid_field, "mean", title=title)})
        if numeric_grid and len({row[1] for row in rows}) > 1:
            arms = list(dict.fromkeys(row[0] for row in rows))
            xs = sorted({row[1] for row in rows})
            by_arm = {arm: {row[1]: row[mean] for row in rows if row[0] == arm} for arm in arms}
            chart = wandb.plot.line_series(
                xs=[float(x) for x in xs],
                ys=[[by_arm[arm].get(x, float("nan")) for x in xs] for arm in arms],
                keys=arms,
                title=f"{metric} against {grid_field} (mean over seeds)",
                xname=grid_field,
            )
            experiment.log({metric_key("results", "curve", metric): chart})
        figure = error_bar_figure(tables["mean_std"], metric, grid_field)
        if figure is not None:
            path = out_dir / f"{stem}_{metric_key(metric).replace('/', '_')}.png"
            atomic_savefig(figure, path, dpi=120)
            close_figure(figure)
            logger.log_image(key=metric_key("results", "error_bars", metric), images=[str(path)])
            saved.append(path)
    return saved
