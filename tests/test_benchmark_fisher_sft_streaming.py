"""benchmarks/fisher_sft_streaming.py: its pool generator and its quick run (a fresh process)."""

from __future__ import annotations

import json

import pytest
import torch

from lightning_info.methods.fisher_sft.functional import FeatureSketch
from tests.benchmark_scripts import load_script

bench = load_script("fisher_sft_streaming")


def test_the_chunks_form_one_pool_that_larger_pools_extend():
    sketch = FeatureSketch(8, seed=1)
    small = list(bench.pool_chunks(60, sketch, tokens=3, dim=32, chunk=20, seed=4))
    large = list(bench.pool_chunks(100, sketch, tokens=3, dim=32, chunk=20, seed=4))
    assert [len(c) for c in small] == [20, 20, 20] and len(large) == 5
    for a, b in zip(small, large):
        assert torch.equal(a.values, b.values) and torch.equal(a.offsets, b.offsets)
    assert small[0].values.shape == (60, 8) and small[0].values.dtype == torch.float32
    assert not torch.equal(small[0].values, small[1].values)


def test_the_quick_run_selects_the_same_subset_serially_and_on_dask(tmp_path):
    pytest.importorskip("distributed")
    out = tmp_path / "run.json"
    bench.main(["--quick", "--threads", "1", "--json", str(out)])
    (row,) = json.loads(out.read_text())["rows"]
    cells = row["cells"]
    assert list(cells) == ["lazy float64", "lazy float32", "GreeDi serial", "Dask, 1 worker"]
    assert row["store_bytes"] == 3000 * 4 * 16 * 4 + 3001 * 8
    assert cells["lazy float64"]["ratio"] == 1.0 and cells["lazy float64"]["common"] == 20
    serial, dask = cells["GreeDi serial"], cells["Dask, 1 worker"]
    assert dask["objective"] == serial["objective"] and dask["common"] == serial["common"]
    for cell in cells.values():
        assert 0.9 < cell["ratio"] < 1.1 and cell["seconds"] >= 0
