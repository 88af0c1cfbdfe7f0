"""Timing helpers for the benchmarks: one call timed, and a speed ratio written for a table."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
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
