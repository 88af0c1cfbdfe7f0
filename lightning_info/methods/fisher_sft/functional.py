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

Lazy greedy never forms a ``d x d`` matrix. After ``t`` picks, by Woodbury's identity applied once
per pick,

    A_t^{-1} = I / lambda - V_t V_t^T,   V_t = [V_(1), ..., V_(t)],
    V_(t+1) = A_t^{-1} X_j^T L_j^{-T},   L_j L_j^T = I + X_j A_t^{-1} X_j^T,              (FSFT-3)

for the chosen example ``j``, so ``C_i = X_i A_t^{-1} X_i^T = X_i X_i^T / lambda - P_i P_i^T`` with
``P_i = X_i V_t``, and the gain (FSFT-2) is ``log det(I + C_i)``. A refreshed candidate only
subtracts the columns of ``V`` added since its last refresh: ``m d`` flops per column instead of
the ``d^2 m`` of a triangular solve, and ``d^3 / 3`` per pick of refactorisation are gone. Memory is
the pool's ``N m d`` plus ``V``'s ``d x sum_j m_j``. Only when a refresh would need more columns
than ``d`` (many picks at a small width) is ``A_t^{-1}`` formed, once, and updated by each pick's
columns. With one row per example (mean or sum pooling) ``V`` gains one column ``v`` per pick and
every gain is ``log(1 + ||x_i||^2 / lambda - ||V^T x_i||^2)``, updated for the whole pool by one
``N x d`` product (FSFT-4, the fast greedy MAP of Chen, Zhang & Zhou 2018 in feature space): on
small pools that beats lazy bookkeeping, and ``lazy`` dispatches to it there.

