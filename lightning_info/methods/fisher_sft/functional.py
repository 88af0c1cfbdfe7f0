"""FisherSFT: information-gain subset selection (Deb et al., ICML 2025), functional core.

Example ``i`` of the candidate pool is a block ``X_i`` of ``m_i`` token embeddings in ``R^d`` (the
frozen model's last layer at the response tokens). Linearising the SFT log-likelihood at the last
layer, the information gain of a subset ``S`` is the D-optimal design objective

    F(S) = log det(lambda I_d + sum_{i in S} X_i^T X_i),                               (FSFT-1)

monotone submodular in ``S``. With ``A = lambda I + sum_{selected} X_i^T X_i = L L^T``, the gain of
adding ``i`` follows from the matrix determinant lemma,

    F(S + i) - F(S) = log det(I_m + X_i A^{-1} X_i^T) = log det(I_m + Z_i^T Z_i),
    Z_i = L^{-1} X_i^T,                                                                (FSFT-2)

so no ``dL x dL`` (nor any ``m x m`` beyond one block) matrix is ever formed. A block with more
rows than ``d`` is first reduced to the ``d x d`` triangular factor ``R_i`` of its QR
decomposition, ``R_i^T R_i = X_i^T X_i``, which leaves (FSFT-1) and (FSFT-2) unchanged.

Greedy selection picks ``argmax_i`` of (FSFT-2) ``budget`` times; by submodularity it reaches at
least ``(1 - 1/e)`` of the optimum (Nemhauser et al., 1978). Lazy greedy (Minoux, 1978) keeps the
stale gains in a max-heap: they only decrease as ``A`` grows, so a candidate whose refreshed gain
still tops the heap is the true argmax. Both break ties by the lowest index, so they return the
same selection.

This module is the public core: the objective, the greedy's dispatch and GreeDi's two rounds. The
parts it calls live beside it, one job each:

- ``pool.py``: the pool checked, token-weighted and factored (``prepare_blocks``);
- ``greedy.py``: the :class:`Selection` record, the batched gain (FSFT-2) and the naive greedy;
- ``lazy_greedy.py``: lazy greedy on the Woodbury representation of ``A^{-1}`` (FSFT-3);
- ``rank_one.py``: the exact greedy for one row per example (FSFT-4);
- ``sketch.py``: the seeded Gaussian sketch of a pool too wide to hold;
- ``baselines.py``: the random and k-center subsets.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

import torch
from torch import Tensor

from lightning_info.core.blocks import TokenBlocks
from lightning_info.core.validation import require_indices, require_int, require_positive
from lightning_info.methods.fisher_sft.baselines import k_center_select, random_select
from lightning_info.methods.fisher_sft.greedy import Selection, _naive_greedy
from lightning_info.methods.fisher_sft.greedy import _gains as _gains  # (FSFT-2), importable here
from lightning_info.methods.fisher_sft.lazy_greedy import (
    SEGMENT_OVERHEAD_FLOPS,
    _lazy_woodbury_greedy,
)
from lightning_info.methods.fisher_sft.pool import (
    POOLINGS,
    _as_token_weights,
    _check_budget,
    _check_indices,
    _stacked_factors,
    _take,
    as_token_blocks,
    prepare_blocks,
)
from lightning_info.methods.fisher_sft.rank_one import _rank_one_greedy
from lightning_info.methods.fisher_sft.sketch import FeatureSketch, gaussian_sketch, sketch_features

__all__ = [
    "as_token_blocks",
    "FeatureSketch",
    "gaussian_sketch",
    "fisher_greedy_select",
    "k_center_select",
    "log_det_objective",
    "merge_shard_selections",
    "METHODS",
    "POOLINGS",
    "prepare_blocks",
    "random_select",
    "SEGMENT_OVERHEAD_FLOPS",
    "Selection",
    "sketch_features",
    "two_round_greedy_select",
]

METHODS = ("lazy", "naive")


def log_det_objective(
    features: TokenBlocks | Sequence[Tensor], indices: Sequence[int], lam: float = 1.0, **kwargs
) -> float:
    """``F(S)`` of (FSFT-1) for the examples ``indices``, by a direct ``slogdet``.

    ``indices`` is a set: distinct integer indices of the pool (a repeat is refused rather than
    counted twice); no indices give ``F(empty) = d log(lambda)``."""
    blocks = as_token_blocks(features)
    indices = _check_indices(indices, len(blocks))
    factors = prepare_blocks(blocks, **kwargs)
    require_positive(lam, "lam")
    dim = factors[0].shape[1]
    matrix = lam * torch.eye(dim, dtype=factors[0].dtype, device=factors[0].device)
    for i in indices:
        matrix = matrix + factors[i].T @ factors[i]
    return torch.linalg.slogdet(matrix).logabsdet.item()


def fisher_greedy_select(
    features: TokenBlocks | Sequence[Tensor],
    budget: int,
    *,
    lam: float = 1.0,
    pooling: str = "none",
    token_weights: Tensor | Sequence[float] | Sequence[Tensor] | None = None,
    method: str = "lazy",
    dtype: torch.dtype = torch.float64,
    chunk_size: int = 4096,
    lazy_batch: int = 16,
) -> Selection:
    """Greedy maximisation of (FSFT-1) over ``budget`` examples.

    Args:
        features: the pool, a :class:`TokenBlocks` or a list of ``(m_i, d)`` tensors.
        budget: number of examples to select, ``1 <= budget <= pool size``.
        lam: ridge ``lambda > 0`` of (FSFT-1).
        pooling: ``"none"`` (token blocks), ``"mean"`` or ``"sum"`` (one row per example).
        token_weights: optional per-token curvature weights (see :func:`prepare_blocks`).
        method: ``"lazy"`` (stale-gain heap) or ``"naive"`` (every gain every round); both
            return the same selection.
        dtype: precision of the computation (float64 keeps near-ties apart).
        chunk_size: candidates per batched gain evaluation (bounds memory).
        lazy_batch: stale candidates refreshed by the first batched call of a lazy-greedy round
            (each further call of the same round doubles it, up to ``chunk_size``).

    ``naive`` refactorises ``A`` after each pick and solves (FSFT-2) for every candidate: the
    reference implementation. ``lazy`` works on (FSFT-3) and never forms a ``d x d`` matrix.
    Where every factor has one row (``pooling="mean"``/``"sum"``, or one-row blocks) and the
    ``N x d`` pool takes at most 12 MiB (about 1.6 million float64 numbers), ``lazy`` runs the exact
    rank-one greedy instead (FSFT-4, :func:`_rank_one_greedy`): every gain updated after each
    pick by one ``N x d`` product, faster there than the lazy bookkeeping; the same selection
    either way.
    """
    if method not in METHODS:
        raise ValueError(f"`method` must be one of {METHODS}, got {method!r}.")
    lam = require_positive(lam, "lam")
    require_int(chunk_size, "chunk_size", 1)
    require_int(lazy_batch, "lazy_batch", 1)
    stacked, rows = _stacked_factors(features, pooling, token_weights, dtype)
    _check_budget(budget, len(stacked))
    if method == "naive":
        return _naive_greedy(stacked, budget, lam, chunk_size)
    if stacked.shape[1] == 1 and stacked.numel() * stacked.element_size() <= _RANK_ONE_MAX_BYTES:
        return _rank_one_greedy(stacked[:, 0], budget, lam)
    return _lazy_woodbury_greedy(stacked, rows, budget, lam, chunk_size, lazy_batch)


_RANK_ONE_MAX_BYTES = 12 * 2**20
"""Largest one-row-per-example pool (bytes) that lazy greedy hands to the rank-one greedy
(FSFT-4). Measured on a CPU at 100 picks (``recipes/lab/fisher_sft/NOTES.md``): up to 1.6
million float64 numbers the rank-one greedy was 2.7x-69x faster than lazy greedy on realistic and
isotropic pools of widths 16 to 4096; from 2.5 million on, where each pick reads the pool from
memory, lazy greedy won 15 of 18 cells (up to 6x)."""


def two_round_greedy_select(
    features: TokenBlocks | Sequence[Tensor],
    budget: int,
    num_shards: int,
    *,
    lam: float = 1.0,
    pooling: str = "none",
    token_weights: Tensor | Sequence[float] | Sequence[Tensor] | None = None,
    method: str = "lazy",
) -> Selection:
    """GreeDi (Mirzasoleiman et al., 2013) for (FSFT-1): the pool split into ``num_shards``
    strided shards (shard ``r`` holds examples ``r, r + W, ...``, as each DDP rank embeds them),
    greedy on each shard to ``min(budget, shard size)`` picks (round 1), then
    :func:`merge_shard_selections` (round 2). Only ``W x budget`` examples ever meet in one place;
    the result reaches at least ``(1 - 1/e)^2 / min(W, budget)`` of the optimum, and in practice
    nearly the centralised greedy's ``F``."""
    blocks = as_token_blocks(features)
    require_int(num_shards, "num_shards", 1)
    _check_budget(budget, len(blocks))
    weights = None if token_weights is None else _as_token_weights(token_weights, blocks.lengths)
    options = {"lam": lam, "pooling": pooling, "method": method}
    picked: list[int] = []
    groups: list[list[int]] = []
    for rank in range(min(num_shards, len(blocks))):
        shard = list(range(rank, len(blocks), num_shards))
        pool, shard_weights = _take(blocks, weights, shard)
        local = fisher_greedy_select(
            pool, min(budget, len(shard)), token_weights=shard_weights, **options
        )
        groups.append(list(range(len(picked), len(picked) + len(local.indices))))
        picked += [shard[i] for i in local.indices]
    candidates, candidate_weights = _take(blocks, weights, picked)
    merged = merge_shard_selections(
        candidates, groups, budget, token_weights=candidate_weights, **options
    )
    return replace(merged, indices=[picked[i] for i in merged.indices], pool_size=len(blocks))


