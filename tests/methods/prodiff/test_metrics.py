"""The trajectory Metrics over uneven batches equal ``trajectory_scores`` on all of it; merged
states equal one instance; the oracle itself on hand-made cases; the errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lightning_info.methods.prodiff.geometry import METRES_PER_DEGREE
from lightning_info.methods.prodiff.metrics import (
    DEFAULT_THRESHOLDS_KM,
    MaxTrajectoryDeviation,
    MeanTrajectoryDeviation,
    TimeMAE,
    TrajectoryCoverage,
    coverage_key,
    trajectory_metrics,
    trajectory_scores,
)

SIZES = [7, 0, 13, 1, 29]  # 50 windows in uneven batches, one empty
K = 8


def _pair(n: int = sum(SIZES), seed: int = 0):
    """True windows around Beijing and predictions off by 0 - ~15 km per interior point, so
    every TC threshold splits the points."""
    rng = np.random.default_rng(seed)
    hours = 10.0 + np.cumsum(rng.uniform(0.01, 0.1, (n, K)), axis=1)
    target = np.stack(
        (
            hours,
            40.0 + 0.05 * rng.standard_normal((n, K)),
            116.3 + 0.05 * rng.standard_normal((n, K)),
        ),
        -1,
    )
    distance = rng.exponential(3000.0, (n, K)) * (rng.random((n, K)) < 0.9)  # metres, some 0
    bearing = rng.uniform(0, 2 * math.pi, (n, K))
    pred = target.copy()
    pred[..., 0] += rng.normal(0, 0.05, (n, K))
    pred[..., 1] += distance * np.cos(bearing) / METRES_PER_DEGREE
    pred[..., 2] += distance * np.sin(bearing) / (METRES_PER_DEGREE * np.cos(np.radians(40.0)))
    return torch.from_numpy(pred), torch.from_numpy(target)


def _batches(pred, target, sizes=SIZES):
    bounds = np.cumsum([0, *sizes])
    return [(pred[a:b], target[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]


def _as_floats(result):
    if isinstance(result, dict):
        return {key: float(value) for key, value in result.items()}
    return float(result)


METRICS = {
    "mtd": MeanTrajectoryDeviation,
    "maxtd": MaxTrajectoryDeviation,
    "maxtd_overall": lambda: MaxTrajectoryDeviation(reduction="max"),
    "time_mae": TimeMAE,
}


def test_oracle_on_hand_made_windows():
    target = torch.zeros(2, 4, 3, dtype=torch.float64)
    target[..., 1], target[..., 2] = 40.0, 116.3
    pred = target.clone()
    pred[0, 1:-1, 1] += 1.0  # one degree of latitude north at window 0's interior
    pred[1, 1, 1] += 0.005  # 556 m at one interior point of window 1
    pred[1, 2, 0] += 0.5  # half an hour late
    pred[:, 0, 1] += 3.0  # endpoints are never scored
    scores = trajectory_scores(pred, target, thresholds_km=(0.5, 1.0, 200.0))
    assert scores["mtd"] == pytest.approx((2 * METRES_PER_DEGREE + 0.005 * METRES_PER_DEGREE) / 4)
    assert scores["maxtd"] == pytest.approx((METRES_PER_DEGREE + 0.005 * METRES_PER_DEGREE) / 2)
    assert scores["maxtd_overall"] == pytest.approx(METRES_PER_DEGREE)
    assert scores["time_mae"] == pytest.approx(0.5 / 4)
    assert scores["tc@0.5km"] == 0.25  # the unmoved point only
    assert scores["tc@1km"] == 0.5
    assert scores["tc@200km"] == 1.0
    assert scores["tc_mean"] == pytest.approx((0.25 + 0.5 + 1.0) / 3)


@pytest.mark.parametrize("key", list(METRICS))
def test_metric_over_uneven_batches_equals_the_oracle(key):
    pred, target = _pair()
    expected = trajectory_scores(pred, target)[key]
    metric = METRICS[key]()
    for p, t in _batches(pred, target):
        metric.update(p, t)
    value = metric.compute()
    assert value.dtype == torch.float64 and value.dim() == 0
    assert float(value) == pytest.approx(expected, rel=1e-9, abs=1e-9)


def test_coverage_over_uneven_batches_equals_the_oracle_and_is_monotone():
    pred, target = _pair()
    expected = trajectory_scores(pred, target)
    metric = TrajectoryCoverage()
    for p, t in _batches(pred, target):
        metric.update(p, t)
    result = _as_floats(metric.compute())
    keys = [coverage_key(t) for t in DEFAULT_THRESHOLDS_KM]
    assert list(result) == [*keys, "tc_mean"]
    for key in result:
        assert result[key] == pytest.approx(expected[key], abs=1e-12)
    values = [result[key] for key in keys]
    assert values == sorted(values) and 0.0 < values[0] < values[-1] < 1.0  # thresholds split
    assert result["tc_mean"] == pytest.approx(np.mean(values), abs=1e-12)
    # thresholds are sorted, keys follow them
    unsorted = TrajectoryCoverage(thresholds_km=(2.5, 0.5))
    unsorted.update(pred, target)
    assert list(unsorted.compute()) == ["tc@0.5km", "tc@2.5km", "tc_mean"]


def test_collection_equals_the_oracle_and_reads_only_the_interior():
    pred, target = _pair()
    expected = trajectory_scores(pred, target, thresholds_km=(1, 3, 5))
    metrics = trajectory_metrics((1, 3, 5))
    moved = pred.clone()
    moved[:, [0, -1], 1:] += 0.3  # endpoints far off: nothing changes
    for p, t in _batches(moved, target):
        metrics.update(p, t)
    result = _as_floats(metrics.compute())
    assert set(result) == set(expected)
    for key, value in expected.items():
        assert result[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
    prefixed = trajectory_metrics(prefix="test/")
    prefixed.update(pred, target)
    assert "test/mtd" in prefixed.compute() and "test/tc@10km" in prefixed.compute()


@pytest.mark.parametrize(
    "make",
    [*METRICS.values(), TrajectoryCoverage],
    ids=[*METRICS, "tc"],
)
def test_merged_states_equal_one_instance(make):
    pred, target = _pair(seed=3)
    batches = _batches(pred, target)
    whole, first, second = make(), make(), make()
    for p, t in batches:
        whole.update(p, t)
    for p, t in batches[:2]:
        first.update(p, t)
    for p, t in batches[2:]:
        second.update(p, t)
    first.merge_state(second)  # the reduction DDP's sync applies (sum / max)
    assert _as_floats(first.compute()) == pytest.approx(_as_floats(whole.compute()), rel=1e-12)
    second.reset()  # an instance that saw nothing contributes nothing
    first.merge_state(second)
    assert _as_floats(first.compute()) == pytest.approx(_as_floats(whole.compute()), rel=1e-12)


def test_float32_inputs_and_states():
    pred, target = _pair()
    metric = MeanTrajectoryDeviation()
    metric.update(pred.float(), target.float())
    assert metric.mtd_distance_sum.dtype == torch.float64
    assert float(metric.compute()) == pytest.approx(
        trajectory_scores(pred, target)["mtd"], rel=1e-3
    )
    for name in ("mtd_distance_sum", "mtd_point_count"):
        assert metric._reductions[name].__name__ == "dim_zero_sum"
    assert TrajectoryCoverage()._reductions["tc_hits"].__name__ == "dim_zero_sum"
    assert MaxTrajectoryDeviation("max")._reductions["maxtd_overall_max"].__name__ == "dim_zero_max"


@pytest.mark.filterwarnings("ignore:The ``compute`` method:UserWarning")
def test_errors():
    pred, target = _pair(4)
    metric = MeanTrajectoryDeviation()
    with pytest.raises(ValueError, match="seen no window"):
        metric.compute()
    with pytest.raises(ValueError, match=r"\(B, k, 3\)"):
        metric.update(pred, target[:2])
    with pytest.raises(ValueError, match="k must be >= 3"):
        metric.update(pred[:, :2], target[:, :2])
    bad = pred.clone()
    bad[1, 3, 2] = math.nan
    with pytest.raises(ValueError, match="finite"):
        TimeMAE().update(bad, target)
    with pytest.raises(ValueError, match="unscale"):
        TrajectoryCoverage().update(pred, target * torch.tensor([1.0, 3.0, 1.0]))
    with pytest.raises(TypeError, match="floating"):
        metric.update(pred.long(), target.long())
    with pytest.raises(ValueError, match="reduction"):
        MaxTrajectoryDeviation(reduction="median")
    with pytest.raises(ValueError, match="empty"):
        TrajectoryCoverage(thresholds_km=())
    with pytest.raises(ValueError, match="> 0"):
        TrajectoryCoverage(thresholds_km=(1.0, 0.0))
    with pytest.raises(ValueError, match="repeated"):
        TrajectoryCoverage(thresholds_km=(1.0, 1))
    with pytest.raises(ValueError, match=r"\(n, k, 3\)"):
        trajectory_scores(pred[:, :2], target[:, :2])
    with pytest.raises(ValueError, match="no window"):
        trajectory_scores(pred[:0], target[:0])
