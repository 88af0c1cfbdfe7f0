"""FisherSFT's greedy record and the reference (naive) greedy.

The gain of adding example ``i`` to the selected set, with ``A = lambda I + sum_{selected}
X_j^T X_j = L L^T``, is by the matrix determinant lemma

    F(S + i) - F(S) = log det(I_m + Z_i^T Z_i),   Z_i = L^{-1} X_i^T,                   (FSFT-2)

evaluated here for a batch of candidates. The naive greedy evaluates it for every candidate every
round and refactorises ``A`` after each pick; the faster greedies
(:mod:`~lightning_info.methods.fisher_sft.lazy_greedy`,
:mod:`~lightning_info.methods.fisher_sft.rank_one`) return the same selection.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


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


def _log_det_unit_plus(inner: Tensor) -> Tensor:
    """``log det(I + C)`` for a batch ``(k, r, r)`` of positive semi-definite ``C``."""
    eye = torch.eye(inner.shape[-1], dtype=inner.dtype, device=inner.device)
    chol = torch.linalg.cholesky(eye + inner)
    return 2 * torch.log(torch.diagonal(chol, dim1=1, dim2=2)).sum(-1)


def _gains(chol: Tensor, stacked: Tensor) -> Tensor:
    """(FSFT-2) for a batch ``(k, r, d)`` of factors, given the Cholesky factor of ``A``."""
    k, r, d = stacked.shape
    rhs = stacked.transpose(1, 2).reshape(k, d, r)
    z = torch.linalg.solve_triangular(chol.expand(k, d, d), rhs, upper=False)
    return _log_det_unit_plus(z.transpose(1, 2) @ z)


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
