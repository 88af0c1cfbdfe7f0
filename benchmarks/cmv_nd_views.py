"""CMV-ND hop views against SIGN's ``Â^k X`` and a per-node networkx BFS, on sparse SBM graphs.

Graphs: :func:`~lightning_info.methods.cmv_nd.datamodule.stochastic_block_model` with
``--nodes`` nodes (100k and 1M by default), average degree ``--degree`` (4: about 2M undirected
edges at 1M nodes), 8 classes, intra/inter edge ratio 4, ``--feature-dim`` (32) float32
features, ``--missing-rate`` (0.6) of the attribute rows unobserved. For every graph and
``K in --hops`` (2, 3):

- ``CMV-ND``: :func:`~lightning_info.methods.cmv_nd.functional.neighbourhood_views`, the exact
  layer means ``[X ⊙ m, H_1, ..., H_K]`` (one sparse product per chunk and hop, then the layer
  sums read off linearly; see the module docstring there);
- ``SIGN scipy``: :func:`~lightning_info.methods.cmv_nd.functional.sign_views`,
  ``[X̃, ÂX̃, ..., Â^K X̃]`` with ``Â = D^-1/2 (A + I) D^-1/2``: ``K`` scipy sparse-dense
  products (one thread), the obvious fast implementation of SIGN's precomputation;
- ``SIGN torch``: the same ``K`` products with ``torch.sparse`` CSR tensors (torch's threads);
- ``PyG SIGN``: ``torch_geometric.transforms.SIGN(K)`` on ``Data(x=X̃, edge_index)`` (its own
  ``D^-1/2 A D^-1/2`` from the edge list, no self loops added; torch's threads), when
  torch_geometric is installed (the extra ``graph``); the column ``CMV-ND / PyG SIGN`` and a
  line under the table for the ``K = 3``, 1M-node cell give the ratio to it;
- ``networkx BFS``: ``single_source_shortest_path_length(G, v, cutoff=K)`` and the layer means
  for ``--bfs-sample`` (200) random nodes only. Only its measured time per node is reported,
  never extrapolated to the whole graph; the CMV-ND rows of those nodes are checked against it.

Every time includes building the adjacency from ``edge_index`` (both methods need it) and is one
run in a fresh interpreter (``--measure``), after an untimed warm-up on a 2,000-node graph; the
table gives the median over ``--repeats`` such processes, the methods interleaved, and the peak
resident memory of the run beyond what the process held before it (``VmHWM`` after resetting it;
Linux), median over the same processes. Building the SBM is never timed. Before any timing the
script asserts that CMV-ND equals a networkx BFS reference on a small SBM (every node) for
several chunk sizes, directed and undirected.

``--quick`` runs one 2,000-node graph at ``K = 2`` with one repeat, measured in this process (no
fresh interpreters), in a few seconds. ``--json PATH`` also writes the measured cells with the
header (``benchmarks/harness.py``).

Usage::

    python benchmarks/cmv_nd_views.py [--quick] [--nodes 100000 1000000] [--hops 2 3]
        [--degree 4] [--feature-dim 32] [--missing-rate 0.6] [--repeats 3] [--bfs-sample 200]
        [--chunk-size 16384] [--threads 0] [--seed 0] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from typing import Any

import numpy as np
import scipy
import torch
from harness import (
    benchmark_parser,
    format_ratio,
    header,
    peak_memory,
    print_header,
    run_measurement,
    write_json,
)

from lightning_info.core.logging import markdown_table
from lightning_info.core.threads import torch_threads
from lightning_info.methods.cmv_nd.datamodule import missing_mask, stochastic_block_model
from lightning_info.methods.cmv_nd.functional import (
    graph_adjacency,
    mean_impute,
    neighbourhood_views,
    normalized_adjacency,
    sign_views,
)

try:  # PyG's SIGN transform, the reference a user would reach for (optional extra "graph")
    import torch_geometric  # noqa: F401

    HAS_PYG = True
except ImportError:
    HAS_PYG = False

METHODS = ("cmv_nd", "sign_scipy", "sign_torch") + (("sign_pyg",) if HAS_PYG else ())
LABELS = {
    "cmv_nd": "CMV-ND",
    "sign_scipy": "SIGN scipy",
    "sign_torch": "SIGN torch",
    "sign_pyg": "PyG SIGN",
}


def make_graph(spec: dict[str, Any]):
    """The spec's SBM: ``(edge_index, x, observed)``."""
    edge_index, x, _ = stochastic_block_model(
        spec["nodes"], 8, spec["degree"], 4.0, spec["feature_dim"], seed=spec["seed"]
    )
    return edge_index, x, missing_mask(spec["nodes"], spec["missing_rate"], spec["seed"])


