"""Ancestral graphs as edge-mark matrices: construction, conversions, ancestors, m-separation,
the MAG of a DAG with latent variables, and the reference's precision / recall / F1.

**Marks.** A graph over ``p`` nodes is a ``(p, p)`` int8 matrix ``marks`` with ``marks[i, j]``
the mark at ``j`` on the edge between ``i`` and ``j``: :data:`NONE` (no edge), :data:`TAIL`,
:data:`ARROW` or :data:`CIRCLE` (a PAG's undetermined mark). ``i -> j`` is ``marks[j, i] = TAIL,
marks[i, j] = ARROW``; ``i <-> j`` has arrows at both ends; a MAG has tails and arrows only, a
PAG also circles. (causal-learn's ``GeneralGraph.graph[a, b]`` is the mark at ``a``, coded -1
tail, 1 arrow, 2 circle: :func:`to_causallearn` / :func:`from_causallearn` translate.)

**m-separation** (Richardson & Spirtes, "Ancestral graph Markov models", Ann. Stat. 2002,
Theorem 3.18): ``X`` and ``Y`` are m-separated by ``Z`` in an ancestral graph ``G`` iff they are
separated by ``Z`` in the augmented graph of ``G`` restricted to ``An(X u Y u Z)``, whose edges
join every two nodes connected by a collider path. A collider path's inner nodes are joined by
bidirected edges, so each bidirected-connected component ``C`` of the restricted graph makes
``C`` plus every node with an arrowhead into ``C`` a clique (for a DAG: a node and its parents,
i.e. moralisation, and m-separation is d-separation).

**The MAG of a DAG** with latents ``L`` (ibid., section 4.2): observed ``a, b`` are adjacent
iff an inducing path relative to ``L`` joins them, which holds iff they are not d-separated by
``An({a, b}) \\ (L u {a, b})`` (ibid., Theorem 4.2); an edge is ``a -> b`` when ``a`` is an
ancestor of ``b`` in the DAG, ``b -> a`` in the reverse case, ``a <-> b`` otherwise.

**The PAG** of that DAG (the marks shared by every MAG Markov equivalent to it) is FCI run with
a d-separation oracle on the DAG (causal-learn's ``fci`` with its ``d_separation`` test):
polynomial in practice, where causal-learn's ``dag2pag`` enumerates exponentially many sets.
The PAG of a MAG is that of its canonical DAG (a latent parent for every bidirected edge).

**Scores** (the reference benchmark's ``compute_fscore_metrics``): every node pair has an edge
type -- none, undirected (``-``, ``o-o``, ``o-``), directed (``->``, ``o->``) or bidirected. Against
the truth: a true positive is an estimated edge of the true type, or any estimated edge where
the truth is undirected; a misoriented edge is an estimated edge of another type where the truth
is directed or bidirected; precision ``TP / (TP + FP + misoriented)``, recall ``TP / (TP + FN)``
(FN: true edges missing), F1 their harmonic mean, all 0 when ``TP = 0``. The skeleton's
precision, recall and F1 count adjacencies only.
"""

from __future__ import annotations

import contextlib
import io
import numbers
import warnings
from collections.abc import Iterable, Sequence

import numpy as np

__all__ = [
    "ARROW",
    "CIRCLE",
    "NONE",
    "TAIL",
    "ancestors",
    "check_marks",
    "edge_types",
    "from_causallearn",
    "from_edges",
    "from_networkx",
    "graph_scores",
    "m_separated",
    "mag_from_dag",
    "canonical_dag",
    "pag_from_dag",
    "pag_from_mag",
    "to_causallearn",
    "to_networkx",
]

NONE, TAIL, ARROW, CIRCLE = 0, 1, 2, 3
MARK_NAMES = {TAIL: "tail", ARROW: "arrow", CIRCLE: "circle"}
_NO_EDGE, _UNDIRECTED, _FORWARD, _BACKWARD, _BIDIRECTED = 0, 1, 2, -2, 6


