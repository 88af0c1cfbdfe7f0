"""benchmarks/fisher_sft_selection.py: its oracle, its result dicts and its submodlib peer."""

from __future__ import annotations

import importlib.util
import math
import sys

import pytest
import torch

from lightning_info.methods.fisher_sft.functional import fisher_greedy_select, log_det_objective
from tests.benchmark_scripts import load_script

bench = load_script("fisher_sft_selection")

TINY = ["--pool-sizes", "30", "50", "--tokens", "3", "--dim", "6", "--budget", "8"]
TINY += ["--repeats", "1", "--baseline-seeds", "3"]
TINY += ["--widths", "12", "--width-pool-size", "40", "--width-tokens", "3"]
TINY += ["--width-budget", "6", "--large-pool-sizes", "300", "--large-dim", "16"]
TINY += ["--large-tokens", "3", "--large-budget", "20", "--submodlib-sizes", "30", "50"]


def _has_submodlib() -> bool:
    return importlib.util.find_spec("submodlib") is not None


@pytest.fixture(scope="module")
def results():
    return bench.main(TINY)


@pytest.mark.parametrize("make_pool", [bench.realistic_pool, bench.isotropic_pool])
def test_textbook_slogdet_greedy_matches_naive_greedy(make_pool):
    pool = make_pool(40, 5, 7, seed=3)
    textbook = bench.slogdet_greedy(pool, 12, lam=0.5)
    naive = fisher_greedy_select(pool, 12, lam=0.5, method="naive")
    assert textbook.indices == naive.indices
    assert textbook.evaluations == naive.evaluations == sum(40 - k for k in range(12))
    torch.testing.assert_close(torch.tensor(textbook.gains), torch.tensor(naive.gains))
    assert textbook.objective == pytest.approx(log_det_objective(pool, naive.indices, 0.5))


@pytest.mark.parametrize("make_pool", [bench.realistic_pool, bench.isotropic_pool])
def test_vectorised_woodbury_greedy_matches_naive_greedy(make_pool):
    pool = make_pool(60, 4, 9, seed=2)
    vectorised = bench.vectorised_greedy(pool, 15, lam=0.5, chunk_size=7)
    naive = fisher_greedy_select(pool, 15, lam=0.5, method="naive")
    assert vectorised.indices == naive.indices
    assert vectorised.evaluations == naive.evaluations
    torch.testing.assert_close(torch.tensor(vectorised.gains), torch.tensor(naive.gains))
    assert vectorised.objective == pytest.approx(log_det_objective(pool, naive.indices, 0.5))


def test_vectorised_greedy_stops_at_its_time_limit():
    pool = bench.realistic_pool(30, 3, 5)
    assert len(bench.vectorised_greedy(pool, 5, time_limit=0.0).indices) == 1


def test_a_larger_pool_extends_a_smaller_one():
    # chunks are seeded by their first index: the pool is the same whatever its size
    small, large = bench.realistic_pool(300, 2, 4, seed=7), bench.realistic_pool(700, 2, 4, seed=7)
    torch.testing.assert_close(large.values[: small.values.shape[0]], small.values)


def test_textbook_gives_up_past_its_time_limit():
    pool = bench.realistic_pool(30, 3, 5)
    assert bench.slogdet_greedy(pool, 5, time_limit=0.0) is None


def test_realistic_pool_is_heterogeneous_and_anisotropic():
    pool = bench.realistic_pool(400, 8, 10, seed=1)
    assert len(pool) == 400 and pool.dim == 10 and set(pool.lengths.tolist()) == {8}
    norms = torch.stack([b.norm() for b in pool.to_list()])
    assert norms.max() / norms.min() > 5
    spectrum = torch.linalg.eigvalsh(pool.values.T @ pool.values)
    assert spectrum.max() / spectrum.min() > 100
    torch.testing.assert_close(pool.values, bench.realistic_pool(400, 8, 10, seed=1).values)


def test_main_reports_every_method_with_positive_times(results):
    timing = results["timing"]
    assert [(r["pool"], r["pool_size"]) for r in timing] == [
        ("realistic", 30),
        ("realistic", 50),
        ("isotropic", 50),
    ]
    for row in timing:
        assert set(row["seconds"]) == set(bench.METHODS)
        assert all(row["seconds"][m] > 0 for m in bench.METHODS)
        assert row["compared"] == list(bench.METHODS)
        assert row["identical"]
        assert len({tuple(row["indices"][m]) for m in bench.METHODS}) == 1
        exhaustive = {row["evaluations"][m] for m in ("vectorised", "naive", "textbook")}
        assert len(exhaustive) == 1
        assert 0 < row["evaluations"]["lazy"] <= row["evaluations"]["naive"]
    assert results["header"]["threads"] == 1


def test_width_and_llm_scale_rows_run_in_fresh_processes_and_agree(results):
    # one width keeps the fresh processes (an interpreter start each) few
    assert [(r["pool"], r["dim"]) for r in results["widths"]] == [
        ("realistic", 12),
        ("isotropic", 12),
    ]
    for row in results["widths"]:
        lazy, vectorised = row["lazy"], row["vectorised"]
        assert lazy["indices"] == vectorised["indices"] and len(lazy["indices"]) == 6
        assert lazy["pool_bytes"] == 40 * 3 * row["dim"] * 8
        for run in (lazy, vectorised):
            assert run["seconds"] > 0
            if sys.platform == "linux":
                assert isinstance(run["peak_extra_bytes"], int) and run["peak_extra_bytes"] >= 0
    (large,) = results["large"]
    assert large["pool_size"] == 300 and large["lazy"]["picks"] == 20
    vectorised = large["vectorised"]
    assert 1 <= vectorised["picks"] <= 20
    assert large["lazy"]["indices"][: vectorised["picks"]] == vectorised["indices"]


