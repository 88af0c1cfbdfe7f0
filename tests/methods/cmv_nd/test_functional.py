"""CMV-ND hop views against networkx BFS shortest-path layers (the definition of D_k), on random
graphs and on the graphs networkx ships; invariances (chunk size, threads, the kernel path, the
linear form against direct sums), missing attributes, bad input; SIGN against a dense reference;
the benchmark's quick mode."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch

import lightning_info.methods.cmv_nd.functional as functional
from lightning_info.methods.cmv_nd.functional import (
    graph_adjacency,
    mean_impute,
    neighbourhood_views,
    sign_views,
)
from tests.benchmark_scripts import load_script

BUNDLED = {
    "karate_club": nx.karate_club_graph,
    "les_miserables": nx.les_miserables_graph,
    "davis_southern_women": nx.davis_southern_women_graph,
    "florentine_families": nx.florentine_families_graph,
}


def random_graph(n: int, m: int, seed: int, directed: bool = False):
    """``edge_index`` of ``m`` random pairs (self loops and repeats included) and the networkx
    graph of the same edges, without self loops."""
    rng = np.random.default_rng(seed)
    edges = rng.integers(0, n, size=(2, m))
    graph = nx.DiGraph() if directed else nx.Graph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from((a, b) for a, b in edges.T.tolist() if a != b)
    return torch.from_numpy(edges), graph


def from_networkx(graph):
    graph = nx.convert_node_labels_to_integers(graph)
    edges = np.array(list(graph.edges()), dtype=np.int64).reshape(-1, 2).T
    return torch.from_numpy(edges.copy()), graph


def bfs_layers(graph, v: int, num_hops: int) -> list[set[int]]:
    """``D_1(v) .. D_K(v)`` by networkx's BFS: the nodes at shortest-path distance exactly k."""
    layers = [set() for _ in range(num_hops)]
    for u, dist in nx.single_source_shortest_path_length(graph, v, cutoff=num_hops).items():
        if dist > 0:
            layers[dist - 1].add(u)
    return layers


def bfs_means(graph, x: np.ndarray, observed: np.ndarray, num_hops: int) -> np.ndarray:
    """``H_k[v]``: the mean of the observed rows of ``x`` over each BFS layer, ``(K, N, d)``."""
    out = np.zeros((num_hops, x.shape[0], x.shape[1]))
    for v in range(x.shape[0]):
        for k, layer in enumerate(bfs_layers(graph, v, num_hops)):
            seen = [u for u in layer if observed[u]]
            if seen:
                out[k, v] = x[seen].mean(0)
    return out


def check_layers_by_one_hot(edge_index, graph, num_hops, undirected=True):
    """With ``x = I`` and every node observed, row ``v`` of ``H_k`` is ``1 / |D_k(v)|`` on
    ``D_k(v)`` and 0 elsewhere: its support must be the BFS layer exactly."""
    n = graph.number_of_nodes()
    views = neighbourhood_views(
        edge_index, torch.eye(n, dtype=torch.float64), num_hops=num_hops, undirected=undirected
    )
    for v in range(n):
        layers = bfs_layers(graph, v, num_hops)
        for k, layer in enumerate(layers):
            row = views[k + 1][v]
            assert set(torch.nonzero(row).flatten().tolist()) == layer, (v, k + 1)
            if layer:
                expected = torch.full((len(layer),), 1.0 / len(layer), dtype=torch.float64)
                torch.testing.assert_close(row[sorted(layer)], expected)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("directed", [False, True])
def test_layers_are_the_bfs_shortest_path_layers_of_random_graphs(seed, directed):
    n = [12, 30, 45, 60][seed]
    edge_index, graph = random_graph(n, int(1.5 * n), seed, directed)
    check_layers_by_one_hot(edge_index, graph, num_hops=4, undirected=not directed)


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_layers_are_the_bfs_shortest_path_layers_of_networkx_graphs(name):
    edge_index, graph = from_networkx(BUNDLED[name]())
    check_layers_by_one_hot(edge_index, graph, num_hops=3)


