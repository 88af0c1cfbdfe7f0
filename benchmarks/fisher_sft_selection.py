"""Cost and quality of FisherSFT greedy subset selection on synthetic pools, on a CPU.

1. Selection time against pool size ``N``, ``--budget`` examples selected with ``lam = --lam``:

   - ``naive``: :func:`~lightning_info.methods.fisher_sft.functional.fisher_greedy_select` with
     ``method="naive"``, the determinant-lemma gain (FSFT-2) of every candidate every round;
   - ``lazy``: the same with ``method="lazy"``, stale gains in a max-heap;
   - ``textbook``: :func:`slogdet_greedy`, ``slogdet(lam I + sum_{S + i} X^T X)`` recomputed for
     every candidate in every round, one candidate at a time. It runs only while one run stays
     under ``--textbook-limit`` seconds; beyond that it is reported as skipped, not estimated.

   All three break ties by the lowest index, so they should return the same selection; the table
   says whether they did, and how many single-candidate gains each evaluated.
2. The same greedy with ``pooling="mean"`` (one row per example) against submodlib's
   ``LogDeterminantFunction`` (dense kernel ``X X^T``, ``LazyGreedy``), when ``submodlib`` is
   importable. By Sylvester's identity ``log det(lam I_k + X_S X_S^T) = log det(lam I_d +
   X_S^T X_S) + (k - d) log lam``, so both maximise the same function and should pick the same
   examples; the kernel's construction is timed apart from the maximisation.
3. ``F(S) - F(empty)`` of (FSFT-1) reached at the budget on the largest realistic pool by the
   greedy selection, by uniform random subsets and by k-center on the mean-pooled features
   (mean and standard deviation over ``--baseline-seeds`` seeds), also as a fraction of greedy.

The realistic pool (:func:`realistic_pool`) gives example ``i`` the token rows

    x_{i,t} = s_i Q diag(sqrt(rho^j)) (c_i + tau e_{i,t}),   t = 1 .. m,

with ``c_i, e_{i,t} ~ N(0, I_d)`` (a centre shared by the tokens of one example, plus per-token
noise, ``tau = 0.5``), ``Q`` a random orthogonal basis, ``rho`` such that the spectrum decays
geometrically from 1 to ``1e-3`` across the ``d`` directions, and per-example scales
``s_i = exp(0.5 u_i)``, ``u_i ~ N(0, 1)`` (log-normal), so that gains differ widely between
examples. The isotropic pool (:func:`isotropic_pool`, i.i.d. ``N(0, 1)`` entries) makes all gains
nearly equal, the worst case for lazy greedy; it is timed at the largest ``N`` only.

Every time is the median over ``--repeats`` runs of ``time.perf_counter``, the methods
interleaved (naive, lazy, textbook, naive, ...); building the pool is not timed. torch runs with
``--threads`` threads, one by default: on a machine whose cores other processes also use,
multi-threaded OpenMP kernels wait for descheduled threads and their times stop measuring the
method.

Usage::

    python benchmarks/fisher_sft_selection.py [--pool-sizes 500 1000 2000] [--tokens 16]
        [--dim 64] [--budget 100] [--repeats 3] [--seed 0] [--lam 1.0]
        [--baseline-seeds 5] [--threads 1] [--textbook-limit 60]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from lightning_info.core.blocks import TokenBlocks
from lightning_info.core.logging import markdown_table
from lightning_info.core.threads import torch_threads
from lightning_info.core.timing import format_ratio, timed
from lightning_info.methods.fisher_sft.functional import Selection, fisher_greedy_select
from lightning_info.methods.fisher_sft.sampler import select_subset

METHODS = ("naive", "lazy", "textbook")
SPECTRUM_RANGE = 1e-3
SCALE_SIGMA = 0.5
TOKEN_NOISE = 0.5


def realistic_pool(pool_size: int, tokens: int, dim: int, seed: int = 0) -> TokenBlocks:
    """``pool_size`` blocks of ``tokens`` rows in ``R^dim`` from the realistic generator above."""
    generator = torch.Generator().manual_seed(seed)

    def normal(*shape: int) -> Tensor:
        return torch.randn(*shape, generator=generator, dtype=torch.float64)

    q, r = torch.linalg.qr(normal(dim, dim))
    basis = q * torch.sign(torch.diagonal(r))
    decay = SPECTRUM_RANGE ** (1 / max(dim - 1, 1))
    root_spectrum = (decay ** torch.arange(dim, dtype=torch.float64)).sqrt()
    scales = torch.exp(SCALE_SIGMA * normal(pool_size, 1, 1))
    latent = normal(pool_size, 1, dim) + TOKEN_NOISE * normal(pool_size, tokens, dim)
    rows = scales * (latent * root_spectrum) @ basis.T
    return TokenBlocks.from_list(list(rows))


def isotropic_pool(pool_size: int, tokens: int, dim: int, seed: int = 0) -> TokenBlocks:
    """``pool_size`` blocks of ``tokens`` rows with i.i.d. standard normal entries."""
    generator = torch.Generator().manual_seed(seed)
    rows = torch.randn(pool_size, tokens, dim, generator=generator, dtype=torch.float64)
    return TokenBlocks.from_list(list(rows))


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
    """Median seconds, gain evaluations and selections of the three greedy methods on ``pool``.

    ``textbook_limit=None`` skips the textbook method; otherwise it is dropped for good as soon as
    one of its runs passes the limit.
    """
    runs: dict[str, Callable[[], Selection | None]] = {
        "naive": lambda: fisher_greedy_select(pool, budget, lam=lam, method="naive"),
        "lazy": lambda: fisher_greedy_select(pool, budget, lam=lam, method="lazy"),
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


def compare_submodlib(pool: TokenBlocks, budget: int, lam: float, repeats: int) -> dict[str, Any]:
    """submodlib against ``fisher_greedy_select(pooling="mean", method="lazy")`` on ``pool``."""
    points = mean_pooled(pool)
    # Per Sylvester's identity, each of submodlib's gains exceeds ours by log(lam).
    shift = math.log(lam)
    ours_seconds, kernel_seconds, maximize_seconds = [], [], []
    for _ in range(repeats):
        elapsed, ours = timed(
            lambda: fisher_greedy_select(pool, budget, lam=lam, pooling="mean", method="lazy")
        )
        ours_seconds.append(elapsed)
        indices, gains, kernel_s, maximize_s = submodlib_select(points, budget, lam)
        kernel_seconds.append(kernel_s)
        maximize_seconds.append(maximize_s)
    return {
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


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool-sizes", type=int, nargs="+", default=[500, 1000, 2000])
    parser.add_argument("--tokens", type=int, default=16, help="token rows per example")
    parser.add_argument("--dim", type=int, default=64, help="feature dimension d")
    parser.add_argument("--budget", type=int, default=100, help="examples to select")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lam", type=float, default=1.0, help="ridge lambda of F(S)")
    parser.add_argument("--baseline-seeds", type=int, default=5, help="seeds of random/k-center")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads; 0 keeps torch's default"
    )
    parser.add_argument(
        "--textbook-limit", type=float, default=60.0, help="seconds after which textbook is skipped"
    )
    args = parser.parse_args(argv)
    for name in ("tokens", "dim", "budget", "repeats", "baseline_seeds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if min(args.pool_sizes) < args.budget:
        parser.error("every --pool-sizes entry must be >= --budget")
    if args.threads < 0:
        parser.error("--threads must be >= 0")
    if args.lam <= 0 or args.textbook_limit <= 0:
        parser.error("--lam and --textbook-limit must be > 0")
    args.pool_sizes = sorted(set(args.pool_sizes))
    return args


def _seconds(value: float | None) -> str:
    return "skipped (too slow)" if value is None else f"{value:.3f}"


def _timing_row(pool_name: str, row: dict[str, Any]) -> list[str]:
    s, e = row["seconds"], row["evaluations"]
    evaluations = " / ".join("-" if e[m] is None else str(e[m]) for m in METHODS)
    return [
        pool_name,
        str(row["pool_size"]),
        *(_seconds(s[m]) for m in METHODS),
        format_ratio(s["naive"], s["lazy"]),
        format_ratio(s["textbook"], s["naive"]),
        format_ratio(s["textbook"], s["lazy"]),
        evaluations,
        ("yes" if row["identical"] else "NO") + f" ({', '.join(row['compared'])})",
    ]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the three measurements, print their tables, return them as plain dicts.

    torch runs with ``--threads`` threads (``0``: torch's default) and gets its former thread
    count back on return.
    """
    args = parse_args(argv)
    with torch_threads(args.threads):
        return _run(args)


