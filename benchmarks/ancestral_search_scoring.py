"""Ancestral-graph search-and-score cost: scoring throughput with memoised information terms
against recomputing every one, and wall time against causal-learn's FCI at equal N.

- ``scoring``: on ``--network`` (Alarm, 37 nodes) with ``--hidden-fraction`` (0.1) of the nodes
  hidden (``BayesianNetworkDataModule(..., constant_columns="hide")``: a node sampled constant
  joins the hidden ones), ``--num-samples`` (5000) rows, seed ``--seed`` (0), FCI's PAG (G^2,
  ``--alpha`` 0.05) is computed once, outside every timing, and turned into the step-0 graph
  (``initial_graph(codes, pag=...)``). The node step and the edge step (``node_step``,
  ``edge_step``) then run with two score callables:

  - cached: a fresh ``InformationCache(codes, --method)`` per run (MIIC's ``infok`` memoised on
    the unordered pair and the sorted conditioning set, as the reference's hash table);
  - recomputed: the same computation afresh for every request, the obvious implementation
    (vectorised plug-in counts, no memoisation): an ``InformationCache`` emptied before every
    call, so each request does exactly what a cache miss does (no data re-check, no extra
    work), counting its calls.

  An untimed first run of each path asserts that both return the identical edge-type matrix
  and make the same number of score requests, and warms the module-level table of NML
  normalisers ``log C(n, r)`` that both paths share. Then each path runs ``--repeats`` (3)
  times; the seconds are the medians (node step, edge step, and the two together). Score
  requests: the calls the search makes on its score; computed: the values actually evaluated
  (the cache's misses; every request for the recomputed path); hit rate ``hits / requests``.
  **Candidate moves** are the (edge, orientation) pairs that ``edge_deltas`` scores over the
  edge step, computed as edges x orientations per call: each call scores, for every edge
  ``x - y``, ``x <- y`` and ``x -> y`` and, when both ``Pa'_x`` and ``Pa'_y`` are non-empty,
  ``x <-> y`` (:func:`candidates`), on the graphs ``edge_step`` scored (the node step's result,
  then the graph after each applied move, recorded by ``on_move``). The script asserts that
  this count plus the edges scored unconditionally as they stand (an undirected edge, or a
  bidirected one with an empty side) equals the score requests of the edge step. Candidate
  moves per second divide by the edge step's median seconds, scores per second divide the
  requests by the node and edge steps' seconds; the ratios are cached over recomputed
  throughput (recomputed seconds over cached seconds).
- ``sizes``: for every N in ``--sizes`` (1000 5000 20000), one data set (seed ``--seed``): the
  median of ``--repeats`` runs of FCI alone (``fci_pag``) and of the whole search (FCI, then
  the node and edge steps with a fresh cache), and the orientation and skeleton F1 of each
  against the oracle PAG (``data.truth``) by ``graph_scores`` -- FCI's PAG marks, and
  ``marks_from_types`` of the search's result. (The NML normalisers of an N not met before are
  computed in that N's first search run; the median of 3 leaves that run out.)

Data generation (sampling and the oracle PAG) is never timed; causal-learn's progress prints are
captured. The header (``benchmarks/harness.py``) gives the date, the 1-minute load average at the
start, the CPU count, the torch threads, python's, torch's and numpy's versions, then
causal-learn's and pgmpy's; the last lines the whole run's seconds, then the results as one JSON
line (``--json PATH`` also writes them to a file). ``--threads`` sets torch's threads (default 0:
torch's default); the search itself is numpy. ``--quick``: Asia (8 nodes), N 2000, sizes 500
2000, one repeat.

Usage::

    python benchmarks/ancestral_search_scoring.py [--quick] [--network alarm]
        [--hidden-fraction 0.1] [--num-samples 5000] [--sizes 1000 5000 20000] [--repeats 3]
        [--seed 0] [--method nml] [--alpha 0.05] [--threads 0] [--json PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import time
import warnings
from importlib import metadata

import numpy as np
from harness import (
    benchmark_parser,
    document,
    format_ratio,
    header,
    median_time,
    print_header,
    write_json,
)

from lightning_info.core.logging import markdown_table
from lightning_info.core.threads import torch_threads
from lightning_info.methods.ancestral_search.datamodule import BayesianNetworkDataModule
from lightning_info.methods.ancestral_search.functional import (
    BIDIRECTED,
    DIRECTED,
    UNDIRECTED,
    edge_step,
    fci_pag,
    initial_graph,
    marks_from_types,
    node_step,
)
from lightning_info.methods.ancestral_search.graphs import graph_scores
from lightning_info.methods.ancestral_search.information import (
    InformationCache,
)

MAX_MOVES = 1000
"""``edge_step``'s move budget (its default), passed explicitly so the candidate count knows it."""


