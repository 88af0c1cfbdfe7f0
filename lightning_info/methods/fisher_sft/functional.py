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
"""

from __future__ import annotations

import heapq
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from lightning_info.core.blocks import TokenBlocks, pooled_features
from lightning_info.core.validation import (
    require_finite_tensor,
    require_int,
    require_positive,
    require_real_tensor,
)

POOLINGS = ("none", "mean", "sum")
METHODS = ("lazy", "naive")


@dataclass
class Selection:
    """A greedy selection: ``indices`` in the order chosen, the gain of each, and ``F(S)``."""

    indices: list[int]
    gains: list[float]
    objective: float
    lam: float
    pool_size: int
    evaluations: int = 0
    """Number of single-candidate gain evaluations (naive: every candidate every round)."""


def _check_budget(budget: int, pool_size: int) -> int:
    require_int(budget, "budget", 1)
    if budget > pool_size:
        raise ValueError(
            f"budget={budget} is larger than the candidate pool ({pool_size} examples); "
            "lower the budget or add candidates."
        )
    return budget


def _check_indices(indices: Sequence[int], pool_size: int) -> None:
    for position, index in enumerate(indices):
        try:
            index = operator.index(index)
        except TypeError:
            raise TypeError(
                f"`indices` must hold integer example indices, got {index!r} at position "
                f"{position}."
            ) from None
        if not 0 <= index < pool_size:
            raise IndexError(
                f"`indices[{position}]` = {index} is outside the pool of {pool_size} examples; "
                f"pass indices in [0, {pool_size})."
            )


def as_token_blocks(features: TokenBlocks | Sequence[Tensor]) -> TokenBlocks:
    """``features`` as :class:`TokenBlocks`; a list of ``(m_i, d)`` tensors must share ``d``."""
    if isinstance(features, TokenBlocks):
        require_real_tensor(features.values, "features.values")
        return features
    if isinstance(features, Tensor):
        raise TypeError(
            "`features` must be a TokenBlocks or a list of (m_i, d) tensors, one per example, "
            f"got a tensor of shape {tuple(features.shape)}; for one row per example pass "
            "`list(x.unsqueeze(1))`."
        )
    if isinstance(features, (str, bytes)) or not isinstance(features, Iterable):
        raise TypeError(
            "`features` must be a TokenBlocks or a list of (m_i, d) tensors, one per example, "
            f"got {type(features).__name__}."
        )
    blocks = list(features)
    for i, block in enumerate(blocks):
        require_real_tensor(block, f"features[{i}]")
        if block.dim() != 2:
            raise ValueError(
                f"`features[{i}]` must be an (m_i, d) matrix of token rows, got shape "
                f"{tuple(block.shape)}; reshape it (e.g. `.unsqueeze(0)` for a single row)."
            )
        if block.shape[1] != blocks[0].shape[1]:
            raise ValueError(
                f"Every example block must have the same width d: `features[{i}]` has "
                f"d = {block.shape[1]} but `features[0]` has d = {blocks[0].shape[1]}; take all "
                "features from the same layer of the same model."
            )
    return TokenBlocks.from_list(blocks)


def _as_token_weights(
    token_weights: Tensor | Sequence[float] | Sequence[Tensor], lengths: Tensor
) -> Tensor:
    if isinstance(token_weights, Tensor):
        return require_real_tensor(token_weights, "token_weights")
    per_example = isinstance(token_weights, Sequence) and len(token_weights) > 0
    if per_example and all(isinstance(w, Tensor) and w.dim() == 1 for w in token_weights):
        sizes = [w.shape[0] for w in token_weights]
        if sizes != lengths.tolist():
            raise ValueError(
                f"Per-example `token_weights` must match the token rows of each example "
                f"({lengths.tolist()}), got lengths {sizes}."
            )
        for i, w in enumerate(token_weights):
            require_real_tensor(w, f"token_weights[{i}]")
        return torch.cat(list(token_weights))
    if not isinstance(token_weights, (str, bytes)):
        try:
            return torch.as_tensor(token_weights, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):
            pass
    raise TypeError(
        "`token_weights` must be a tensor, a list of numbers (one per token row) or a list "
        f"of 1-D tensors (one per example), got {type(token_weights).__name__}."
    )


def prepare_blocks(
    features: TokenBlocks | Sequence[Tensor],
    *,
    pooling: str = "none",
    token_weights: Tensor | Sequence[float] | Sequence[Tensor] | None = None,
    dtype: torch.dtype = torch.float64,
) -> list[Tensor]:
    """Per-example factors ``R_i`` with ``R_i^T R_i = X_i^T X_i`` and at most ``d`` rows.

    ``token_weights`` (one non-negative weight per token row, e.g. ``p (1 - p)`` of the model's
    next-token probability) scale the curvature: ``X_i^T W_i X_i``, i.e. rows times ``sqrt(w)``.
    They may be a tensor, a list of numbers, or a list of 1-D tensors, one per example.
    ``pooling="mean"``/``"sum"`` replace each block by the mean/sum of its rows (one row per
    example). The input is never modified.
    """
    if pooling not in POOLINGS:
        raise ValueError(f"`pooling` must be one of {POOLINGS}, got {pooling!r}.")
    blocks = as_token_blocks(features)
    values = require_finite_tensor(blocks.values, "features").to(dtype)
    if token_weights is not None:
        token_weights = _as_token_weights(token_weights, blocks.lengths)
        if token_weights.shape != (values.shape[0],):
            raise ValueError(
                f"`token_weights` must have one entry per token row ({values.shape[0]}), "
                f"got shape {tuple(token_weights.shape)}."
            )
        if (require_finite_tensor(token_weights, "token_weights") < 0).any():
            raise ValueError("`token_weights` must be non-negative.")
        values = values * token_weights.to(dtype).sqrt().unsqueeze(1)
    lengths = blocks.lengths
    if (lengths == 0).any():
        empty = torch.nonzero(lengths == 0).flatten()[:5].tolist()
        raise ValueError(f"Examples {empty} have no token rows; drop them or give them tokens.")
    if pooling != "none":
        return list(pooled_features(TokenBlocks(values, blocks.offsets), pooling).unsqueeze(1))
    dim = values.shape[1]
    return [
        torch.linalg.qr(block, mode="r").R if block.shape[0] > dim else block
        for block in torch.split(values, lengths.tolist())
    ]


def _padded(factors: list[Tensor]) -> Tensor:
    """Stack factors into ``(N, r_max, d)`` with zero rows; zero rows add nothing to (FSFT-2)."""
    rows = max(f.shape[0] for f in factors)
    out = factors[0].new_zeros(len(factors), rows, factors[0].shape[1])
    for i, f in enumerate(factors):
        out[i, : f.shape[0]] = f
    return out


def _gains(chol: Tensor, stacked: Tensor) -> Tensor:
    """(FSFT-2) for a batch ``(k, r, d)`` of factors, given the Cholesky factor of ``A``."""
    k, r, d = stacked.shape
    rhs = stacked.transpose(1, 2).reshape(k, d, r)
    z = torch.linalg.solve_triangular(chol.expand(k, d, d), rhs, upper=False)
    inner = torch.eye(r, dtype=z.dtype, device=z.device) + z.transpose(1, 2) @ z
    return 2 * torch.log(torch.diagonal(torch.linalg.cholesky(inner), dim1=1, dim2=2)).sum(-1)


def log_det_objective(
    features: TokenBlocks | Sequence[Tensor], indices: Sequence[int], lam: float = 1.0, **kwargs
) -> float:
    """``F(S)`` of (FSFT-1) for the examples ``indices``, by a direct ``slogdet``."""
    blocks = as_token_blocks(features)
    _check_indices(indices, len(blocks))
    factors = prepare_blocks(blocks, **kwargs)
    require_positive(lam, "lam")
    dim = factors[0].shape[1]
    matrix = lam * torch.eye(dim, dtype=factors[0].dtype)
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
        lazy_batch: stale candidates refreshed per batched call in lazy greedy.
    """
    if method not in METHODS:
        raise ValueError(f"`method` must be one of {METHODS}, got {method!r}.")
    lam = require_positive(lam, "lam")
    require_int(chunk_size, "chunk_size", 1)
    require_int(lazy_batch, "lazy_batch", 1)
    factors = prepare_blocks(features, pooling=pooling, token_weights=token_weights, dtype=dtype)
    pool_size = len(factors)
    _check_budget(budget, pool_size)
    dim = factors[0].shape[1]
    stacked = _padded(factors)
    matrix = lam * torch.eye(dim, dtype=dtype)
    # Refactorising the accumulated A costs d^3/3 per selection, less than r rank-1 Cholesky
    # updates in Python and free of their accumulated round-off.
    chol = torch.linalg.cholesky(matrix)

    def gains_of(candidates: Tensor) -> Tensor:
        parts = [_gains(chol, stacked[c]) for c in torch.split(candidates, chunk_size)]
        return torch.cat(parts)

    selected: list[int] = []
    gains: list[float] = []
    evaluations = 0
    if method == "naive":
        available = torch.ones(pool_size, dtype=torch.bool)
        for _ in range(budget):
            candidates = torch.nonzero(available).flatten()
            values = gains_of(candidates)
            evaluations += candidates.numel()
            best = int(torch.argmax(values))
            index = int(candidates[best])
            selected.append(index)
            gains.append(float(values[best]))
            available[index] = False
            matrix = matrix + factors[index].T @ factors[index]
            chol = torch.linalg.cholesky(matrix)
    else:
        initial = gains_of(torch.arange(pool_size))
        evaluations += pool_size
        heap = [(-float(g), i) for i, g in enumerate(initial.tolist())]
        heapq.heapify(heap)
        fresh_round = [0] * pool_size
        round_index = 0
        while len(selected) < budget:
            if fresh_round[heap[0][1]] == round_index:
                neg_gain, index = heapq.heappop(heap)
                selected.append(index)
                gains.append(-neg_gain)
                matrix = matrix + factors[index].T @ factors[index]
                chol = torch.linalg.cholesky(matrix)
                round_index += 1
                continue
            # Refresh the stale top of the heap in one batched call: exact values, so the
            # selection is unchanged, and far less per-call overhead than one at a time.
            stale = []
            while heap and len(stale) < lazy_batch and fresh_round[heap[0][1]] != round_index:
                stale.append(heapq.heappop(heap)[1])
            refreshed = gains_of(torch.tensor(stale)).tolist()
            evaluations += len(stale)
            for index, gain in zip(stale, refreshed):
                fresh_round[index] = round_index
                heapq.heappush(heap, (-gain, index))
    objective = 2 * torch.log(torch.diagonal(chol)).sum().item()
    return Selection(selected, gains, objective, lam, pool_size, evaluations)