def check_marks(marks: np.ndarray) -> np.ndarray:
    """``marks`` as an int8 array after checking it is a valid edge-mark matrix (square, no
    self loops, marks in {0, 1, 2, 3}, an edge marked at both ends or at neither)."""
    marks = np.asarray(marks)
    if marks.dtype == np.bool_:
        raise TypeError(
            "`marks` must be an int edge-mark matrix (0 none, 1 tail, 2 arrow, 3 circle), got a "
            "bool matrix; for a DAG's adjacency matrix use mag_from_dag(dag)."
        )
    if marks.ndim != 2 or marks.shape[0] != marks.shape[1]:
        raise ValueError(f"`marks` must be a square (p, p) matrix, got shape {marks.shape}.")
    if not np.isin(marks, (NONE, TAIL, ARROW, CIRCLE)).all():
        raise ValueError("`marks` may hold only 0 (none), 1 (tail), 2 (arrow) and 3 (circle).")
    if np.diagonal(marks).any():
        raise ValueError("`marks` has a self loop: its diagonal must be 0.")
    if not np.array_equal(marks == NONE, marks.T == NONE):
        raise ValueError("an edge of `marks` is marked at one end only: mark both ends.")
    return marks.astype(np.int8)


def from_edges(
    num_nodes: int,
    directed: Iterable[tuple[int, int]] = (),
    bidirected: Iterable[tuple[int, int]] = (),
    undirected: Iterable[tuple[int, int]] = (),
    partially_directed: Iterable[tuple[int, int]] = (),
    nondirected: Iterable[tuple[int, int]] = (),
) -> np.ndarray:
    """A mark matrix from edge lists: ``directed`` ``(a, b)`` is ``a -> b``, ``bidirected``
    ``a <-> b``, ``undirected`` ``a - b``, ``partially_directed`` ``a o-> b``, ``nondirected``
    ``a o-o b``."""
    if isinstance(num_nodes, (bool, np.bool_)) or not isinstance(num_nodes, numbers.Integral):
        raise TypeError(f"`num_nodes` must be an int, got {num_nodes!r}.")
    marks = np.zeros((num_nodes, num_nodes), dtype=np.int8)
    kinds = (
        (directed, TAIL, ARROW),
        (bidirected, ARROW, ARROW),
        (undirected, TAIL, TAIL),
        (partially_directed, CIRCLE, ARROW),
        (nondirected, CIRCLE, CIRCLE),
    )
    for edges, at_a, at_b in kinds:
        for a, b in edges:
            _node_set((a, b), num_nodes, "edge")
            if a == b:
                raise ValueError(f"self loop at node {a}.")
            if marks[a, b]:
                raise ValueError(f"two edges between nodes {a} and {b}.")
            marks[b, a], marks[a, b] = at_a, at_b
    return marks


def edge_types(marks: np.ndarray) -> np.ndarray:
    """``(p, p)`` edge types: 0 none, 1 undirected (tails and circles without an arrow), 2 at
    ``[a, b]`` and -2 at ``[b, a]`` for ``a -> b`` or ``a o-> b``, 6 for ``a <-> b``."""
    marks = check_marks(marks)
    head, back = marks == ARROW, marks.T == ARROW
    types = np.where(marks != NONE, _UNDIRECTED, _NO_EDGE)
    types = np.where(head & ~back, _FORWARD, types)
    types = np.where(back & ~head, _BACKWARD, types)
    return np.where(head & back, _BIDIRECTED, types).astype(np.int8)