def sign_torch(edge_index, x, num_hops: int, observed) -> list[torch.Tensor]:
    """SIGN's views with ``torch.sparse`` CSR products (the adjacency is built as in scipy)."""
    propagate = normalized_adjacency(graph_adjacency(edge_index, x.shape[0]))
    with warnings.catch_warnings():  # "sparse CSR support is in beta"
        warnings.simplefilter("ignore", UserWarning)
        matrix = torch.sparse_csr_tensor(
            torch.from_numpy(propagate.indptr.astype(np.int64)),
            torch.from_numpy(propagate.indices.astype(np.int64)),
            torch.from_numpy(propagate.data),
            size=propagate.shape,
            check_invariants=False,
        )
    views = [mean_impute(x, observed)]
    for _ in range(num_hops):
        views.append(torch.sparse.mm(matrix, views[-1]))
    return views


def sign_pyg(edge_index, x, num_hops: int, observed) -> list[torch.Tensor]:
    """SIGN's views by ``torch_geometric.transforms.SIGN`` on the mean-imputed attributes."""
    from torch_geometric.data import Data
    from torch_geometric.transforms import SIGN

    with warnings.catch_warnings():  # "sparse CSC support is in beta", invariant checks
        warnings.simplefilter("ignore", UserWarning)
        data = SIGN(num_hops)(Data(x=mean_impute(x, observed), edge_index=edge_index))
    return [data.x] + [data[f"x{k}"] for k in range(1, num_hops + 1)]