A pool too wide to hold is sketched on the way in (:class:`FeatureSketch`): every token row is
multiplied by one seeded Gaussian matrix ``S`` in ``R^{d x k}`` with entries ``N(0, 1/k)``. By
Sylvester's identity ``F(S) = d log(lambda) + log det(I + V V^T / lambda)`` for the stacked rows
``V`` of the subset, so (FSFT-1) depends on the rows only through their Gram matrix ``V V^T``,
which ``V S`` keeps in expectation (``E[S S^T] = I_d``) and up to ``1 +- eps`` for ``k`` of order
``log(rows) / eps^2`` (Johnson-Lindenstrauss): the greedy runs in ``k`` dimensions on ``k / d`` of
the memory.
"""

from __future__ import annotations

import contextlib
import functools
import math
import operator
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from torch import Tensor

from lightning_info.core.blocks import TokenBlocks, pooled_features
from lightning_info.core.validation import (
    require_finite_tensor,
    require_indices,
    require_int,
    require_positive,
    require_real_floating,
    require_real_tensor,
)

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


def _check_indices(indices: Sequence[int], pool_size: int) -> list[int]:
    """``indices`` as a list of distinct ints in ``[0, pool_size)``: a subset ``S`` of the pool.

    Bools, floats and strings are refused (``True`` would read as example 1), and so is a
    repeated index: ``F(S)`` is a function of a set, and counting an example twice would add its
    curvature twice."""
    if isinstance(indices, (str, bytes)):
        raise TypeError(
            f"`indices` must be a sequence of integer example indices, got a string {indices!r}."
        )
    if isinstance(indices, Tensor):
        integral = not (indices.dtype == torch.bool or indices.is_floating_point())
        integral = integral and not indices.is_complex()
    else:
        integral = not isinstance(indices, np.ndarray) or indices.dtype.kind in "iu"
    if not integral:
        dtype = indices.dtype
        raise TypeError(
            f"`indices` must hold integer example indices, got dtype {dtype}; pass integers "
            "(a bool mask becomes indices with `.nonzero().flatten()`)."
        )
    checked: list[int] = []
    for position, index in enumerate(indices):
        try:
            if isinstance(index, (bool, np.bool_)) or (
                isinstance(index, Tensor) and index.dtype == torch.bool
            ):
                raise TypeError
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
        checked.append(index)
    if len(set(checked)) != len(checked):
        repeated = sorted(i for i, n in Counter(checked).items() if n > 1)[:5]
        raise ValueError(
            f"`indices` repeats the example(s) {repeated}; F(S) is a function of a set: give "
            "each example once."
        )
    return checked


def as_token_blocks(features: TokenBlocks | Sequence[Tensor]) -> TokenBlocks:
    """``features`` as :class:`TokenBlocks`; a list of ``(m_i, d)`` tensors must share ``d``."""
    if isinstance(features, TokenBlocks):
        require_real_floating(features.values, "features.values")
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
        require_real_floating(block, f"features[{i}]")
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
        return _weight_tensor(token_weights, "token_weights")
    per_example = isinstance(token_weights, Sequence) and len(token_weights) > 0
    if per_example and any(isinstance(w, (bool, np.bool_)) for w in token_weights):
        raise TypeError(
            "`token_weights` must hold numbers, got a bool; pass the weights themselves "
            "(a bool mask is not a weight)."
        )
    if per_example and all(isinstance(w, Tensor) and w.dim() == 1 for w in token_weights):
        sizes = [w.shape[0] for w in token_weights]
        if sizes != lengths.tolist():
            raise ValueError(
                f"Per-example `token_weights` must match the token rows of each example "
                f"({lengths.tolist()}), got lengths {sizes}."
            )
        for i, w in enumerate(token_weights):
            _weight_tensor(w, f"token_weights[{i}]")
        return torch.cat(list(token_weights))
    if not isinstance(token_weights, (str, bytes)):
        try:
            # through numpy: Python floats stay float64 (torch.as_tensor would round to float32)
            converted = torch.as_tensor(np.asarray(token_weights))
        except (TypeError, ValueError, RuntimeError):
            pass
        else:
            return _weight_tensor(converted, "token_weights").to(torch.float64)
    raise TypeError(
        "`token_weights` must be a tensor, a list of numbers (one per token row) or a list "
        f"of 1-D tensors (one per example), got {type(token_weights).__name__}."
    )


def _weight_tensor(weights: Tensor, name: str) -> Tensor:
    """``weights``, refused when bool (a mask, not weights) or complex."""
    require_real_tensor(weights, name)
    if weights.dtype == torch.bool or weights.is_complex():
        raise TypeError(
            f"`{name}` must hold real numbers, got dtype {weights.dtype}; pass the weights "
            "themselves as a float tensor."
        )
    return weights


def _require_float_dtype(dtype: torch.dtype) -> torch.dtype:
    """``dtype``, or raise unless it is a real floating-point dtype (an integer one would
    truncate every product)."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(
            f"`dtype` must be a real floating-point torch dtype, got {dtype!r}; pass "
            "torch.float64 (the default) or torch.float32."
        )
    return dtype


def _weighted_values(
    features: TokenBlocks | Sequence[Tensor],
    pooling: str,
    token_weights: Tensor | Sequence[float] | Sequence[Tensor] | None,
    dtype: torch.dtype,
) -> TokenBlocks:
    """The token rows in ``dtype``, times ``sqrt(w)`` with token weights; checked, not copied
    when neither the dtype nor the weights ask for it."""
    if pooling not in POOLINGS:
        raise ValueError(f"`pooling` must be one of {POOLINGS}, got {pooling!r}.")
    _require_float_dtype(dtype)
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
    return TokenBlocks(values, blocks.offsets)


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
    blocks = _weighted_values(features, pooling, token_weights, dtype)
    if pooling != "none":
        return list(pooled_features(blocks, pooling).unsqueeze(1))
    return _reduced_factors(blocks)


def _reduced_factors(blocks: TokenBlocks) -> list[Tensor]:
    """Each block, or its ``d x d`` QR factor ``R_i`` when it has more rows than ``d``."""
    dim = blocks.dim
    return [
        torch.linalg.qr(block, mode="r").R if block.shape[0] > dim else block
        for block in torch.split(blocks.values, blocks.lengths.tolist())
    ]


