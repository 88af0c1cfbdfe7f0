"""FisherSFT selection from a pool on disk: a synthetic pool written to a FeatureStore chunk by
chunk, then the selection from it, on a CPU.

For each ``N`` of ``--sizes`` (one fresh process each, so that its peak memory is its own):

1. ``write``: ``N`` candidates of ``--tokens`` token rows at width ``--dim``, generated and
   sketched to ``--sketch-dim`` columns ``--chunk`` candidates at a time (:func:`pool_chunks`),
   each chunk appended to a :class:`~lightning_info.methods.fisher_sft.feature_store.FeatureStore`
   in ``--store-dir`` (default: a temporary folder, deleted afterwards);
2. ``lazy float64``: :func:`~lightning_info.methods.fisher_sft.functional.fisher_greedy_select` on
   the memory-mapped pool (``store.blocks()``), which computes on a float64 copy of it: the
   centralised lazy greedy, the reference of every ratio;
3. ``lazy float32``: the same greedy with ``dtype=torch.float32`` on the map itself (no copy);
4. ``GreeDi serial``: :func:`~lightning_info.methods.fisher_sft.dask_select.store_two_round_select`
   over ``--shards`` contiguous shards, one read into memory at a time;
5. ``Dask, W workers`` for each W of ``--workers``:
   :func:`~lightning_info.methods.fisher_sft.dask_select.dask_two_round_select` on a
   ``distributed.LocalCluster`` of W worker processes, one thread each, torch threads
   ``--threads / W`` each (the cluster is started and warmed up untimed; its start is reported).

Every selection's ``F(S)`` is recomputed in float64 from its picks (``log_det_objective``) and
reported as ``(F(S) - F(empty)) / (F(lazy float64) - F(empty))`` with the picks it shares with
the reference. Peak memory is the process's resident high-water mark beyond what it held before
the stage (``VmHWM`` reset, Linux; pages of the memory map read count while they are mapped); for
Dask, that of the client process and of the largest worker.

The features: ``x_{i,t} = s_i (c_i + 0.5 e_{i,t}) W + 0.1 n_{i,t}``, a rank-64 latent part (centre
``c_i`` and token noise ``e_{i,t}`` standard normal, log-normal scale ``s_i = exp(0.5 u_i)``) times
a fixed ``64 x d`` matrix whose rows decay from 1 to 1e-2, formed at full width and sketched, plus
isotropic noise drawn directly in the sketched space with the law of sketched ``d``-wide noise;
the law and seeds of ``sketched_scale_pool`` in ``benchmarks/fisher_sft_selection.py``.

``--quick``: one pool of 3,000 candidates at ``d = 64``, ``k = 16``, 20 picks, 4 shards, one
in-process (threaded) Dask worker: a run of seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from harness import (
    benchmark_parser,
    header,
    peak_memory,
    print_header,
    run_measurement,
    write_json,
)

from lightning_info.core.blocks import TokenBlocks
from lightning_info.core.dask_cluster import local_cluster
from lightning_info.methods.fisher_sft.dask_select import (
    dask_two_round_select,
    store_two_round_select,
)
from lightning_info.methods.fisher_sft.feature_store import FeatureStore
from lightning_info.methods.fisher_sft.functional import (
    FeatureSketch,
    Selection,
    fisher_greedy_select,
    gaussian_sketch,
    log_det_objective,
)

RANK = 64
NOISE = 0.1
LATENT_DECAY = 1e-2
SCALE_SIGMA = 0.5
TOKEN_NOISE = 0.5


def _tagged_generator(seed: int, *tags: int) -> torch.Generator:
    entropy = np.random.SeedSequence([seed, *tags]).generate_state(1)[0]
    return torch.Generator().manual_seed(int(entropy))


def pool_chunks(
    pool_size: int,
    sketch: FeatureSketch,
    *,
    tokens: int = 4,
    dim: int = 4096,
    rank: int = RANK,
    chunk: int = 20000,
    seed: int = 0,
) -> Iterator[TokenBlocks]:
    """The pool of the module's docstring, ``chunk`` candidates at a time, each a
    :class:`TokenBlocks` of ``tokens`` rows per candidate at ``sketch.sketch_dim`` columns
    (float32). Only one ``(chunk * tokens, dim)`` block is ever held; chunks are seeded by their
    first index, so a larger pool extends a smaller one whose size is a multiple of ``chunk``."""
    k = sketch.sketch_dim
    matrix = gaussian_sketch(dim, k, sketch.seed, torch.float64)
    eigenvalues, eigenvectors = torch.linalg.eigh(matrix.T @ matrix)
    noise_factor = (eigenvectors * eigenvalues.clamp(min=0).sqrt()).T.to(torch.float32)
    decay = LATENT_DECAY ** (1 / max(rank - 1, 1))
    loading = torch.randn(rank, dim, generator=_tagged_generator(seed, 1, 0)) / math.sqrt(rank)
    loading *= (decay ** torch.arange(rank, dtype=torch.float32)).unsqueeze(1)
    for start in range(0, pool_size, chunk):
        count = min(chunk, pool_size - start)
        generator = _tagged_generator(seed, 2, start)
        scales = torch.exp(SCALE_SIGMA * torch.randn(count, 1, 1, generator=generator))
        centre = torch.randn(count, 1, rank, generator=generator)
        latent = scales * (
            centre + TOKEN_NOISE * torch.randn(count, tokens, rank, generator=generator)
        )
        wide = latent.reshape(count * tokens, rank) @ loading
        noise = torch.randn(count * tokens, k, generator=generator) @ noise_factor
        values = sketch(wide) + NOISE * noise
        del wide
        offsets = torch.arange(0, count * tokens + 1, tokens, dtype=torch.long)
        yield TokenBlocks(values, offsets)


def write_store(path: Path, spec: dict[str, Any]) -> FeatureStore:
    sketch = FeatureSketch(spec["sketch_dim"], spec["seed"])
    store = FeatureStore.create(path, sketch=sketch, overwrite=True)
    for part in pool_chunks(
        spec["pool_size"],
        sketch,
        tokens=spec["tokens"],
        dim=spec["dim"],
        chunk=spec["chunk"],
        seed=spec["seed"],
    ):
        store.append(part)
    return store


def _objective(store: FeatureStore, selection: Selection, lam: float) -> float:
    """``F(S)`` in float64 from the picks alone."""
    picks, _ = store.take(selection.indices)
    return log_det_objective(picks, range(len(picks)), lam)


def _worker_peak_reset() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def _worker_peak_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return 1024 * int(line.split()[1])
    return 0


def _dask_cell(store: FeatureStore, spec: dict[str, Any], workers: int) -> dict[str, Any]:
    import distributed

    threads = max(1, spec["threads"] // workers)
    cluster_seconds, cluster, _ = peak_memory(
        lambda: local_cluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=spec["processes"],
            dashboard_address=None,
        )
    )
    with cluster, distributed.Client(cluster) as client:
        if spec["processes"]:
            client.run(torch.set_num_threads, threads)
        warm = Path(spec["store"]).with_name("warm-up")
        write_store(warm, {**spec, "pool_size": 64, "dim": 64, "chunk": 64})
        dask_two_round_select(warm, 3, workers, client)  # imports and first kernel calls
        if spec["processes"]:
            client.run(_worker_peak_reset)
        budget, shards, lam = spec["budget"], spec["shards"], spec["lam"]
        seconds, selection, extra = peak_memory(
            lambda: dask_two_round_select(store.path, budget, shards, client, lam=lam)
        )
        worker_peak = max(client.run(_worker_peak_bytes).values()) if spec["processes"] else None
        running = len(client.scheduler_info()["workers"])
    return {
        "seconds": seconds,
        "peak_bytes": extra,
        "worker_peak_bytes": worker_peak,
        "cluster_seconds": cluster_seconds,
        "workers_running": running,
        "selection": selection,
    }


def measure(spec: dict[str, Any]) -> None:
    """One pool size in this (fresh) process; one JSON line per stage (the last holds all)."""
    torch.set_num_threads(spec["threads"])
    path = Path(spec["store"])
    warm = write_store(path.with_name("warm-up"), {**spec, "pool_size": 64, "dim": 64, "chunk": 64})
    fisher_greedy_select(warm.blocks(), 3)  # first calls of the BLAS/LAPACK kernels, untimed
    store_two_round_select(warm, 3, 2)
    out: dict[str, Any] = {**spec, "cells": {}}

    def report(**fields: Any) -> None:
        out.update(fields)
        print(json.dumps(out), flush=True)

    seconds, store, extra = peak_memory(lambda: write_store(path, spec))
    report(write_seconds=seconds, write_peak_bytes=extra, store_bytes=store.nbytes)
    budget, lam, shards = spec["budget"], spec["lam"], spec["shards"]
    empty = store.dim * math.log(lam)
    reference: Selection | None = None

    def cell(name: str, seconds: float, selection: Selection, extra: int | None, **more) -> None:
        nonlocal reference
        objective = _objective(store, selection, lam)
        if reference is None:
            reference = selection
            out["reference_objective"] = objective
        ratio = (objective - empty) / (out["reference_objective"] - empty)
        common = len(set(selection.indices) & set(reference.indices))
        out["cells"][name] = {
            "seconds": seconds,
            "peak_bytes": extra,
            "objective": objective,
            "ratio": ratio,
            "common": common,
            **more,
        }
        report()

    def lazy(dtype: torch.dtype) -> Selection:
        return fisher_greedy_select(FeatureStore.open(path).blocks(), budget, lam=lam, dtype=dtype)

    seconds, selection, extra = peak_memory(lambda: lazy(torch.float64))
    cell("lazy float64", seconds, selection, extra)
    try:  # float32 Woodbury downdates: reported, not assumed, to stay accurate
        seconds, selection, extra = peak_memory(lambda: lazy(torch.float32))
        cell("lazy float32", seconds, selection, extra)
    except (RuntimeError, ValueError) as error:  # e.g. a Cholesky factor that fails in float32
        out.setdefault("errors", {})["lazy float32"] = str(error)[:300]
        report()
    seconds, selection, extra = peak_memory(
        lambda: store_two_round_select(path, budget, shards, lam=lam)
    )
    cell("GreeDi serial", seconds, selection, extra)
    for workers in spec["workers"]:
        result = _dask_cell(store, spec, workers)
        selection = result.pop("selection")
        seconds, extra = result.pop("seconds"), result.pop("peak_bytes")
        name = f"Dask, {workers} worker{'s' * (workers > 1)}"
        cell(name, seconds, selection, extra, **result)
    shutil.rmtree(path.with_name("warm-up"), ignore_errors=True)


def _gb(value: int | None) -> str:
    return "-" if value is None else f"{value / 1e9:.2f}"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = benchmark_parser(__doc__.split("\n\n")[0], threads=2)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--budget", type=int, default=500)
    parser.add_argument("--dim", type=int, default=4096, help="width before the sketch")
    parser.add_argument("--sketch-dim", type=int, default=128)
    parser.add_argument("--tokens", type=int, default=4)
    parser.add_argument("--chunk", type=int, default=20000, help="candidates per append")
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 2])
    parser.add_argument("--lam", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--store-dir", default=None, help="where the stores go (default: temp)")
    parser.add_argument("--measure", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.processes = True
    if args.quick:
        args.sizes, args.budget, args.dim, args.sketch_dim = [3000], 20, 64, 16
        args.chunk, args.shards, args.workers, args.processes = 500, 4, [1], False
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.measure is not None:
        measure(json.loads(args.measure))
        return {}
    if args.threads:
        torch.set_num_threads(args.threads)
    head = header(args)
    folder = Path(args.store_dir or tempfile.mkdtemp(prefix="fisher-sft-stores-"))
    rows = []
    try:
        for size in args.sizes:
            spec = {
                "pool_size": size,
                "dim": args.dim,
                "sketch_dim": args.sketch_dim,
                "tokens": args.tokens,
                "chunk": args.chunk,
                "budget": args.budget,
                "shards": args.shards,
                "workers": args.workers,
                "lam": args.lam,
                "seed": args.seed,
                "threads": args.threads or torch.get_num_threads(),
                "processes": args.processes,
                "store": str(folder / f"pool-{size}" / "store"),
            }
            rows.append(run_measurement(__file__, spec))
            shutil.rmtree(folder / f"pool-{size}", ignore_errors=True)
    finally:
        if args.store_dir is None:
            shutil.rmtree(folder, ignore_errors=True)
    print_header(
        head,
        f"N {args.sizes}",
        f"{args.tokens} tokens at d = {args.dim} sketched to k = {args.sketch_dim}",
        f"budget {args.budget}",
        f"{args.shards} shards",
    )
    print()
    columns = [
        "N",
        "write s",
        "write peak GB",
        "store GB",
        "selection",
        "s",
        "peak GB",
        "worker peak GB",
        "F / F lazy float64",
        "common picks",
    ]
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join("---" for _ in columns) + "|")
    for row in rows:
        for name, cell in row["cells"].items():
            print(
                "| "
                + " | ".join(
                    [
                        str(row["pool_size"]),
                        f"{row['write_seconds']:.1f}",
                        _gb(row["write_peak_bytes"]),
                        _gb(row["store_bytes"]),
                        name,
                        f"{cell['seconds']:.1f}",
                        _gb(cell["peak_bytes"]),
                        _gb(cell.get("worker_peak_bytes")),
                        f"{cell['ratio']:.4f}",
                        f"{cell['common']}/{row['budget']}",
                    ]
                )
                + " |"
            )
    starts = [
        f"{row['pool_size']}: {cell['cluster_seconds']:.1f} s"
        for row in rows
        for name, cell in row["cells"].items()
        if "cluster_seconds" in cell
    ]
    if starts:
        print(f"\nDask cluster starts (untimed above): {', '.join(starts)}")
    for row in rows:
        for name, error in row.get("errors", {}).items():
            print(f"N = {row['pool_size']}, {name} failed: {error}")
    results = {"header": head, "rows": rows}
    if args.json:
        write_json(args.json, head, results)
    return results


if __name__ == "__main__":
    main()
