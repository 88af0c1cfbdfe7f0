"""The imputation Metrics, updated batch by batch, merged and reduced over two gloo processes, and
``imputation_scores`` (the same score functions run once) equal a two-pass numpy oracle on the
whole table; entries that are not missing are never read."""

from __future__ import annotations

import math
import socket

import numpy as np
import pytest
import torch
from torchmetrics import MetricCollection

from lightning_info.methods.cacti.functional import imputation_scores
from lightning_info.methods.cacti.metrics import (
    ImputationMAE,
    ImputationR2,
    ImputationRMSE,
    ImputationWasserstein,
    imputation_metrics,
)

D = 9
TIGHT = {"r2": 1e-10, "rmse": 1e-10, "mae": 1e-10, "wasserstein": 1e-12}
SIZES = [120, 0, 37, 250, 1, 92]  # 500 rows in batches of different sizes, one empty
SINGLE, CONSTANT_TRUTH, CONSTANT_IMPUTED, UNREPRESENTABLE, COMPLETE = 4, 5, 6, 7, 8


def _table(seed: int, n: int = 500, rate: float = 0.3):
    """``(truth, imputed, missing)`` as float64 numpy arrays and a bool mask, with NaN in the
    truth and in the imputation wherever the entry is not missing, and columns that ``r2`` must
    leave out: one missing entry, constant truth (2.5, exact), constant imputation, constant
    truth 0.1 (whose raw moments do not cancel exactly), and one with nothing missing."""
    rng = np.random.default_rng(seed)
    latent = rng.standard_normal((n, 2))
    truth = latent @ rng.standard_normal((2, D)) + 0.7 * rng.standard_normal((n, D))
    truth = truth * rng.uniform(0.5, 3.0, D) + rng.uniform(-4.0, 4.0, D)  # means off zero
    imputed = truth + rng.uniform(0.2, 2.0, D) * rng.standard_normal((n, D))
    missing = rng.random((n, D)) < rate
    missing[:, SINGLE] = False
    missing[rng.integers(n), SINGLE] = True
    truth[missing[:, CONSTANT_TRUTH], CONSTANT_TRUTH] = 2.5
    imputed[missing[:, CONSTANT_IMPUTED], CONSTANT_IMPUTED] = -1.25
    truth[missing[:, UNREPRESENTABLE], UNREPRESENTABLE] = 0.1
    missing[:, COMPLETE] = False
    truth[~missing] = np.nan
    imputed[~missing & (rng.random((n, D)) < 0.5)] = np.nan
    return truth, imputed, missing


def _torch(truth, imputed, missing, dtype=torch.float64):
    return (
        torch.from_numpy(imputed).to(dtype),
        torch.from_numpy(truth).to(dtype),
        torch.from_numpy(missing),
    )


def _batches(sizes):
    bounds = np.cumsum([0, *sizes])
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]


def _numpy_scores(truth, imputed, missing) -> dict[str, float]:
    """The scores by their definitions, in numpy, two-pass: per column ``np.corrcoef`` of the
    missing entries squared (columns with fewer than two entries or a constant side left out),
    the errors' root mean square and mean absolute value, scipy's per-column Wasserstein
    distance."""
    from scipy.stats import wasserstein_distance

    truth, imputed = np.asarray(truth, np.float64), np.asarray(imputed, np.float64)
    missing = np.asarray(missing, dtype=bool)
    errors = imputed[missing] - truth[missing]
    correlations, distances = [], []
    for column in np.flatnonzero(missing.any(0)):
        rows = missing[:, column]
        a, b = truth[rows, column], imputed[rows, column]
        distances.append(wasserstein_distance(a, b))
        if rows.sum() >= 2 and np.ptp(a) > 0 and np.ptp(b) > 0:
            correlations.append(np.corrcoef(a, b)[0, 1] ** 2)
    return {
        "r2": float(np.mean(correlations)) if correlations else float("nan"),
        "rmse": float(np.sqrt(np.mean(errors**2))),
        "mae": float(np.mean(np.abs(errors))),
        "wasserstein": float(np.mean(distances)),
    }


def _oracle(truth, imputed, missing):
    """:func:`_numpy_scores`, except that ``r2`` leaves out the constant 0.1 column, which the
    oracle's ``ptp() > 0`` test keeps while its raw moments do not cancel (see below)."""
    scores = _numpy_scores(truth, imputed, missing)
    keep = np.arange(D) != UNREPRESENTABLE
    scores["r2"] = _numpy_scores(truth[:, keep], imputed[:, keep], missing[:, keep])["r2"]
    return scores


def _good_column_r2(truth, imputed, missing):
    """The mean squared correlation over the columns that should qualify, by hand."""
    values = []
    for column in range(SINGLE):
        rows = missing[:, column]
        values.append(np.corrcoef(truth[rows, column], imputed[rows, column])[0, 1] ** 2)
    return float(np.mean(values))


