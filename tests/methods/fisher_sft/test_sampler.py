"""Subset strategies, the subset sampler and selection files."""

from __future__ import annotations

import pytest
import torch

from lightning_info.core.blocks import TokenBlocks
from lightning_info.methods.fisher_sft.functional import fisher_greedy_select, log_det_objective
from lightning_info.methods.fisher_sft.sampler import (
    FisherSubsetSampler,
    load_selection,
    save_selection,
    select_subset,
    selection_fingerprint,
)


def _pool(n=50, d=6, seed=0) -> TokenBlocks:
    generator = torch.Generator().manual_seed(seed)
    return TokenBlocks.from_list(
        [
            torch.randn(int(m), d, generator=generator)
            for m in torch.randint(1, 6, (n,), generator=generator)
        ]
    )


def test_strategies_share_one_interface_and_report_the_objective():
    pool = _pool()
    fisher = select_subset(pool, 10, strategy="fisher")
    assert fisher.indices == fisher_greedy_select(pool, 10).indices
    for strategy in ("random", "k_center"):
        other = select_subset(pool, 10, strategy=strategy, seed=1)
        assert len(set(other.indices)) == 10
        assert other.objective == pytest.approx(log_det_objective(pool, other.indices))
        assert fisher.objective > other.objective
    assert select_subset(None, 5, strategy="random", pool_size=50).indices == (
        select_subset(pool, 5, strategy="random").indices
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(strategy="best"), "strategy"),
        (dict(strategy="fisher", features=None), "needs the pool's features"),
        (dict(strategy="random", features=None), "pool_size"),
    ],
)
def test_strategy_errors(kwargs, message):
    features = kwargs.pop("features", _pool())
    with pytest.raises(ValueError, match=message):
        select_subset(features, 3, **kwargs)


def test_sampler_serves_the_subset_reshuffled_per_epoch_and_restores():
    sampler = FisherSubsetSampler([7, 3, 19, 42, 5], seed=2)
    sampler.set_epoch(0)
    first = list(sampler)
    sampler.set_epoch(1)
    second = list(sampler)
    assert sorted(first) == sorted(second) == [3, 5, 7, 19, 42] and first != second
    assert len(sampler) == 5
    restored = FisherSubsetSampler([0], seed=0)
    restored.load_state_dict(sampler.state_dict())
    assert list(restored) == second
    assert list(FisherSubsetSampler([4, 1, 2], shuffle=False)) == [4, 1, 2]


def test_sampler_select_is_deterministic():
    pool = _pool(seed=3)
    a = FisherSubsetSampler.select(pool, 8, strategy="fisher")
    b = FisherSubsetSampler.select(pool, 8, strategy="fisher")
    assert a.indices == b.indices == a.selection.indices


@pytest.mark.parametrize("bad", [[], [1, 1], [-1, 2]])
def test_sampler_rejects_bad_indices(bad):
    with pytest.raises(ValueError):
        FisherSubsetSampler(bad)


def test_selection_round_trip_and_stale_file_detection(tmp_path):
    pool = _pool()
    selection = select_subset(pool, 6)
    path = tmp_path / "sel.json"
    digest = selection_fingerprint(pool, strategy="fisher", budget=6)
    save_selection(selection, path, fingerprint=digest, pool_size=50, budget=6, strategy="fisher")
    loaded = load_selection(path, fingerprint=digest, pool_size=50, budget=6, strategy="fisher")
    assert loaded == selection
    with pytest.raises(ValueError, match="budget: saved 6, now 7"):
        load_selection(path, fingerprint=digest, pool_size=50, budget=7, strategy="fisher")
    other = selection_fingerprint(_pool(seed=1), strategy="fisher", budget=6)
    assert other != digest
    with pytest.raises(ValueError, match="made from other inputs"):
        load_selection(path, fingerprint=other, pool_size=50, budget=6, strategy="fisher")