def graph_scores(estimated: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """Skeleton and orientation precision, recall and F1 of ``estimated`` against ``truth``
    (module docstring), over the node pairs ``i < j``."""
    estimated_types, true_types = edge_types(estimated), edge_types(truth)
    if estimated_types.shape != true_types.shape:
        raise ValueError(
            f"the graphs have {estimated_types.shape[0]} and {true_types.shape[0]} nodes."
        )
    upper = np.triu_indices(true_types.shape[0], 1)
    est, true = estimated_types[upper], true_types[upper]
    scores = {}
    exact = (est == true) & (true != _NO_EDGE)
    tp = int(exact.sum() + ((true == _UNDIRECTED) & (est != _NO_EDGE) & ~exact).sum())
    fn = int(((true != _NO_EDGE) & (est == _NO_EDGE)).sum())
    fp = int(((true == _NO_EDGE) & (est != _NO_EDGE)).sum())
    wrong = (true != _NO_EDGE) & (est != _NO_EDGE) & (est != true) & (true != _UNDIRECTED)
    scores.update(_prf("orientation", tp, tp + fp + int(wrong.sum()), tp + fn))
    adjacent = int(((true != _NO_EDGE) & (est != _NO_EDGE)).sum())
    scores.update(_prf("skeleton", adjacent, int((est != _NO_EDGE).sum()), int((true != 0).sum())))
    return scores


def _prf(prefix: str, tp: int, predicted: int, actual: int) -> dict[str, float]:
    precision = tp / predicted if tp else 0.0
    recall = tp / actual if tp else 0.0
    f1 = 2 * precision * recall / (precision + recall) if tp else 0.0
    return {f"{prefix}_precision": precision, f"{prefix}_recall": recall, f"{prefix}_f1": f1}


def ancestors(marks: np.ndarray) -> np.ndarray:
    """``(p, p)`` bool, ``[a, b]`` true iff ``a`` is an ancestor of ``b`` (a directed path
    ``a -> ... -> b``, or ``a = b``), by repeated squaring of the reachability matrix."""
    marks = check_marks(marks)
    reach = ((marks == ARROW) & (marks.T == TAIL)) | np.eye(len(marks), dtype=bool)
    while True:
        longer = (reach.astype(np.int64) @ reach.astype(np.int64)) > 0
        if np.array_equal(longer, reach):
            return reach
        reach = longer


def _node_set(nodes: int | Iterable[int], count: int, name: str) -> set[int]:
    """The node indices ``nodes`` (one or several) as a set, each checked to be an int in
    ``[0, count)``: a negative index would name another node, a float would be truncated."""
    nodes = [nodes] if np.isscalar(nodes) else list(nodes)
    for n in nodes:
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, numbers.Integral):
            raise TypeError(f"`{name}` must hold integer node indices, got {n!r}.")
        if not 0 <= n < count:
            raise ValueError(
                f"`{name}` names node {n}, but the graph has nodes 0..{count - 1}; "
                "pass indices of its nodes."
            )
    return {int(n) for n in nodes}


def m_separated(
    marks: np.ndarray, x: int | Iterable[int], y: int | Iterable[int], z: Iterable[int] = ()
) -> bool:
    """Whether ``x`` and ``y`` are m-separated by ``z`` in the ancestral graph ``marks``
    (tails and arrows only; the augmented-graph criterion of the module docstring)."""
    marks = check_marks(marks)
    if (marks == CIRCLE).any():
        raise ValueError("m-separation is defined on MAGs: `marks` holds circle marks (a PAG).")
    p = len(marks)
    xs, ys, zs = _node_set(x, p, "x"), _node_set(y, p, "y"), _node_set(z, p, "z")
    if not xs or not ys:
        raise ValueError("`x` and `y` must name at least one node each.")
    if xs & ys or (xs | ys) & zs:
        raise ValueError("`x`, `y` and `z` must be disjoint.")
    keep = np.flatnonzero(ancestors(marks)[:, sorted(xs | ys | zs)].any(axis=1))
    sub = marks[np.ix_(keep, keep)]
    moral = sub != NONE
    bidirected = (sub == ARROW) & (sub.T == ARROW)
    for component in _components(bidirected):
        into = (sub[:, component] == ARROW).any(axis=1)  # an arrowhead into the component
        clique = np.union1d(component, np.flatnonzero(into))
        moral[np.ix_(clique, clique)] = True
    np.fill_diagonal(moral, False)
    index = {node: k for k, node in enumerate(keep)}
    blocked = np.zeros(len(keep), dtype=bool)
    blocked[[index[n] for n in zs]] = True
    frontier = [index[n] for n in xs]
    seen = np.zeros(len(keep), dtype=bool)
    seen[frontier] = True
    targets = {index[n] for n in ys}
    while frontier:
        node = frontier.pop()
        if node in targets:
            return False
        step = np.flatnonzero(moral[node] & ~seen & ~blocked)
        seen[step] = True
        frontier.extend(step.tolist())
    return True


def _components(adjacency: np.ndarray) -> list[np.ndarray]:
    """Connected components of a symmetric bool adjacency, each a sorted index array."""
    label = -np.ones(len(adjacency), dtype=np.int64)
    components = []
    for start in range(len(adjacency)):
        if label[start] >= 0:
            continue
        label[start] = len(components)
        stack, members = [start], [start]
        while stack:
            for neighbour in np.flatnonzero(adjacency[stack.pop()] & (label < 0)):
                label[neighbour] = len(components)
                stack.append(neighbour)
                members.append(neighbour)
        components.append(np.sort(np.asarray(members)))
    return components


