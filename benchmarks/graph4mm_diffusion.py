"""Graph4MM's hop-diffused attention applied to node features: K sparse products against dense
products, the dense matrix power and the closed-form solve.

For each ``N`` in ``--sizes`` (64, 256, 1024, 4096) the script draws one graph ``G``: every
unordered pair of distinct nodes is an edge with probability ``--degree / (N - 1)`` (average
degree 8), symmetric, no self loops; ``E`` counts its directed entries (twice the edges).
Attention weights ``S`` are a row softmax of standard normal logits, the transition is
``T = masked_transition(S, G)`` (row-stochastic on the edges; a node without edges gets a self
loop) and the values ``V`` are ``(N, --dim)`` standard normal, ``--dim`` 64. With
``theta = ppr_weights(--alpha, --steps)`` (0.1, 4, the remainder ``(1 - alpha)^K`` on ``T^K``)
four ways compute the diffused features:

- ``sparse products``: ``diffuse(T_csr, V, theta)``, ``T`` as a ``torch.sparse_csr_tensor``
  holding only its nonzero entries (``E``, plus one per isolated node) with int32 indices (the
  CPU kernel works on int32 indices and converts int64 ones on every product): ``K`` sparse-dense
  products, ``O(K E D)``.
- ``dense products``: the same ``diffuse`` with dense ``T``, as ``HopDiffusedAttention`` runs
  it: ``K`` dense ``(N, N) x (N, D)`` products, ``O(K N^2 D)``.
- ``dense power``: the matrix ``A = sum_i theta_i T^i`` of the paper's equation formed densely
  (the running power ``P <- P T`` accumulated into ``A`` in place, ``K - 1`` ``(N, N) x (N, N)``
  products, ``O(K N^3)``), then ``A V``.
- ``solve``: the ``K -> infinity`` limit ``alpha (I - (1 - alpha) T)^-1 V`` by
  ``torch.linalg.solve`` (an LU factorisation, ``O(N^3)``). It is not the truncated series, so
  it is checked against a 200-step series instead.

Before timing, the script computes every way in float64 and asserts that the three truncated
ways agree (max abs difference <= 1e-9 relative to the largest entry) and that the solve matches
``diffuse`` over 200 steps (<= 1e-6); the float32 results, from the memory run below, must agree
with the float64 ones to 1e-4 relative.

Timing (float32): seconds are the median of ``--repeats`` (5) samples from
``median_time`` (``benchmarks/harness.py``); a sample runs the way enough times to last about
20 ms (one call when a call takes longer) and is divided by that count, so microsecond calls at
small ``N`` are not dominated by the timer. Ratios are each way's seconds over the sparse
products'.

Memory: the peak extra memory of one float32 call of each way, measured with
``torch.profiler.profile(activities=[ProfilerActivity.CPU], profile_memory=True)``: the
allocation and free records of that call, in time order, are summed and the largest running sum
is kept. The inputs (``T``, ``V``) are held before the call and not counted; the output is. The
profiler sees every allocation made through torch's CPU allocator, which is every tensor, but not
buffers that MKL or LAPACK allocate inside a kernel (GEMM packing buffers, sparse-kernel
handles), so the numbers are the tensor memory each way needs, a lower bound on what the process
holds. The table also gives the bytes of ``T`` itself in each layout.

Torch runs with ``--threads`` threads (default 1). ``--quick``: ``N`` = 32 and 64, one repeat.
``--json PATH`` also writes the results with the header (``benchmarks/harness.py``).

Usage::

    python benchmarks/graph4mm_diffusion.py [--quick] [--sizes 64 256 1024 4096] [--dim 64]
        [--degree 8] [--alpha 0.1] [--steps 4] [--repeats 5] [--threads 1] [--seed 0]
        [--json PATH]
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable

import torch
from harness import benchmark_parser, format_ratio, header, median_time, print_header, write_json
from torch import Tensor
from torch.profiler import ProfilerActivity, profile

from lightning_info.core.logging import markdown_table
from lightning_info.methods.graph4mm.functional import diffuse, masked_transition, ppr_weights

WAYS = ("sparse", "dense", "power", "solve")
NAMES = {
    "sparse": "sparse products",
    "dense": "dense products",
    "power": "dense power",
    "solve": "solve",
}
SERIES_STEPS = 200
SAMPLE_SECONDS = 0.02


def parse(args=None) -> argparse.Namespace:
    parser = benchmark_parser(__doc__.split("\n\n")[0], threads=1)
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1024, 4096])
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--degree", type=float, default=8.0)
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parsed = parser.parse_args(args)
    if parsed.quick:
        parsed.sizes, parsed.repeats = [32, 64], 1
    if min(parsed.sizes) < 2 or not 0 < parsed.degree <= min(parsed.sizes) - 1:
        parser.error("--degree must be in (0, N - 1] for every N in --sizes")
    if not 0 < parsed.alpha <= 1 or parsed.steps < 1 or parsed.dim < 1:
        parser.error("--alpha must be in (0, 1], --steps and --dim at least 1")
    return parsed


def random_graph(n: int, degree: float, generator: torch.Generator) -> Tensor:
    """A symmetric ``(n, n)`` bool adjacency without self loops, each pair an edge with
    probability ``degree / (n - 1)``."""
    upper = (torch.rand(n, n, generator=generator) < degree / (n - 1)).triu(1)
    return upper | upper.T


def sparse_csr(dense: Tensor) -> Tensor:
    """``dense`` as a CSR tensor of its nonzero entries, int32 indices."""
    csr = dense.to_sparse_csr()
    return torch.sparse_csr_tensor(
        csr.crow_indices().to(torch.int32),
        csr.col_indices().to(torch.int32),
        csr.values(),
        csr.shape,
        check_invariants=True,
    )


def power_series(transition: Tensor, values: Tensor, weights: Tensor) -> Tensor:
    """``(sum_i w_i T^i) V`` with the ``(N, N)`` matrix formed first (at least two weights, as
    :func:`ppr_weights` gives): the running power ``P`` is multiplied by ``T`` once per hop and
    added into ``A`` in place."""
    weights = weights.tolist()
    matrix = transition * weights[1]
    matrix.diagonal().add_(weights[0])
    power = transition
    for w in weights[2:]:
        power = power @ transition
        matrix.add_(power, alpha=w)
    del power  # the last power is not needed for the product with V
    return matrix @ values


def closed_form(transition: Tensor, values: Tensor, alpha: float) -> Tensor:
    """``alpha (I - (1 - alpha) T)^-1 V``, the limit of the series as ``K`` grows."""
    system = torch.eye(transition.shape[-1], dtype=transition.dtype)
    system.sub_(transition, alpha=1.0 - alpha)
    return torch.linalg.solve(system, alpha * values)


def ways_for(transition: Tensor, sparse: Tensor, values: Tensor, alpha: float, steps: int):
    """The four ways as callables on ``T`` (dense and CSR) and ``V`` of one dtype."""
    weights = ppr_weights(alpha, steps).to(values.dtype)
    return {
        "sparse": lambda: diffuse(sparse, values, weights),
        "dense": lambda: diffuse(transition, values, weights),
        "power": lambda: power_series(transition, values, weights),
        "solve": lambda: closed_form(transition, values, alpha),
    }


def peak_bytes(fn: Callable[[], Tensor]) -> tuple[int, Tensor]:
    """The largest running sum of the bytes allocated and freed while ``fn`` runs (through
    torch's CPU allocator, as the profiler records it), and ``fn()``."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = fn()
    records = sorted(
        (event.start_ns(), event.nbytes())
        for event in prof.profiler.kineto_results.events()
        if event.name() == "[memory]"
    )
    running = peak = 0
    for _, nbytes in records:
        running += nbytes
        peak = max(peak, running)
    return peak, result


def sampled_seconds(fn: Callable[[], Tensor], repeats: int) -> float:
    """Median seconds per call over ``repeats`` samples of about ``SAMPLE_SECONDS`` each."""
    start = time.perf_counter()
    fn()
    calls = max(1, int(SAMPLE_SECONDS / max(time.perf_counter() - start, 1e-9)))

    def sample() -> None:
        for _ in range(calls):
            fn()

    return median_time(sample, repeats)[0] / calls


def check(transition: Tensor, values: Tensor, alpha: float, steps: int) -> dict:
    """Every way's result from float64 ``T`` and ``V``, asserted to agree (module docstring)."""
    sparse = sparse_csr(transition)
    ways = ways_for(transition, sparse, values, alpha, steps)
    results = {name: way() for name, way in ways.items()}
    scale = float(results["sparse"].abs().max())
    truncated = max(
        float((results[name] - results["sparse"]).abs().max()) for name in ("dense", "power")
    )
    assert truncated <= 1e-9 * scale, f"the truncated series differ by {truncated:.1e}"
    series = diffuse(sparse, values, ppr_weights(alpha, SERIES_STEPS))
    solve = float((results["solve"] - series).abs().max())
    assert solve <= 1e-6, f"the solve differs from a {SERIES_STEPS}-step series by {solve:.1e}"
    return {"results": results, "truncated": truncated, "solve": solve, "scale": scale}


def measure(n: int, options: argparse.Namespace) -> dict:
    generator = torch.Generator().manual_seed(options.seed + n)
    adjacency = random_graph(n, options.degree, generator)
    scores = torch.softmax(torch.randn(n, n, generator=generator, dtype=torch.float64), -1)
    transition64 = masked_transition(scores[None], adjacency)[0]
    values64 = torch.randn(n, options.dim, generator=generator, dtype=torch.float64)
    checked = check(transition64, values64, options.alpha, options.steps)
    transition, values = transition64.float(), values64.float()
    sparse = sparse_csr(transition)
    ways = ways_for(transition, sparse, values, options.alpha, options.steps)
    memory, gap = {}, 0.0
    for name, way in ways.items():
        memory[name], result = peak_bytes(way)
        reference = checked["results"][name]
        gap = max(gap, float((result.double() - reference).abs().max()) / checked["scale"])
    assert gap <= 1e-4, f"float32 and float64 results differ by {gap:.1e} (relative)"
    seconds = {name: sampled_seconds(way, options.repeats) for name, way in ways.items()}
    return {
        "n": n,
        "edges": int(adjacency.sum()),
        "isolated": int((adjacency.sum(-1) == 0).sum()),
        "nnz": int(sparse.values().numel()),
        "seconds": seconds,
        "ratio": {name: seconds[name] / seconds["sparse"] for name in WAYS},
        "peak_bytes": memory,
        "transition_bytes": {
            "sparse": sum(
                t.numel() * t.element_size()
                for t in (sparse.crow_indices(), sparse.col_indices(), sparse.values())
            ),
            "dense": transition.numel() * transition.element_size(),
        },
        "max_difference": checked["truncated"],
        "solve_difference": checked["solve"],
        "float32_difference": gap,
    }


def milliseconds(seconds: float) -> str:
    value = 1e3 * seconds
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.3g}"


