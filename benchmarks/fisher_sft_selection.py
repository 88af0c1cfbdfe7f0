"""Cost and quality of FisherSFT greedy subset selection on synthetic pools, on a CPU.

1. Selection time against pool size ``N`` at ``d = --dim``, ``--budget`` examples selected with
   ``lam = --lam``:

   - ``lazy``: :func:`~lightning_info.methods.fisher_sft.functional.fisher_greedy_select`
     (``method="lazy"``): stale gains in a max-heap, refreshed on the Woodbury representation
     (FSFT-3) of ``A^{-1}``;
   - ``vectorised``: :func:`vectorised_greedy`, the obvious fast exact greedy: every candidate's
     gain (FSFT-2) in one batched ``slogdet`` per pick, ``A^{-1}`` kept by a Woodbury update, no
     lazy evaluation;
   - ``naive``: ``fisher_greedy_select(method="naive")``, every candidate's gain every round
     through the Cholesky factor of ``A`` (the reference implementation);
   - ``textbook``: :func:`slogdet_greedy`, ``slogdet(lam I + sum_{S + i} X^T X)`` recomputed for
     every candidate in every round, one candidate at a time. It runs only while one run stays
     under ``--textbook-limit`` seconds; beyond that it is reported as skipped, not estimated.

   All break ties by the lowest index, so they should return the same selection; the table says
   whether they did, and how many single-candidate gains each evaluated.
2. The width axis: ``--widths`` at ``N = --width-pool-size``, ``--width-tokens`` tokens,
   ``--width-budget`` picks, on both pools: lazy against vectorised, each in a fresh process that
   reports its peak memory beyond the pool (``VmHWM`` after resetting it, Linux); a cell whose
   run takes under a second is timed as the median of ``--width-repeats`` runs.
3. LLM scale: ``--large-pool-sizes`` candidates at ``d = --large-dim``, ``--large-budget`` picks,
   realistic pool: lazy (time, peak memory beyond the pool, the pool's own size), and the
   vectorised baseline for at most ``--baseline-limit`` seconds: how many picks it made by then.
4. The same greedy with ``pooling="mean"`` (one row per example, where ``lazy`` runs the
   rank-one greedy FSFT-4 of ``functional.py``) against submodlib's ``LogDeterminantFunction``
   (dense kernel ``X X^T``, ``LazyGreedy``), at ``--submodlib-sizes`` realistic pools of
   ``--tokens`` rows, ``--budget`` picks, when ``submodlib`` is importable and its estimated peak
   memory (``SUBMODLIB_BYTES_PER_ENTRY`` times ``N^2``: the float64 kernel, the Python list of
   lists that ``LogDeterminantFunction`` keeps of it and its C++ copy) fits in
   ``--kernel-limit-gb``; the table says where it stops. By Sylvester's identity ``log det(lam
   I_k + X_S X_S^T) = log det(lam I_d + X_S^T X_S) + (k - d) log lam``, so both maximise the
   same function and should pick the same examples; the kernel's construction is timed apart
   from the maximisation. Each ``N`` runs in a fresh process that reports the peak memory of
   each side beyond the pool; ``--only-submodlib`` runs this table alone.
5. ``F(S) - F(empty)`` of (FSFT-1) reached at the budget on the largest realistic pool of table 1
   by the greedy selection, by uniform random subsets and by k-center on the mean-pooled
   features (mean and standard deviation over ``--baseline-seeds`` seeds), also as a fraction of
   greedy.
6. Scaling (``--scale``, off by default; ``--only-scale`` runs it alone): ``--scale-sizes``
   candidates (default 10,000, 100,000 and 1,000,000) of 4 token rows at ``d = --scale-dim``
   (4096), generated and sketched ``--scale-chunk`` candidates at a time by
   :class:`~lightning_info.methods.fisher_sft.functional.FeatureSketch` (``k = --sketch-dim``,
   128), so only the float32 ``N x 4 x k`` pool is ever held; then lazy greedy and
   :func:`~lightning_info.methods.fisher_sft.functional.two_round_greedy_select`
   (``--scale-shards`` shards), ``--scale-budget`` picks each. The features are synthetic and
   low-rank (:func:`sketched_scale_pool`): rank-64 latent rows times a fixed ``64 x d`` matrix,
   formed ``d`` wide per chunk and sketched, plus isotropic noise drawn directly in the sketched
   space with the same law as sketched ``d``-wide noise (drawing ``N x 4 x d`` Gaussians would
   dominate the run). One fresh process per ``N`` (peak memory of its own), stopped after
   ``--scale-limit`` seconds; the table gives the seconds and peak memory of each stage and the
   two-round ``F(S) - F(empty)`` as a fraction of the centralised greedy's. The sketch's own
   error: where the ``d``-wide pool and the greedy's float64 copy take at most
   ``--scale-exact-limit-gb`` (8 GB: ``N`` = 10,000, not 100,000), the same pool with its noise
   drawn ``d`` wide (:func:`wide_scale_pool`) is selected from unsketched and sketched, and each
   selection's (and one random subset's) ``F(S) - F(empty)`` on the unsketched rows is given as
   a fraction of the unsketched greedy's (:func:`sketch_gain_check`).

The realistic pool (:func:`realistic_pool`) gives example ``i`` the token rows

    x_{i,t} = s_i diag(sqrt(rho^j)) (c_i + tau e_{i,t}),   t = 1 .. m,

with ``c_i, e_{i,t} ~ N(0, I_d)`` (a centre shared by the tokens of one example, plus per-token
noise, ``tau = 0.5``), ``rho`` such that the spectrum decays geometrically from 1 to ``1e-3``
across the ``d`` coordinates, and per-example scales ``s_i = exp(0.5 u_i)``, ``u_i ~ N(0, 1)``
(log-normal), so that gains differ widely between examples. (FSFT-1) is invariant under a
rotation of ``R^d``, so the pool is generated in its eigenbasis: a rotation would change neither
the selections nor the times. The isotropic pool (:func:`isotropic_pool`, i.i.d. ``N(0, 1)``
entries) makes all gains nearly equal, the worst case for lazy greedy.

Every time in table 1 is the median over ``--repeats`` runs of ``time.perf_counter``, the methods
interleaved; tables 2 and 3 time one run per process. Building the pool is never timed. torch runs
with ``--threads`` threads, one by default: on a machine whose cores other processes also use,
multi-threaded OpenMP kernels wait for descheduled threads and their times stop measuring the
method.

``--quick``: pools of 30 and 50 examples of 3 tokens in ``d = 6``, budget 8, one repeat, 2
baseline seeds (submodlib at the same two sizes); no width or LLM-scale table; the scaling
table, when asked for, at ``N`` 200 and 400, ``d = 64``, ``k = 16``, budget 10, 4 shards.
``--json PATH`` also writes the results with the header (``benchmarks/harness.py``).

Usage::

    python benchmarks/fisher_sft_selection.py [--quick] [--pool-sizes 500 1000 2000] [--tokens 16]
        [--dim 64] [--budget 100] [--widths 64 256 1024 4096] [--width-pool-size 400]
        [--width-tokens 8] [--width-budget 30] [--large-pool-sizes 20000] [--large-dim 4096]
        [--large-budget 500] [--baseline-limit 120] [--repeats 3] [--seed 0] [--lam 1.0]
        [--baseline-seeds 5] [--threads 1] [--textbook-limit 60] [--kernel-limit-gb 14]
        [--submodlib-sizes 500 1000 2000 5000 10000 15000 20000] [--only-submodlib]
        [--scale | --only-scale] [--scale-sizes 10000 100000 1000000] [--scale-dim 4096]
        [--sketch-dim 128] [--scale-chunk 20000] [--scale-budget 500] [--scale-shards 8]
        [--scale-limit 360] [--scale-exact-limit-gb 8] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from harness import (
    benchmark_parser,
    format_ratio,
    header,
    peak_memory,
    print_header,
    run_measurement,
    timed,
    write_json,
)
from torch import Tensor

from lightning_info.core.blocks import TokenBlocks
from lightning_info.core.logging import markdown_table
from lightning_info.core.threads import torch_threads
from lightning_info.methods.fisher_sft.functional import (
    FeatureSketch,
    Selection,
    fisher_greedy_select,
    gaussian_sketch,
    random_select,
    sketch_features,
    two_round_greedy_select,
)
from lightning_info.methods.fisher_sft.sampler import select_subset

METHODS = ("lazy", "vectorised", "naive", "textbook")
CHUNK_EXAMPLES = 256
SPECTRUM_RANGE = 1e-3
SCALE_SIGMA = 0.5
TOKEN_NOISE = 0.5


def _chunk_generator(seed: int, start: int) -> torch.Generator:
    entropy = np.random.SeedSequence([seed, start]).generate_state(1)[0]
    return torch.Generator().manual_seed(int(entropy))


def _equal_blocks(values: Tensor, tokens: int) -> TokenBlocks:
    offsets = torch.arange(0, values.shape[0] + 1, tokens, dtype=torch.long)
    return TokenBlocks(values, offsets)


def realistic_pool(pool_size: int, tokens: int, dim: int, seed: int = 0) -> TokenBlocks:
    """``pool_size`` blocks of ``tokens`` rows in ``R^dim`` from the realistic generator above,
    written in place ``CHUNK_EXAMPLES`` examples at a time (each chunk seeded from ``seed`` and its
    first index), so a pool of several GB needs little more memory than itself."""
    decay = SPECTRUM_RANGE ** (1 / max(dim - 1, 1))
    root_spectrum = (decay ** torch.arange(dim, dtype=torch.float64)).sqrt()
    values = torch.empty(pool_size * tokens, dim, dtype=torch.float64)
    for start in range(0, pool_size, CHUNK_EXAMPLES):
        count = min(CHUNK_EXAMPLES, pool_size - start)
        generator = _chunk_generator(seed, start)

        def normal(*shape: int, generator=generator) -> Tensor:
            return torch.randn(*shape, generator=generator, dtype=torch.float64)

        # A whole chunk is always drawn, so a larger pool extends a smaller one.
        scales = torch.exp(SCALE_SIGMA * normal(CHUNK_EXAMPLES, 1, 1))
        latent = normal(CHUNK_EXAMPLES, 1, dim) + TOKEN_NOISE * normal(CHUNK_EXAMPLES, tokens, dim)
        rows = (scales * latent * root_spectrum)[:count]
        values[start * tokens : (start + count) * tokens] = rows.reshape(count * tokens, dim)
    return _equal_blocks(values, tokens)


def isotropic_pool(pool_size: int, tokens: int, dim: int, seed: int = 0) -> TokenBlocks:
    """``pool_size`` blocks of ``tokens`` rows with i.i.d. standard normal entries."""
    values = torch.empty(pool_size * tokens, dim, dtype=torch.float64)
    for start in range(0, pool_size, CHUNK_EXAMPLES):
        count = min(CHUNK_EXAMPLES, pool_size - start)
        rows = torch.randn(
            CHUNK_EXAMPLES * tokens,
            dim,
            generator=_chunk_generator(seed, start),
            dtype=torch.float64,
        )
        values[start * tokens : (start + count) * tokens] = rows[: count * tokens]
    return _equal_blocks(values, tokens)


POOLS = {"realistic": realistic_pool, "isotropic": isotropic_pool}
SHORT_RUN_SECONDS = 1.0  # fresh-process runs shorter than this are repeated (median)


def vectorised_greedy(
    blocks: TokenBlocks,
    budget: int,
    lam: float = 1.0,
    chunk_size: int = 256,
    time_limit: float | None = None,
) -> Selection:
    """Exact greedy (FSFT-1), all gains in one batched ``slogdet`` per pick, ``A^{-1}`` by Woodbury.

    The obvious fast implementation: per pick every remaining candidate's
    ``log det(I + X_i A^{-1} X_i^T)`` (``N m d^2`` flops), then ``A^{-1} -= W (I + X_j W)^{-1}
    W^T`` with ``W = A^{-1} X_j^T``. Blocks must have equal lengths. Ties go to the lowest index
    (``torch.argmax`` returns the first maximum). With ``time_limit``, stops after the pick that
    passes it: the selection then holds fewer than ``budget`` picks.
    """
    lengths = blocks.lengths
    if not bool((lengths == lengths[0]).all()):
        raise ValueError("vectorised_greedy needs blocks of equal length.")
    tokens, dim = int(lengths[0]), blocks.dim
    x = blocks.values.to(torch.float64).reshape(len(lengths), tokens, dim)
    start = time.perf_counter()
    a_inv = torch.eye(dim, dtype=torch.float64) / lam
    eye = torch.eye(tokens, dtype=torch.float64)
    taken = torch.zeros(len(x), dtype=torch.bool)
    selected: list[int] = []
    gains: list[float] = []
    evaluations = 0
    for _ in range(budget):
        values = torch.cat(
            [
                torch.linalg.slogdet(eye + (chunk @ a_inv) @ chunk.transpose(1, 2)).logabsdet
                for chunk in torch.split(x, chunk_size)
            ]
        )
        evaluations += len(x) - len(selected)
        values[taken] = -math.inf
        index = int(torch.argmax(values))
        selected.append(index)
        gains.append(float(values[index]))
        taken[index] = True
        w = a_inv @ x[index].T
        a_inv = a_inv - w @ torch.linalg.solve(eye + x[index] @ w, w.T)
        if time_limit is not None and time.perf_counter() - start > time_limit:
            break
    objective = dim * math.log(lam) + math.fsum(gains)
    return Selection(selected, gains, objective, lam, len(x), evaluations)


def slogdet_greedy(
    blocks: TokenBlocks | Sequence[Tensor],
    budget: int,
    lam: float = 1.0,
    time_limit: float | None = None,
) -> Selection | None:
    """Greedy (FSFT-1) by a full ``slogdet`` of ``lam I + sum X^T X`` per candidate per round.

    Ties go to the lowest index. Returns ``None`` once ``time_limit`` seconds have passed.
    """
    factors = [
        b.to(torch.float64)
        for b in (blocks.to_list() if isinstance(blocks, TokenBlocks) else blocks)
    ]
    dim = factors[0].shape[1]
    start = time.perf_counter()
    matrix = lam * torch.eye(dim, dtype=torch.float64)
    base = torch.linalg.slogdet(matrix).logabsdet.item()
    selected: list[int] = []
    gains: list[float] = []
    chosen = [False] * len(factors)
    evaluations = 0
    for _ in range(budget):
        best_index, best_value = -1, -math.inf
        for i, block in enumerate(factors):
            if chosen[i]:
                continue
            value = torch.linalg.slogdet(matrix + block.T @ block).logabsdet.item()
            evaluations += 1
            if value > best_value:
                best_index, best_value = i, value
        if time_limit is not None and time.perf_counter() - start > time_limit:
            return None
        chosen[best_index] = True
        selected.append(best_index)
        gains.append(best_value - base)
        matrix = matrix + factors[best_index].T @ factors[best_index]
        base = best_value
    return Selection(selected, gains, base, lam, len(factors), evaluations)


def submodlib_select(
    points: np.ndarray, budget: int, lam: float = 1.0
) -> tuple[list[int], list[float], float, float]:
    """submodlib's LazyGreedy log-determinant selection on the rows of ``points`` (float64).

    Returns the indices, their gains (of ``log det(lam I_k + X_S X_S^T)``), the seconds spent
    building the kernel (``X X^T`` and the ``LogDeterminantFunction``) and those spent maximising.
    """
    from submodlib import LogDeterminantFunction

    start = time.perf_counter()
    kernel = points @ points.T
    function = LogDeterminantFunction(n=points.shape[0], mode="dense", lambdaVal=lam, sijs=kernel)
    built = time.perf_counter()
    picked = function.maximize(
        budget=budget,
        optimizer="LazyGreedy",
        stopIfZeroGain=False,
        stopIfNegativeGain=False,
        verbose=False,
        show_progress=False,
    )
    done = time.perf_counter()
    return [int(i) for i, _ in picked], [float(g) for _, g in picked], built - start, done - built


def mean_pooled(blocks: TokenBlocks) -> np.ndarray:
    """One float64 row per example, the mean of its token rows, as ``prepare_blocks`` pools them."""
    return np.stack([b.to(torch.float64).mean(0).numpy() for b in blocks.to_list()])


def time_selection(
    pool: TokenBlocks,
    budget: int,
    lam: float,
    repeats: int,
    textbook_limit: float | None,
) -> dict[str, Any]:
    """Median seconds, gain evaluations and selections of the four greedy methods on ``pool``.

    ``textbook_limit=None`` skips the textbook method; otherwise it is dropped for good as soon as
    one of its runs passes the limit.
    """
    runs: dict[str, Callable[[], Selection | None]] = {
        "lazy": lambda: fisher_greedy_select(pool, budget, lam=lam, method="lazy"),
        "vectorised": lambda: vectorised_greedy(pool, budget, lam),
        "naive": lambda: fisher_greedy_select(pool, budget, lam=lam, method="naive"),
        "textbook": lambda: slogdet_greedy(pool, budget, lam, time_limit=textbook_limit),
    }
    active = [m for m in METHODS if m != "textbook" or textbook_limit is not None]
    seconds: dict[str, list[float]] = {m: [] for m in METHODS}
    selections: dict[str, Selection | None] = dict.fromkeys(METHODS)
    for _ in range(repeats):
        for method in list(active):
            elapsed, selection = timed(runs[method])
            if selection is None:
                active.remove(method)
                seconds[method] = []
                continue
            seconds[method].append(elapsed)
            selections[method] = selection
    done = [m for m in METHODS if seconds[m]]
    reference = selections["naive"].indices
    return {
        "pool_size": len(pool),
        "seconds": {m: statistics.median(seconds[m]) if seconds[m] else None for m in METHODS},
        "evaluations": {m: selections[m].evaluations if seconds[m] else None for m in METHODS},
        "objective": {m: selections[m].objective if seconds[m] else None for m in METHODS},
        "indices": {m: selections[m].indices if seconds[m] else None for m in METHODS},
        "identical": all(selections[m].indices == reference for m in done),
        "compared": done,
    }


SUBMODLIB_BYTES_PER_ENTRY = 56
"""Peak resident bytes per kernel entry of :func:`submodlib_select` (submodlib 0.0.3), measured
at ``N`` = 2000 and 4000 (56.6 and 56.4): the float64 kernel (8), the Python list of lists of
floats that ``LogDeterminantFunction`` builds from it and keeps (32) and its C++ copy."""


def compare_submodlib(pool: TokenBlocks, budget: int, lam: float, repeats: int) -> dict[str, Any]:
    """submodlib against ``fisher_greedy_select(pooling="mean", method="lazy")`` on ``pool``.

    The seconds are medians over ``repeats``; the peak memory (bytes beyond what the process
    held before, ``None`` off Linux) of each side is its first run's."""
    points = mean_pooled(pool)
    # Per Sylvester's identity, each of submodlib's gains exceeds ours by log(lam).
    shift = math.log(lam)
    ours_seconds, kernel_seconds, maximize_seconds = [], [], []
    ours_peak = submodlib_peak = None
    for repeat in range(repeats):
        elapsed, ours, peak = peak_memory(
            lambda: fisher_greedy_select(pool, budget, lam=lam, pooling="mean", method="lazy")
        )
        ours_seconds.append(elapsed)
        _, (indices, gains, kernel_s, maximize_s), other_peak = peak_memory(
            lambda: submodlib_select(points, budget, lam)
        )
        if repeat == 0:
            ours_peak, submodlib_peak = peak, other_peak
        kernel_seconds.append(kernel_s)
        maximize_seconds.append(maximize_s)
    return {
        "budget": budget,
        "ours_peak_bytes": ours_peak,
        "submodlib_peak_bytes": submodlib_peak,
        "pool_size": len(pool),
        "ours_seconds": statistics.median(ours_seconds),
        "kernel_seconds": statistics.median(kernel_seconds),
        "maximize_seconds": statistics.median(maximize_seconds),
        "agree": indices == ours.indices,
        "max_gain_difference": max(abs(a - shift - b) for a, b in zip(gains, ours.gains)),
        "ours_indices": ours.indices,
        "submodlib_indices": indices,
    }