@pytest.mark.parametrize("name", ["karate_club", "les_miserables"])
def test_layers_are_disjoint_and_cover_the_ball(name):
    edge_index, graph = from_networkx(BUNDLED[name]())
    n, num_hops = graph.number_of_nodes(), 4
    views = neighbourhood_views(edge_index, torch.eye(n), num_hops=num_hops)
    support = torch.stack([view != 0 for view in views[1:]])  # (K, N, N)
    assert int(support.sum(0).max()) <= 1  # every node in at most one layer
    assert not support[:, torch.arange(n), torch.arange(n)].any()  # v itself in none
    for v in range(n):
        ball = set(nx.single_source_shortest_path_length(graph, v, cutoff=num_hops))
        assert set(torch.nonzero(support[:, v].any(0)).flatten().tolist()) | {v} == ball


def test_means_of_observed_features_match_bfs_with_missing_attributes():
    edge_index, graph = random_graph(80, 160, seed=7)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((80, 5))
    observed = rng.random(80) < 0.4
    views = neighbourhood_views(
        edge_index, torch.from_numpy(x), num_hops=4, observed=torch.from_numpy(observed)
    )
    reference = bfs_means(graph, x, observed, 4)
    for k in range(4):
        np.testing.assert_allclose(views[k + 1].numpy(), reference[k], atol=1e-12)
    np.testing.assert_array_equal(views[0].numpy(), x * observed[:, None])


@pytest.mark.parametrize("linear", [True, False])
def test_linear_form_and_direct_sums_both_match_bfs(monkeypatch, linear):
    """Rows are summed either as ``A S_{k-1} - R x̄`` or directly over ``D_k``; both forms must
    give the BFS means (a cycle forces direct rows, the random part linear ones)."""
    monkeypatch.setattr(functional, "_LINEAR_FORM", linear)
    edge_index, graph = random_graph(70, 140, seed=3)
    cycle = torch.tensor([[70 + i, 70 + (i + 1) % 11] for i in range(11)]).T
    graph.add_edges_from(cycle.T.tolist())
    x = np.random.default_rng(1).standard_normal((81, 3))
    observed = np.random.default_rng(2).random(81) < 0.7
    views = neighbourhood_views(
        torch.cat([edge_index, cycle], 1),
        torch.from_numpy(x).float(),
        num_hops=3,
        observed=torch.from_numpy(observed),
    )
    reference = bfs_means(graph, x, observed, 3)
    for k in range(3):
        np.testing.assert_allclose(views[k + 1].double().numpy(), reference[k], atol=2e-6)


def test_rows_with_heavy_cancellation_are_summed_directly():
    """In a clique with a pendant leaf per member, ``sum_{u in N(v)} S_1(u)`` adds ``m^2`` rows
    to find ``m - 1`` leaves; such rows must be summed over ``D_2(v)`` directly, so that float32
    keeps the accuracy of a direct sum (forcing the linear form gives ~0.09 here)."""
    m = 150
    graph = nx.complete_graph(m)
    graph.add_edges_from((i, m + i) for i in range(m))
    edge_index = torch.tensor(list(graph.edges())).T
    x = 1000 + torch.randn(2 * m, 3, generator=torch.Generator().manual_seed(0))
    views = neighbourhood_views(edge_index, x, num_hops=2)
    reference = bfs_means(graph, x.double().numpy(), np.ones(2 * m, bool), 2)
    assert np.abs(views[2].double().numpy() - reference[1]).max() < 5e-3


def test_results_do_not_depend_on_chunk_size_threads_or_kernel_path(monkeypatch):
    edge_index, _ = random_graph(300, 700, seed=11)
    x = torch.randn(300, 4, generator=torch.Generator().manual_seed(0))
    observed = torch.rand(300, generator=torch.Generator().manual_seed(1)) < 0.5

    def run(**kwargs):
        return neighbourhood_views(edge_index, x, num_hops=3, observed=observed, **kwargs)

    reference = run(chunk_size=300, threads=1)
    for kwargs in ({"chunk_size": 1}, {"chunk_size": 7, "threads": 2}, {"chunk_size": 64}):
        for got, want in zip(run(**kwargs), reference):
            assert torch.equal(got, want), kwargs
    monkeypatch.setattr(functional, "_CSR_MATMAT", None)  # scipy's public product instead
    for got, want in zip(run(chunk_size=50), reference):
        assert torch.equal(got, want)