def _stacked_factors(
    features: TokenBlocks | Sequence[Tensor],
    pooling: str,
    token_weights: Tensor | Sequence[float] | Sequence[Tensor] | None,
    dtype: torch.dtype,
) -> tuple[Tensor, Tensor]:
    """The factors of :func:`prepare_blocks` as one ``(N, r_max, d)`` tensor, zero rows padding
    the shorter ones (zero rows add nothing to (FSFT-2)), and each factor's row count.

    A pool of equal-length blocks of at most ``d`` rows, already in ``dtype``, is a view of the
    input: no copy of an LLM-sized pool is made.
    """
    blocks = _weighted_values(features, pooling, token_weights, dtype)
    lengths, dim = blocks.lengths, blocks.dim
    if pooling != "none":
        pooled = pooled_features(blocks, pooling)
        return pooled.unsqueeze(1), torch.ones(len(pooled), dtype=torch.long, device=pooled.device)
    if bool((lengths == lengths[0]).all()) and int(lengths[0]) <= dim:
        return blocks.values.reshape(len(lengths), int(lengths[0]), dim), lengths
    factors = _reduced_factors(blocks)  # already checked and weighted
    rows = torch.tensor([f.shape[0] for f in factors], device=factors[0].device)
    out = factors[0].new_zeros(len(factors), int(rows.max()), dim)
    for i, f in enumerate(factors):
        out[i, : f.shape[0]] = f
    return out, rows


def _gains(chol: Tensor, stacked: Tensor) -> Tensor:
    """(FSFT-2) for a batch ``(k, r, d)`` of factors, given the Cholesky factor of ``A``."""
    k, r, d = stacked.shape
    rhs = stacked.transpose(1, 2).reshape(k, d, r)
    z = torch.linalg.solve_triangular(chol.expand(k, d, d), rhs, upper=False)
    return _log_det_unit_plus(z.transpose(1, 2) @ z)


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


def _naive_greedy(stacked: Tensor, budget: int, lam: float, chunk_size: int) -> Selection:
    """Every candidate's (FSFT-2) every round, through the Cholesky factor of ``A``."""
    pool_size, _, dim = stacked.shape
    matrix = lam * torch.eye(dim, dtype=stacked.dtype, device=stacked.device)
    # Refactorising the accumulated A costs d^3/3 per selection, less than r rank-1 Cholesky
    # updates in Python and free of their accumulated round-off.
    chol = torch.linalg.cholesky(matrix)
    selected: list[int] = []
    gains: list[float] = []
    evaluations = 0
    available = torch.ones(pool_size, dtype=torch.bool, device=stacked.device)
    for _ in range(budget):
        candidates = torch.nonzero(available).flatten()
        values = torch.cat([_gains(chol, stacked[c]) for c in torch.split(candidates, chunk_size)])
        evaluations += candidates.numel()
        best = int(torch.argmax(values))
        index = int(candidates[best])
        selected.append(index)
        gains.append(float(values[best]))
        available[index] = False
        matrix = matrix + stacked[index].T @ stacked[index]
        chol = torch.linalg.cholesky(matrix)
    objective = 2 * torch.log(torch.diagonal(chol)).sum().item()
    return Selection(selected, gains, objective, lam, pool_size, evaluations)


_RANK_ONE_MAX_BYTES = 12 * 2**20
"""Largest one-row-per-example pool (bytes) that lazy greedy hands to the rank-one greedy
(FSFT-4). Measured on a CPU at 100 picks (NOTES.md): up to 1.6 million float64 numbers the
rank-one greedy was 2.7x-69x faster than lazy greedy on realistic and isotropic pools of widths
16 to 4096; from 2.5 million on, where each pick reads the pool from memory, lazy greedy won 15
of 18 cells (up to 6x)."""


