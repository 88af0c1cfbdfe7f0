"""Set functions return sets and valid input keeps working: k-center never repeats an index (also
on duplicate points, against a brute-force oracle), F(S) matches a float64 slogdet of the set,
and a selection file is reused exactly when the pool and settings are the same."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import torch

from lightning_info.methods.fisher_sft.functional import (
    fisher_greedy_select,
    k_center_select,
    log_det_objective,
)
from lightning_info.methods.fisher_sft.sampler import (
    FisherSubsetSampler,
    load_selection,
    save_selection,
    select_subset,
    selection_fingerprint,
)
from tests.methods.fisher_sft.test_bad_input import _module, _pool


def _radius(points: torch.Tensor, chosen: list[int]) -> float:
    """The k-center objective: the largest distance from a point to its nearest chosen one."""
    return float(torch.cdist(points.double(), points[chosen].double()).min(1).values.max())


def _optimal_radius(points: torch.Tensor, k: int) -> float:
    return min(_radius(points, list(c)) for c in itertools.combinations(range(len(points)), k))


def _duplicated(distinct: int, copies: int, seed: int = 0) -> torch.Tensor:
    base = torch.randn(distinct, 2, generator=torch.Generator().manual_seed(seed))
    order = torch.randperm(distinct * copies, generator=torch.Generator().manual_seed(seed + 1))
    return base.repeat(copies, 1)[order]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("budget", [2, 3, 4])
def test_k_center_on_duplicate_points_picks_distinct_indices_within_twice_the_optimum(budget, seed):
    points = _duplicated(distinct=4, copies=2, seed=seed)
    chosen = k_center_select(points, budget, seed=seed)
    assert len(chosen) == len(set(chosen)) == budget
    assert _radius(points, chosen) <= 2 * _optimal_radius(points, budget) + 1e-12
    locations = {tuple(points[i].tolist()) for i in chosen}
    assert len(locations) == budget, "a duplicate of a chosen point while others are uncovered"


def test_k_center_beyond_the_distinct_points_covers_all_and_stays_a_set():
    points = _duplicated(distinct=3, copies=3)
    chosen = k_center_select(points, 7, seed=1)
    assert len(set(chosen)) == 7
    assert _radius(points, chosen) == 0.0
    same = k_center_select(torch.zeros(5, 2), 5, seed=3)
    assert same[1:] == sorted(set(range(5)) - {same[0]}), "ties go to the lowest index"


@pytest.mark.parametrize("indices", [[3, 0, 4], [4, 3, 0], np.array([0, 3, 4])])
def test_log_det_objective_is_the_float64_slogdet_of_the_set(indices):
    pool = _pool(n=6, rows=3, d=4)
    matrix = 0.5 * torch.eye(4, dtype=torch.float64)
    for i in (0, 3, 4):
        matrix += pool[i].T @ pool[i]
    expected = torch.linalg.slogdet(matrix).logabsdet.item()
    assert log_det_objective(pool, indices, lam=0.5) == pytest.approx(expected, rel=1e-12)
    assert log_det_objective(pool, [], lam=0.5) == pytest.approx(4 * np.log(0.5))


def test_valid_integer_indices_and_weights_still_work():
    pool = _pool()
    as_tensor = log_det_objective(pool, torch.tensor([0, 2]))
    assert log_det_objective(pool, [np.int64(0), 2]) == pytest.approx(as_tensor)
    weights = torch.arange(1, 11)
    integer = fisher_greedy_select(pool, 2, token_weights=weights)
    real = fisher_greedy_select(pool, 2, token_weights=weights.double())
    assert integer.indices == real.indices
    assert list(FisherSubsetSampler(np.array([3, 1]), shuffle=False)) == [3, 1]
    assert select_subset(pool, 2, strategy="random", pool_size=5).indices == (
        select_subset(None, 2, strategy="random", pool_size=5).indices
    )


def test_a_selection_file_with_a_bom_loads(tmp_path):
    pool = _pool()
    selection = select_subset(pool, 2)
    digest = selection_fingerprint(pool, strategy="fisher", budget=2)
    path = tmp_path / "sel.json"
    save_selection(selection, path, fingerprint=digest, budget=2)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert load_selection(path, fingerprint=digest, budget=2) == selection


def test_the_selection_file_is_reused_for_the_same_pool_and_settings(tmp_path):
    first = _module(tmp_path, strategy="random", seed=3)
    first.setup("fit")
    record = json.loads((tmp_path / "selection.json").read_text())
    assert record["fingerprint"] == first.fingerprint
    again = _module(tmp_path, strategy="random", seed=3)
    again.setup("fit")
    assert again.selection.indices == first.selection.indices
    assert again.fingerprint == first.fingerprint
    fisher = _module(tmp_path / "fisher")
    fisher.setup("fit")
    other_seed = _module(tmp_path / "fisher", seed=5)  # FisherSFT draws nothing: reused
    other_seed.setup("fit")
    assert other_seed.selection.indices == fisher.selection.indices
    assert other_seed.embedded_rows == 0


def test_resuming_restores_the_subset_of_the_same_configuration(tmp_path):
    module = _module(tmp_path)
    module.setup("fit")
    state = module.state_dict()
    resumed = _module(tmp_path)
    resumed.setup("fit")
    resumed.load_state_dict(state)
    assert resumed.sampler.indices == module.sampler.indices
    state["fingerprint"] = "0" * 32
    with pytest.raises(ValueError, match="made from other inputs"):
        resumed.load_state_dict(state)


def test_a_feature_store_record_with_a_bom_opens(tmp_path):
    """A record saved with a UTF-8 byte-order mark reads as the same store (oracle: the rows
    of the store before the mark was added)."""
    from tests.methods.fisher_sft.test_bad_input import _store

    store = _store(tmp_path)
    before = store.blocks().values.clone()
    record = store.path / "store.json"
    record.write_bytes(b"\xef\xbb\xbf" + record.read_bytes())
    from lightning_info.methods.fisher_sft.feature_store import FeatureStore

    reopened = FeatureStore.open(store.path)
    assert len(reopened) == 6
    torch.testing.assert_close(reopened.blocks().values, before, rtol=0, atol=0)


def test_dask_two_round_select_takes_an_open_store(tmp_path):
    """An open FeatureStore given to the Dask selection gives the serial selection."""
    pytest.importorskip("dask")
    from lightning_info.methods.fisher_sft.dask_select import (
        dask_two_round_select,
        store_two_round_select,
    )
    from tests.methods.fisher_sft.test_bad_input import _store

    store = _store(tmp_path)
    on_dask = dask_two_round_select(store, 2, 2, scheduler="sync")
    serial = store_two_round_select(store, 2, 2)
    assert on_dask.indices == serial.indices
    assert on_dask.objective == pytest.approx(serial.objective, rel=1e-12)
