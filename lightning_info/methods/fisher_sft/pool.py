"""FisherSFT's candidate pool, checked and factored for the greedy of
:mod:`~lightning_info.methods.fisher_sft.functional`.

Example ``i`` is a block ``X_i`` of ``m_i`` token rows in ``R^d``. Token weights ``w`` (e.g.
``p (1 - p)`` of the next-token probability) scale the curvature to ``X_i^T W_i X_i``: the rows are
multiplied by ``sqrt(w)``. A block with more rows than ``d`` is reduced to the ``d x d``
triangular factor ``R_i`` of its QR decomposition, ``R_i^T R_i = X_i^T X_i``, which leaves
(FSFT-1) and (FSFT-2) unchanged. Every entry point refuses bad input here, before any work: a
budget above the pool, repeated or out-of-range indices, blocks of different widths, empty blocks,
non-finite rows, bool or negative weights, an integer dtype.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np
import torch
from torch import Tensor

from lightning_info.core.blocks import TokenBlocks, pooled_features
from lightning_info.core.validation import (
    require_finite_tensor,
    require_int,
    require_real_floating,
    require_real_tensor,
)

POOLINGS = ("none", "mean", "sum")


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


def _take(blocks: TokenBlocks, weights: Tensor | None, indices: Sequence[int]):
    """The blocks ``indices`` of ``blocks`` (and their token weights) as a pool of their own."""
    taken = [blocks.block(i) for i in indices]
    pool = TokenBlocks.from_list(taken)
    if weights is None:
        return pool, None
    starts = blocks.offsets[:-1]
    parts = [weights[int(starts[i]) : int(starts[i]) + len(b)] for i, b in zip(indices, taken)]
    return pool, torch.cat(parts)