def compare_objectives(
    pool: TokenBlocks, budget: int, lam: float, seeds: Sequence[int]
) -> dict[str, dict[str, float]]:
    """``F(S) - F(empty)`` at the budget for greedy, random and k-center (mean, std over seeds)."""
    empty = pool.dim * math.log(lam)
    greedy = select_subset(pool, budget, strategy="fisher", lam=lam).objective - empty
    out = {"fisher (greedy)": {"mean": greedy, "std": 0.0, "fraction": 1.0, "runs": 1}}
    for strategy in ("random", "k_center"):
        values = [
            select_subset(pool, budget, strategy=strategy, seed=s, lam=lam).objective - empty
            for s in seeds
        ]
        mean = statistics.fmean(values)
        std = statistics.stdev(values) if len(values) > 1 else 0.0
        out[strategy] = {"mean": mean, "std": std, "fraction": mean / greedy, "runs": len(values)}
    return out


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """Build ``spec``'s pool, then run one method on it: seconds, selection, peak memory.

    ``peak_extra_bytes`` is the peak resident memory during the selection beyond what the process
    held after building the pool (``None`` without Linux's ``/proc``); ``pool_bytes`` the pool's
    values. Meant to run in a fresh process (:func:`measure_in_fresh_process`).
    """
    torch.set_num_threads(spec["threads"])
    warm_up = POOLS[spec["pool"]](40, spec["tokens"], spec["dim"], spec["seed"] + 1)
    fisher_greedy_select(warm_up, 3)  # first calls of the BLAS/LAPACK kernels, untimed
    vectorised_greedy(warm_up, 3)
    pool = POOLS[spec["pool"]](spec["pool_size"], spec["tokens"], spec["dim"], spec["seed"])
    budget, lam, limit = spec["budget"], spec["lam"], spec.get("time_limit")
    if spec["method"] == "lazy":
        run = lambda: fisher_greedy_select(pool, budget, lam=lam)  # noqa: E731
    else:
        run = lambda: vectorised_greedy(pool, budget, lam, time_limit=limit)  # noqa: E731
    seconds, selection, extra = peak_memory(run)
    runs = 1
    if seconds < SHORT_RUN_SECONDS:  # one run of a few milliseconds is mostly noise
        repeats = [timed(run)[0] for _ in range(spec.get("repeats", 1) - 1)]
        seconds, runs = statistics.median([seconds, *repeats]), 1 + len(repeats)
    return {
        **spec,
        "seconds": seconds,
        "runs": runs,
        "picks": len(selection.indices),
        "indices": selection.indices,
        "evaluations": selection.evaluations,
        "objective": selection.objective,
        "pool_bytes": pool.values.numel() * pool.values.element_size(),
        "peak_extra_bytes": extra,
    }


