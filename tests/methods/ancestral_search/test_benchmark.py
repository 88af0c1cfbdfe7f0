"""benchmarks/ancestral_search_scoring.py: the quick run searches with memoised and recomputed
scores to the same graph, counts and times both, and scores FCI and the search per N as
``graph_scores`` does; its candidate count is what ``edge_deltas`` asks the score for."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("pgmpy")
pytest.importorskip("causallearn")

from lightning_info.methods.ancestral_search.datamodule import (  # noqa: E402
    BayesianNetworkDataModule,
)
from lightning_info.methods.ancestral_search.functional import (  # noqa: E402
    BIDIRECTED,
    DIRECTED,
    UNDIRECTED,
    edge_deltas,
    edge_step,
    fci_pag,
    initial_graph,
    marks_from_types,
    node_step,
)
from lightning_info.methods.ancestral_search.graphs import graph_scores  # noqa: E402
from lightning_info.methods.ancestral_search.information import InformationCache  # noqa: E402
from tests.benchmark_scripts import load_script  # noqa: E402


@pytest.fixture(scope="module")
def bench():
    return load_script("ancestral_search_scoring")


def test_quick_run_compares_cached_and_recomputed_scores_and_fci(bench, capsys):
    result = bench.main(["--quick"])
    printed = capsys.readouterr().out

    options = result["options"]
    assert options["network"] == "asia" and options["num_samples"] == 2000
    assert options["sizes"] == [500, 2000] and options["repeats"] == 1

    scoring = result["scoring"]
    cached, recomputed = scoring["cached"], scoring["recomputed"]
    assert scoring["identical_graphs"] is True
    # the same search asks for the same scores; the cache computes fewer of them
    assert cached["requests"] == recomputed["requests"] == recomputed["computed"]
    assert cached["node_requests"] == recomputed["node_requests"]
    assert cached["candidates"] == recomputed["candidates"] > 0
    assert cached["computed"] < cached["requests"]
    assert cached["hits"] + cached["computed"] == cached["requests"]
    assert 0 < cached["hit_rate"] < 1
    assert cached["hit_rate"] == pytest.approx(cached["hits"] / cached["requests"])
    assert recomputed["hit_rate"] == 0
    for run in (cached, recomputed):
        assert run["edge_deltas_calls"] == run["moves"] + 1
        assert run["candidates"] <= run["edge_requests"]
        assert run["node_requests"] + run["edge_requests"] == run["requests"]
        assert run["node_seconds"] > 0 and run["edge_seconds"] > 0
        assert run["candidates_per_second"] > 0 and run["scores_per_second"] > 0
        moves_per_second = run["candidates"] / run["edge_seconds"]
        assert run["candidates_per_second"] == pytest.approx(moves_per_second)
        assert run["scores_per_second"] == pytest.approx(run["requests"] / run["seconds"])
    assert scoring["speedup"] == pytest.approx(recomputed["seconds"] / cached["seconds"])

    sizes = result["sizes"]
    assert [row["num_samples"] for row in sizes] == [500, 2000]
    for row in sizes:
        assert row["fci_seconds"] > 0 and row["search_seconds"] > 0
        assert f"| {row['num_samples']:,} " in printed

    # the F1 cells at N = 500, recomputed here from the same samples
    data = BayesianNetworkDataModule(
        "asia", num_samples=500, hidden_fraction=0.1, data_seed=0, constant_columns="hide"
    )
    assert sizes[0]["observed"] == len(data.names)
    pag = fci_pag(data.codes)
    score = InformationCache(data.codes)
    found = edge_step(node_step(initial_graph(data.codes, pag=pag), score), score)
    expected = {
        "fci": graph_scores(pag, data.truth),
        "search": graph_scores(marks_from_types(found), data.truth),
    }
    for method in ("fci", "search"):
        for key in ("orientation_f1", "skeleton_f1"):
            assert sizes[0][method][key] == expected[method][key], (method, key)
    cells = [
        f"{expected[method][key]:.3f}"
        for key in ("orientation_f1", "skeleton_f1")
        for method in ("fci", "search")
    ]
    row = next(line for line in printed.splitlines() if line.startswith("| 500 "))
    assert [cell.strip() for cell in row.strip("|").split("|")][-4:] == cells

    assert "| cached (InformationCache)" in printed and "| recomputed" in printed
    assert json.loads(printed.strip().splitlines()[-1])["options"] == options


def test_candidate_count_is_what_edge_deltas_asks_the_score_for(bench):
    # 0 -> 1, 2 -> 3, 1 <-> 3 (both sides have another parent: three orientations), 3 <-> 4
    # (node 4 has none: two orientations, and its current type is scored unconditionally),
    # 0 - 4 undirected (scored unconditionally as well)
    types = np.zeros((5, 5), dtype=np.int8)
    for a, b in ((0, 1), (2, 3)):
        types[a, b], types[b, a] = DIRECTED, -DIRECTED
    for a, b in ((1, 3), (3, 4)):
        types[a, b] = types[b, a] = BIDIRECTED
    types[0, 4] = types[4, 0] = UNDIRECTED
    calls = []

    def score(x, y, z):
        calls.append((x, y, z))
        return 0.1 * len(calls)

    edge_deltas(types, score)
    assert bench.candidates(types) == (3 + 2 + 2 + 2 + 2, 2)
    assert sum(bench.candidates(types)) == len(calls)
