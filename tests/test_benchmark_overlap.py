"""benchmarks/overlap_throughput.py at a toy size: every method's counts agree (the benchmark
asserts it), and the streamed scans read every document from disk."""

from __future__ import annotations

from tests.benchmark_scripts import load_script

bench = load_script("overlap_throughput")


def test_toy_run_agrees_across_methods_and_streams_from_disk(tmp_path, capsys):
    rates = bench.main(
        ["--tokens", "30000", "--instances", "40", "--repeats", "1", "--n", "8"]
        + ["--stream-mb", "0.3", "0.6", "--num-proc", "2", "--stream-dir", str(tmp_path)]
    )
    assert {"fast (end to end)", "token by token (end to end)", "naive tuples"} <= set(rates)
    assert all(rate > 0 for rate in rates.values())
    printed = capsys.readouterr().out
    assert printed.count("stream JSON lines") == 2 and "datasets.map, 2 processes" in printed
