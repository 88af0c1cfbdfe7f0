"""benchmarks/overlap_throughput.py at a toy size: every method's counts agree (the benchmark
asserts it), and the streamed scans read every document from disk."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "overlap_throughput.py"
_spec = importlib.util.spec_from_file_location("overlap_throughput", _PATH)
bench = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bench
_spec.loader.exec_module(bench)


def test_toy_run_agrees_across_methods_and_streams_from_disk(tmp_path, capsys):
    rates = bench.main(
        ["--tokens", "30000", "--instances", "40", "--repeats", "1", "--n", "8"]
        + ["--stream-mb", "0.3", "0.6", "--num-proc", "2", "--stream-dir", str(tmp_path)]
    )
    assert {"fast (end to end)", "token by token (end to end)", "naive tuples"} <= set(rates)
    assert all(rate > 0 for rate in rates.values())
    printed = capsys.readouterr().out
    assert printed.count("stream JSON lines") == 2 and "datasets.map, 2 processes" in printed
