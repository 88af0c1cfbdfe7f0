"""Cost and accuracy of the diffusion Fisher's trace and matrix-vector product, on a CPU.

For a data set of ``N`` points in ``R^d`` (i.i.d. ``N(0, I)``) noised by the VP schedule at time
``--t``, and ``--batch`` query points ``x = alpha_t y_i + sigma_t eps``:

1. ``tr F(x)``, ``F = -Hessian log q_t``, four ways:

   - ``DF``: :func:`~lightning_info.methods.diffusion_fisher.functional.diffusion_fisher_trace`,
   one streamed pass
     over the data, ``d / sigma^2 - (alpha^2 / sigma^4) (E_w||y||^2 - ||y_hat||^2)``;
   - ``autograd exact``: the Hessian diagonal by autograd, the score by one backward with
     ``create_graph=True`` and then one backward per coordinate (``d`` in all);
   - ``Hutchinson 1`` / ``Hutchinson 10``: ``-eps^T H eps`` with 1 or 10 Rademacher probes, each a
     Hessian-vector product by double backward (Skilling-Hutchinson).

2. ``F v`` for one random ``v`` per point, two ways:

   - ``DF``: :func:`~lightning_info.methods.diffusion_fisher.functional.diffusion_fisher_mvp`, one
   pass,
     ``v / sigma^2 - (alpha^2 / sigma^4) (E_w[y (y^T v)] - y_hat (y_hat^T v))``;
   - ``autograd HVP``: ``-H v`` by double backward through ``log q_t``.

Every method runs in ``--dtype`` (float32 by default); accuracy is the relative error
``||estimate - reference||_2 / ||reference||_2`` over the batch against the DF formula in float64,
which the tests check against ``torch.autograd.functional.hessian`` to 1e-10. Times are medians
over ``--repeats`` runs of ``time.perf_counter`` after one untimed warm-up, the methods
interleaved; ``x DF`` is a method's time over DF's in the same run. torch runs with ``--threads``
threads, one by default (see ``benchmarks/README.md`` on shared cores). ``--json PATH`` also
writes the results with the header (``benchmarks/harness.py``).

Usage::

    python benchmarks/diffusion_fisher.py [--sizes 256 1024 4096] [--dims 2 16 64]
        [--batch 128] [--t 0.5] [--repeats 5] [--seed 0] [--dtype float32] [--threads 1]
        [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from harness import benchmark_parser, format_ratio, header, print_header, timed, write_json
from torch import Tensor

from lightning_info.core.logging import markdown_table
from lightning_info.core.threads import torch_threads
from lightning_info.diffusion.noise_schedules import VPSchedule
from lightning_info.methods.diffusion_fisher.functional import (
    diffusion_fisher_mvp,
    diffusion_fisher_trace,
    diffusion_log_density,
)

TRACE_METHODS = ("DF", "autograd exact", "Hutchinson 1", "Hutchinson 10")
MVP_METHODS = ("DF", "autograd HVP")


def _score_graph(x: Tensor, data: Tensor, alpha: float, sigma: float) -> tuple[Tensor, Tensor]:
    """A leaf copy of ``x`` and the score at it, with the graph kept for second derivatives."""
    point = x.detach().requires_grad_(True)
    log_q = diffusion_log_density(point, data, alpha, sigma)
    (score,) = torch.autograd.grad(log_q.sum(), point, create_graph=True)
    return point, score


def autograd_trace(x: Tensor, data: Tensor, alpha: float, sigma: float) -> Tensor:
    """``tr F = -sum_j d s_j / d x_j``, one backward per coordinate (the points are independent)."""
    point, score = _score_graph(x, data, alpha, sigma)
    total = torch.zeros(x.shape[0], dtype=x.dtype)
    for j in range(x.shape[1]):
        (row,) = torch.autograd.grad(score[:, j].sum(), point, retain_graph=j < x.shape[1] - 1)
        total = total - row[:, j]
    return total


def hutchinson_trace(x: Tensor, data: Tensor, alpha: float, sigma: float, probes: Tensor) -> Tensor:
    """``-mean_k eps_k^T H eps_k`` with Hessian-vector products by double backward."""
    point, score = _score_graph(x, data, alpha, sigma)
    total = torch.zeros(x.shape[0], dtype=x.dtype)
    for k, eps in enumerate(probes):
        (hvp,) = torch.autograd.grad(
            (score * eps).sum(), point, retain_graph=k < probes.shape[0] - 1
        )
        total = total - (hvp * eps).sum(1)
    return total / probes.shape[0]


def autograd_mvp(x: Tensor, v: Tensor, data: Tensor, alpha: float, sigma: float) -> Tensor:
    """``F v = -H v`` by double backward."""
    point, score = _score_graph(x, data, alpha, sigma)
    (hvp,) = torch.autograd.grad((score * v).sum(), point)
    return -hvp


def _relative_error(estimate: Tensor, reference: Tensor) -> float:
    estimate = estimate.detach().to(torch.float64)
    return float(
        torch.linalg.vector_norm(estimate - reference) / torch.linalg.vector_norm(reference)
    )


def _time(runs: dict[str, Callable[[], Tensor]], repeats: int) -> tuple[dict, dict]:
    """Median seconds and the last result of each run, after one warm-up, interleaved."""
    results = {name: run() for name, run in runs.items()}
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            elapsed, results[name] = timed(run)
            seconds[name].append(elapsed)
    return {name: statistics.median(s) for name, s in seconds.items()}, results


def measure(
    size: int, dim: int, batch: int, t: float, repeats: int, seed: int, dtype: torch.dtype
) -> dict[str, Any]:
    """Times and errors of every method on one ``(N, d)`` configuration."""
    generator = torch.Generator().manual_seed(seed)
    schedule = VPSchedule()
    alpha, sigma = float(schedule.alpha(t)), float(schedule.sigma(t))
    data64 = torch.randn(size, dim, generator=generator, dtype=torch.float64)
    index = torch.randint(0, size, (batch,), generator=generator)
    x64 = alpha * data64[index] + sigma * torch.randn(
        batch, dim, generator=generator, dtype=torch.float64
    )
    v64 = torch.randn(batch, dim, generator=generator, dtype=torch.float64)
    probes64 = torch.sign(torch.randn(10, batch, dim, generator=generator, dtype=torch.float64))
    data, x, v, probes = (a.to(dtype) for a in (data64, x64, v64, probes64))

    trace_runs = {
        "DF": lambda: diffusion_fisher_trace(x, data, alpha, sigma),
        "autograd exact": lambda: autograd_trace(x, data, alpha, sigma),
        "Hutchinson 1": lambda: hutchinson_trace(x, data, alpha, sigma, probes[:1]),
        "Hutchinson 10": lambda: hutchinson_trace(x, data, alpha, sigma, probes),
    }
    mvp_runs = {
        "DF": lambda: diffusion_fisher_mvp(x, v, data, alpha, sigma),
        "autograd HVP": lambda: autograd_mvp(x, v, data, alpha, sigma),
    }
    trace_seconds, traces = _time(trace_runs, repeats)
    mvp_seconds, products = _time(mvp_runs, repeats)
    reference_trace = diffusion_fisher_trace(x64, data64, alpha, sigma)
    reference_mvp = diffusion_fisher_mvp(x64, v64, data64, alpha, sigma)
    return {
        "N": size,
        "d": dim,
        "alpha": alpha,
        "sigma": sigma,
        "trace_seconds": trace_seconds,
        "trace_error": {m: _relative_error(traces[m], reference_trace) for m in TRACE_METHODS},
        "mvp_seconds": mvp_seconds,
        "mvp_error": {m: _relative_error(products[m], reference_mvp) for m in MVP_METHODS},
    }


def _rows(results: list[dict[str, Any]], kind: str, methods: Sequence[str]) -> list[list[str]]:
    rows = []
    for r in results:
        seconds, errors = r[f"{kind}_seconds"], r[f"{kind}_error"]
        for method in methods:
            rows.append(
                [
                    str(r["N"]),
                    str(r["d"]),
                    method,
                    f"{1e3 * seconds[method]:.2f}",
                    format_ratio(seconds[method], seconds["DF"]),
                    f"{errors[method]:.1e}",
                ]
            )
    return rows


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = benchmark_parser(
        __doc__.split("\n\n")[0],
        threads=1,
        quick_help="N = 64, d in {2, 8}, batch 16, 1 repeat (a smoke run)",
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 16, 64])
    parser.add_argument("--batch", type=int, default=128, help="query points")
    parser.add_argument("--t", type=float, default=0.5, help="VP time of the query points")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.dims, args.batch, args.repeats = [64], [2, 8], 16, 1
    if min(args.sizes) < 1 or min(args.dims) < 1 or args.batch < 1 or args.repeats < 1:
        parser.error("--sizes, --dims, --batch and --repeats must be >= 1")
    if args.threads < 0:
        parser.error("--threads must be >= 0")
    schedule = VPSchedule()
    if not schedule.t_min <= args.t <= schedule.t_max:
        parser.error(f"--t must lie in [{schedule.t_min}, {schedule.t_max}]")
    args.sizes, args.dims = sorted(set(args.sizes)), sorted(set(args.dims))
    return args


def _run(args: argparse.Namespace) -> dict[str, Any]:
    head = header(args)
    load = head["load_average"]
    dtype = getattr(torch, args.dtype)
    schedule = VPSchedule()
    alpha, sigma = float(schedule.alpha(args.t)), float(schedule.sigma(args.t))
    print_header(
        head,
        f"N {args.sizes} x d {args.dims}",
        f"batch {args.batch}",
        f"VP t={args.t:g} (alpha {alpha:.3f}, sigma {sigma:.3f})",
        args.dtype,
        f"{args.repeats} repeats (median)",
        f"seed {args.seed}",
    )
    print()
    start = time.perf_counter()
    results = [
        measure(size, dim, args.batch, args.t, args.repeats, args.seed, dtype)
        for size in args.sizes
        for dim in args.dims
    ]
    columns = ["N", "d", "method", "ms", "x DF", "relative error"]
    print("tr F at the batch (relative error vs the float64 DF formula):")
    print()
    print(markdown_table(columns, _rows(results, "trace", TRACE_METHODS)))
    print()
    print("F v at the batch, one v per point (relative error vs the float64 DF formula):")
    print()
    print(markdown_table(columns, _rows(results, "mvp", MVP_METHODS)))
    elapsed = time.perf_counter() - start
    print()
    print(f"measured in {elapsed:.1f} s")
    result = {"header": {"load_average": load, **vars(args)}, "results": results}
    if args.json:
        write_json(args.json, head, result)
    return result


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the measurements, print the two tables, return them as plain dicts.

    torch runs with ``--threads`` threads (``0``: torch's default) and gets its former thread
    count back on return.
    """
    args = parse_args(argv)
    with torch_threads(args.threads):
        return _run(args)


if __name__ == "__main__":
    main()
