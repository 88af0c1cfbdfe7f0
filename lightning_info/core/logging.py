"""Logging helpers: W&B defaults that never need the network, logger-friendly names, and result
tables as numbers."""

from __future__ import annotations

import netrc
import os
import re
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from lightning.pytorch.loggers import Logger
from lightning.pytorch.loggers import WandbLogger as LightningWandbLogger

OFFLINE_MODES = {"offline", "dryrun", "disabled"}

METRIC_NAME = re.compile(r"[a-z0-9_/.-]+")
"""What every logged metric name matches: sortable, filterable and plottable in any logger."""

_SPELLED_OUT = (("%", "pct_"), ("@", "_at_"), ("±", "_pm_"), ("+", "plus"))


def metric_key(*parts: object) -> str:
    """The logged name of a figure: ``parts`` joined with ``/``, each lowercased, with ``%``,
    ``@`` and ``+`` spelled out and any other character outside ``[a-z0-9_.-]`` (spaces,
    parentheses, commas) as one ``_`` (none at a part's ends). The one rule every report
    follows: ``metric_key("failure", "MSP (temperature)", "AUROC")`` is
    ``"failure/msp_temperature/auroc"``, ``metric_key("audit", "target", "tpr@1%fpr")`` is
    ``"audit/target/tpr_at_1pct_fpr"``. A part may itself hold ``/``-separated parts."""
    names = []
    for part in parts:
        for piece in str(part).split("/"):
            text = piece.lower()
            for symbol, word in _SPELLED_OUT:
                text = text.replace(symbol, word)
            text = re.sub(r"[^a-z0-9_.-]+", "_", text)
            text = re.sub(r"_+", "_", text).strip("_")
            if not text:
                raise ValueError(f"{piece!r} in {parts!r} names nothing a logger can show.")
            names.append(text)
    return "/".join(names)


def wandb_is_configured() -> bool:
    """True when the user has W&B credentials: ``WANDB_API_KEY`` or a netrc entry for its host."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    host = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname
    netrc_path = Path(os.environ.get("NETRC", Path.home() / ".netrc"))
    try:
        return netrc.netrc(netrc_path).authenticators(host) is not None
    except (FileNotFoundError, netrc.NetrcParseError, PermissionError):
        return False


def announce_wandb_runs(save_dir: str | None, offline: bool) -> bool:
    """Say in one line where a recipe's W&B runs go; True when its runs should be started
    silent (``wandb.Settings(silent=True)``: no per-run banner or run summary), that is unless
    the user set ``WANDB_SILENT`` or ``WANDB_QUIET``. ``save_dir`` ``None``: no W&B logger."""
    if save_dir is None:
        return False
    where = f"offline, under {Path(save_dir) / 'wandb'} (`wandb sync` uploads)"
    print(f"W&B: one run per cell, {where if offline else 'online'}", flush=True)
    return not {"WANDB_SILENT", "WANDB_QUIET"} & set(os.environ)


def wandb_offline_by_default() -> bool:
    """Offline unless ``WANDB_MODE=online`` or W&B credentials are configured."""
    mode = os.environ.get("WANDB_MODE", "").lower()
    if mode in OFFLINE_MODES:
        return True
    if mode == "online":
        return False
    return not wandb_is_configured()


class WandbLogger(LightningWandbLogger):
    """Lightning's ``WandbLogger``, every argument and behaviour kept, without the two warnings
    that its defaults make W&B 0.19+ print on every run:

    - ``The anonymous setting has no effect``: Lightning passes ``anonymous=None`` to
      ``wandb.init`` when the argument is not given, and W&B warns for any value; it is passed
      only when given;
    - ``git root <save_dir> does not exist``: W&B looks for a git repository in ``save_dir``
      before creating it; ``save_dir`` is created first.
    """

    def __init__(self, *args: Any, anonymous: bool | None = None, **kwargs: Any) -> None:
        super().__init__(*args, anonymous=anonymous, **kwargs)
        if anonymous is None:
            self._wandb_init.pop("anonymous", None)
        if self._save_dir is not None:
            Path(self._save_dir).mkdir(parents=True, exist_ok=True)


def default_wandb_logger_config(project: str = "lightning-info", save_dir: str = "lightning_logs"):
    """A LightningCLI ``trainer.logger`` entry: :class:`WandbLogger`, offline unless the user
    configured W&B."""
    return {
        "class_path": "lightning_info.core.logging.WandbLogger",
        "init_args": {
            "project": project,
            "save_dir": save_dir,
            "offline": wandb_offline_by_default(),
        },
    }


def finish_wandb_runs(loggers: Sequence[Logger]) -> None:
    """Close the W&B run of every ``WandbLogger`` so that the next run starts a new one."""
    if any(isinstance(logger, LightningWandbLogger) for logger in loggers):
        import wandb

        wandb.finish()


_MEAN_STD = re.compile(r"^\s*([-+]?[0-9.eE+-]+|nan|inf|-inf)\s*±\s*([0-9.eE+-]+|nan|inf)\s*$")


def _number(value: object) -> float | int | None:
    """``value`` as a number when it is one (a bool, ``"-"`` or text is not)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        return value.item()
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def numeric_table(
    columns: Sequence[str], rows: Sequence[Sequence[object]]
) -> tuple[list[str], list[list]]:
    """A printed table as numbers a logger can sort, filter and plot.

    A column whose every cell is a number (or a numeric string) holds numbers; one whose every
    cell is ``"mean ± std"`` becomes two columns, ``<name>/mean`` and ``<name>/std``; any other
    column (names, ``"-"``, notes, a column mixing numbers and text) is text. Rows keep their
    order.
    """
    columns = [str(c) for c in columns]
    rows = [list(row) for row in rows]
    out_columns: list[str] = []
    out_cells: list[list[list]] = []  # per column, its output columns' cells
    for i, name in enumerate(columns):
        cells = [row[i] if i < len(row) else None for row in rows]
        numbers = [_number(c) for c in cells]
        pairs = [_MEAN_STD.match(c) if isinstance(c, str) else None for c in cells]
        if rows and all(n is not None for n in numbers):
            out_columns.append(name)
            out_cells.append([numbers])
        elif rows and all(pairs):
            out_columns += [f"{name}/mean", f"{name}/std"]
            out_cells.append(
                [[float(m.group(1)) for m in pairs], [float(m.group(2)) for m in pairs]]
            )
        else:
            out_columns.append(name)
            out_cells.append([[str(c) for c in cells]])  # one type per column, as W&B needs
    flat = [column for group in out_cells for column in group]
    return out_columns, [[column[r] for column in flat] for r in range(len(rows))]


