"""benchmarks/overlap_throughput.py at a toy size: every method's counts agree (the benchmark
asserts it), the streamed scans read every document from disk, and the Dask scan of a corpus
written to disk gives one report with one and with two worker processes."""

from __future__ import annotations

import pytest

from tests.benchmark_scripts import load_script

bench = load_script("overlap_throughput")


def test_toy_run_agrees_across_methods_and_streams_from_disk(tmp_path, capsys):
    rates = bench.main(
        ["--tokens", "30000", "--instances", "40", "--repeats", "1", "--n", "8"]
        + ["--stream-mb", "0.3", "0.6", "--num-proc", "2", "--stream-dir", str(tmp_path)]
    )
    assert {
        "compiled (end to end)",
        "numpy (end to end)",
        "token by token (end to end)",
        "naive tuples",
    } <= set(rates)
    assert all(rate > 0 for rate in rates.values())
    printed = capsys.readouterr().out
    for row in ("JSON lines, compiled", "JSON lines.gz, compiled", "JSON lines.zst, compiled"):
        assert printed.count(f"| {row} ") == 2, row  # each file size
    assert printed.count("| JSON lines, numpy ") == 2 and "datasets.map, 2 processes" in printed


def test_toy_dask_scan_of_files_on_disk(tmp_path, capsys):
    pytest.importorskip("distributed")
    json_path = tmp_path / "overlap.json"
    bench.main(
        ["--tokens", "20000", "--instances", "30", "--repeats", "1", "--n", "8"]
        + ["--dask-gb", "0.0008", "--dask-file-mb", "0.3", "--dask-blocksize", "100kB"]
        + ["--dask-workers", "1", "2", "--stream-dir", str(tmp_path), "--json", str(json_path)]
    )
    printed = capsys.readouterr().out
    assert "overlap_files_with_dask on a LocalCluster" in printed
    import json

    runs = json.loads(json_path.read_text())["dask"]
    assert [run["workers"] for run in runs] == [1, 2]
    assert runs[0]["documents"] == runs[1]["documents"] > 0 and runs[0]["partitions"] > 2
    assert not any(p.name.startswith("overlap_dask_") for p in tmp_path.iterdir())  # deleted