def measure_submodlib(spec: dict[str, Any]) -> dict[str, Any]:
    """One row of table 4 in this (fresh) process: :func:`compare_submodlib` on the realistic pool
    of ``spec``, after untimed first calls of both sides."""
    torch.set_num_threads(spec["threads"])
    warm = realistic_pool(40, spec["tokens"], spec["dim"], spec["seed"] + 1)
    compare_submodlib(warm, 3, spec["lam"], 1)
    pool = realistic_pool(spec["pool_size"], spec["tokens"], spec["dim"], spec["seed"])
    row = compare_submodlib(pool, spec["budget"], spec["lam"], spec["repeats"])
    return {**spec, **row, "pool_bytes": pool.values.numel() * pool.values.element_size()}


def measure_in_fresh_process(spec: dict[str, Any]) -> dict[str, Any]:
    """:func:`measure` in a new interpreter, so that its peak memory is its own."""
    return run_measurement(__file__, spec)


# --------------------------------------------------------------------------- table 6: scaling
SCALE_TOKENS = 4
SCALE_WIDTH = 4096
SCALE_RANK = 64
SCALE_NOISE = 0.1
SCALE_LATENT_DECAY = 1e-2


def _tagged_generator(seed: int, *tags: int) -> torch.Generator:
    entropy = np.random.SeedSequence([seed, *tags]).generate_state(1)[0]
    return torch.Generator().manual_seed(int(entropy))