def test_isolated_nodes_and_empty_layers_give_zero_rows():
    edge_index = torch.tensor([[0, 1], [1, 2]])  # path 0 - 1 - 2; nodes 3, 4 isolated
    x = torch.arange(10.0).reshape(5, 2) + 1
    views = neighbourhood_views(edge_index, x, num_hops=3)
    for k in (1, 2, 3):
        assert not views[k][3:].any()
    assert not views[3].any()  # the path has no node at distance 3
    torch.testing.assert_close(views[1][1], (x[0] + x[2]) / 2)
    torch.testing.assert_close(views[2][0], x[2])
    none = neighbourhood_views(torch.zeros(2, 0, dtype=torch.long), torch.ones(1, 2), num_hops=2)
    assert [v.tolist() for v in none] == [[[1.0, 1.0]], [[0.0, 0.0]], [[0.0, 0.0]]]


def test_missing_attributes_never_contribute():
    edge_index, _ = random_graph(120, 300, seed=5)
    x = torch.randn(120, 3, generator=torch.Generator().manual_seed(0))
    observed = torch.rand(120, generator=torch.Generator().manual_seed(1)) < 0.4
    polluted = x.clone()
    polluted[~observed] = 1e6  # huge values on the unobserved rows: H must not move
    before = neighbourhood_views(edge_index, x, num_hops=3, observed=observed)
    after = neighbourhood_views(edge_index, polluted, num_hops=3, observed=observed)
    for a, b in zip(before, after):
        assert torch.equal(a, b)
    assert not before[0][~observed].any()
    with pytest.raises(ValueError, match="marks none of the 120 nodes observed"):
        neighbourhood_views(edge_index, x, num_hops=2, observed=torch.zeros(120).bool())


def test_self_loops_and_duplicate_edges_are_ignored():
    edge_index, _ = random_graph(50, 90, seed=2)
    x = torch.randn(50, 3, generator=torch.Generator().manual_seed(0))
    loops = torch.arange(50).repeat(2, 1)
    for undirected, noisy in (
        (True, torch.cat([edge_index, loops, edge_index, edge_index.flip(0)], 1)),
        (False, torch.cat([edge_index, loops, edge_index], 1)),
    ):
        clean = neighbourhood_views(edge_index, x, num_hops=3, undirected=undirected)
        dirty = neighbourhood_views(noisy, x, num_hops=3, undirected=undirected)
        for a, b in zip(clean, dirty):
            assert torch.equal(a, b)
    twice = torch.tensor([[0, 0, 0], [1, 1, 0]])  # 0 -> 1 twice, and a self loop
    directed = neighbourhood_views(twice, x[:2], num_hops=1, undirected=False)
    torch.testing.assert_close(directed[1], torch.stack([x[1], torch.zeros(3)]))


def test_directed_follows_edges_out_of_each_node():
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 3]])  # 0 -> 1 -> 2 -> 3
    x = torch.eye(4)
    out = neighbourhood_views(edge_index, x, num_hops=3, undirected=False)
    assert torch.equal(out[3][0], x[3]) and not out[1][3].any()
    into = neighbourhood_views(edge_index.flip(0), x, num_hops=3, undirected=False)
    assert torch.equal(into[3][3], x[0]) and not into[1][0].any()


def test_inputs_are_not_modified():
    edge_index, _ = random_graph(40, 80, seed=4)
    x = torch.randn(40, 3, generator=torch.Generator().manual_seed(0))
    observed = torch.rand(40, generator=torch.Generator().manual_seed(1)) < 0.5
    copies = [t.clone() for t in (edge_index, x, observed)]
    views = neighbourhood_views(edge_index, x, num_hops=2, observed=observed)
    sign = sign_views(edge_index, x, None, 2, observed)
    mean_impute(x, observed)
    for original, copy in zip((edge_index, x, observed), copies):
        assert torch.equal(original, copy)
    views[1] += 1  # outputs are new tensors
    sign[0] += 1
    assert torch.equal(x, copies[1])


