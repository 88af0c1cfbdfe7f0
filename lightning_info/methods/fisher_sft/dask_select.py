"""Two-round (GreeDi) FisherSFT selection from a :class:`~.feature_store.FeatureStore` on disk,
serially or on Dask.

Round 1 splits the store into contiguous shards (:func:`~.feature_store.shard_range`); each shard
is read into memory alone and greedy-selected to ``min(budget, shard size)`` picks
(:func:`~lightning_info.methods.fisher_sft.functional.fisher_greedy_select`). Round 2 reads the
picks back from the store and merges them
(:func:`~lightning_info.methods.fisher_sft.functional.merge_shard_selections`: greedy over the
union, or the best shard's own picks when they are better). A process holds one shard and the
picks, never the pool. On Dask every shard is a task that opens the store itself from its path
(only the path, the range and the options travel; each task returns its picks' indices), and the
merge is one more task; serially the same two functions run in a loop, so both give the same
selection. Dask is the optional extra ``audit`` (``pip install 'lightning-info[audit]'``).
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from lightning_info.core.optional import require_extra
from lightning_info.core.validation import require_choice, require_int, require_positive
from lightning_info.methods.fisher_sft.feature_store import FeatureStore, shard_range
from lightning_info.methods.fisher_sft.functional import (
    METHODS,
    POOLINGS,
    Selection,
    fisher_greedy_select,
    merge_shard_selections,
)

__all__ = [
    "dask_two_round_select",
    "merge_store_picks",
    "select_store_shard",
    "store_two_round_select",
]


def _options(lam: float, pooling: str, method: str) -> dict[str, Any]:
    return {
        "lam": require_positive(lam, "lam"),
        "pooling": require_choice(pooling, "pooling", POOLINGS),
        "method": require_choice(method, "method", METHODS),
    }


def _checked(store: FeatureStore, budget: int, num_shards: int) -> int:
    """The number of shards to run (at most one per example), after checking the arguments."""
    require_int(budget, "budget", 1)
    require_int(num_shards, "num_shards", 1)
    if budget > len(store):
        raise ValueError(
            f"budget={budget} is larger than the store's pool ({len(store)} examples at "
            f"{store.path}); lower the budget or add candidates."
        )
    return min(num_shards, len(store))


def select_store_shard(
    path: str | os.PathLike, rank: int, num_shards: int, budget: int, options: dict[str, Any]
) -> list[int]:
    """Round 1 for one shard: open the store at ``path``, read contiguous shard ``rank`` of
    ``num_shards`` into memory, greedy-select ``min(budget, shard size)`` examples; their pool
    indices, in the order chosen. ``options``: ``lam``, ``pooling``, ``method``."""
    store = FeatureStore.open(path)
    start, stop = shard_range(len(store), rank, num_shards)
    blocks, weights = store.read(start, stop)
    local = fisher_greedy_select(
        blocks, min(budget, stop - start), token_weights=weights, **options
    )
    return [start + i for i in local.indices]


def merge_store_picks(
    path: str | os.PathLike, picks: list[list[int]], budget: int, options: dict[str, Any]
) -> Selection:
    """Round 2: the shards' ``picks`` (pool indices) read from the store at ``path`` and merged
    by :func:`merge_shard_selections`; the selection's indices are pool indices."""
    store = FeatureStore.open(path)
    union = [index for shard in picks for index in shard]
    candidates, weights = store.take(union)
    groups, first = [], 0
    for shard in picks:
        groups.append(list(range(first, first + len(shard))))
        first += len(shard)
    merged = merge_shard_selections(candidates, groups, budget, token_weights=weights, **options)
    return replace(merged, indices=[union[i] for i in merged.indices], pool_size=len(store))


def store_two_round_select(
    store: FeatureStore | str | os.PathLike,
    budget: int,
    num_shards: int,
    *,
    lam: float = 1.0,
    pooling: str = "none",
    method: str = "lazy",
) -> Selection:
    """GreeDi over ``num_shards`` contiguous shards of the store, one shard in memory at a time,
    in this process. The store's token weights, when it has them, weigh the objective."""
    store = store if isinstance(store, FeatureStore) else FeatureStore.open(store)
    options = _options(lam, pooling, method)
    shards = _checked(store, budget, num_shards)
    picks = [select_store_shard(store.path, r, shards, budget, options) for r in range(shards)]
    return merge_store_picks(store.path, picks, budget, options)


def dask_two_round_select(
    store_path: str | os.PathLike,
    budget: int,
    num_shards: int,
    client: Any = None,
    *,
    scheduler: str | None = None,
    lam: float = 1.0,
    pooling: str = "none",
    method: str = "lazy",
) -> Selection:
    """:func:`store_two_round_select` as a Dask graph (``store_path`` may be an open
    :class:`FeatureStore`, whose folder is used): one task per shard
    (:func:`select_store_shard`), each opening the store at ``store_path`` itself, and one merge
    task (:func:`merge_store_picks`); the same selection as the serial run.

    ``client``: a ``distributed.Client`` to run on (its workers must be able to read
    ``store_path``: the same machine, or a shared file system); ``None`` runs ``dask.compute``
    with ``scheduler`` (``"threads"``, ``"processes"``, ``"sync"``; ``None``: Dask's default,
    which is the current ``distributed`` client when there is one).
    """
    dask = require_extra("dask", "audit", "Selections on Dask")
    if client is not None and not callable(getattr(client, "compute", None)):
        raise TypeError(
            f"`client` must be a distributed.Client or None, got {type(client).__name__}; for a "
            "local run pass scheduler='threads' (or 'processes', 'sync') instead."
        )
    if isinstance(store_path, FeatureStore):
        store_path = store_path.path
    store = FeatureStore.open(store_path)  # checked here, before any task is sent
    options = _options(lam, pooling, method)
    shards = _checked(store, budget, num_shards)
    path = str(store.path.resolve())
    shard_task = dask.delayed(select_store_shard)  # not pure: a store can be rewritten in place
    picks = [shard_task(path, r, shards, budget, options) for r in range(shards)]
    merged = dask.delayed(merge_store_picks)(path, picks, budget, options)
    if client is not None:
        return client.compute(merged).result()
    (selection,) = dask.compute(merged, scheduler=scheduler)
    return selection