def _scale_loading(rank: int, dim: int, seed: int) -> Tensor:
    """The fixed ``(rank, dim)`` matrix ``W`` of :func:`sketched_scale_pool`."""
    decay = SCALE_LATENT_DECAY ** (1 / max(rank - 1, 1))
    loading = torch.randn(rank, dim, generator=_tagged_generator(seed, 1, 0)) / math.sqrt(rank)
    return loading * (decay ** torch.arange(rank, dtype=torch.float32)).unsqueeze(1)


def _scale_signal(
    count: int, tokens: int, loading: Tensor, seed: int, start: int
) -> tuple[torch.Generator, Tensor]:
    """The low-rank rows ``s_i (c_i + tau e_{i,t}) W`` of the chunk starting at ``start``, and its
    generator, whose next draws are the chunk's noise."""
    generator = _tagged_generator(seed, 2, start)
    scales = torch.exp(SCALE_SIGMA * torch.randn(count, 1, 1, generator=generator))
    centre = torch.randn(count, 1, loading.shape[0], generator=generator)
    noise = TOKEN_NOISE * torch.randn(count, tokens, loading.shape[0], generator=generator)
    latent = scales * (centre + noise)
    return generator, latent.reshape(count * tokens, loading.shape[0]) @ loading


def wide_scale_pool(
    pool_size: int,
    *,
    tokens: int = SCALE_TOKENS,
    dim: int = SCALE_WIDTH,
    rank: int = SCALE_RANK,
    chunk: int = 20000,
    seed: int = 0,
) -> TokenBlocks:
    """The pool of :func:`sketched_scale_pool` before the sketch, float32 ``(pool_size * tokens,
    dim)``: the same low-rank rows, with the isotropic noise ``sigma n_{i,t}`` drawn ``dim`` wide.
    The sketch's error in ``F`` is measured on it (table 6)."""
    loading = _scale_loading(rank, dim, seed)
    values = torch.empty(pool_size * tokens, dim, dtype=torch.float32)
    for start in range(0, pool_size, chunk):
        count = min(chunk, pool_size - start)
        generator, wide = _scale_signal(count, tokens, loading, seed, start)
        wide += SCALE_NOISE * torch.randn(count * tokens, dim, generator=generator)
        values[start * tokens : (start + count) * tokens] = wide
        del wide
    return _equal_blocks(values, tokens)


def gain_over_empty(blocks: TokenBlocks, indices: Sequence[int], lam: float) -> float:
    """``F(S) - F(empty)`` of (FSFT-1) for ``indices``, in float64 by Sylvester's identity:
    ``log det(I + Y Y^T / lam)`` for the stacked rows ``Y`` of the subset (``|S| m x |S| m``, not
    ``d x d``)."""
    rows = torch.cat([blocks.block(i) for i in indices]).to(torch.float64)
    gram = rows @ rows.T / lam
    gram.diagonal().add_(1.0)
    return 2 * torch.log(torch.linalg.cholesky(gram).diagonal()).sum().item()