def _dag_marks(dag: np.ndarray) -> np.ndarray:
    dag = np.asarray(dag, dtype=bool)
    if dag.ndim != 2 or dag.shape[0] != dag.shape[1] or np.diagonal(dag).any():
        raise ValueError("`dag` must be a square boolean matrix, dag[a, b] for a -> b, no loops.")
    if (dag & dag.T).any():
        raise ValueError("`dag` has an edge in both directions.")
    marks = np.where(dag, ARROW, NONE) + np.where(dag.T, TAIL, NONE)
    anc = ancestors(marks)
    if (anc & anc.T & ~np.eye(len(dag), dtype=bool)).any():
        raise ValueError("`dag` has a directed cycle.")
    return marks.astype(np.int8)


def mag_from_dag(dag: np.ndarray, latent: Sequence[int] = ()) -> np.ndarray:
    """The MAG over the observed nodes (in their order) of the DAG ``dag`` (``dag[a, b]`` for
    ``a -> b``) with the ``latent`` nodes marginalised (module docstring)."""
    marks = _dag_marks(dag)
    latent_set = _node_set(latent, len(marks), "latent")
    observed = [n for n in range(len(marks)) if n not in latent_set]
    anc = ancestors(marks)
    mag = np.zeros((len(observed), len(observed)), dtype=np.int8)
    for i, a in enumerate(observed):
        for j in range(i + 1, len(observed)):
            b = observed[j]
            near = anc[:, [a, b]].any(axis=1)
            separator = [n for n in observed if near[n] and n not in (a, b)]
            if m_separated(marks, a, b, separator):
                continue
            if anc[a, b]:
                mag[j, i], mag[i, j] = TAIL, ARROW
            elif anc[b, a]:
                mag[j, i], mag[i, j] = ARROW, TAIL
            else:
                mag[j, i] = mag[i, j] = ARROW
    return mag


def pag_from_dag(dag: np.ndarray, latent: Sequence[int] = ()) -> np.ndarray:
    """The PAG over the observed nodes (in their order) of ``dag`` with ``latent``
    marginalised: FCI with causal-learn's d-separation oracle (module docstring)."""
    from lightning_info.core.optional import require_extra

    require_extra("causallearn", "causal", "The oracle PAG")
    import networkx as nx
    from causallearn.search.ConstraintBased.FCI import fci

    marks = _dag_marks(dag)
    latent_set = _node_set(latent, len(marks), "latent")
    observed = [n for n in range(len(marks)) if n not in latent_set]
    # causal-learn's oracle reads the DAG by column index: observed nodes first, latents after
    order = {node: k for k, node in enumerate([*observed, *sorted(latent_set)])}
    truth = nx.DiGraph()
    truth.add_nodes_from(range(len(marks)))
    truth.add_edges_from((order[a], order[b]) for a, b in zip(*np.nonzero(np.asarray(dag))))
    # the placeholder data has one row, which FCI warns of; its oracle path prints every edge
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore", UserWarning)
        graph, _ = fci(
            np.zeros((1, len(observed))),
            "d_separation",
            0.05,
            true_dag=truth,
            show_progress=False,
            verbose=False,
        )
    return from_causallearn(graph)