def main(args=None) -> list[dict]:
    options = parse(args)
    if options.threads > 0:
        torch.set_num_threads(options.threads)
    head = header(options)
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    results = [measure(n, options) for n in options.sizes]
    rows = [
        [f"{r['n']:,}", f"{r['edges']:,}"]
        + [milliseconds(r["seconds"][name]) for name in WAYS]
        + [format_ratio(r["seconds"][name], r["seconds"]["sparse"]) for name in WAYS[1:]]
        + [mib(r["peak_bytes"][name]) for name in WAYS]
        + [f"{mib(r['transition_bytes']['sparse'])} / {mib(r['transition_bytes']['dense'])}"]
        for r in results
    ]
    columns = (
        ["N", "E"]
        + [f"{NAMES[name]} ms" for name in WAYS]
        + [f"{NAMES[name]} / sparse" for name in WAYS[1:]]
        + [f"{NAMES[name]} peak MiB" for name in WAYS]
        + ["T MiB sparse / dense"]
    )
    print_header(
        head,
        f"D {options.dim}",
        f"average degree {options.degree:g}",
        f"alpha {options.alpha:g}",
        f"K {options.steps}",
        f"float32, median of {options.repeats}",
    )
    print(
        "check (float64): truncated ways agree to "
        f"{max(r['max_difference'] for r in results):.1e}, solve vs {SERIES_STEPS}-step series "
        f"{max(r['solve_difference'] for r in results):.1e}, float32 vs float64 "
        f"{max(r['float32_difference'] for r in results):.1e} (relative)"
    )
    print(markdown_table(columns, rows))
    if options.json:
        write_json(options.json, head, results)
    return results


if __name__ == "__main__":
    main()