def sketch_gain_check(
    pool_size: int, sketch: FeatureSketch, budget: int, lam: float, **pool: Any
) -> dict[str, float]:
    """The sketch's error in ``F``: on :func:`wide_scale_pool` (noise drawn ``d`` wide), lazy
    greedy on the unsketched rows and on the sketched rows, and one uniform random subset; each
    selection's ``F(S) - F(empty)`` on the unsketched rows, as a fraction of the unsketched
    greedy's."""
    wide = wide_scale_pool(pool_size, **pool)
    sketched = fisher_greedy_select(sketch_features(wide, sketch), budget, lam=lam).indices
    exact = fisher_greedy_select(wide, budget, lam=lam).indices
    chance = random_select(pool_size, budget, seed=pool.get("seed", 0))
    best = gain_over_empty(wide, exact, lam)
    return {
        "exact_gain": best,
        "sketch_fraction": gain_over_empty(wide, sketched, lam) / best,
        "random_fraction": gain_over_empty(wide, chance, lam) / best,
        "sketch_common_picks": len(set(sketched) & set(exact)),
    }


def sketched_scale_pool(
    pool_size: int,
    sketch: FeatureSketch,
    *,
    tokens: int = SCALE_TOKENS,
    dim: int = SCALE_WIDTH,
    rank: int = SCALE_RANK,
    chunk: int = 20000,
    seed: int = 0,
) -> TokenBlocks:
    """``pool_size`` examples of ``tokens`` rows of width ``dim``, sketched to ``sketch.sketch_dim``
    columns ``chunk`` examples at a time, so only the float32 ``(pool_size * tokens, k)`` pool is
    held (plus one ``(chunk * tokens, dim)`` chunk).

    Example ``i``'s token rows are ``x_{i,t} = s_i (c_i + tau e_{i,t}) W + sigma n_{i,t}``:
    ``c_i, e_{i,t} ~ N(0, I_r)`` (``tau = 0.5``), log-normal scales ``s_i = exp(0.5 u_i)``, a
    fixed ``W`` (``r x d``, entries ``N(0, 1/r)``, row ``j`` scaled by ``rho^j`` decaying from 1
    to ``1e-2``), and isotropic noise ``n_{i,t} ~ N(0, I_d)``, ``sigma = 0.1``. The low-rank part
    is formed at full width ``d`` and multiplied by the sketch ``S``; the noise is drawn directly
    in the sketched space as ``z L^T`` with ``z ~ N(0, I_k)`` and ``L L^T = S^T S`` (``L`` from
    its eigendecomposition), which has the law of ``n S`` exactly, so the ``d``-wide noise
    (``pool_size * tokens * d`` draws) is never generated. Chunks are seeded by their first
    index: a larger pool extends a smaller one whose size is a multiple of ``chunk``.
    """
    k = sketch.sketch_dim
    matrix = gaussian_sketch(dim, k, sketch.seed, torch.float64)
    eigenvalues, eigenvectors = torch.linalg.eigh(matrix.T @ matrix)  # PSD even when d < k
    noise_factor = (eigenvectors * eigenvalues.clamp(min=0).sqrt()).T.to(torch.float32)
    loading = _scale_loading(rank, dim, seed)
    values = torch.empty(pool_size * tokens, k, dtype=torch.float32)
    for start in range(0, pool_size, chunk):
        count = min(chunk, pool_size - start)
        generator, wide = _scale_signal(count, tokens, loading, seed, start)
        noise = torch.randn(count * tokens, k, generator=generator) @ noise_factor
        values[start * tokens : (start + count) * tokens] = sketch(wide) + SCALE_NOISE * noise
        del wide
    return _equal_blocks(values, tokens)


def measure_scale(spec: dict[str, Any]) -> None:
    """One cell of the scaling table, in this (fresh) process: build the sketched pool, then the
    centralised lazy greedy, then the two-round selection, printing a JSON line after each stage
    (so a cell stopped at its time limit still reports the stages it finished)."""
    torch.set_num_threads(spec["threads"])
    sketch = FeatureSketch(spec["sketch_dim"], spec["seed"])
    warm = sketched_scale_pool(64, sketch, dim=64, chunk=64, seed=spec["seed"] + 1)
    fisher_greedy_select(warm, 3)  # first calls of the BLAS/LAPACK kernels, untimed
    two_round_greedy_select(warm, 3, 2)
    out: dict[str, Any] = dict(spec)

    def report(peak_key: str = "process_peak_bytes", **fields: Any) -> None:
        out.update(fields)
        # peak_memory resets the high-water mark, so ru_maxrss is now this stage's whole peak
        stage_peak = 1024 * resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out[peak_key] = max(out.get(peak_key, 0), stage_peak)
        print(json.dumps(out), flush=True)

    seconds, pool, extra = peak_memory(
        lambda: sketched_scale_pool(
            spec["pool_size"], sketch, dim=spec["dim"], chunk=spec["chunk"], seed=spec["seed"]
        )
    )
    report(
        generate_seconds=seconds,
        generate_peak_bytes=extra,
        pool_bytes=pool.values.numel() * pool.values.element_size(),
    )
    budget, lam = spec["budget"], spec["lam"]
    seconds, central, extra = peak_memory(lambda: fisher_greedy_select(pool, budget, lam=lam))
    report(lazy_seconds=seconds, lazy_peak_bytes=extra, lazy_objective=central.objective)
    seconds, two, extra = peak_memory(
        lambda: two_round_greedy_select(pool, budget, spec["shards"], lam=lam)
    )
    empty = pool.dim * math.log(lam)
    report(
        two_round_seconds=seconds,
        two_round_peak_bytes=extra,
        two_round_objective=two.objective,
        two_round_ratio=(two.objective - empty) / (central.objective - empty),
        overlap=len(set(two.indices) & set(central.indices)),
    )
    if spec.get("exact"):
        del pool, central, two
        seconds, check, extra = peak_memory(
            lambda: sketch_gain_check(
                spec["pool_size"],
                sketch,
                budget,
                lam,
                dim=spec["dim"],
                chunk=spec["chunk"],
                seed=spec["seed"],
            )
        )
        # the selection stages' process peak stays apart from the check's
        report("check_process_peak_bytes", exact_seconds=seconds, exact_peak_bytes=extra, **check)


def measure_scale_in_fresh_process(spec: dict[str, Any], limit: float) -> dict[str, Any]:
    """:func:`measure_scale` in a new interpreter, killed after ``limit`` seconds: its last JSON
    line, with ``"stopped"`` true when the limit cut it short."""
    command = [sys.executable, str(Path(__file__).resolve()), "--measure-scale", json.dumps(spec)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=limit, check=False)
        output, stopped = done.stdout, False
        if done.returncode != 0:
            raise RuntimeError(f"measurement {spec} failed:\n{done.stderr[-3000:]}")
    except subprocess.TimeoutExpired as expired:
        raw = expired.stdout or b""
        output, stopped = raw.decode() if isinstance(raw, bytes) else raw, True
    lines = [line for line in output.splitlines() if line.startswith("{")]
    return {**spec, **(json.loads(lines[-1]) if lines else {}), "stopped": stopped}