def test_dtypes_and_wide_degrees():
    edge_index = torch.stack([torch.zeros(300, dtype=torch.long), torch.arange(1, 301)])
    x = torch.randn(301, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    views = neighbourhood_views(edge_index, x, num_hops=2)  # a star: int16 counts (degree 300)
    assert all(v.dtype == torch.float64 for v in views)
    torch.testing.assert_close(views[1][0], x[1:].mean(0))
    torch.testing.assert_close(views[2][5], (x[1:].sum(0) - x[5]) / 299)
    assert not views[2][0].any()
    half = neighbourhood_views(edge_index[:, :20], x[:21].half(), num_hops=2)
    assert all(v.dtype == torch.float16 for v in half)


BAD = [
    ({"edge_index": torch.tensor([0, 1])}, ValueError, r"shape \(2, num_edges\)"),
    ({"edge_index": torch.tensor([[0.0], [1.0]])}, TypeError, "integer node ids"),
    ({"edge_index": torch.tensor([[0], [9]])}, ValueError, r"ids in \[0, 9\]"),
    ({"edge_index": torch.tensor([[-1], [0]])}, ValueError, "node ids"),
    ({"x": torch.ones(4)}, ValueError, "2-D"),
    ({"x": torch.ones(4, 2, dtype=torch.long)}, TypeError, "floating-point"),
    ({"x": torch.tensor([[1.0], [float("nan")], [0.0], [0.0]])}, ValueError, "NaN/inf"),
    ({"num_nodes": 5}, ValueError, "num_nodes"),
    ({"num_hops": 0}, ValueError, "num_hops"),
    ({"num_hops": 1.5}, TypeError, "num_hops"),
    ({"observed": torch.ones(4)}, TypeError, "bool mask"),
    ({"observed": torch.ones(3, dtype=torch.bool)}, ValueError, r"shape \(4,\)"),
    ({"chunk_size": 0}, ValueError, "chunk_size"),
    ({"undirected": 1}, TypeError, "undirected"),
    ({"threads": 0}, ValueError, "threads"),
]


@pytest.mark.parametrize(("kwargs", "error", "match"), BAD)
def test_bad_input_gets_a_clear_error(kwargs, error, match):
    args = {"edge_index": torch.tensor([[0, 1], [1, 2]]), "x": torch.ones(4, 2), **kwargs}
    with pytest.raises(error, match=match):
        neighbourhood_views(**args)


def test_bad_input_of_sign_and_imputation():
    with pytest.raises(ValueError, match="no node is observed"):
        mean_impute(torch.ones(3, 2), torch.zeros(3, dtype=torch.bool))
    with pytest.raises(ValueError, match="num_hops"):
        sign_views(torch.tensor([[0], [1]]), torch.ones(2, 2), None, 0)
    with pytest.raises(ValueError, match="ids in"):
        graph_adjacency(torch.tensor([[0], [3]]), 2)


def test_sign_views_equal_a_dense_reference():
    edge_index, graph = from_networkx(nx.florentine_families_graph())
    n = graph.number_of_nodes()
    x = torch.randn(n, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    observed = torch.rand(n, generator=torch.Generator().manual_seed(1)) < 0.6
    dirty = torch.cat([edge_index, torch.tensor([[0, 1], [0, 1]]), edge_index], 1)
    views = sign_views(dirty, x, n, 3, observed)
    adjacency = torch.zeros(n, n, dtype=torch.float64)
    adjacency[edge_index[0], edge_index[1]] = 1
    adjacency = adjacency.maximum(adjacency.T) + torch.eye(n, dtype=torch.float64)
    scale = adjacency.sum(1).rsqrt()
    normalised = scale[:, None] * adjacency * scale[None, :]
    imputed = torch.where(observed[:, None], x, x[observed].mean(0))
    assert torch.equal(views[0], imputed)
    for k in range(1, 4):
        torch.testing.assert_close(views[k], torch.linalg.matrix_power(normalised, k) @ imputed)
    assert torch.equal(sign_views(edge_index, x, n, 1)[0], x)  # all observed: x itself


def test_benchmark_quick_runs():
    bench = load_script("cmv_nd_views")
    result = bench.main(["--quick"])
    assert result["check_gap"] < 1e-5
    (cell,) = result["cells"]
    assert cell["bfs"]["max_gap"] < 1e-5
    assert set(cell["seconds"]) == set(bench.METHODS) >= {"cmv_nd", "sign_scipy", "sign_torch"}
