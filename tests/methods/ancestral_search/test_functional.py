"""The search steps: the conditioning-set search against exhaustive enumeration, the node
step's drop rules on a hand-made score, ancestrality, the edge step's invariants, and the
method note's two toy graphs recovered from samples as N grows."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from lightning_info.methods.ancestral_search.datamodule import (
    TOY_GRAPHS,
    monotone_binary_samples,
)
from lightning_info.methods.ancestral_search.functional import (
    BIDIRECTED,
    DIRECTED,
    UNDIRECTED,
    best_conditioning_set,
    edge_deltas,
    edge_step,
    initial_graph,
    is_ancestral,
    marks_from_types,
    node_step,
)
from lightning_info.methods.ancestral_search.graphs import edge_types, from_edges
from lightning_info.methods.ancestral_search.information import InformationCache

TOYS = {  # the expected MAG and the sample size at which it is recovered
    "two_colliders": (
        *TOY_GRAPHS["two_colliders"],
        from_edges(5, directed=[(0, 1), (3, 2), (4, 2)], bidirected=[(1, 2)]),
        100_000,
    ),
    "confounded_pair": (
        *TOY_GRAPHS["confounded_pair"],
        from_edges(4, directed=[(0, 1), (3, 2)], bidirected=[(1, 2)]),
        20_000,
    ),
}


def search(codes: np.ndarray) -> np.ndarray:
    score = InformationCache(codes)
    return edge_step(node_step(initial_graph(codes), score), score)


@pytest.mark.parametrize("toy", TOYS)
@pytest.mark.parametrize("seed", [0, 1])
def test_the_toy_graphs_are_recovered_at_large_n(toy, seed):
    dag, latent, expected, n = TOYS[toy]
    observed = [v for v in range(len(dag)) if v not in latent]
    codes = monotone_binary_samples(dag, n, seed)[:, observed]
    assert np.array_equal(marks_from_types(search(codes)), expected)


class TableScore:
    """A hand-made score: I'(x; y | z) read from a table keyed by (x, y, sorted z), 0 when
    absent, symmetric in x and y."""

    def __init__(self, table):
        self.table = {(min(x, y), max(x, y), tuple(sorted(z))): v for (x, y, z), v in table.items()}

    def __call__(self, x, y, z):
        (x,), (y,) = x, y
        return self.table.get((min(x, y), max(x, y), tuple(sorted(z))), 0.0)


def _chain(score, target, order):
    return sum(score((target,), (c,), tuple(order[:k])) for k, c in enumerate(order))


@pytest.mark.parametrize("seed", range(6))
def test_conditioning_set_search_is_the_best_subset_for_up_to_four_candidates(seed):
    rng = np.random.default_rng(seed)
    candidates = [1, 2, 3, 4]
    table = {}
    for size in range(4):
        for z in itertools.combinations(candidates, size):
            for c in candidates:
                if c not in z:
                    table[(0, c, z)] = float(rng.normal(0.5, 1.0))
    score = TableScore(table)
    chosen = best_conditioning_set(score, 0, candidates)
    # the search is a level-wise best: no set of the chosen size scores more, and no set of
    # the next size scores more than it (else the search would have gone on)
    value = _chain(score, 0, list(chosen))
    same_size = [_chain(score, 0, list(s)) for s in itertools.combinations(candidates, len(chosen))]
    assert value == pytest.approx(max(same_size))  # the empty set scores 0 = its own max
    if len(chosen) < 4:
        bigger = [
            _chain(score, 0, list(s)) for s in itertools.combinations(candidates, len(chosen) + 1)
        ]
        assert max(bigger) <= value + 1e-12


def test_node_step_removes_mutual_drops_and_orients_one_sided_ones():
    # a - b - c undirected. I'(b; a) = 5, I'(b; c) = -1, I'(b; c | a) = 2: b keeps a, then c
    # (its chain gain 5 + 2); c's only candidate b scores -1, so c drops b: b is no parent of
    # c, the edge becomes c -> b; a and b keep each other
    types = np.zeros((3, 3), dtype=np.int8)
    for u, v in [(0, 1), (1, 2)]:
        types[u, v] = types[v, u] = UNDIRECTED
    score = TableScore({(1, 0, ()): 5.0, (1, 2, ()): -1.0, (1, 2, (0,)): 2.0})
    assert best_conditioning_set(score, 1, [0, 2]) == (0, 2)
    assert best_conditioning_set(score, 2, [1]) == ()
    out = node_step(types, score)
    assert out[2, 1] == DIRECTED and out[1, 2] == -DIRECTED  # c -> b
    assert out[0, 1] in (DIRECTED, -DIRECTED) and out[0, 2] == 0  # a - b oriented acyclically
    # both ends drop: the edge goes
    dropped = node_step(types, TableScore({(0, 1, ()): 5.0}))
    assert dropped[1, 2] == 0 and dropped[0, 1] != 0


def test_is_ancestral():
    assert is_ancestral(edge_types(from_edges(3, directed=[(0, 1), (1, 2)])))
    assert not is_ancestral(edge_types(from_edges(3, directed=[(0, 1), (1, 2), (2, 0)])))
    assert not is_ancestral(
        edge_types(from_edges(3, directed=[(0, 1), (1, 2)], bidirected=[(0, 2)]))
    )
    assert is_ancestral(edge_types(from_edges(3, directed=[(0, 1)], bidirected=[(1, 2)])))


def test_edge_step_keeps_the_graph_ancestral_and_stops_at_no_improving_move():
    dag = np.zeros((5, 5), dtype=bool)
    for a, b in [(0, 1), (1, 2), (2, 3), (0, 3), (4, 3), (4, 1)]:
        dag[a, b] = True
    codes = monotone_binary_samples(dag, 5000, 0)
    score = InformationCache(codes)
    start = node_step(initial_graph(codes), score)
    visited = []
    final = edge_step(start, score, on_move=lambda types, move: visited.append((types, move)))
    assert all(is_ancestral(types) for types, _ in visited)
    assert all(move[0] < 0 for _, move in visited)
    assert len({types.tobytes() for types, _ in visited}) == len(visited)  # never revisits
    remaining = [d for d, *_ in edge_deltas(final, score)]
    assert not remaining or min(remaining) >= 0 or len(visited) == 1000
    assert np.array_equal(final != 0, start != 0)  # the edge step only reorients
    assert set(np.unique(final)) <= {0, DIRECTED, -DIRECTED, BIDIRECTED}