def run(method: str, graph, spec: dict[str, Any]) -> list[torch.Tensor]:
    edge_index, x, observed = graph
    if method == "cmv_nd":
        return neighbourhood_views(
            edge_index, x, None, spec["hops"], observed, chunk_size=spec["chunk_size"]
        )
    if method == "sign_scipy":
        return sign_views(edge_index, x, None, spec["hops"], observed)
    if method == "sign_pyg":
        return sign_pyg(edge_index, x, spec["hops"], observed)
    return sign_torch(edge_index, x, spec["hops"], observed)


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """Time one run of ``spec["method"]`` on the spec's graph (its peak memory beyond the process
    before the run, in bytes); meant for a fresh process (:func:`measure_in_fresh_process`)."""
    with torch_threads(spec["threads"]):
        warm = {**spec, "nodes": 2000}
        run(spec["method"], make_graph(warm), warm)  # first calls of every kernel, untimed
        graph = make_graph(spec)
        seconds, views, extra = peak_memory(lambda: run(spec["method"], graph, spec))
        assert len(views) == spec["hops"] + 1
    return {**spec, "seconds": seconds, "peak_bytes": extra, "edges": graph[0].shape[1] // 2}


def measure_in_fresh_process(spec: dict[str, Any]) -> dict[str, Any]:
    """:func:`measure` in a new interpreter, so that its peak memory is its own."""
    return run_measurement(__file__, spec)


def bfs_layer_means(graph_nx, x: np.ndarray, observed: np.ndarray, nodes, num_hops: int):
    """``H_k`` rows of ``nodes`` by networkx BFS (the oracle): ``(len(nodes), K, d)``."""
    import networkx as nx

    out = np.zeros((len(nodes), num_hops, x.shape[1]))
    for row, v in enumerate(nodes):
        layers: dict[int, list[int]] = {}
        for u, dist in nx.single_source_shortest_path_length(graph_nx, v, cutoff=num_hops).items():
            if dist > 0 and observed[u]:
                layers.setdefault(dist, []).append(u)
        for dist, members in layers.items():
            out[row, dist - 1] = x[members].mean(0)
    return out


def to_networkx(edge_index: torch.Tensor, num_nodes: int, directed: bool = False):
    import networkx as nx

    graph = nx.DiGraph() if directed else nx.Graph()
    graph.add_nodes_from(range(num_nodes))
    graph.add_edges_from((a, b) for a, b in edge_index.t().tolist() if a != b)
    return graph


def bfs_sample(spec: dict[str, Any]) -> dict[str, Any]:
    """networkx BFS on ``spec["sample"]`` random nodes: seconds per node, and the largest gap to
    the CMV-ND rows of those nodes (computed untimed in the same process)."""
    edge_index, x, observed = make_graph(spec)
    graph_nx = to_networkx(edge_index, spec["nodes"])
    rng = np.random.default_rng(spec["seed"] + 1)
    nodes = rng.choice(spec["nodes"], size=min(spec["sample"], spec["nodes"]), replace=False)
    start = time.perf_counter()
    reference = bfs_layer_means(graph_nx, x.double().numpy(), observed.numpy(), nodes, spec["hops"])
    per_node = (time.perf_counter() - start) / len(nodes)
    views = neighbourhood_views(edge_index, x, None, spec["hops"], observed)
    ours = torch.stack(views[1:], 1)[torch.from_numpy(nodes)].double().numpy()
    return {**spec, "per_node_seconds": per_node, "max_gap": float(np.abs(ours - reference).max())}


def bfs_in_fresh_process(spec: dict[str, Any]) -> dict[str, Any]:
    return run_measurement(__file__, spec, flag="--bfs")


def reference_check(seed: int) -> float:
    """Assert CMV-ND == networkx BFS on every node of a 400-node SBM (and of its directed
    version), for three chunk sizes; returns the largest absolute gap."""
    gap = 0.0
    edge_index, x, _ = stochastic_block_model(400, 4, 3.0, 4.0, 8, seed=seed)
    observed = missing_mask(400, 0.6, seed)
    half = edge_index[:, : edge_index.shape[1] // 2]  # each undirected pair once
    flip = torch.from_numpy(np.random.default_rng(seed).random(half.shape[1]) < 0.5)
    oriented = torch.where(flip, half.flip(0), half)  # a random direction per pair
    for directed in (False, True):
        edges = oriented if directed else edge_index
        graph_nx = to_networkx(edges, 400, directed)
        reference = bfs_layer_means(graph_nx, x.double().numpy(), observed.numpy(), range(400), 3)
        for chunk in (7, 64, 16384):
            views = neighbourhood_views(
                edges, x, None, 3, observed, chunk_size=chunk, undirected=not directed
            )
            diff = np.abs(torch.stack(views[1:], 1).double().numpy() - reference).max()
            assert diff < 1e-5, f"CMV-ND differs from BFS by {diff} (chunk {chunk})"
            gap = max(gap, float(diff))
    return gap


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = benchmark_parser(
        __doc__.split("\n\n")[0], threads=0, quick_help="2,000 nodes, K = 2, in-process"
    )
    parser.add_argument("--nodes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--hops", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--degree", type=float, default=4.0, help="average degree of the SBM")
    parser.add_argument("--feature-dim", type=int, default=32)
    parser.add_argument("--missing-rate", type=float, default=0.6)
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per cell")
    parser.add_argument("--bfs-sample", type=int, default=200, help="nodes timed with networkx")
    parser.add_argument("--chunk-size", type=int, default=16384)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.quick:
        args.nodes, args.hops, args.repeats, args.bfs_sample = [2000], [2], 1, 20
    return args


def _gb(values: list[int | None]) -> str:
    known = [v for v in values if v is not None]
    return f"{statistics.median(known) / 1e9:.2f}" if known else "n/a"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the check and the measurements, print the table; returns the measured cells."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["--measure"], ["--bfs"]):
        job = measure if argv[0] == "--measure" else bfs_sample
        print(json.dumps(job(json.loads(argv[1]))))
        return {}
    args = parse_args(argv)
    with torch_threads(args.threads):
        head = header(args)
    gap = reference_check(args.seed)
    print_header(
        head,
        f"scipy {scipy.__version__}",
        f"SBM average degree {args.degree:g}, 8 classes, feature dim {args.feature_dim}, "
        f"missing rate {args.missing_rate:g}",
        f"{'in-process' if args.quick else 'fresh processes'}, median of {args.repeats}",
    )
    print(
        f"check: CMV-ND == networkx BFS on a 400-node SBM, K = 3, chunks 7/64/16384, "
        f"undirected and directed (largest gap {gap:.1e})\n"
    )
    timer = measure if args.quick else measure_in_fresh_process
    bfs = bfs_sample if args.quick else bfs_in_fresh_process
    cells = []
    for nodes in args.nodes:
        for hops in args.hops:
            base = {
                "nodes": nodes,
                "hops": hops,
                "degree": args.degree,
                "feature_dim": args.feature_dim,
                "missing_rate": args.missing_rate,
                "chunk_size": args.chunk_size,
                "threads": args.threads,
                "seed": args.seed,
            }
            runs: dict[str, list[dict[str, Any]]] = {m: [] for m in METHODS}
            for _ in range(args.repeats):
                for method in METHODS:
                    runs[method].append(timer({**base, "method": method}))
            sample = bfs({**base, "sample": args.bfs_sample})
            assert sample["max_gap"] < 1e-4, f"CMV-ND differs from BFS at scale: {sample}"
            cells.append({"spec": base, "runs": runs, "bfs": sample})
    rows = []
    for cell in cells:
        spec, runs, sample = cell["spec"], cell["runs"], cell["bfs"]
        seconds = {m: statistics.median(r["seconds"] for r in runs[m]) for m in METHODS}
        best_sign = min(seconds["sign_scipy"], seconds["sign_torch"])
        rows.append(
            [
                f"{spec['nodes']:,}",
                f"{runs['cmv_nd'][0]['edges']:,}",
                spec["hops"],
                *(f"{seconds[m]:.3f}" for m in METHODS),
                format_ratio(seconds["cmv_nd"], seconds["sign_scipy"]),
                format_ratio(seconds["cmv_nd"], best_sign),
                *([format_ratio(seconds["cmv_nd"], seconds["sign_pyg"])] if HAS_PYG else []),
                *(_gb([r["peak_bytes"] for r in runs[m]]) for m in METHODS),
                f"{1e3 * sample['per_node_seconds']:.3f} ({sample['sample']} nodes)",
                f"{1e3 * seconds['cmv_nd'] / spec['nodes']:.5f}",
                f"{sample['max_gap']:.1e}",
            ]
        )
        cell["seconds"] = seconds
    columns = [
        "N",
        "E",
        "K",
        *(f"{LABELS[m]} s" for m in METHODS),
        "CMV-ND / SIGN scipy",
        "CMV-ND / best SIGN",
        *(["CMV-ND / PyG SIGN"] if HAS_PYG else []),
        *(f"{LABELS[m]} peak GB" for m in METHODS),
        "networkx BFS ms/node (sample)",
        "CMV-ND ms/node (all nodes)",
        "max gap to BFS (sample)",
    ]
    print(markdown_table(columns, rows))
    for cell in cells:
        spec, seconds = cell["spec"], cell["seconds"]
        if spec["nodes"] == 1_000_000 and spec["hops"] == 3:
            against = "PyG SIGN" if HAS_PYG else "best SIGN (torch_geometric not installed)"
            base = seconds["sign_pyg"] if HAS_PYG else min(seconds[m] for m in METHODS[1:])
            print(
                f"\nK = 3, 1M nodes, {cell['runs']['cmv_nd'][0]['edges']:,} edges: CMV-ND "
                f"{seconds['cmv_nd']:.3f} s / {against} {base:.3f} s = "
                f"{format_ratio(seconds['cmv_nd'], base)}"
            )
    result = {"check_gap": gap, "cells": cells}
    if args.json:
        write_json(args.json, head, result)
    return result


if __name__ == "__main__":
    main()
