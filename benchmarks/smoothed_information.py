"""Accuracy and cost of the smoothed entropy and Gaussian-channel MI against infomeasure, on a CPU.

For ``n`` i.i.d. samples ``X_i`` of a density with known smoothed entropy and a noise level ``t``,
``Y = X + sqrt(t) Z`` with ``Z ~ N(0, I_d)``:

1. The differential entropy ``h(Y)`` (nats), three ways:

   - ``ours de Bruijn``:
   :func:`~lightning_info.methods.smoothed_information.functional.smoothed_information`, whose
     ``.entropy`` is
     :func:`~lightning_info.methods.smoothed_information.functional.smoothed_entropy` ``(X, t)``: de
     Bruijn's identity on the Gaussian KDE ``f_n * phi_t`` of the clean samples, with the noise
     level known (quadrature in 1-D, 4096 Monte Carlo draws for ``d > 1``);
   - ``ours plug-in``: ``smoothed_entropy(X, t, SmoothedEstimatorOptions(estimator="plug_in"))``,
     ``-E log f_t(Y)`` of the same density;
   - ``infomeasure KL``: ``infomeasure.entropy(Y, approach="kl", k=4)``, the Kozachenko-Leonenko
     k-NN estimator on one noisy draw ``Y_i = X_i + sqrt(t) Z_i`` per sample (the peer's natural
     input: it knows neither ``X`` nor ``t``).

2. The mutual information ``I(X; Y)`` (nats), three ways:

   - ``ours de Bruijn``: the ``.mutual_information`` of the same
     :func:`~lightning_info.methods.smoothed_information.functional.smoothed_information` call, i.e.
     :func:`~lightning_info.methods.smoothed_information.functional.smoothed_mutual_information`
     ``(X, t)``, so its time
     is the time of that one call, which returns the entropy too;
   - ``ours plug-in``: the plug-in entropy minus ``(d/2) log(2 pi e t)`` (no extra cost);
   - ``infomeasure KSG``: ``infomeasure.mutual_information(X, Y, approach="ksg", k=4)``, the
     Kraskov-Stoegbauer-Grassberger estimator (type I) on the pairs ``(X_i, Y_i)``.

The truths: for ``X ~ N(0, I_d)``, ``h(Y) = (d/2) log(2 pi e (1 + t))`` and
``I(X; Y) = (d/2) log(1 + 1/t)``; for ``X ~ Uniform[-1, 1]^d`` the coordinates of ``Y`` are
independent, so ``h(Y) = d h_1(t)`` with ``h_1`` the entropy of the 1-D density
``(Phi((y + 1) / sqrt(t)) - Phi((y - 1) / sqrt(t))) / 2``, computed by Simpson's rule on 200 001
points (:func:`uniform_smoothed_entropy`), and ``I(X; Y) = h(Y) - (d/2) log(2 pi e t)``.

Our estimators are functionals of the empirical law of ``X`` smoothed at the known ``t``: they
use information the k-NN peers do not have, and their error is that of the plug-in density
``f_n * phi_t`` (a negative bias, ``E h(f_n * phi_t) <= h(f * phi_t)`` by concavity), which
shrinks as ``t`` grows. For ``d > 1`` our cost is ``O(num_mc * n * d)`` per noise level of the
de Bruijn grid (about 10-13 levels here), so sizes above ``--mc-max-size`` are run for ``d = 1``
only.

Each estimate is one call on one seed's data; the table gives the mean absolute error and the
mean error (bias) over ``--seeds`` seeds and the median over seeds of ``time.perf_counter`` per
call, the methods interleaved on the same data; ``x de Bruijn`` is a method's median time over
that of ``ours de Bruijn`` in the same configuration. One untimed warm-up call of every method
runs first. torch runs with ``--threads`` threads, one by default (see ``benchmarks/README.md``
on shared cores); scipy's k-d trees in infomeasure use one thread. ``--json PATH`` also writes
the results with the header (``benchmarks/harness.py``).

Usage::

    python benchmarks/smoothed_information.py [--sizes 500 2000 8000] [--dims 1 2 5]
        [--times 0.25 1.0] [--seeds 2] [--mc-max-size 2000] [--num-mc 4096] [--k 4]
        [--distributions gaussian uniform] [--threads 1] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Sequence
from typing import Any

import torch
from harness import benchmark_parser, format_ratio, header, print_header, timed, write_json
from torch import Tensor

from lightning_info.core.logging import markdown_table
from lightning_info.core.threads import torch_threads
from lightning_info.methods.smoothed_information.functional import (
    SmoothedEstimatorOptions,
    smoothed_entropy,
    smoothed_information,
)

DISTRIBUTIONS = ("gaussian", "uniform")
ENTROPY_METHODS = ("ours de Bruijn", "ours plug-in", "infomeasure KL")
MI_METHODS = ("ours de Bruijn", "ours plug-in", "infomeasure KSG")
QUADRATURE_POINTS = 200_001
QUADRATURE_SDS = 12.0  # the uniform's truth integrates y up to 1 + 12 sqrt(t)


# --------------------------------------------------------------------------------------------
# Truths
# --------------------------------------------------------------------------------------------


def gaussian_entropy(dim: int, variance: float) -> float:
    """``h(N(0, variance I_d)) = (d/2) log(2 pi e variance)``, nats."""
    return 0.5 * dim * math.log(2 * math.pi * math.e * variance)


def uniform_smoothed_entropy_1d(t: float, points: int = QUADRATURE_POINTS) -> float:
    """``h(U + sqrt(t) Z)``, ``U ~ Uniform[-1, 1]``, by Simpson's rule on the exact density.

    The density ``p(y) = (Phi((y + 1) / s) - Phi((y - 1) / s)) / 2`` (``s = sqrt(t)``) is even,
    so ``h = -2 int_0^{1 + 12 s} p log p``; for ``y >= 0`` it is evaluated as
    ``(Q((y - 1) / s) - Q((y + 1) / s)) / 2`` with ``Q(z) = Phi(-z)``, in log space, which keeps
    its relative accuracy in the tail.
    """
    if points % 2 == 0:
        points += 1
    s = math.sqrt(t)
    end = 1.0 + QUADRATURE_SDS * s
    y = torch.linspace(0.0, end, points, dtype=torch.float64)
    log_upper = torch.special.log_ndtr((1.0 - y) / s)  # log Q((y - 1) / s)
    log_lower = torch.special.log_ndtr((-1.0 - y) / s)  # log Q((y + 1) / s)
    log_p = log_upper + torch.log1p(-torch.exp(log_lower - log_upper)) - math.log(2.0)
    integrand = -torch.exp(log_p) * log_p
    weights = torch.ones_like(integrand)
    weights[1:-1:2] = 4
    weights[2:-1:2] = 2
    return float(2 * (weights * integrand).sum() * (end / (points - 1)) / 3)


def true_entropy(distribution: str, dim: int, t: float) -> float:
    """``h(X + sqrt(t) Z)`` in nats for ``X ~ N(0, I_d)`` or ``Uniform[-1, 1]^d``."""
    if distribution == "gaussian":
        return gaussian_entropy(dim, 1.0 + t)
    return dim * uniform_smoothed_entropy_1d(t)


def true_mutual_information(distribution: str, dim: int, t: float) -> float:
    """``I(X; X + sqrt(t) Z) = h(X + sqrt(t) Z) - (d/2) log(2 pi e t)`` in nats."""
    if distribution == "gaussian":
        return 0.5 * dim * math.log1p(1.0 / t)
    return true_entropy(distribution, dim, t) - gaussian_entropy(dim, t)


def sample(distribution: str, size: int, dim: int, t: float, seed: int) -> tuple[Tensor, Tensor]:
    """Clean samples ``X`` (float64, ``(n, d)``) and one noisy draw ``Y = X + sqrt(t) Z`` each."""
    generator = torch.Generator().manual_seed(seed)
    if distribution == "gaussian":
        x = torch.randn(size, dim, generator=generator, dtype=torch.float64)
    else:
        x = 2 * torch.rand(size, dim, generator=generator, dtype=torch.float64) - 1
    noise = torch.randn(size, dim, generator=generator, dtype=torch.float64)
    return x, x + math.sqrt(t) * noise


# --------------------------------------------------------------------------------------------
# Estimators
# --------------------------------------------------------------------------------------------


def _runs(x: Tensor, y: Tensor, t: float, seed: int, args: argparse.Namespace) -> dict:
    """One zero-argument call per method; each returns ``(entropy, mutual information)``."""
    import infomeasure as im

    dim = x.shape[1]
    gaussian = gaussian_entropy(dim, t)
    x_np, y_np = x.numpy(), y.numpy()

    def de_bruijn() -> tuple[float, float]:
        generator = torch.Generator().manual_seed(seed)
        options = SmoothedEstimatorOptions(num_mc=args.num_mc)
        info = smoothed_information(x, t, options, generator=generator)
        return float(info.entropy), float(info.mutual_information)

    def plug_in() -> tuple[float, float]:
        generator = torch.Generator().manual_seed(seed)
        options = SmoothedEstimatorOptions(estimator="plug_in", num_mc=args.num_mc)
        h = float(smoothed_entropy(x, t, options, generator=generator))
        return h, h - gaussian

    def knn_entropy() -> tuple[float, float]:
        return float(im.entropy(y_np, approach="kl", k=args.k, base="e")), math.nan

    def ksg() -> tuple[float, float]:
        mi = im.mutual_information(x_np, y_np, approach="ksg", k=args.k, base="e")
        return math.nan, float(mi)

    return {"de_bruijn": de_bruijn, "plug_in": plug_in, "kl": knn_entropy, "ksg": ksg}


def measure(
    distribution: str, size: int, dim: int, t: float, args: argparse.Namespace
) -> dict[str, Any]:
    """Estimates, errors and median seconds of every method on one configuration, over seeds."""
    truth_h = true_entropy(distribution, dim, t)
    truth_mi = true_mutual_information(distribution, dim, t)
    seconds: dict[str, list[float]] = {k: [] for k in ("de_bruijn", "plug_in", "kl", "ksg")}
    values: dict[str, list[tuple[float, float]]] = {k: [] for k in seconds}
    for seed in range(args.seed, args.seed + args.seeds):
        x, y = sample(distribution, size, dim, t, seed)
        for name, run in _runs(x, y, t, seed, args).items():
            elapsed, value = timed(run)
            seconds[name].append(elapsed)
            values[name].append(value)
    median = {name: statistics.median(s) for name, s in seconds.items()}

    def summary(estimates: list[float], truth: float, key: str) -> dict[str, float]:
        errors = [v - truth for v in estimates]
        return {
            "mean_abs_error": statistics.fmean(abs(e) for e in errors),
            "bias": statistics.fmean(errors),
            "seconds": median[key],
            "ratio": median[key] / median["de_bruijn"],
            "estimates": estimates,
        }

    entropy_keys = dict(zip(ENTROPY_METHODS, ("de_bruijn", "plug_in", "kl")))
    mi_keys = dict(zip(MI_METHODS, ("de_bruijn", "plug_in", "ksg")))
    return {
        "distribution": distribution,
        "n": size,
        "d": dim,
        "t": t,
        "entropy_truth": truth_h,
        "mi_truth": truth_mi,
        "entropy": {
            m: summary([v[0] for v in values[k]], truth_h, k) for m, k in entropy_keys.items()
        },
        "mutual_information": {
            m: summary([v[1] for v in values[k]], truth_mi, k) for m, k in mi_keys.items()
        },
    }


def _warm_up(args: argparse.Namespace) -> None:
    """One untimed call of every method (first-call imports and allocations)."""
    for dim in sorted({1, max(args.dims)}):
        x, y = sample("gaussian", 64, dim, 1.0, 0)
        for run in _runs(x, y, 1.0, 0, args).values():
            run()


# --------------------------------------------------------------------------------------------
# Command line and tables
# --------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = benchmark_parser(
        __doc__.split("\n\n")[0], threads=1, quick_help="n = 300, d = 1, one seed (a smoke run)"
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 2000, 8000])
    parser.add_argument("--dims", type=int, nargs="+", default=[1, 2, 5])
    parser.add_argument("--times", type=float, nargs="+", default=[0.25, 1.0], help="noise t")
    parser.add_argument(
        "--seeds", type=int, default=2, help="data sets per configuration (5: about 5 min)"
    )
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument(
        "--mc-max-size",
        type=int,
        default=2000,
        help="largest n run for d > 1, where our estimators use Monte Carlo "
        "(n = 8000 costs about 12 s per call)",
    )
    parser.add_argument("--num-mc", type=int, default=4096, help="our Monte Carlo draws (d > 1)")
    parser.add_argument("--k", type=int, default=4, help="neighbours of the KL and KSG peers")
    parser.add_argument(
        "--distributions", nargs="+", choices=DISTRIBUTIONS, default=list(DISTRIBUTIONS)
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.dims, args.seeds = [300], [1], 1
    for name in ("seeds", "mc_max_size", "num_mc", "k"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if min(args.sizes) <= args.k + 1 or min(args.dims) < 1:
        parser.error("--sizes must exceed --k + 1 and --dims must be >= 1")
    if min(args.times) <= 0:
        parser.error("--times must be > 0")
    if args.threads < 0:
        parser.error("--threads must be >= 0")
    args.sizes, args.dims = sorted(set(args.sizes)), sorted(set(args.dims))
    args.times = sorted(set(args.times))
    args.distributions = [d for d in DISTRIBUTIONS if d in args.distributions]
    return args


def _milliseconds(seconds: float) -> str:
    return f"{1e3 * seconds:.0f}" if seconds >= 0.1 else f"{1e3 * seconds:.2f}"


def _rows(results: list[dict[str, Any]], quantity: str, methods: Sequence[str]) -> list[list]:
    truth_key = "entropy_truth" if quantity == "entropy" else "mi_truth"
    rows = []
    for r in results:
        for method in methods:
            s = r[quantity][method]
            rows.append(
                [
                    str(r["d"]),
                    str(r["n"]),
                    f"{r['t']:g}",
                    f"{r[truth_key]:.4f}",
                    method,
                    f"{s['mean_abs_error']:.4f}",
                    f"{s['bias']:+.4f}",
                    _milliseconds(s["seconds"]),
                    format_ratio(s["ratio"]),
                ]
            )
    return rows


def _summary(results: list[dict[str, Any]], quantity: str, methods: Sequence[str]) -> list[list]:
    """Per method: its mean absolute error averaged over all configurations, the number of
    configurations where it is within 10% of the smallest, and its geometric mean time ratio."""
    rows = []
    for m in methods:
        errors = [r[quantity][m]["mean_abs_error"] for r in results]
        near_best = sum(
            r[quantity][m]["mean_abs_error"]
            <= 1.1 * min(r[quantity][o]["mean_abs_error"] for o in methods)
            for r in results
        )
        log_ratio = statistics.fmean(math.log(r[quantity][m]["ratio"]) for r in results)
        rows.append(
            [
                m,
                f"{statistics.fmean(errors):.4f}",
                f"{near_best} / {len(results)}",
                format_ratio(math.exp(log_ratio)),
            ]
        )
    return rows


LEGEND = """\
Estimators (nats; X clean samples, Y = X + sqrt(t) Z one noisy draw per sample):
  ours de Bruijn   smoothed_information(X, t): .entropy = smoothed_entropy(X, t), \