def _rank_one_greedy(
    points: Tensor, budget: int, lam: float, *, use_numpy: bool | None = None
) -> Selection:
    """Exact greedy on ``(N, d)`` points, one row per example (Chen, Zhang & Zhou, 2018: fast
    greedy MAP inference for DPPs, written in feature space).

    With ``A_t^{-1} = I / lambda - V_t V_t^T`` (FSFT-3, one column per pick), the gain of ``x_i``
    is ``log(1 + q_i)`` with ``q_i = x_i^T A_t^{-1} x_i = ||x_i||^2 / lambda - ||V_t^T x_i||^2``.
    Picking ``j`` appends ``v = A_t^{-1} x_j / sqrt(1 + q_j)`` to ``V`` and updates every
    candidate by ``q_i -= (x_i . v)^2``: one ``N x d`` product per pick, ``O(N)`` memory beyond
    the pool and ``V`` (``d x budget``), no ``N x N`` kernel.                            (FSFT-4)
    ``log(1 + q)`` is increasing, so the argmax of ``q`` (its first maximum: the lowest index on
    ties, as the other methods) is the argmax of the gains. On the CPU (``use_numpy=None``) the
    loop runs on numpy views of the same memory, its BLAS held to torch's thread count: a pick
    is a dozen small operations, each a few times cheaper in numpy than in torch.
    """
    pool_size, dim = points.shape
    if use_numpy is None:
        use_numpy = points.device.type == "cpu" and points.dtype in (torch.float32, torch.float64)
    if use_numpy:
        values = points.detach().numpy()
        columns = np.zeros((budget, dim), dtype=values.dtype)  # the columns of V, as rows
        with _numpy_blas_threads(torch.get_num_threads()):
            return _rank_one_loop(values, columns, budget, lam)
    return _rank_one_loop(points.detach(), points.new_zeros(budget, dim), budget, lam)


@functools.cache
def _blas_controller():
    try:
        from threadpoolctl import ThreadpoolController  # installed with scikit-learn
    except ImportError:
        return None
    return ThreadpoolController()


def _numpy_blas_threads(count: int):
    """numpy's BLAS held to ``count`` threads inside the block (as torch is): its threaded
    matrix-vector products otherwise wait for threads that other processes deschedule."""
    controller = _blas_controller()
    if controller is None:
        return contextlib.nullcontext()
    return controller.limit(limits=count, user_api="blas")


def _rank_one_loop(values, columns, budget: int, lam: float) -> Selection:
    """(FSFT-4) on ``values`` (``(N, d)``) with ``columns`` (``(budget, d)``, zeros), both numpy
    arrays or both tensors."""
    pool_size, dim = values.shape
    residual = (values * values).sum(1) / lam  # q_i at A = lambda I
    selected: list[int] = []
    gains: list[float] = []
    for step in range(budget):
        best = int(residual.argmax())
        q = max(float(residual[best]), 0.0)  # round-off can leave a spanned candidate below 0
        selected.append(best)
        gains.append(math.log1p(q))
        if step + 1 == budget:
            break
        point, seen = values[best], columns[:step]
        columns[step] = (point / lam - (seen @ point) @ seen) / math.sqrt(1.0 + q)
        product = values @ columns[step]
        residual -= product * product
        residual[best] = -math.inf
    evaluations = sum(pool_size - step for step in range(budget))  # every remaining gain, per pick
    objective = dim * math.log(lam) + math.fsum(gains)
    return Selection(selected, gains, objective, lam, pool_size, evaluations)


def _log_det_unit_plus(inner: Tensor) -> Tensor:
    """``log det(I + C)`` for a batch ``(k, r, r)`` of positive semi-definite ``C``."""
    eye = torch.eye(inner.shape[-1], dtype=inner.dtype, device=inner.device)
    chol = torch.linalg.cholesky(eye + inner)
    return 2 * torch.log(torch.diagonal(chol, dim1=1, dim2=2)).sum(-1)


