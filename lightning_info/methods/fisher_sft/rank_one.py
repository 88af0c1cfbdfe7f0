"""FisherSFT's rank-one greedy: exact greedy for one row per example.

With one row per example (mean or sum pooling) ``V`` of (FSFT-3) gains one column ``v`` per pick
and every gain is ``log(1 + ||x_i||^2 / lambda - ||V^T x_i||^2)``, updated for the whole pool by
one ``N x d`` product (FSFT-4, the fast greedy MAP of Chen, Zhang & Zhou 2018 in feature space):
on small pools that beats lazy bookkeeping, and ``lazy`` dispatches to it there
(:func:`~lightning_info.methods.fisher_sft.functional.fisher_greedy_select`).
"""

from __future__ import annotations

import contextlib
import functools
import math

import numpy as np
import torch
from torch import Tensor

from lightning_info.methods.fisher_sft.greedy import Selection


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