def test_main_objectives_rank_greedy_first(results):
    objective = results["objective"]
    assert list(objective) == ["fisher (greedy)", "random", "k_center"]
    greedy = objective["fisher (greedy)"]["mean"]
    assert greedy > 0 and objective["fisher (greedy)"]["fraction"] == 1.0
    for name in ("random", "k_center"):
        assert objective[name]["runs"] == 3
        assert math.isfinite(objective[name]["std"])
        assert 0 < objective[name]["mean"] <= greedy
        assert objective[name]["fraction"] == pytest.approx(objective[name]["mean"] / greedy)


def test_submodlib_selection_equals_mean_pooled_greedy(results):
    if not _has_submodlib():
        pytest.skip("submodlib (submodlib-py) is not installed")
    assert results["submodlib"] is not None
    for row in results["submodlib"]:
        assert row["agree"], row
        assert row["ours_indices"] == row["submodlib_indices"]
        assert row["kernel_seconds"] > 0 and row["maximize_seconds"] > 0
    pool = bench.realistic_pool(60, 4, 6, seed=5)
    indices, gains, _, _ = bench.submodlib_select(bench.mean_pooled(pool), 15, lam=2.0)
    ours = fisher_greedy_select(pool, 15, lam=2.0, pooling="mean")
    assert indices == ours.indices
    shifted = torch.tensor(ours.gains) + math.log(2.0)
    torch.testing.assert_close(torch.tensor(gains), shifted, rtol=0, atol=1e-5)
    row = bench.compare_submodlib(pool, 15, lam=2.0, repeats=1)
    assert row["agree"] and row["max_gain_difference"] < 1e-5


def test_submodlib_table_alone_runs_each_size_in_a_fresh_process_and_stops_past_its_limit():
    if not _has_submodlib():
        pytest.skip("submodlib (submodlib-py) is not installed")
    args = ["--only-submodlib", "--submodlib-sizes", "40", "300", "--tokens", "3", "--dim", "6"]
    args += ["--budget", "10", "--repeats", "1", "--kernel-limit-gb", "1e-3"]
    results = bench.main(args)
    assert set(results) == {"header", "submodlib"}
    (row,) = results["submodlib"]  # 300: 56 * 300^2 bytes > 1 MB, reported as not run
    assert row["pool_size"] == 40 and row["budget"] == 10 and row["agree"]
    assert row["ours_indices"] == row["submodlib_indices"]
    if sys.platform == "linux":
        assert row["ours_peak_bytes"] is not None and row["submodlib_peak_bytes"] is not None


def test_scale_pool_is_sketched_chunk_by_chunk_and_extends():
    sketch = bench.FeatureSketch(8, seed=1)
    small = bench.sketched_scale_pool(28, sketch, dim=32, rank=6, chunk=7, seed=2)
    large = bench.sketched_scale_pool(50, sketch, dim=32, rank=6, chunk=7, seed=2)
    assert len(small) == 28 and small.dim == 8 and small.values.dtype == torch.float32
    assert set(small.lengths.tolist()) == {bench.SCALE_TOKENS}
    torch.testing.assert_close(large.values[: small.values.shape[0]], small.values)


def test_scale_table_runs_in_a_fresh_process_per_size():
    results = bench.main(["--quick", "--scale", "--scale-sizes", "200"])
    assert results["timing"] and results["objective"]  # the other quick tables still run
    (row,) = results["scale"]
    assert row["pool_size"] == 200 and not row["stopped"]
    assert row["pool_bytes"] == 200 * bench.SCALE_TOKENS * row["sketch_dim"] * 4
    for key in ("generate_seconds", "lazy_seconds", "two_round_seconds"):
        assert row[key] > 0
    assert 0.5 < row["two_round_ratio"] <= 1 + 1e-9
    assert 0 <= row["overlap"] <= row["budget"]
    # the sketch's error, on the same pool with its noise drawn d wide
    assert row["exact"] and row["exact_seconds"] > 0
    assert row["random_fraction"] < row["sketch_fraction"] <= 1 + 1e-9
    assert 0 <= row["sketch_common_picks"] <= row["budget"]


def test_the_wide_pool_is_the_sketched_pool_before_the_sketch(monkeypatch):
    monkeypatch.setattr(bench, "SCALE_NOISE", 0.0)  # the noise is drawn differently; drop it
    sketch = bench.FeatureSketch(8, seed=1)
    options = {"dim": 32, "rank": 6, "chunk": 7, "seed": 2}
    wide = bench.wide_scale_pool(20, **options)
    assert wide.dim == 32 and wide.values.dtype == torch.float32
    sketched = bench.sketched_scale_pool(20, sketch, **options)
    torch.testing.assert_close(bench.sketch_features(wide, sketch).values, sketched.values)


def test_gain_over_empty_is_the_log_det_objective_less_its_empty_value():
    pool = bench.realistic_pool(30, 3, 5, seed=4)
    indices = [3, 17, 4, 29]
    expected = log_det_objective(pool, indices, 0.7) - 5 * math.log(0.7)
    assert bench.gain_over_empty(pool, indices, 0.7) == pytest.approx(expected, abs=1e-10)


def test_scale_cell_past_its_limit_is_reported_stopped():
    spec = {"pool_size": 200, "dim": 16, "sketch_dim": 4, "chunk": 50, "budget": 5}
    spec.update(shards=2, lam=1.0, seed=0, threads=1)
    row = bench.measure_scale_in_fresh_process(spec, limit=0.05)
    assert row["stopped"] and "lazy_seconds" not in row