.mutual_information = smoothed_mutual_information(X, t) (one call gives both; knows X and t)
  ours plug-in     smoothed_entropy(X, t, SmoothedEstimatorOptions(estimator="plug_in")), \
-E log f_t(Y); MI = that - (d/2) log(2 pi e t)
  infomeasure KL   im.entropy(Y, approach="kl", k={k}): Kozachenko-Leonenko k-NN entropy of Y
  infomeasure KSG  im.mutual_information(X, Y, approach="ksg", k={k}): KSG (type I) on (X_i, Y_i)
Truth:
  gaussian  X ~ N(0, I_d):         h(Y) = (d/2) log(2 pi e (1 + t)),   I(X; Y) = (d/2) log(1 + 1/t)
  uniform   X ~ Uniform[-1, 1]^d:  h(Y) = d h_1(t), h_1 by Simpson quadrature of the exact density \
(Phi((y+1)/sqrt t) - Phi((y-1)/sqrt t)) / 2,   I(X; Y) = h(Y) - (d/2) log(2 pi e t)
error = estimate - truth; mean abs error and bias over seeds; ms = median over seeds of one call; \
x de Bruijn = ms / ms of ours de Bruijn (same configuration, same run)"""


def _run(args: argparse.Namespace) -> dict[str, Any]:
    try:
        import infomeasure
    except ImportError as error:
        raise SystemExit(
            "benchmarks/smoothed_information.py compares against infomeasure: "
            "pip install infomeasure"
        ) from error

    head = header(args)
    load = head["load_average"]
    print_header(
        head,
        f"infomeasure {infomeasure.__version__}",
        f"n {args.sizes} (d > 1: n <= {args.mc_max_size}) x d {args.dims} x t {args.times}",
        f"{args.seeds} seeds from {args.seed}",
        f"num_mc {args.num_mc}",
        f"k {args.k}",
        "float64",
    )
    print()
    print(LEGEND.format(k=args.k))
    print()
    start = time.perf_counter()
    _warm_up(args)
    results = {}
    for distribution in args.distributions:
        results[distribution] = [
            measure(distribution, size, dim, t, args)
            for dim in args.dims
            for size in args.sizes
            if dim == 1 or size <= args.mc_max_size
            for t in args.times
        ]
    columns = ["d", "n", "t", "truth", "estimator", "mean abs error", "bias", "ms", "x de Bruijn"]
    summary_columns = [
        "estimator",
        "mean abs error (average)",
        "within 10% of the best",
        "x de Bruijn (geometric mean)",
    ]
    for quantity, methods, title in (
        ("entropy", ENTROPY_METHODS, "Entropy h(X + sqrt(t) Z)"),
        ("mutual_information", MI_METHODS, "Mutual information I(X; X + sqrt(t) Z)"),
    ):
        for distribution, rows in results.items():
            print(f"{title}, X {distribution}:")
            print()
            print(markdown_table(columns, _rows(rows, quantity, methods)))
            print()
        every = [r for rows in results.values() for r in rows]
        print(f"{title}, all {len(every)} configurations:")
        print()
        print(markdown_table(summary_columns, _summary(every, quantity, methods)))
        print()
    elapsed = time.perf_counter() - start
    print(f"measured in {elapsed:.1f} s")
    result = {"header": {"load_average": load, **vars(args)}, "results": results}
    if args.json:
        write_json(args.json, head, result)
    return result


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the measurements, print the tables, return them as plain dicts.

    Needs infomeasure (``pip install infomeasure``). torch runs with ``--threads`` threads
    (``0``: torch's default) and gets its former thread count back on return.
    """
    args = parse_args(argv)
    with torch_threads(args.threads):
        return _run(args)


if __name__ == "__main__":
    main()