def _run(args: argparse.Namespace) -> dict[str, Any]:
    load = f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "n/a"
    header = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "load_average": load,
        **vars(args),
    }
    print(
        f"torch {torch.__version__} | threads {torch.get_num_threads()} | load average {load} | "
        f"pools of {args.pool_sizes} examples x {args.tokens} tokens x d={args.dim} | "
        f"budget {args.budget} | lam {args.lam:g} | float64 | {args.repeats} repeats (median) | "
        f"seed {args.seed}"
    )
    print()

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

    print("Selection time (seconds, median):")
    print()
    columns = [
        "pool",
        "N",
        "naive s",
        "lazy s",
        "textbook s",
        "naive/lazy",
        "textbook/naive",
        "textbook/lazy",
        "gain evaluations naive / lazy / textbook",
        "identical selection",
    ]
    print(markdown_table(columns, [_timing_row(r["pool"], r) for r in timing]))
    print()

    submodlib_rows: list[dict[str, Any]] | None
    try:
        import submodlib  # noqa: F401
    except ImportError:
        submodlib_rows = None
        print("submodlib is not importable (pip install submodlib-py); peer comparison skipped.")
    else:
        submodlib_rows = []
        for size in args.pool_sizes:
            pool = realistic_pool(size, args.tokens, args.dim, args.seed)
            submodlib_rows.append(compare_submodlib(pool, args.budget, args.lam, args.repeats))
        print(
            'pooling="mean" (one row per example) against submodlib LogDeterminantFunction '
            "(dense, LazyGreedy), milliseconds (median):"
        )
        print()
        rows = [
            [
                "realistic",
                str(r["pool_size"]),
                f"{1e3 * r['ours_seconds']:.1f}",
                f"{1e3 * r['kernel_seconds']:.1f}",
                f"{1e3 * r['maximize_seconds']:.1f}",
                format_ratio(r["kernel_seconds"] + r["maximize_seconds"], r["ours_seconds"]),
                format_ratio(r["maximize_seconds"], r["ours_seconds"]),
                "yes" if r["agree"] else "NO",
                f"{r['max_gain_difference']:.1e}",
            ]
            for r in submodlib_rows
        ]
        columns = [
            "pool",
            "N",
            "ours lazy ms",
            "submodlib kernel ms",
            "submodlib maximize ms",
            "submodlib total/ours",
            "submodlib maximize/ours",
            "same selection",
            "max gain difference",
        ]
        print(markdown_table(columns, rows))
    print()

    pool = realistic_pool(largest, args.tokens, args.dim, args.seed)
    seeds = [args.seed + k for k in range(args.baseline_seeds)]
    objectives = compare_objectives(pool, args.budget, args.lam, seeds)
    print(
        f"F(S) - F(empty) at budget {args.budget} on the realistic pool of {largest} examples "
        f"(random and k-center: mean ± std over {len(seeds)} seeds; k-center on mean-pooled "
        "features):"
    )
    print()
    rows = [
        [name, f"{v['mean']:.2f} ± {v['std']:.2f}", f"{v['fraction']:.3f}"]
        for name, v in objectives.items()
    ]
    print(markdown_table(["selection", "F(S) - F(empty)", "fraction of greedy"], rows))
    return {
        "header": header,
        "timing": timing,
        "submodlib": submodlib_rows,
        "objective": objectives,
    }


if __name__ == "__main__":
    main()
