"""GreeDi from a FeatureStore: serial = hand-built GreeDi over the same contiguous ranges = Dask
(threads, processes, a distributed LocalCluster); its objective against the centralised greedy."""

from __future__ import annotations

import math

import pytest
import torch

from lightning_info.core.blocks import TokenBlocks
from lightning_info.methods.fisher_sft.dask_select import (
    dask_two_round_select,
    store_two_round_select,
)
from lightning_info.methods.fisher_sft.feature_store import FeatureStore
from lightning_info.methods.fisher_sft.functional import (
    fisher_greedy_select,
    log_det_objective,
    merge_shard_selections,
)


def _pool(count, dim=8, seed=0, rank=None):
    """Blocks of 1-6 rows; with ``rank``, low-rank rows plus noise (correlated candidates)."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 7, (count,), generator=generator)
    loading = torch.randn(rank or dim, dim, generator=generator) if rank else torch.eye(dim)
    scales = torch.exp(0.5 * torch.randn(count, generator=generator))
    blocks = [
        s * torch.randn(int(n), rank or dim, generator=generator) @ loading
        + 0.1 * torch.randn(int(n), dim, generator=generator)
        for n, s in zip(lengths, scales)
    ]
    weights = [torch.rand(int(n), generator=generator) for n in lengths]
    return blocks, weights


def _store(path, blocks, weights=None):
    store = FeatureStore.create(path, weighted=weights is not None)
    for start in range(0, len(blocks), 32):
        store.append(blocks[start : start + 32], weights and torch.cat(weights[start : start + 32]))
    return store


def _hand_built_greedi(blocks, weights, budget, shards, lam=1.0):
    """GreeDi written out: fisher_greedy_select on each contiguous range, then
    merge_shard_selections over the union of the picks."""
    count = len(blocks)
    union, groups = [], []
    for r in range(shards):
        start, stop = r * count // shards, (r + 1) * count // shards
        local = fisher_greedy_select(
            blocks[start:stop],
            min(budget, stop - start),
            lam=lam,
            token_weights=weights and weights[start:stop],
        )
        groups.append(list(range(len(union), len(union) + len(local.indices))))
        union += [start + i for i in local.indices]
    merged = merge_shard_selections(
        TokenBlocks.from_list([blocks[i] for i in union]),
        groups,
        budget,
        lam=lam,
        token_weights=weights and torch.cat([weights[i] for i in union]),
    )
    return [union[i] for i in merged.indices], merged.objective


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("shards", [1, 3, 8])
def test_serial_selection_from_disk_is_the_hand_built_greedi(tmp_path, weighted, shards):
    blocks, weights = _pool(120, rank=3)
    weights = weights if weighted else None
    store = _store(tmp_path / "store", blocks, weights)
    selection = store_two_round_select(store, 12, shards, lam=0.5)
    indices, objective = _hand_built_greedi(blocks, weights, 12, shards, lam=0.5)
    assert selection.indices == indices
    assert selection.objective == pytest.approx(objective, rel=1e-12)
    assert selection.pool_size == 120 and len(set(selection.indices)) == 12
    direct = log_det_objective(blocks, selection.indices, 0.5, token_weights=weights)
    assert selection.objective == pytest.approx(direct, rel=1e-9)


def test_one_shard_is_the_centralised_greedy(tmp_path):
    blocks, _ = _pool(60)
    store = _store(tmp_path / "store", blocks)
    assert store_two_round_select(store, 9, 1).indices == fisher_greedy_select(blocks, 9).indices


@pytest.mark.parametrize("scheduler", ["sync", "threads", "processes"])
def test_dask_schedulers_give_the_serial_selection(tmp_path, scheduler):
    pytest.importorskip("dask")
    blocks, weights = _pool(90, rank=4)
    store = _store(tmp_path / "store", blocks, weights)
    serial = store_two_round_select(store, 10, 4)
    on_dask = dask_two_round_select(tmp_path / "store", 10, 4, scheduler=scheduler)
    assert on_dask.indices == serial.indices and on_dask.gains == serial.gains
    assert on_dask.objective == serial.objective and on_dask.pool_size == 90


def test_a_distributed_local_cluster_gives_the_serial_selection(tmp_path):
    distributed = pytest.importorskip("distributed")
    blocks, weights = _pool(90, rank=4)
    store = _store(tmp_path / "store", blocks, weights)
    serial = store_two_round_select(store, 10, 3)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        on_cluster = dask_two_round_select(str(tmp_path / "store"), 10, 3, client)
        # the workers opened the store themselves: only the path was in the graph
        assert on_cluster.indices == serial.indices
        assert dask_two_round_select(tmp_path / "store", 10, 3).indices == serial.indices
    assert on_cluster.objective == serial.objective


def _clustered(count, dim, clusters, seed=0):
    """``clusters`` directions, the examples of each contiguous in the pool's order (so that a
    contiguous shard sees few of them), 1-4 noisy rows per example."""
    generator = torch.Generator().manual_seed(seed)
    centres = torch.randn(clusters, dim, generator=generator)
    blocks = []
    for i in range(count):
        scale = torch.exp(0.3 * torch.randn(1, generator=generator))
        rows = int(torch.randint(1, 5, (1,), generator=generator))
        noise = 0.3 * torch.randn(rows, dim, generator=generator)
        blocks.append(centres[i * clusters // count] * scale + noise)
    return blocks


POOLS = {
    "low-rank, d = 16, budget 20": (lambda: _pool(400, dim=16, seed=1, rank=3)[0], 20),
    "clustered, d = 32, 16 clusters, budget 40": (lambda: _clustered(400, 32, 16), 40),
    "clustered, d = 8, 4 clusters, budget 10": (lambda: _clustered(400, 8, 4), 10),
}


@pytest.mark.parametrize("name", POOLS)
def test_greedi_from_disk_reaches_the_guarantee_against_the_centralised_greedy(tmp_path, name):
    """``F(S) / F(greedy)`` (``lam = 1``: ``F(empty) = 0``) per shard count, printed (the table
    in NOTES.md); GreeDi guarantees ``(1 - 1/e)^2 / min(W, budget)`` of the optimum, which the
    centralised greedy's value is at most."""
    make, budget = POOLS[name]
    blocks = make()
    store = _store(tmp_path / "store", blocks)
    central = fisher_greedy_select(blocks, budget)
    for shards in (2, 4, 8, 16):
        selection = store_two_round_select(store, budget, shards)
        ratio = selection.objective / central.objective
        common = len(set(selection.indices) & set(central.indices))
        print(f"N = 400, {name}, W = {shards}: ratio {ratio:.5f}, common {common}/{budget}")
        assert ratio >= (1 - 1 / math.e) ** 2 / min(shards, budget)
        assert ratio > 0.99  # in practice near the centralised greedy


def test_bad_arguments_are_refused_before_any_work(tmp_path):
    blocks, _ = _pool(10)
    store = _store(tmp_path / "store", blocks)
    with pytest.raises(ValueError, match="larger than the store's pool"):
        store_two_round_select(store, 11, 2)
    with pytest.raises(ValueError, match="num_shards"):
        store_two_round_select(store, 3, 0)
    with pytest.raises(ValueError, match="pooling"):
        store_two_round_select(store, 3, 2, pooling="max")
    with pytest.raises(FileNotFoundError, match="no store.json"):
        dask_two_round_select(tmp_path / "nothing", 3, 2)
    # more shards than examples: one example per shard
    assert len(store_two_round_select(store, 3, 50).indices) == 3