def merge_shard_selections(
    candidates: TokenBlocks,
    groups: Sequence[Sequence[int]],
    budget: int,
    *,
    lam: float = 1.0,
    pooling: str = "none",
    token_weights: Tensor | None = None,
    method: str = "lazy",
) -> Selection:
    """Round 2 of GreeDi: greedy over ``candidates`` (every shard's picks; ``groups[r]`` the
    positions of shard ``r``'s), and the better, by ``F``, of that and the best shard's own
    ``budget`` picks. Indices are positions in ``candidates``; ``gains`` those of the round that
    chose them. Each group must be a set of positions in ``candidates`` (no repeats)."""
    candidates = as_token_blocks(candidates)
    if isinstance(groups, (str, bytes)) or not isinstance(groups, Iterable):
        raise TypeError(
            f"`groups` must be a list of lists of positions in `candidates`, got "
            f"{type(groups).__name__}."
        )
    groups = [
        require_indices(group, f"groups[{r}]", len(candidates), unique=True).tolist()
        for r, group in enumerate(groups)
    ]
    options = {"lam": lam, "pooling": pooling}
    union = fisher_greedy_select(
        candidates, budget, token_weights=token_weights, method=method, **options
    )

    def objective(positions: Sequence[int]) -> float:  # on the subset's blocks only
        subset, subset_weights = _take(candidates, token_weights, positions)
        everything = range(len(positions))
        return log_det_objective(subset, everything, token_weights=subset_weights, **options)

    best = union
    for group in groups:
        if len(group) == budget and (value := objective(group)) > best.objective:
            best = Selection(list(group), [], value, lam, len(candidates))
    return best