def random_select(pool_size: int, budget: int, seed: int = 0) -> list[int]:
    """``budget`` distinct indices drawn uniformly with a seeded generator."""
    _check_budget(budget, require_int(pool_size, "pool_size", 1))
    generator = torch.Generator().manual_seed(seed)
    return torch.randperm(pool_size, generator=generator)[:budget].tolist()


def k_center_select(points: Tensor, budget: int, seed: int = 0) -> list[int]:
    """Greedy k-center (farthest-point) selection (Gonzalez, 1985) on ``(N, d)`` points.

    Starts from a seeded random point, then repeatedly adds the point farthest (Euclidean) from
    the selected set; a 2-approximation of the k-center objective.
    """
    require_real_tensor(points, "points")
    if points.dim() != 2:
        raise ValueError(f"`points` must be (N, d), got shape {tuple(points.shape)}.")
    require_finite_tensor(points, "points")
    _check_budget(budget, points.shape[0])
    generator = torch.Generator().manual_seed(seed)
    first = int(torch.randint(points.shape[0], (1,), generator=generator))
    selected = [first]
    distance = torch.linalg.vector_norm(points - points[first], dim=1)
    for _ in range(budget - 1):
        nxt = int(torch.argmax(distance))
        selected.append(nxt)
        distance = torch.minimum(distance, torch.linalg.vector_norm(points - points[nxt], dim=1))
    return selected
