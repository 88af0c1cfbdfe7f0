"""Ancestral-graph utilities against peers and brute force: m-separation equals networkx's
d-separation on DAGs and the DAG's d-separation on the MAG of a DAG with latents; the MAG's
adjacencies equal the brute-force "no separating set" rule; conversions round-trip through
causal-learn and networkx; the scores equal the reference's counting on hand-made graphs."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

from lightning_info.methods.ancestral_search.graphs import (
    ARROW,
    CIRCLE,
    TAIL,
    ancestors,
    canonical_dag,
    check_marks,
    edge_types,
    from_causallearn,
    from_edges,
    from_networkx,
    graph_scores,
    m_separated,
    mag_from_dag,
    pag_from_dag,
    pag_from_mag,
    to_causallearn,
    to_networkx,
)


def random_dag(nodes: int, density: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    order = rng.permutation(nodes)
    dag = np.zeros((nodes, nodes), dtype=bool)
    for i in range(nodes):
        for j in range(i + 1, nodes):
            if rng.random() < density:
                dag[order[i], order[j]] = True
    return dag


def dag_marks(dag: np.ndarray) -> np.ndarray:
    return from_edges(len(dag), directed=list(zip(*np.nonzero(dag))))


def subsets(nodes):
    return itertools.chain.from_iterable(
        itertools.combinations(nodes, r) for r in range(len(nodes) + 1)
    )


@pytest.mark.parametrize("seed", range(4))
def test_m_separation_is_networkx_d_separation_on_dags(seed):
    dag = random_dag(7, 0.35, seed)
    graph = nx.DiGraph(list(zip(*np.nonzero(dag))))
    graph.add_nodes_from(range(7))
    marks = dag_marks(dag)
    for x, y in itertools.combinations(range(7), 2):
        rest = [n for n in range(7) if n not in (x, y)]
        for z in subsets(rest):
            expected = nx.is_d_separator(graph, {x}, {y}, set(z))
            assert m_separated(marks, x, y, z) == expected, (x, y, z)


@pytest.mark.parametrize("seed", range(5))
def test_mag_of_a_dag_with_latents_keeps_its_separations(seed):
    dag = random_dag(8, 0.35, seed)
    latent = [int(n) for n in np.random.default_rng(seed).choice(8, 2, replace=False)]
    observed = [n for n in range(8) if n not in latent]
    marks, mag = dag_marks(dag), mag_from_dag(dag, latent)
    check_marks(mag)
    anc = ancestors(mag)
    assert not (anc & anc.T & ~np.eye(len(mag), dtype=bool)).any()  # still acyclic
    for i, j in itertools.combinations(range(len(observed)), 2):
        rest = [k for k in range(len(observed)) if k not in (i, j)]
        separable = False
        for z in subsets(rest):
            in_dag = m_separated(marks, observed[i], observed[j], [observed[k] for k in z])
            assert m_separated(mag, i, j, z) == in_dag, (i, j, z)
            separable |= in_dag
        assert (mag[i, j] != 0) == (not separable)  # adjacent iff no separating set


def test_the_method_notes_toy_graphs():
    # X1 -> X2 <- X3 -> X4 <- X5, X6 -> X4, X3 hidden: X2 <-> X4
    dag = np.zeros((6, 6), dtype=bool)
    for a, b in [(0, 1), (2, 1), (2, 3), (4, 3), (5, 3)]:
        dag[a, b] = True
    mag = mag_from_dag(dag, [2])  # observed X1, X2, X4, X5, X6
    assert edge_types(mag)[1, 2] == 6  # X2 <-> X4
    expected = from_edges(5, directed=[(0, 1), (3, 2), (4, 2)], bidirected=[(1, 2)])
    assert np.array_equal(mag, expected)
    # L -> X2, L -> X3, X1 -> X2, X4 -> X3 with L hidden: X2 <-> X3, X1 -> X2, X4 -> X3
    dag = np.zeros((5, 5), dtype=bool)
    for a, b in [(0, 2), (0, 3), (1, 2), (4, 3)]:
        dag[a, b] = True
    expected = from_edges(4, directed=[(0, 1), (3, 2)], bidirected=[(1, 2)])
    assert np.array_equal(mag_from_dag(dag, [0]), expected)


def test_conversions_round_trip_through_causallearn_and_networkx():
    marks = from_edges(
        6,
        directed=[(0, 1)],
        bidirected=[(1, 2)],
        undirected=[(2, 3)],
        partially_directed=[(3, 4)],
        nondirected=[(4, 5)],
    )
    graph = to_causallearn(marks)
    assert np.array_equal(from_causallearn(graph), marks)
    edges = {str(e) for e in graph.get_graph_edges()}
    assert edges == {"X1 --> X2", "X2 <-> X3", "X3 --- X4", "X4 o-> X5", "X5 o-o X6"}
    names = list("abcdef")
    nxg = to_networkx(marks, names)
    assert nxg.edges["d", "e"]["marks"] == {"d": "circle", "e": "arrow"}
    assert np.array_equal(from_networkx(nxg, names), marks)


def test_edge_types_and_ancestors():
    marks = from_edges(
        4, directed=[(0, 1), (1, 2)], bidirected=[(2, 3)], partially_directed=[(0, 3)]
    )
    types = edge_types(marks)
    assert types[0, 1] == 2 and types[1, 0] == -2 and types[2, 3] == 6 and types[0, 3] == 2
    anc = ancestors(marks)
    assert anc[0, 2] and not anc[2, 0] and not anc[2, 3] and anc.diagonal().all()


def test_scores_count_as_the_reference_does():
    truth = from_edges(5, directed=[(0, 1), (1, 2)], bidirected=[(2, 3)], undirected=[(3, 4)])
    # (0,1) right; (1,2) reversed: misoriented; (2,3) as -> : misoriented; (3,4) any: TP;
    # (0,4) extra: FP
    est = from_edges(5, directed=[(0, 1), (2, 1), (2, 3), (4, 3), (0, 4)])
    scores = graph_scores(est, truth)
    tp, fp, wrong, fn = 2, 1, 2, 0
    assert scores["orientation_precision"] == pytest.approx(tp / (tp + fp + wrong))
    assert scores["orientation_recall"] == pytest.approx(tp / (tp + fn))
    assert scores["skeleton_precision"] == pytest.approx(4 / 5)
    assert scores["skeleton_recall"] == 1.0
    assert graph_scores(truth, truth)["orientation_f1"] == 1.0
    empty = np.zeros((5, 5), dtype=np.int8)
    assert graph_scores(empty, truth)["orientation_f1"] == 0.0


def test_bad_graphs_are_refused():
    with pytest.raises(ValueError, match="one end only"):
        check_marks(np.array([[0, ARROW], [0, 0]]))
    with pytest.raises(ValueError, match="self loop"):
        check_marks(np.array([[TAIL, 0], [0, 0]]))
    with pytest.raises(ValueError, match="circle marks"):
        m_separated(from_edges(2, nondirected=[(0, 1)]), 0, 1)
    with pytest.raises(ValueError, match="cycle"):
        mag_from_dag(np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]], dtype=bool))
    with pytest.raises(ValueError, match="disjoint"):
        m_separated(from_edges(3, directed=[(0, 1)]), 0, 1, [1])


@pytest.mark.parametrize("seed", range(4))
def test_oracle_pag_has_the_mags_skeleton_and_only_its_marks(seed):
    dag = random_dag(9, 0.3, seed)
    latent = [int(n) for n in np.random.default_rng(seed + 10).choice(9, 2, replace=False)]
    mag, pag = mag_from_dag(dag, latent), pag_from_dag(dag, latent)
    assert np.array_equal(mag != 0, pag != 0)
    determined = (pag != CIRCLE) & (pag != 0)
    assert np.array_equal(pag[determined], mag[determined])  # invariant marks are the MAG's


def test_oracle_pag_of_the_first_toy_graph():
    dag = np.zeros((6, 6), dtype=bool)
    for a, b in [(0, 1), (2, 1), (2, 3), (4, 3), (5, 3)]:
        dag[a, b] = True
    expected = from_edges(
        5, bidirected=[(1, 2)], partially_directed=[(0, 1), (3, 2), (4, 2)]
    )  # X1 o-> X2 <-> X4 <-o X5, X6 o-> X4
    assert np.array_equal(pag_from_dag(dag, [2]), expected)


@pytest.mark.parametrize("seed", range(4))
def test_the_pag_of_a_mag_is_the_pag_of_the_dag_it_came_from(seed):
    dag = random_dag(9, 0.3, seed)
    latent = [int(n) for n in np.random.default_rng(seed + 20).choice(9, 2, replace=False)]
    mag = mag_from_dag(dag, latent)
    assert np.array_equal(pag_from_mag(mag), pag_from_dag(dag, latent))
    canonical, hidden = canonical_dag(mag)
    assert np.array_equal(mag_from_dag(canonical, hidden), mag)
    with pytest.raises(ValueError, match="selection"):
        canonical_dag(from_edges(2, undirected=[(0, 1)]))