def parse(args=None) -> argparse.Namespace:
    parser = benchmark_parser(__doc__.split("\n\n")[0], threads=0)
    parser.add_argument("--network", default="alarm")
    parser.add_argument("--hidden-fraction", type=float, default=0.1)
    parser.add_argument("--num-samples", type=int, default=5000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--method", choices=("nml", "bic"), default="nml")
    parser.add_argument("--alpha", type=float, default=0.05)
    parsed = parser.parse_args(args)
    if parsed.quick:
        parsed.network, parsed.num_samples = "asia", 2000
        parsed.sizes, parsed.repeats = [500, 2000], 1
    return parsed


class RecomputedScore:
    """``infok`` evaluated afresh on every call: a cache emptied before each lookup, so every
    request costs what a miss costs; ``calls`` counts them."""

    def __init__(self, codes: np.ndarray, method: str) -> None:
        self.cache, self.calls = InformationCache(codes, method=method), 0

    def __call__(self, x, y, z=()) -> float:
        self.calls += 1
        self.cache.clear()
        return self.cache(x, y, z)


def requests(score) -> int:
    """The score requests made so far on a ``RecomputedScore`` or an ``InformationCache``."""
    return score.calls if isinstance(score, RecomputedScore) else score.hits + score.misses


def candidates(types: np.ndarray) -> tuple[int, int]:
    """``(orientations, unconditional)`` that one ``edge_deltas(types, score)`` call scores:
    for every edge ``x - y`` (``x < y``) the candidates ``x <- y``, ``x -> y`` and, when both
    ``Pa'_x \\ {y}`` and ``Pa'_y \\ {x}`` are non-empty, ``x <-> y``; plus the edges whose
    current type is none of those it scores (undirected, or bidirected with an empty side), which
    cost one more request each (their unconditional information)."""
    types = np.asarray(types)
    into = (types == DIRECTED) | (types == BIDIRECTED)  # into[n, x]: n in Pa'_x
    orientations = unconditional = 0
    for x, y in zip(*np.nonzero(np.triu(types != 0))):
        both = into[:, x].sum() - into[y, x] > 0 and into[:, y].sum() - into[x, y] > 0
        orientations += 3 if both else 2
        current = types[x, y]
        unconditional += current == UNDIRECTED or (current == BIDIRECTED and not both)
    return orientations, int(unconditional)


def search(skeleton: np.ndarray, score) -> dict:
    """The node and edge steps from the step-0 graph, timed apart; the graphs the edge step
    scored (its start, then the graph after each move), and the requests of each step."""
    scored: list[np.ndarray] = []
    start = time.perf_counter()
    after_node = node_step(skeleton, score)
    middle = time.perf_counter()
    node_requests = requests(score)
    scored.append(after_node)
    found = edge_step(
        after_node,
        score,
        max_moves=MAX_MOVES,
        on_move=lambda types, move: scored.append(types.copy()),
    )
    end = time.perf_counter()
    moves = len(scored) - 1
    if moves >= MAX_MOVES:  # stopped by the budget: the last graph was never scored
        scored.pop()
    orientations = unconditional = 0
    for types in scored:
        counted = candidates(types)
        orientations, unconditional = orientations + counted[0], unconditional + counted[1]
    edge_requests = requests(score) - node_requests
    assert orientations + unconditional == edge_requests, (
        f"{orientations} candidates + {unconditional} unconditional edges != "
        f"{edge_requests} score requests of the edge step"
    )
    return {
        "graph": found,
        "node_seconds": middle - start,
        "edge_seconds": end - middle,
        "seconds": end - start,
        "moves": moves,
        "edge_deltas_calls": len(scored),
        "candidates": orientations,
        "node_requests": node_requests,
        "edge_requests": edge_requests,
        "requests": requests(score),
        "computed": score.misses if isinstance(score, InformationCache) else score.calls,
    }


def pag_of(codes: np.ndarray, alpha: float) -> np.ndarray:
    """``fci_pag`` with causal-learn's orientation prints captured."""
    with contextlib.redirect_stdout(io.StringIO()):
        return fci_pag(codes, alpha)


def scoring(data, options) -> dict:
    """Section ``scoring`` of the module docstring: both paths on one data set."""
    skeleton = initial_graph(data.codes, pag=pag_of(data.codes, options.alpha))
    paths = {
        "cached": lambda: InformationCache(data.codes, method=options.method),
        "recomputed": lambda: RecomputedScore(data.codes, options.method),
    }
    first = {name: search(skeleton, make()) for name, make in paths.items()}  # untimed
    assert np.array_equal(first["cached"]["graph"], first["recomputed"]["graph"]), (
        "the cached and the recomputed scores led the search to different graphs"
    )
    assert first["cached"]["requests"] == first["recomputed"]["requests"], (
        "the two paths made different numbers of score requests"
    )
    results = {}
    for name, make in paths.items():
        runs: list[dict] = []

        def once(make=make, runs=runs) -> dict:
            score = make()
            run = search(skeleton, score)
            run["score"] = score
            runs.append(run)
            return run

        seconds, last = median_time(once, options.repeats)
        for run in runs:
            assert np.array_equal(run["graph"], first["cached"]["graph"]), name
        score = last.pop("score")
        node = statistics.median(run["node_seconds"] for run in runs)
        edge = statistics.median(run["edge_seconds"] for run in runs)
        hits = score.hits if isinstance(score, InformationCache) else 0
        results[name] = {
            **{k: v for k, v in last.items() if k not in ("graph", "seconds")},
            "node_seconds": node,
            "edge_seconds": edge,
            "seconds": seconds,
            "hits": hits,
            "hit_rate": hits / last["requests"],
            "candidates_per_second": last["candidates"] / edge,
            "scores_per_second": last["requests"] / seconds,
        }
    cached, recomputed = results["cached"], results["recomputed"]
    return {
        **results,
        "identical_graphs": True,
        "edges": int(np.count_nonzero(np.triu(first["cached"]["graph"]))),
        "speedup": recomputed["seconds"] / cached["seconds"],
        "candidates_per_second_ratio": (
            cached["candidates_per_second"] / recomputed["candidates_per_second"]
        ),
    }


def whole_search(codes: np.ndarray, options) -> tuple[np.ndarray, np.ndarray]:
    """FCI, then the node and edge steps with a fresh cache: ``(pag, edge types)``."""
    pag = pag_of(codes, options.alpha)
    score = InformationCache(codes, method=options.method)
    return pag, edge_step(node_step(initial_graph(codes, pag=pag), score), score, MAX_MOVES)


def size_row(data, options) -> dict:
    """Section ``sizes`` of the module docstring at one N."""
    fci_seconds, pag = median_time(lambda: pag_of(data.codes, options.alpha), options.repeats)
    search_seconds, (search_pag, found) = median_time(
        lambda: whole_search(data.codes, options), options.repeats
    )
    assert np.array_equal(pag, search_pag), "FCI returned different PAGs on the same data"
    return {
        "num_samples": int(data.codes.shape[0]),
        "observed": len(data.names),
        "hidden": len(data.hidden),
        "fci_seconds": fci_seconds,
        "search_seconds": search_seconds,
        "fci": graph_scores(pag, data.truth),
        "search": graph_scores(marks_from_types(found), data.truth),
    }


def main(args=None) -> dict:
    options = parse(args)
    with torch_threads(options.threads):
        return _run(options)


def _run(options: argparse.Namespace) -> dict:
    start = time.perf_counter()
    head = header(options)
    load = head["load_average"]
    warnings.filterwarnings("ignore")
    datasets: dict[int, BayesianNetworkDataModule] = {}

    def data_at(num_samples: int) -> BayesianNetworkDataModule:
        if num_samples not in datasets:
            datasets[num_samples] = BayesianNetworkDataModule(
                options.network,
                num_samples=num_samples,
                hidden_fraction=options.hidden_fraction,
                data_seed=options.seed,
                constant_columns="hide",
            )
        return datasets[num_samples]

    data = data_at(options.num_samples)
    score_results = scoring(data, options)
    sizes = [size_row(data_at(n), options) for n in options.sizes]

    versions = {
        name: metadata.version(dist)
        for name, dist in (("numpy", "numpy"), ("causal-learn", "causal-learn"), ("pgmpy", "pgmpy"))
    }
    print_header(
        head,
        *(f"{name} {version}" for name, version in versions.items() if name != "numpy"),
        f"{options.network} ({len(data.dag_names)} nodes), {options.hidden_fraction:g} hidden, "
        f"seed {options.seed}",
        f"scoring at N = {options.num_samples} ({len(data.names)} observed, hidden {data.hidden})",
        f"sizes {' '.join(str(n) for n in options.sizes)}",
        f"{options.method.upper()} scores, FCI G^2 alpha {options.alpha:g}",
        f"{options.repeats} repeat(s), median",
    )
    cached, recomputed = score_results["cached"], score_results["recomputed"]
    print(
        f"check: cached and recomputed scores give the identical graph "
        f"({score_results['edges']} edges, {cached['moves']} edge move(s), "
        f"{cached['edge_deltas_calls']} edge_deltas call(s)) and {cached['requests']:,} score "
        "requests each: ok\n"
    )
    rows = []
    for name, run, label in (
        ("cached", cached, "cached (InformationCache)"),
        ("recomputed", recomputed, "recomputed (every request computed)"),
    ):
        rows.append(
            [
                label,
                f"{run['node_seconds']:.3f}",
                f"{run['edge_seconds']:.3f}",
                f"{run['seconds']:.3f}",
                f"{run['requests']:,}",
                f"{run['computed']:,}",
                f"{run['hit_rate']:.1%}" if name == "cached" else "-",
                f"{run['candidates']:,}",
                f"{run['candidates_per_second']:,.0f}",
                f"{run['scores_per_second']:,.0f}",
                format_ratio(recomputed["seconds"], run["seconds"]),
                format_ratio(run["candidates_per_second"], recomputed["candidates_per_second"]),
            ]
        )
    columns = [
        "scores",
        "node step s",
        "edge step s",
        "node + edge s",
        "score requests",
        "computed",
        "hit rate",
        "candidate moves",
        "candidate moves/s",
        "scores/s",
        "node + edge vs recomputed",
        "moves/s vs recomputed",
    ]
    print(markdown_table(columns, rows))
    rows = [
        [
            f"{row['num_samples']:,}",
            f"{row['observed']} ({row['hidden']} hidden)",
            f"{row['fci_seconds']:.2f}",
            f"{row['search_seconds']:.2f}",
            format_ratio(row["search_seconds"], row["fci_seconds"]),
            f"{row['fci']['orientation_f1']:.3f}",
            f"{row['search']['orientation_f1']:.3f}",
            f"{row['fci']['skeleton_f1']:.3f}",
            f"{row['search']['skeleton_f1']:.3f}",
        ]
        for row in sizes
    ]
    columns = [
        "N",
        "observed",
        "FCI s",
        "search s (FCI + steps)",
        "search / FCI",
        "FCI orientation F1",
        "search orientation F1",
        "FCI skeleton F1",
        "search skeleton F1",
    ]
    print(f"\nwall time against FCI ({options.network}, seed {options.seed}, oracle PAG):\n")
    print(markdown_table(columns, rows))
    elapsed = time.perf_counter() - start
    print(f"\nmeasured in {elapsed:.1f} s")
    result = {
        "header": {
            **versions,
            "load_average": load,
            "network": options.network,
            "nodes": len(data.dag_names),
            "observed": len(data.names),
            "hidden": list(data.hidden),
        },
        "scoring": score_results,
        "sizes": sizes,
        "seconds": elapsed,
        "options": vars(options),
    }
    result = document(head, result)
    if options.json:
        write_json(options.json, head, result)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
