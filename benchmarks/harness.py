"""What every benchmark script shares: its command line, its header line, its JSON file, and the
timing helpers (one call timed, a median over repeats, peak memory, a measurement in a fresh
interpreter, a speed ratio written for a table).

A script run as ``python benchmarks/<name>.py`` has ``benchmarks/`` on ``sys.path``, so it
imports this module as ``harness``::

    from harness import benchmark_parser, format_ratio, header, print_header, write_json

    parser = benchmark_parser(__doc__.split("\\n\\n")[0], threads=1)
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 256])
    args = parser.parse_args()
    if args.quick:
        args.sizes = [16]
    head = header(args)            # at the start: date, load average, versions, threads
    ...
    print_header(head, f"sizes {args.sizes}")
    ...
    if args.json:
        write_json(args.json, head, results)

Shared flags: ``--quick`` (small sizes, a run of seconds: each script says which),
``--json PATH`` (also write the results, with the header, as one JSON file) and ``--threads N``
(torch threads; ``0`` keeps torch's default; each script keeps its own default).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


# ------------------------------------------------------------------------------ command line
def benchmark_parser(
    description: str,
    *,
    threads: int = 1,
    threads_help: str | None = None,
    quick_help: str | None = None,
) -> argparse.ArgumentParser:
    """An ``ArgumentParser`` holding the flags every benchmark takes: ``--quick``, ``--json PATH``
    and ``--threads N`` (default ``threads``; ``0`` keeps torch's default). A script adds its own
    flags and applies ``--quick`` after parsing."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--quick", action="store_true", help=quick_help or "small sizes, a run of seconds"
    )
    parser.add_argument(
        "--json", metavar="PATH", default=None, help="also write the results as JSON to PATH"
    )
    parser.add_argument(
        "--threads",
        type=_non_negative_int,
        default=threads,
        metavar="N",
        help=threads_help or f"torch threads (default {threads}; 0 keeps torch's default)",
    )
    return parser


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {value}")
    return value


# ------------------------------------------------------------------------------------ header
def load_average() -> str:
    """The 1-minute load average as ``"1.79"``; ``"n/a"`` where the platform has none."""
    return f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "n/a"


def header(args: argparse.Namespace | None = None) -> dict[str, Any]:
    """What fixes a run's numbers besides its options, taken now (call it at the start, once the
    torch thread count is set): date, 1-minute load average, CPU count, torch threads, python,
    torch and numpy versions; and ``vars(args)`` under ``"options"``."""
    import numpy
    import torch

    head: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "load_average": load_average(),
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
    }
    if args is not None:
        head["options"] = dict(vars(args))
    return head


def header_line(head: Mapping[str, Any], *settings: Any) -> str:
    """The header as one line: ``date | load average | CPUs | torch threads | versions``, then
    the script's own ``settings`` (sizes, its other versions), all joined by ``" | "``."""
    cpus = head["cpus"]
    threads = head["torch_threads"]
    parts = [
        head["date"],
        f"load average {head['load_average']}",
        f"{cpus} CPU{'s' * (cpus != 1)}",
        f"torch threads {threads}",
        f"python {head['python']}",
        f"torch {head['torch']}",
        f"numpy {head['numpy']}",
    ]
    return " | ".join([*parts, *(str(s) for s in settings if s not in (None, ""))])


def print_header(head: Mapping[str, Any], *settings: Any) -> None:
    """Print :func:`header_line`."""
    print(header_line(head, *settings))


# -------------------------------------------------------------------------------------- JSON
def document(head: Mapping[str, Any], results: Any) -> dict[str, Any]:
    """The JSON document of a run: ``{"header": head, ...}``. A mapping of results keeps its
    keys at the top level: a ``"header"`` of its own is merged into ``head`` (its keys winning),
    and the header's ``"options"`` are left out where the results already hold them (an
    ``"options"`` key, or every option in their own header). Anything else goes under
    ``"results"``."""
    head = dict(head)
    if not isinstance(results, Mapping):
        return {"header": head, "results": results}
    own = results.get("header")
    own = own if isinstance(own, Mapping) else {}
    options = head.get("options")
    if "options" in results or (isinstance(options, Mapping) and options.keys() <= own.keys()):
        head.pop("options", None)
    head.update(own)
    return {"header": head, **{k: v for k, v in results.items() if k != "header"}}


def _plain(value: Any) -> Any:
    """``json.dump``'s fallback: dataclasses, sets, paths, numpy and torch scalars or arrays."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def write_json(path: str | Path, head: Mapping[str, Any], results: Any) -> dict[str, Any]:
    """Write :func:`document` ``(head, results)`` to ``path`` (indented; folders created) and
    return what was written, read back."""
    text = json.dumps(document(head, results), indent=2, default=_plain)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    return json.loads(text)


# ------------------------------------------------------------------------------------ timing
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