def _metrics():
    return {
        "r2": ImputationR2(D),
        "rmse": ImputationRMSE(),
        "mae": ImputationMAE(num_columns=D),
        "wasserstein": ImputationWasserstein(D),
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_metrics_over_batches_equal_the_oracle_on_the_whole_table(seed):
    truth, imputed, missing = _table(seed)
    imputed_t, truth_t, missing_t = _torch(truth, imputed, missing)
    metrics, collection = _metrics(), imputation_metrics(D)
    for part in _batches(SIZES):
        for metric in metrics.values():
            metric.update(imputed_t[part], truth_t[part], missing_t[part])
        collection.update(imputed_t[part], truth_t[part], missing_t[part])
    expected = _oracle(truth, imputed, missing)
    # the r2 columns left out are the ones meant: only the first SINGLE columns qualify
    assert expected["r2"] == pytest.approx(_good_column_r2(truth, imputed, missing), abs=1e-12)
    out = collection.compute()
    assert set(out) == set(TIGHT)
    whole = imputation_scores(truth, imputed, missing)
    for name, tolerance in TIGHT.items():
        value = metrics[name].compute()
        assert value.dtype == torch.float64 and value.dim() == 0
        assert abs(value.item() - expected[name]) <= tolerance, name
        assert abs(out[name].item() - expected[name]) <= tolerance, name
        assert abs(whole[name] - expected[name]) <= tolerance, name


def test_the_excluded_columns_really_are_special():
    truth, imputed, missing = _table(3)
    assert missing[:, SINGLE].sum() == 1 and not missing[:, COMPLETE].any()
    for column in (CONSTANT_TRUTH, UNREPRESENTABLE):
        assert missing[:, column].sum() >= 2
        assert np.ptp(truth[missing[:, column], column]) == 0
    assert np.ptp(imputed[missing[:, CONSTANT_IMPUTED], CONSTANT_IMPUTED]) == 0
    # r2 with the special columns dropped by hand is what the metric reports
    metric = ImputationR2(D)
    metric.update(*_torch(truth, imputed, missing))
    assert metric.compute().item() == pytest.approx(
        _good_column_r2(truth, imputed, missing), abs=1e-10
    )


def test_a_constant_column_whose_sums_do_not_cancel_is_left_out():
    # n copies of 0.1: S_aa - S_a^2 / n is rounding noise, not 0, and numpy's std is ~1e-17 > 0
    # for most n (the oracle then keeps the column with r^2 ~ 0); the relative tolerance drops it
    rng = np.random.default_rng(4)
    n = 231
    truth = np.stack([rng.standard_normal(n), np.full(n, 0.1)], 1)
    imputed = truth + rng.standard_normal((n, 2))
    missing = np.ones((n, 2), dtype=bool)
    metric = ImputationR2(2)
    imputed_t, truth_t, missing_t = _torch(truth, imputed, missing)
    for part in _batches([100, 31, 100]):
        metric.update(imputed_t[part], truth_t[part], missing_t[part])
    assert metric.count.tolist() == [n, n]
    assert metric.sum_truth_sq[1] - metric.sum_truth[1] ** 2 / n != 0  # the noise is there
    first = np.corrcoef(truth[:, 0], imputed[:, 0])[0, 1] ** 2
    assert metric.compute().item() == pytest.approx(first, abs=1e-12)
    assert _numpy_scores(truth[:, :1], imputed[:, :1], missing[:, :1])["r2"] == pytest.approx(
        first, abs=1e-15
    )
    assert imputation_scores(truth, imputed, missing)["r2"] == pytest.approx(first, abs=1e-12)


def test_float32_inputs_match_the_oracle_on_the_same_values():
    truth, imputed, missing = _table(5)
    imputed_t, truth_t, missing_t = _torch(truth, imputed, missing, torch.float32)
    collection = imputation_metrics(D)
    for part in _batches(SIZES):
        collection.update(imputed_t[part], truth_t[part], missing_t[part])
    expected = _oracle(truth_t.double().numpy(), imputed_t.double().numpy(), missing)
    out = collection.compute()
    for name, tolerance in TIGHT.items():
        assert abs(out[name].item() - expected[name]) <= tolerance, name


def test_values_that_are_not_missing_are_never_read():
    truth, imputed, missing = _table(6)
    clean_truth = np.where(missing, truth, 0.0)
    clean_imputed = np.where(missing, imputed, 0.0)
    dirty_truth = np.where(missing, truth, np.nan)
    dirty_imputed = np.where(missing, imputed, np.inf)
    dirty_imputed[~missing & (np.arange(D) % 2 == 0)] = -np.inf
    for clean, dirty in (
        (_metrics(), _metrics()),
        ({"all": imputation_metrics(D)}, {"all": imputation_metrics(D)}),
    ):
        for name in clean:
            clean[name].update(*_torch(clean_truth, clean_imputed, missing))
            dirty[name].update(*_torch(dirty_truth, dirty_imputed, missing))
            got, want = dirty[name].compute(), clean[name].compute()
            got = got if isinstance(got, dict) else {name: got}
            want = want if isinstance(want, dict) else {name: want}
            for key in want:
                assert math.isfinite(got[key].item()), key
                assert got[key].item() == want[key].item(), key


def test_a_non_finite_missing_entry_is_refused():
    truth, imputed, missing = _table(7, n=40)
    row, column = np.argwhere(missing)[0]
    truth[row, column] = np.nan
    for metric in _metrics().values():
        with pytest.raises(ValueError, match="finite at the missing entries"):
            metric.update(*_torch(truth, imputed, missing))


def test_bad_shapes_and_types_raise_clear_errors():
    x = torch.randn(6, D)
    mask = torch.rand(6, D) < 0.5
    for metric in _metrics().values():
        with pytest.raises(ValueError, match=r"2-D \(rows, columns\) of one shape"):
            metric.update(x, x[:5], mask)
        with pytest.raises(ValueError, match="of one shape"):
            metric.update(x, x, mask[:, :-1])
        with pytest.raises(ValueError, match="2-D"):
            metric.update(x[0], x[0], mask[0])
        with pytest.raises(TypeError, match="bool mask"):
            metric.update(x, x, mask.float())
        with pytest.raises(TypeError, match="torch.Tensor"):
            metric.update(x.numpy(), x, mask)
    for metric in (ImputationR2(D), ImputationMAE(D), ImputationRMSE(D), ImputationWasserstein(D)):
        with pytest.raises(ValueError, match=f"`num_columns` = {D} but the batch has {D + 1}"):
            metric.update(torch.randn(6, D + 1), torch.randn(6, D + 1), torch.ones(6, D + 1) > 0)
    ImputationRMSE().update(torch.randn(3, D + 1), torch.randn(3, D + 1), torch.ones(3, D + 1) > 0)
    for cls in (ImputationR2, ImputationWasserstein):
        with pytest.raises(ValueError, match="`num_columns` must be >= 1"):
            cls(0)
    with pytest.raises(ValueError, match="variance_rtol"):
        ImputationR2(D, variance_rtol=1.5)


def test_nothing_missing_raises_and_no_qualifying_column_gives_nan():
    x = torch.randn(8, D)
    for metric in _metrics().values():
        metric.update(x, x, torch.zeros(8, D, dtype=torch.bool))
        with pytest.raises(ValueError, match="seen no missing entry"):
            metric.compute()
    with pytest.raises(ValueError, match="no entry is missing"):
        imputation_scores(x.numpy(), x.numpy(), np.zeros((8, D), dtype=bool))
    only_singles = torch.zeros(8, D, dtype=torch.bool)
    only_singles[torch.arange(D) % 8, torch.arange(D)] = True  # one missing entry per column
    r2 = ImputationR2(D)
    r2.update(x + 1.0, x, only_singles)
    assert math.isnan(r2.compute().item())
    assert math.isnan(imputation_scores(x.numpy(), x.numpy() + 1, only_singles.numpy())["r2"])


@pytest.mark.parametrize("name", list(TIGHT))
def test_two_metrics_merged_equal_one_that_saw_everything(name):
    truth, imputed, missing = _table(8)
    imputed_t, truth_t, missing_t = _torch(truth, imputed, missing)
    whole, first, second = _metrics()[name], _metrics()[name], _metrics()[name]
    whole.update(imputed_t, truth_t, missing_t)
    for part in _batches([90, 110]):
        first.update(imputed_t[part], truth_t[part], missing_t[part])
    for part in _batches([33, 267])[::-1]:
        second.update(imputed_t[200:][part], truth_t[200:][part], missing_t[200:][part])
    first.merge_state(second)
    expected = _oracle(truth, imputed, missing)[name]
    assert abs(first.compute().item() - whole.compute().item()) <= TIGHT[name]
    assert abs(first.compute().item() - expected) <= TIGHT[name]
    if name != "wasserstein":  # the DDP reduction of "sum" states, by hand
        third, fourth = _metrics()[name], _metrics()[name]
        third.update(imputed_t[:321], truth_t[:321], missing_t[:321])
        fourth.update(imputed_t[321:], truth_t[321:], missing_t[321:])
        for state in third._defaults:
            setattr(third, state, getattr(third, state) + getattr(fourth, state))
        assert abs(third.compute().item() - expected) <= TIGHT[name]


@pytest.mark.filterwarnings("ignore:The ``compute`` method:UserWarning")
def test_reset_forgets_everything():
    truth, imputed, missing = _table(9)
    other = _table(10, n=300)
    collection = imputation_metrics(D)
    metrics = _metrics()
    for metric in (collection, *metrics.values()):
        metric.update(*_torch(truth, imputed, missing))
        metric.reset()
    for metric in metrics.values():
        with pytest.raises(ValueError, match="seen no missing entry"):
            metric.compute()
    assert metrics["wasserstein"].columns == []
    assert int(metrics["r2"].count.sum()) == 0 and float(metrics["r2"].sum_product.abs().sum()) == 0
    expected = _oracle(*other)
    for metric in (collection, *metrics.values()):
        metric.update(*_torch(*other))
    out = collection.compute()
    for name, tolerance in TIGHT.items():
        assert abs(out[name].item() - expected[name]) <= tolerance, name
        assert abs(metrics[name].compute().item() - expected[name]) <= tolerance, name


@pytest.mark.filterwarnings("ignore:The ``compute`` method:UserWarning")
def test_forward_and_a_first_batch_with_nothing_missing_in_a_collection():
    # RMSE and MAE both hold 0 after a batch with nothing missing; their states have different
    # names, so the collection does not merge them into one compute group
    truth, imputed, missing = _table(11)
    missing[:120] = False
    imputed_t, truth_t, missing_t = _torch(truth, imputed, missing)
    collection = imputation_metrics(D)
    collection.update(imputed_t[:120], truth_t[:120], missing_t[:120])
    batch = collection(imputed_t[120:300], truth_t[120:300], missing_t[120:300])
    collection.update(imputed_t[300:], truth_t[300:], missing_t[300:])
    assert all(len(group) == 1 for group in collection.compute_groups.values())
    in_batch = _oracle(truth[120:300], imputed[120:300], missing[120:300])
    expected = _oracle(truth, imputed, missing)
    out = collection.compute()
    for name, tolerance in TIGHT.items():
        assert abs(batch[name].item() - in_batch[name]) <= tolerance, name
        assert abs(out[name].item() - expected[name]) <= tolerance, name
    assert expected["rmse"] != pytest.approx(expected["mae"], abs=1e-3)


def _ddp_worker(rank, port, folder, truth, imputed, missing):
    torch.distributed.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2
    )
    try:
        imputed_t, truth_t, missing_t = _torch(truth, imputed, missing)
        # .to(device), as Lightning does, sets torchmetrics' `dtype` back to float32
        uneven, idle = imputation_metrics(D).to("cpu"), imputation_metrics(D).to("cpu")
        half = slice(0, 170) if rank == 0 else slice(170, None)
        for chunk in zip(
            imputed_t[half].split(60), truth_t[half].split(60), missing_t[half].split(60)
        ):
            uneven.update(*chunk)
        if rank == 0:  # the other process never calls update
            for chunk in zip(imputed_t.split(128), truth_t.split(128), missing_t.split(128)):
                idle.update(*chunk)
        out = {
            key: {name: value.item() for name, value in collection.compute().items()}
            for key, collection in (("uneven", uneven), ("idle", idle))
        }
        torch.save(out, f"{folder}/rank{rank}.pt")
        torch.distributed.barrier()
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.filterwarnings("ignore:The ``compute`` method:UserWarning")
def test_metrics_reduce_over_two_gloo_processes_one_of_them_idle(tmp_path):
    truth, imputed, missing = _table(12, n=400)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    torch.multiprocessing.spawn(
        _ddp_worker, args=(port, str(tmp_path), truth, imputed, missing), nprocs=2, join=True
    )
    expected = _oracle(truth, imputed, missing)
    alone = _oracle(truth[170:], imputed[170:], missing[170:])
    assert all(abs(alone[name] - expected[name]) > 1e-6 for name in TIGHT)  # a rank alone differs
    for rank in (0, 1):
        out = torch.load(tmp_path / f"rank{rank}.pt")
        for key in ("uneven", "idle"):
            for name, tolerance in TIGHT.items():
                assert abs(out[key][name] - expected[name]) <= tolerance, (rank, key, name)


def test_the_collection_has_the_four_scores():
    collection = imputation_metrics(D)
    assert isinstance(collection, MetricCollection)
    assert set(collection.keys()) == {"r2", "rmse", "mae", "wasserstein"}
    assert collection["r2"].higher_is_better and not collection["rmse"].higher_is_better
    named = imputation_metrics(D, prefix="val/")
    named.update(torch.randn(5, D), torch.randn(5, D), torch.ones(5, D, dtype=torch.bool))
    assert set(named.compute()) == {"val/r2", "val/rmse", "val/mae", "val/wasserstein"}