SEGMENT_OVERHEAD_FLOPS = 1e7
"""About the cost of one more small matrix product on a CPU, in flops (some tens of us)."""


def _column_segments(first: list[int], used: int, row_size: int) -> list[tuple[int, int]]:
    """Column ranges ``[low, high)`` of ``V`` for a refresh of candidates whose unseen columns
    start at ``first`` (ascending) and end at ``used``.

    One range from ``first[0]`` makes every candidate multiply the columns the oldest one has
    not seen (masked out for the others); a range starting at ``first[i]`` leaves the
    candidates ``i..`` out of the columns before it. A range starts there only when the
    products it saves (``(k - i) * gap`` columns of ``2 * row_size`` flops each) outweigh the
    cost of one more product.
    """
    bounds = [first[0]]
    for i in range(1, len(first)):
        saved = (len(first) - i) * (first[i] - bounds[-1]) * 2 * row_size
        if saved > SEGMENT_OVERHEAD_FLOPS:
            bounds.append(first[i])
    bounds.append(used)
    return list(zip(bounds[:-1], bounds[1:]))


def _lazy_woodbury_greedy(
    stacked: Tensor,
    rows: Tensor,
    budget: int,
    lam: float,
    chunk_size: int,
    lazy_batch: int,
) -> Selection:
    """Lazy greedy on the representation (FSFT-3): ``C_i`` kept per candidate, downdated by the
    columns of ``V`` it has not seen yet when it is refreshed.

    The stale gains are upper bounds (submodularity). Each round refreshes, in batches, the
    stale candidates that could still beat the best refreshed one, until none can; the best
    refreshed one (lowest index among ties) is then the exact argmax. The bookkeeping is numpy
    over the pool, not a Python heap, so its cost does not grow with the number of refreshes.
    """
    pool_size, _, dim = stacked.shape
    inner = torch.cat(
        [block @ block.transpose(1, 2) / lam for block in torch.split(stacked, chunk_size)]
    )
    bound = torch.cat([_log_det_unit_plus(c) for c in torch.split(inner, chunk_size)]).numpy()
    bound = bound.astype(np.float64)  # stale or fresh gain of every candidate; -inf once chosen
    seen = np.zeros(pool_size, dtype=np.int64)  # columns of V already in each candidate's C_i
    positions = np.arange(pool_size)
    state = _WoodburyState(stacked, inner, lam, int(rows.topk(budget).values.sum()))
    selected: list[int] = []
    gains: list[float] = []
    evaluations = pool_size
    refreshed = 0
    while len(selected) < budget:
        fresh = seen == state.used
        # Rounds refresh similar numbers of candidates: start from half of the last round's.
        batch, refreshed = min(max(lazy_batch, refreshed // 2), chunk_size), 0
        while True:
            fresh_bounds = np.where(fresh, bound, -np.inf)
            best = int(np.argmax(fresh_bounds))  # the first maximum: lowest index on ties
            top = fresh_bounds[best]
            contenders = ~fresh & ((bound > top) | ((bound == top) & (positions < best)))
            count = int(contenders.sum())
            if count == 0:
                break
            # Refresh the contenders with the largest bounds in one batched call: exact values,
            # so the selection is unchanged. A round that needs another batch doubles it: where
            # most gains must be refreshed anyway (nearly tied candidates), few large products
            # beat many small ones, and at most twice the needed candidates are refreshed.
            candidates = np.flatnonzero(contenders)
            if count > batch:
                candidates = candidates[np.argpartition(-bound[candidates], batch - 1)[:batch]]
            bound[candidates] = state.refresh(candidates, seen[candidates])
            seen[candidates] = state.used
            fresh[candidates] = True
            evaluations += len(candidates)
            refreshed += len(candidates)
            batch = min(2 * batch, chunk_size)
        selected.append(best)
        gains.append(float(bound[best]))
        bound[best] = -np.inf
        seen[best] = -1  # never fresh again
        state.add(best, int(rows[best]))
    objective = dim * math.log(lam) + math.fsum(gains)
    return Selection(selected, gains, objective, lam, pool_size, evaluations)


class _WoodburyState:
    """``V`` of (FSFT-3), the candidates' ``C_i``, and ``A^{-1}`` once it is worth forming."""

    def __init__(self, stacked: Tensor, inner: Tensor, lam: float, max_columns: int) -> None:
        self.stacked, self.inner, self.lam = stacked, inner, lam
        self.dim = stacked.shape[2]
        self.columns = stacked.new_zeros(self.dim, max_columns)
        self.used = 0
        self.dense: Tensor | None = None

    def add(self, index: int, count: int) -> None:
        """Append the columns of the chosen example ``index`` (its first ``count`` rows)."""
        block = self.stacked[index, :count]
        inner = self.inner[index, :count, :count]
        chol = torch.linalg.cholesky(
            torch.eye(count, dtype=block.dtype, device=block.device) + inner
        )
        old = self.columns[:, : self.used]
        a_inv_xt = block.T / self.lam - old @ (old.T @ block.T)
        new = torch.linalg.solve_triangular(chol, a_inv_xt.T, upper=False).T
        self.columns[:, self.used : self.used + count] = new
        self.used += count
        if self.dense is not None:
            self.dense -= new @ new.T

    def refresh(self, candidates: np.ndarray, seen: np.ndarray) -> np.ndarray:
        """Exact gains of ``candidates``, whose ``C_i`` hold the first ``seen`` columns of V."""
        order = np.argsort(seen, kind="stable")  # oldest first: the stale ones are a prefix
        index = torch.from_numpy(candidates[order])
        first = torch.from_numpy(seen[order])
        used, dim = self.used, self.dim
        blocks = self.stacked.index_select(0, index)
        if used - int(first[0]) > dim:
            # More unseen columns than dimensions: ``X_i A^{-1} X_i^T`` from the dense inverse
            # (``r d^2`` per candidate) is cheaper than the downdate (``r d`` per column).
            if self.dense is None:
                self.dense = torch.eye(dim, dtype=self.stacked.dtype, device=self.stacked.device)
                self.dense /= self.lam
                self.dense -= self.columns[:, :used] @ self.columns[:, :used].T
            refreshed = (blocks @ self.dense) @ blocks.transpose(1, 2)
        else:
            update = self.inner.new_zeros(len(index), *self.inner.shape[1:])
            row_size = self.stacked.shape[1] * dim
            for low, high in _column_segments(first.tolist(), used, row_size):
                prefix = int(torch.searchsorted(first, high, right=False))
                projected = blocks[:prefix] @ self.columns[:, low:high]
                seen_before = torch.arange(low, high, device=first.device) < first[:prefix, None]
                projected = projected.masked_fill(seen_before[:, None, :], 0.0)
                update[:prefix] += projected @ projected.transpose(1, 2)
            refreshed = self.inner.index_select(0, index) - update
        self.inner[index] = refreshed
        gains = np.empty(len(candidates), dtype=np.float64)
        gains[order] = _log_det_unit_plus(refreshed).numpy()
        return gains


def random_select(pool_size: int, budget: int, seed: int = 0) -> list[int]:
    """``budget`` distinct indices drawn uniformly with a seeded generator."""
    _check_budget(budget, require_int(pool_size, "pool_size", 1))
    generator = torch.Generator().manual_seed(require_int(seed, "seed", 0))
    return torch.randperm(pool_size, generator=generator)[:budget].tolist()


def k_center_select(points: Tensor, budget: int, seed: int = 0) -> list[int]:
    """Greedy k-center (farthest-point) selection (Gonzalez, 1985) on ``(N, d)`` points.

    Starts from a seeded random point, then repeatedly adds the point farthest (Euclidean) from
    the selected set; a 2-approximation of the k-center objective. The result is a set: ``budget``
    distinct indices. Where several points coincide, each still counts as one candidate: once
    every distinct location is covered (all remaining distances are 0), the next picks are the
    lowest unselected indices, duplicates of points already chosen, so a budget above the number
    of distinct points still gives distinct indices (at covering radius 0). Ties in distance go
    to the lowest index.
    """
    require_real_floating(points, "points")
    if points.dim() != 2:
        raise ValueError(f"`points` must be (N, d), got shape {tuple(points.shape)}.")
    require_finite_tensor(points, "points")
    _check_budget(budget, points.shape[0])
    generator = torch.Generator().manual_seed(require_int(seed, "seed", 0))
    first = int(torch.randint(points.shape[0], (1,), generator=generator))
    selected = [first]
    distance = torch.linalg.vector_norm(points - points[first], dim=1)
    distance[first] = -math.inf
    for _ in range(budget - 1):
        nxt = int(torch.argmax(distance))  # the first maximum; chosen points sit at -inf
        selected.append(nxt)
        distance = torch.minimum(distance, torch.linalg.vector_norm(points - points[nxt], dim=1))
        distance[nxt] = -math.inf
    return selected


def gaussian_sketch(
    dim: int,
    sketch_dim: int,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> Tensor:
    """The ``(dim, sketch_dim)`` matrix ``S`` of :class:`FeatureSketch`, entries ``N(0, 1 /
    sketch_dim)`` so that ``E[S S^T] = I``: drawn on the CPU from a generator seeded with ``seed``
    (the same matrix on every device and process), then moved to ``device``."""
    require_int(dim, "dim", 1)
    require_int(sketch_dim, "sketch_dim", 1)
    _require_float_dtype(dtype)
    generator = torch.Generator().manual_seed(require_int(seed, "seed", 0))
    matrix = torch.randn(dim, sketch_dim, generator=generator, dtype=torch.float64)
    return (matrix / math.sqrt(sketch_dim)).to(dtype=dtype, device=device)


@dataclass(frozen=True)
class FeatureSketch:
    """Token rows ``(n, d) -> (n, sketch_dim)``, times :func:`gaussian_sketch` ``(d, sketch_dim,
    seed)``: pass it as ``project`` to :func:`~lightning_info.lm.features.response_features` so
    the pool is held at ``sketch_dim`` columns, or apply :func:`sketch_features` to features held.
    The matrix is built once per width, dtype and device."""

    sketch_dim: int
    seed: int = 0
    _matrices: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        require_int(self.sketch_dim, "sketch_dim", 1)
        require_int(self.seed, "seed", 0)

    def __call__(self, rows: Tensor) -> Tensor:
        require_real_floating(rows, "rows")
        key = (rows.shape[-1], rows.dtype, rows.device)
        if key not in self._matrices:
            self._matrices[key] = gaussian_sketch(
                rows.shape[-1], self.sketch_dim, self.seed, rows.dtype, rows.device
            )
        return rows @ self._matrices[key]


def sketch_features(
    features: TokenBlocks | Sequence[Tensor], sketch: FeatureSketch, chunk_rows: int = 65536
) -> TokenBlocks:
    """``features`` with every token row sketched (:class:`FeatureSketch`), ``chunk_rows`` rows
    at a time; the blocks keep their lengths."""
    blocks = as_token_blocks(features)
    require_int(chunk_rows, "chunk_rows", 1)
    values = torch.cat([sketch(chunk) for chunk in blocks.values.split(chunk_rows)])
    return TokenBlocks(values, blocks.offsets)


def _take(blocks: TokenBlocks, weights: Tensor | None, indices: Sequence[int]):
    """The blocks ``indices`` of ``blocks`` (and their token weights) as a pool of their own."""
    taken = [blocks.block(i) for i in indices]
    pool = TokenBlocks.from_list(taken)
    if weights is None:
        return pool, None
    starts = blocks.offsets[:-1]
    parts = [weights[int(starts[i]) : int(starts[i]) + len(b)] for i, b in zip(indices, taken)]
    return pool, torch.cat(parts)


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
