"""Timing helpers for the benchmarks: one call timed (and its peak memory), and a speed ratio
written for a table."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    """``(seconds, fn())`` with ``time.perf_counter``."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def median_time(fn: Callable[[], T], repeats: int) -> tuple[float, T]:
    """Median seconds over ``repeats`` calls of ``fn`` (at least one), and the last result."""
    runs = [timed(fn) for _ in range(max(1, repeats))]
    return statistics.median(seconds for seconds, _ in runs), runs[-1][1]


def format_ratio(numerator: float | None, denominator: float | None = 1.0) -> str:
    """``numerator / denominator`` as ``"3.41x"`` (three significant digits; ``"120x"`` from 100
    on); ``"-"`` when either is missing."""
    if numerator is None or denominator is None:
        return "-"
    ratio = numerator / denominator
    return f"{ratio:.0f}x" if ratio >= 100 else f"{ratio:.3g}x"


def _status_kib(field: str) -> int | None:
    """A ``/proc/self/status`` field in KiB (``VmRSS``, ``VmHWM``); ``None`` off Linux."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def peak_memory(fn: Callable[[], T]) -> tuple[float, T, int | None]:
    """``(seconds, fn(), bytes)``: the bytes are the peak resident memory of the process while
    ``fn`` ran beyond what it held before (Linux: ``VmHWM`` reset through ``clear_refs``),
    ``None`` where that cannot be measured."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        before = _status_kib("VmRSS")
    except OSError:
        before = None
    seconds, result = timed(fn)
    peak = _status_kib("VmHWM") if before is not None else None
    return seconds, result, None if peak is None else 1024 * (peak - before)


def run_measurement(script: str | Path, spec: dict, flag: str = "--measure") -> dict:
    """Run ``python script <flag> '<spec as JSON>'`` in a new interpreter, so that the peak
    memory it reports is its own, and return the JSON object on the last line of its output."""
    done = subprocess.run(
        [sys.executable, str(Path(script).resolve()), flag, json.dumps(spec)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"measurement {spec} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