def _wide_check_bytes(args: argparse.Namespace, size: int) -> int:
    """Bytes of the sketch check's ``d``-wide pool: float32, plus the greedy's float64 copy."""
    return size * SCALE_TOKENS * args.scale_dim * (4 + 8)


def _sketch_cell(row: dict[str, Any], key: str) -> str:
    if not row.get("exact"):
        return "not run"
    return f"{row[key]:.4f}" if key in row else "stopped"


def _table_of_scale(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for size in args.scale_sizes:
        spec = {
            "pool_size": size,
            "dim": args.scale_dim,
            "sketch_dim": args.sketch_dim,
            "chunk": args.scale_chunk,
            "budget": args.scale_budget,
            "shards": args.scale_shards,
            "lam": args.lam,
            "seed": args.seed,
            "threads": args.threads or torch.get_num_threads(),
            "exact": _wide_check_bytes(args, size) <= args.scale_exact_limit_gb * 1e9,
        }
        rows.append(measure_scale_in_fresh_process(spec, args.scale_limit))
        if rows[-1]["stopped"]:
            break  # a larger pool would only be stopped later
    print(
        f"6. Scaling: N candidates of {SCALE_TOKENS} token rows at d = {args.scale_dim}, low-rank "
        f"(r = {SCALE_RANK}) plus noise, sketched to k = {args.sketch_dim} (float32) "
        f"{args.scale_chunk} candidates at a time; budget {args.scale_budget}, two-round with "
        f"{args.scale_shards} shards; one fresh process per N, stopped after "
        f"{args.scale_limit:g} s (GB: peak resident memory beyond the process before the stage; "
        "process peak: the whole process, largest over the stages):"
    )
    print()

    def cell(row: dict[str, Any], key: str, text: Callable[[Any], str]) -> str:
        return text(row[key]) if key in row else "stopped"

    table = [
        [
            r["pool_size"],
            cell(r, "generate_seconds", lambda v: f"{v:.1f}"),
            cell(r, "generate_peak_bytes", _gb),
            cell(r, "pool_bytes", _gb),
            cell(r, "lazy_seconds", lambda v: f"{v:.1f}"),
            cell(r, "lazy_peak_bytes", _gb),
            cell(r, "two_round_seconds", lambda v: f"{v:.1f}"),
            cell(r, "two_round_peak_bytes", _gb),
            cell(r, "two_round_ratio", lambda v: f"{v:.4f}"),
            cell(r, "overlap", str),
            _sketch_cell(r, "sketch_fraction"),
            _sketch_cell(r, "random_fraction"),
            _gb(r.get("process_peak_bytes")),
        ]
        for r in rows
    ]
    columns = [
        "N",
        "generate + sketch s",
        "generate peak GB",
        "pool GB",
        "lazy s",
        "lazy peak GB",
        "two-round s",
        "two-round peak GB",
        "F two-round / F lazy",
        "common picks",
        "sketch: F / F unsketched greedy",
        "random: F / F unsketched greedy",
        "process peak GB",
    ]
    print(markdown_table(columns, table))
    print(
        "Sketch columns: on the same pool with its noise drawn d wide, F(S) - F(empty) on the "
        "unsketched rows of lazy greedy's picks on the sketched rows, and of one random subset "
        f"(seed {args.seed}), over the unsketched lazy greedy's; run where the d-wide float32 pool "
        "and the greedy's float64 copy of it take at most "
        f"{args.scale_exact_limit_gb:g} GB (--scale-exact-limit-gb):"
    )
    for r in rows:
        if not r.get("exact"):
            needed = _wide_check_bytes(args, r["pool_size"]) / 1e9
            print(f"  N = {r['pool_size']}: not run, {needed:.1f} GB needed.")
        elif "exact_seconds" in r:
            print(
                f"  N = {r['pool_size']}: {r['exact_seconds']:.1f} s, peak "
                f"{_gb(r['exact_peak_bytes'])} GB beyond the process before it (process peak "
                f"{_gb(r['check_process_peak_bytes'])} GB), {r['sketch_common_picks']} picks in "
                "common with the unsketched greedy."
            )
    if rows and rows[-1]["stopped"]:
        print(f"N = {rows[-1]['pool_size']} was stopped after {args.scale_limit:g} s.")
    print()
    return rows


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = benchmark_parser(
        __doc__.split("\n\n")[0],
        threads=1,
        quick_help="tiny pools (N 30 and 50, d 6); no width or LLM-scale table",
    )
    parser.add_argument("--pool-sizes", type=int, nargs="+", default=[500, 1000, 2000])
    parser.add_argument("--tokens", type=int, default=16, help="token rows per example")
    parser.add_argument("--dim", type=int, default=64, help="feature dimension d")
    parser.add_argument("--budget", type=int, default=100, help="examples to select")
    parser.add_argument("--widths", type=int, nargs="*", default=[64, 256, 1024, 4096])
    parser.add_argument("--width-pool-size", type=int, default=400)
    parser.add_argument("--width-tokens", type=int, default=8)
    parser.add_argument("--width-budget", type=int, default=30)
    parser.add_argument(
        "--width-repeats", type=int, default=9, help="runs (median) of a fresh-process cell < 1 s"
    )
    parser.add_argument("--large-pool-sizes", type=int, nargs="*", default=[20000])
    parser.add_argument("--large-dim", type=int, default=4096)
    parser.add_argument("--large-tokens", type=int, default=8)
    parser.add_argument("--large-budget", type=int, default=500)
    parser.add_argument(
        "--baseline-limit", type=float, default=120.0, help="seconds for the vectorised baseline"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lam", type=float, default=1.0, help="ridge lambda of F(S)")
    parser.add_argument("--baseline-seeds", type=int, default=5, help="seeds of random/k-center")
    parser.add_argument(
        "--textbook-limit", type=float, default=60.0, help="seconds after which textbook is skipped"
    )
    parser.add_argument(
        "--kernel-limit-gb",
        type=float,
        default=14.0,
        help="largest estimated submodlib peak memory (kernel and its copies) to run",
    )
    parser.add_argument(
        "--submodlib-sizes",
        type=int,
        nargs="+",
        default=None,
        help="N of table 4 (default 500 1000 2000 5000 10000 15000 20000)",
    )
    parser.add_argument(
        "--only-submodlib", action="store_true", help="only the submodlib table (4)"
    )
    parser.add_argument(
        "--scale", action="store_true", help="also the scaling table (6), off by default"
    )
    parser.add_argument(
        "--only-scale", action="store_true", help="only the scaling table (6); implies --scale"
    )
    parser.add_argument(
        "--scale-sizes", type=int, nargs="+", default=None, help="default 10000 100000 1000000"
    )
    parser.add_argument("--scale-dim", type=int, default=SCALE_WIDTH, help="width before sketch")
    parser.add_argument("--sketch-dim", type=int, default=128, help="sketch width k")
    parser.add_argument("--scale-chunk", type=int, default=20000, help="candidates per chunk")
    parser.add_argument("--scale-budget", type=int, default=500)
    parser.add_argument("--scale-shards", type=int, default=8, help="shards of two-round")
    parser.add_argument(
        "--scale-limit", type=float, default=360.0, help="seconds after which a cell is stopped"
    )
    parser.add_argument(
        "--scale-exact-limit-gb",
        type=float,
        default=8.0,
        help="largest d-wide pool (float32 + float64 copy) on which the sketch's error is measured",
    )
    args = parser.parse_args(argv)
    args.scale = args.scale or args.only_scale
    if args.quick:
        args.pool_sizes, args.tokens, args.dim, args.budget = [30, 50], 3, 6, 8
        args.repeats, args.baseline_seeds, args.widths, args.large_pool_sizes = 1, 2, [], []
        args.scale_sizes = args.scale_sizes or [200, 400]
        args.submodlib_sizes = args.submodlib_sizes or [30, 50]
        args.scale_dim, args.sketch_dim = 64, 16
        args.scale_chunk, args.scale_budget, args.scale_shards = 150, 10, 4
    for name in (
        "tokens",
        "dim",
        "budget",
        "repeats",
        "baseline_seeds",
        "width_pool_size",
        "width_tokens",
        "width_budget",
        "width_repeats",
        "large_dim",
        "large_tokens",
        "large_budget",
        "scale_dim",
        "sketch_dim",
        "scale_chunk",
        "scale_budget",
        "scale_shards",
    ):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if min(args.pool_sizes) < args.budget:
        parser.error("every --pool-sizes entry must be >= --budget")
    if args.width_pool_size < args.width_budget:
        parser.error("--width-pool-size must be >= --width-budget")
    if args.large_pool_sizes and min(args.large_pool_sizes) < args.large_budget:
        parser.error("every --large-pool-sizes entry must be >= --large-budget")
    if args.scale and min(args.scale_sizes or [args.scale_budget]) < args.scale_budget:
        parser.error("every --scale-sizes entry must be >= --scale-budget")
    if args.scale_limit <= 0:
        parser.error("--scale-limit must be > 0")
    args.scale_sizes = sorted(set(args.scale_sizes or [10000, 100000, 1000000]))
    default_peer = [500, 1000, 2000, 5000, 10000, 15000, 20000]
    args.submodlib_sizes = sorted(set(args.submodlib_sizes or default_peer))
    if min(args.submodlib_sizes) < args.budget:
        parser.error("every --submodlib-sizes entry must be >= --budget")
    if args.threads < 0:
        parser.error("--threads must be >= 0")
    if min(args.lam, args.textbook_limit, args.baseline_limit, args.kernel_limit_gb) <= 0:
        parser.error("--lam, --textbook-limit, --baseline-limit and --kernel-limit-gb must be > 0")
    args.pool_sizes = sorted(set(args.pool_sizes))
    return args


def _seconds(value: float | None) -> str:
    return "skipped (too slow)" if value is None else f"{value:.3f}"


def _gb(value: int | None) -> str:
    # VmHWM minus the size before the run can dip below 0 when the run freed memory
    return "n/a" if value is None else f"{max(value, 0) / 1e9:.2f}"


def _timing_row(pool_name: str, row: dict[str, Any]) -> list[str]:
    s, e = row["seconds"], row["evaluations"]
    evaluations = " / ".join("-" if e[m] is None else str(e[m]) for m in METHODS)
    return [
        pool_name,
        str(row["pool_size"]),
        *(_seconds(s[m]) for m in METHODS),
        format_ratio(s["vectorised"], s["lazy"]),
        format_ratio(s["naive"], s["lazy"]),
        format_ratio(s["textbook"], s["lazy"]),
        evaluations,
        ("yes" if row["identical"] else "NO") + f" ({', '.join(row['compared'])})",
    ]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the five measurements, print their tables, return them as plain dicts.

    torch runs with ``--threads`` threads (``0``: torch's default) and gets its former thread
    count back on return.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--measure"]:
        print(json.dumps(measure(json.loads(argv[1]))))
        return {}
    if argv[:1] == ["--measure-scale"]:
        measure_scale(json.loads(argv[1]))
        return {}
    if argv[:1] == ["--measure-submodlib"]:
        print(json.dumps(measure_submodlib(json.loads(argv[1]))))
        return {}
    args = parse_args(argv)
    with torch_threads(args.threads):
        return _run(args)


def _table_by_pool_size(args: argparse.Namespace) -> list[dict[str, Any]]:
    limit: float | None = args.textbook_limit
    timing = []
    for size in args.pool_sizes:
        pool = realistic_pool(size, args.tokens, args.dim, args.seed)
        row = time_selection(pool, args.budget, args.lam, args.repeats, limit)
        row["pool"] = "realistic"
        timing.append(row)
        if row["seconds"]["textbook"] is None:
            limit = None
    largest = args.pool_sizes[-1]
    iso = isotropic_pool(largest, args.tokens, args.dim, args.seed)
    row = time_selection(iso, args.budget, args.lam, args.repeats, limit)
    row["pool"] = "isotropic"
    timing.append(row)
    print(f"1. Selection time at d = {args.dim} (seconds, median of {args.repeats}):")
    print()
    columns = [
        "pool",
        "N",
        *(f"{m} s" for m in METHODS),
        "vectorised/lazy",
        "naive/lazy",
        "textbook/lazy",
        "gain evaluations " + " / ".join(METHODS),
        "identical selection",
    ]
    print(markdown_table(columns, [_timing_row(r["pool"], r) for r in timing]))
    print()
    return timing


def _spec(args: argparse.Namespace, **fields: Any) -> dict[str, Any]:
    threads = args.threads or torch.get_num_threads()
    return {
        "lam": args.lam,
        "seed": args.seed,
        "threads": threads,
        "repeats": args.width_repeats,
        **fields,
    }


def _table_by_width(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for pool in POOLS:
        for dim in args.widths:
            spec = _spec(
                args,
                pool=pool,
                pool_size=args.width_pool_size,
                tokens=args.width_tokens,
                dim=dim,
                budget=args.width_budget,
            )
            lazy = measure_in_fresh_process({**spec, "method": "lazy"})
            vectorised = measure_in_fresh_process({**spec, "method": "vectorised"})
            rows.append({"pool": pool, "dim": dim, "lazy": lazy, "vectorised": vectorised})
    if not rows:
        return rows
    print(
        f"2. Width axis: N = {args.width_pool_size}, {args.width_tokens} tokens, budget "
        f"{args.width_budget}, each method in a fresh process, its seconds the median of "
        f"{args.width_repeats} runs when one takes under {SHORT_RUN_SECONDS:g} s (GB of peak "
        "memory beyond the pool, first run):"
    )
    print()
    table = [
        [
            r["pool"],
            r["dim"],
            f"{r['lazy']['seconds']:.3f}",
            f"{r['vectorised']['seconds']:.3f}",
            format_ratio(r["vectorised"]["seconds"], r["lazy"]["seconds"]),
            _gb(r["lazy"]["peak_extra_bytes"]),
            _gb(r["vectorised"]["peak_extra_bytes"]),
            _gb(r["lazy"]["pool_bytes"]),
            f"{r['lazy']['evaluations']} / {r['vectorised']['evaluations']}",
            "yes" if r["lazy"]["indices"] == r["vectorised"]["indices"] else "NO",
        ]
        for r in rows
    ]
    columns = [
        "pool",
        "d",
        "lazy s",
        "vectorised s",
        "vectorised/lazy",
        "lazy peak GB",
        "vectorised peak GB",
        "pool GB",
        "gain evaluations lazy / vectorised",
        "identical selection",
    ]
    print(markdown_table(columns, table))
    print()
    return rows


def _table_at_llm_scale(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for size in args.large_pool_sizes:
        spec = _spec(
            args,
            pool="realistic",
            pool_size=size,
            tokens=args.large_tokens,
            dim=args.large_dim,
            budget=args.large_budget,
        )
        lazy = measure_in_fresh_process({**spec, "method": "lazy"})
        vectorised = measure_in_fresh_process(
            {**spec, "method": "vectorised", "time_limit": args.baseline_limit}
        )
        rows.append({"pool_size": size, "lazy": lazy, "vectorised": vectorised})
    if not rows:
        return rows
    print(
        f"3. LLM scale: realistic pool, d = {args.large_dim}, {args.large_tokens} tokens, budget "
        f"{args.large_budget}; the vectorised baseline stops after {args.baseline_limit:g} s:"
    )
    print()
    table = []
    for r in rows:
        lazy, vectorised = r["lazy"], r["vectorised"]
        agree = lazy["indices"][: vectorised["picks"]] == vectorised["indices"]
        table.append(
            [
                r["pool_size"],
                f"{lazy['seconds']:.1f}",
                _gb(lazy["peak_extra_bytes"]),
                _gb(lazy["pool_bytes"]),
                lazy["evaluations"],
                f"{vectorised['picks']} of {args.large_budget} in {vectorised['seconds']:.0f} s",
                f"{vectorised['seconds'] / vectorised['picks']:.1f}",
                f"{lazy['seconds'] / lazy['picks']:.3f}",
                "yes" if agree else "NO",
            ]
        )
    columns = [
        "N",
        "lazy s",
        "lazy peak GB beyond the pool",
        "pool GB",
        "lazy gain evaluations",
        "vectorised",
        "vectorised s / pick",
        "lazy s / pick",
        "same first picks",
    ]
    print(markdown_table(columns, table))
    print()
    return rows


def _table_against_submodlib(args: argparse.Namespace) -> list[dict[str, Any]] | None:
    try:
        import submodlib  # noqa: F401
    except ImportError:
        print("submodlib is not importable (pip install submodlib-py); peer comparison skipped.")
        print()
        return None
    rows: list[dict[str, Any]] = []
    sizes = args.submodlib_sizes
    limit = args.kernel_limit_gb * 1e9
    fits = [n for n in sizes if SUBMODLIB_BYTES_PER_ENTRY * n * n <= limit]
    for size in fits:
        spec = _spec(args, pool_size=size, tokens=args.tokens, dim=args.dim, budget=args.budget)
        spec["repeats"] = args.repeats
        rows.append(run_measurement(__file__, spec, "--measure-submodlib"))
    print(
        '4. pooling="mean" (one row per example) against submodlib LogDeterminantFunction '
        f"(dense, LazyGreedy): realistic pool, {args.tokens} tokens mean-pooled, d = {args.dim}, "
        f"budget {args.budget}; seconds (median of {args.repeats}), each N in a fresh process; "
        "peak GB: resident memory beyond the pool, first run:"
    )
    print()
    table = [
        [
            "realistic",
            str(r["pool_size"]),
            f"{r['ours_seconds']:.4f}",
            f"{r['kernel_seconds']:.4f}",
            f"{r['maximize_seconds']:.4f}",
            format_ratio(r["kernel_seconds"] + r["maximize_seconds"], r["ours_seconds"]),
            format_ratio(r["maximize_seconds"], r["ours_seconds"]),
            "yes" if r["agree"] else "NO",
            f"{r['max_gain_difference']:.1e}",
            _gb(r["ours_peak_bytes"]),
            _gb(r["submodlib_peak_bytes"]),
        ]
        for r in rows
    ]
    columns = [
        "pool",
        "N",
        "ours s",
        "submodlib kernel s",
        "submodlib maximize s",
        "submodlib total/ours",
        "submodlib maximize/ours",
        "same selection",
        "max gain difference",
        "ours peak GB",
        "submodlib peak GB",
    ]
    print(markdown_table(columns, table))
    for size in sorted(set(sizes) - set(fits)):
        print(
            f"submodlib stops before N = {size}: its dense N x N kernel and copies would take "
            f"about {SUBMODLIB_BYTES_PER_ENTRY * size * size / 1e9:.1f} GB "
            f"(--kernel-limit-gb {args.kernel_limit_gb:g})."
        )
    print()
    return rows


def _run(args: argparse.Namespace) -> dict[str, Any]:
    head = header(args)
    own_header = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "load_average": head["load_average"],
        **vars(args),
    }
    print_header(head, f"lam {args.lam:g}", "float64", f"seed {args.seed}")
    print()
    if args.only_scale or args.only_submodlib:
        result: dict[str, Any] = {"header": own_header}
        if args.only_submodlib:
            result["submodlib"] = _table_against_submodlib(args)
        if args.only_scale:
            result["scale"] = _table_of_scale(args)
        if args.json:
            write_json(args.json, head, result)
        return result
    timing = _table_by_pool_size(args)
    widths = _table_by_width(args)
    large = _table_at_llm_scale(args)
    submodlib_rows = _table_against_submodlib(args)

    largest = args.pool_sizes[-1]
    pool = realistic_pool(largest, args.tokens, args.dim, args.seed)
    seeds = [args.seed + k for k in range(args.baseline_seeds)]
    objectives = compare_objectives(pool, args.budget, args.lam, seeds)
    print(
        f"5. F(S) - F(empty) at budget {args.budget} on the realistic pool of {largest} examples "
        f"(random and k-center: mean ± std over {len(seeds)} seeds; k-center on mean-pooled "
        "features):"
    )
    print()
    rows = [
        [name, f"{v['mean']:.2f} ± {v['std']:.2f}", f"{v['fraction']:.3f}"]
        for name, v in objectives.items()
    ]
    print(markdown_table(["selection", "F(S) - F(empty)", "fraction of greedy"], rows))
    print()
    scale = _table_of_scale(args) if args.scale else []
    result = {
        "header": own_header,
        "timing": timing,
        "widths": widths,
        "large": large,
        "submodlib": submodlib_rows,
        "objective": objectives,
        "scale": scale,
    }
    if args.json:
        write_json(args.json, head, result)
    return result


if __name__ == "__main__":
    main()