def canonical_dag(mag: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """``(dag, latent)``: the MAG's directed edges plus one latent parent of both ends of every
    bidirected edge (the canonical DAG of Richardson & Spirtes 2002, section 6, for a MAG
    without undirected edges), latents numbered after the observed nodes. Marginalising them
    gives back a graph Markov equivalent to ``mag``."""
    mag = check_marks(mag)
    if (mag == CIRCLE).any() or ((mag == TAIL) & (mag.T == TAIL)).any():
        raise ValueError(
            "`mag` must hold directed and bidirected edges only (undirected edges stand for "
            "selection variables, which this construction does not cover)."
        )
    p = len(mag)
    pairs = [(a, b) for a, b in zip(*np.triu_indices(p, 1)) if mag[a, b] == ARROW == mag[b, a]]
    dag = np.zeros((p + len(pairs), p + len(pairs)), dtype=bool)
    dag[:p, :p] = (mag == ARROW) & (mag.T == TAIL)
    for k, (a, b) in enumerate(pairs):
        dag[p + k, [a, b]] = True
    return dag, list(range(p, p + len(pairs)))


def pag_from_mag(mag: np.ndarray) -> np.ndarray:
    """The PAG of a MAG (directed and bidirected edges): :func:`pag_from_dag` of its
    :func:`canonical_dag`."""
    return pag_from_dag(*canonical_dag(mag))


# ----------------------------------------------------------------------------- conversions

_FROM_CAUSALLEARN = {-1: TAIL, 1: ARROW, 2: CIRCLE}


def to_causallearn(marks: np.ndarray, names: Sequence[str] | None = None):
    """A causal-learn ``GeneralGraph`` with the edges of ``marks`` (``names``: node names,
    default ``X1 .. Xp`` as causal-learn names them)."""
    from causallearn.graph.Edge import Edge
    from causallearn.graph.Endpoint import Endpoint
    from causallearn.graph.GeneralGraph import GeneralGraph
    from causallearn.graph.GraphNode import GraphNode

    marks = check_marks(marks)
    names = _names(names, len(marks))
    nodes = [GraphNode(name) for name in names]
    graph = GeneralGraph(nodes)
    endpoint = {TAIL: Endpoint.TAIL, ARROW: Endpoint.ARROW, CIRCLE: Endpoint.CIRCLE}
    for a, b in zip(*np.triu_indices(len(marks), 1)):
        if marks[a, b]:
            graph.add_edge(Edge(nodes[a], nodes[b], endpoint[marks[b, a]], endpoint[marks[a, b]]))
    return graph


def from_causallearn(graph) -> np.ndarray:
    """The mark matrix of a causal-learn graph (its ``graph`` matrix, node order kept)."""
    if not hasattr(graph, "graph"):
        raise TypeError(
            "`graph` must be a causal-learn graph (e.g. a GeneralGraph, or fci(...)[0]), got "
            f"{type(graph).__name__}."
        )
    matrix = np.asarray(graph.graph)
    marks = np.zeros(matrix.shape, dtype=np.int8)
    for code, mark in _FROM_CAUSALLEARN.items():
        marks[np.equal(matrix.T, code)] = mark  # causal-learn's [a, b] is the mark at a
    if ((matrix != 0) & ~np.isin(matrix, list(_FROM_CAUSALLEARN))).any():
        raise ValueError("the causal-learn graph holds endpoint codes other than -1, 1, 2.")
    return check_marks(marks)


def to_networkx(marks: np.ndarray, names: Sequence[str] | None = None):
    """A ``networkx.Graph`` with one edge per adjacency and its marks as the edge attribute
    ``marks = {node: "tail" | "arrow" | "circle"}`` (the mark at each end)."""
    import networkx as nx

    marks = check_marks(marks)
    names = _names(names, len(marks))
    graph = nx.Graph()
    graph.add_nodes_from(names)
    for a, b in zip(*np.triu_indices(len(marks), 1)):
        if marks[a, b]:
            at = {names[a]: MARK_NAMES[marks[b, a]], names[b]: MARK_NAMES[marks[a, b]]}
            graph.add_edge(names[a], names[b], marks=at)
    return graph


def from_networkx(graph, names: Sequence[str] | None = None) -> np.ndarray:
    """The mark matrix of a graph made by :func:`to_networkx` (``names``: the node order,
    default the graph's)."""
    names = list(graph.nodes) if names is None else list(names)
    index = {name: k for k, name in enumerate(names)}
    codes = {name: code for code, name in MARK_NAMES.items()}
    marks = np.zeros((len(names), len(names)), dtype=np.int8)
    for u, v, data in graph.edges(data=True):
        at = data["marks"]
        marks[index[v], index[u]] = codes[at[u]]
        marks[index[u], index[v]] = codes[at[v]]
    return check_marks(marks)


def _names(names: Sequence[str] | None, count: int) -> list[str]:
    if isinstance(names, (str, bytes)):
        raise TypeError(
            f"`names` must be a sequence of {count} names, got the single string {names!r}; "
            "wrap each name in a list, e.g. ['A', 'B']."
        )
    names = [f"X{k + 1}" for k in range(count)] if names is None else [str(n) for n in names]
    if len(names) != count:
        raise ValueError(f"`names` must be {count} distinct names, got {len(names)}.")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"`names` must be {count} distinct names; {repeated} repeat.")
    return names
