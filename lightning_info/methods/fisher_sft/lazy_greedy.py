"""FisherSFT's lazy greedy on the Woodbury representation of ``A^{-1}``.

Lazy greedy (Minoux, 1978) keeps the stale gains as upper bounds: they only decrease as ``A``
grows, so a candidate whose refreshed gain still tops them is the true argmax; ties go to the
lowest index, as in the naive greedy, so both return the same selection.

It never forms a ``d x d`` matrix. After ``t`` picks, by Woodbury's identity applied once per
pick,

    A_t^{-1} = I / lambda - V_t V_t^T,   V_t = [V_(1), ..., V_(t)],
    V_(t+1) = A_t^{-1} X_j^T L_j^{-T},   L_j L_j^T = I + X_j A_t^{-1} X_j^T,              (FSFT-3)

for the chosen example ``j``, so ``C_i = X_i A_t^{-1} X_i^T = X_i X_i^T / lambda - P_i P_i^T`` with
``P_i = X_i V_t``, and the gain (FSFT-2) is ``log det(I + C_i)``. A refreshed candidate only
subtracts the columns of ``V`` added since its last refresh: ``m d`` flops per column instead of
the ``d^2 m`` of a triangular solve, and ``d^3 / 3`` per pick of refactorisation are gone. Memory is
the pool's ``N m d`` plus ``V``'s ``d x sum_j m_j``. Only when a refresh would need more columns
than ``d`` (many picks at a small width) is ``A_t^{-1}`` formed, once, and updated by each pick's
columns.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from lightning_info.methods.fisher_sft.greedy import Selection, _log_det_unit_plus

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