def log_wandb_tables(
    loggers: Sequence[Logger], tables: Mapping[str, tuple[Sequence[str], Sequence[Sequence]]]
) -> None:
    """Log ``{key: (columns, rows)}`` as W&B tables of numbers (:func:`numeric_table`) to every
    ``WandbLogger`` in ``loggers``, each key built by :func:`metric_key`; other loggers have no
    tables and are skipped."""
    for logger in loggers:
        if isinstance(logger, LightningWandbLogger):
            for key, (columns, rows) in tables.items():
                names, data = numeric_table(columns, rows)
                logger.log_table(key=metric_key(key), columns=names, data=data)


LinePlot = tuple[str, Sequence[float], Mapping[str, Sequence[float]]]
"""``(x name, xs, {series name: ys})``: one line per series over the shared ``xs``."""


def log_wandb_line_plots(loggers: Sequence[Logger], plots: Mapping[str, LinePlot]) -> None:
    """Log ``{key: (x_name, xs, {series: ys})}`` as native W&B line plots
    (``wandb.plot.line_series``, interactive in the W&B UI, their data kept as a table) to every
    ``WandbLogger`` in ``loggers``; other loggers are skipped."""
    for logger in loggers:
        if isinstance(logger, LightningWandbLogger):
            import wandb

            for key, (x_name, xs, series) in plots.items():
                chart = wandb.plot.line_series(
                    xs=[float(x) for x in xs],
                    ys=[[float(y) for y in ys] for ys in series.values()],
                    keys=list(series),
                    title=key,
                    xname=x_name,
                )
                logger.experiment.log({key: chart})


def mean_std(values: Sequence[float]) -> str:
    """``"mean ± std"`` (sample standard deviation, 0 for one value; ``"-"`` for none)."""
    values = [float(v) for v in values]
    if not values:
        return "-"
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.4f} ± {std:.4f}"


def mean_std_rows(records: Sequence[Mapping]) -> tuple[list[str], list[list]]:
    """One table from per-seed tables: each cell ``mean ± std`` over ``records``, each
    ``{"columns": [name, *metrics], "rows": {row name: {metric: value}}}`` with the same rows."""
    columns = list(records[0]["columns"])
    rows = [
        [name, *(mean_std([r["rows"][name][c] for r in records]) for c in columns[1:])]
        for name in records[0]["rows"]
    ]
    return columns, rows


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Render a Markdown table with columns padded for reading in a terminal."""
    # hand-written: pandas' to_markdown needs tabulate, which no required package installs
    cells = [[str(c) for c in columns]] + [[str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)
