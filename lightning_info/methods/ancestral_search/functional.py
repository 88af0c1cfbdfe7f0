"""The search-and-score steps of Lagrange & Isambert (ICML 2025) for ancestral graphs, on an
edge-type matrix and a memoised score ``I'(X; Y | Z)`` (MIIC's ``infok``:
:class:`~lightning_info.methods.ancestral_search.information.InformationCache`).

**Edge types** (``graphs.edge_types``): ``types[a, b]`` is 0 (no edge), 1 (undirected), 2 with
``types[b, a] = -2`` for ``a -> b``, 6 for ``a <-> b``. The parents-and-spouses of ``X`` other
than ``Y`` are ``Pa'_X = {n != Y : types[n, X] in (2, 6)}``.

**Step 0, skeleton** (:func:`initial_graph`): causal-learn's FCI with the G^2 test (the
reference starts from MIIC, which has no Python port); its PAG becomes edge types, ``o->`` as
directed and ``o-o`` / ``o-`` as undirected.

**Step 1, node score** (:func:`node_step`): for every node ``X`` and its neighbours ``C`` the
conditioning set ``S`` of the largest ``sum_k I'(X; s_k | s_<k)`` (:func:`best_conditioning_set`:
all subsets of each size while ``|C| <= 4``, otherwise greedy additions, stopping when no set of
the next size improves the score). A neighbour ``N`` outside ``S`` is dropped by ``X``: an edge
dropped by both ends is removed; dropped by ``X`` only, it becomes ``X -> N`` (``N`` is no
parent of ``X``); repeated to a fixed point; then every undirected edge is oriented so the
graph stays acyclic (nodes with the most undirected edges first, as the reference).

**Step 2, edge score** (:func:`edge_deltas`, :func:`edge_step`): for the edge ``X - Y`` the
orientation scores are ``s(X <- Y) = -I'(X; Y | Pa'_X)``, ``s(X -> Y) = -I'(X; Y | Pa'_Y)`` and,
when both sets are non-empty, ``s(X <-> Y) = -I'(X; Y | Pa'_X u Pa'_Y)``; the move to the lowest
score has ``delta = s(best) - s(current)``. A move is admissible when the graph it makes is
ancestral (no directed cycle, no bidirected edge between an ancestor and its descendant -- the
reference's cycle and local v-structure checks are the two-edge cases of this), it does not
return to a graph already visited, and it does not undo the last move (one-step tabu). The most
negative admissible delta is applied and the deltas recomputed, until no delta is negative.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np

from lightning_info.core.validation import require_choice, require_index, require_int
from lightning_info.methods.ancestral_search.graphs import (
    ARROW,
    CIRCLE,
    TAIL,
    ancestors,
    check_marks,
    edge_types,
)
from lightning_info.methods.ancestral_search.information import _check_codes

__all__ = [
    "choose_move",
    "BIDIRECTED",
    "DIRECTED",
    "UNDIRECTED",
    "best_conditioning_set",
    "edge_deltas",
    "edge_step",
    "fci_pag",
    "initial_graph",
    "is_ancestral",
    "marks_from_types",
    "node_step",
    "with_type",
]

Score = Callable[[Sequence[int], Sequence[int], Sequence[int]], float]
"""``score(x, y, z)``: ``I'(X; Y | Z)`` of column tuples (an ``InformationCache``)."""

UNDIRECTED, DIRECTED, BIDIRECTED = 1, 2, 6
_EXHAUSTIVE_UP_TO = 4
_TYPES = (0, UNDIRECTED, DIRECTED, -DIRECTED, BIDIRECTED)


def _check_types(types: np.ndarray) -> np.ndarray:
    """``types`` as an int8 array after checking it is an edge-type matrix (module docstring):
    square, integers in {0, 1, 2, -2, 6}, a zero diagonal, ``types[b, a] = -2`` opposite every
    ``types[a, b] = 2`` and the same type at both ends of the other edges."""
    types = np.asarray(types)
    if types.dtype == np.bool_:
        raise TypeError(
            "`types` must be an int edge-type matrix (0 none, 1 undirected, 2 / -2 directed, "
            "6 bidirected), got a bool matrix; for marks use graphs.edge_types(marks)."
        )
    if types.ndim != 2 or types.shape[0] != types.shape[1]:
        raise ValueError(f"`types` must be a square (p, p) matrix, got shape {types.shape}.")
    if not np.isin(types, _TYPES).all():
        raise ValueError(
            "`types` may hold only 0 (none), 1 (undirected), 2 / -2 (directed) and 6 "
            "(bidirected); for an edge-mark matrix use graphs.edge_types(marks)."
        )
    types = types.astype(np.int8)
    if np.diagonal(types).any():
        raise ValueError("`types` has a self loop: its diagonal must be 0.")
    mirror = np.where(np.abs(types) == DIRECTED, -types, types)
    if not np.array_equal(types.T, mirror):
        raise ValueError(
            "`types` is not consistent: types[b, a] must be -2 where types[a, b] is 2, and "
            "equal to types[a, b] otherwise."
        )
    return types


def _check_edge(types: np.ndarray, x: object, y: object) -> tuple[int, int]:
    x, y = require_index(x, "x", len(types)), require_index(y, "y", len(types))
    if x == y:
        raise ValueError(f"`x` and `y` must be two nodes, got {x} twice.")
    return x, y


def _finite_score(value: float, x, y, z) -> float:
    if not math.isfinite(value):
        raise ValueError(
            f"score({x}, {y}, {z}) returned {value!r}; the score must return a finite number."
        )
    return value


def marks_from_types(types: np.ndarray) -> np.ndarray:
    """Edge marks (``graphs``' convention) of an edge-type matrix: tails and arrows, an
    undirected edge tail-tail."""
    types = _check_types(types)
    marks = np.where(types != 0, TAIL, 0)
    marks = np.where((types == DIRECTED) | (types == BIDIRECTED), ARROW, marks)
    return marks.astype(np.int8)


def _parents_and_spouses(types: np.ndarray, node: int, other: int) -> tuple[int, ...]:
    column = types[:, node]
    members = np.flatnonzero((column == DIRECTED) | (column == BIDIRECTED))
    return tuple(int(n) for n in members if n != other)


def _directed_ancestors(types: np.ndarray) -> np.ndarray:
    """:func:`~lightning_info.methods.ancestral_search.graphs.ancestors` over the directed
    edges alone."""
    directed = np.where(types == DIRECTED, ARROW, 0) + np.where(types == -DIRECTED, TAIL, 0)
    return ancestors(directed.astype(np.int8))


def is_ancestral(types: np.ndarray) -> bool:
    """No directed cycle (undirected edges ignored) and no bidirected edge between two nodes one
    of which is an ancestor of the other."""
    return _is_ancestral(_check_types(types))


def _is_ancestral(types: np.ndarray) -> bool:
    anc = _directed_ancestors(types)
    off = ~np.eye(len(types), dtype=bool)
    if (anc & anc.T & off).any():
        return False
    return not ((types == BIDIRECTED) & (anc | anc.T) & off).any()


# ----------------------------------------------------------------------------- step 0


def fci_pag(codes: np.ndarray, alpha: float = 0.05, test: str = "gsq") -> np.ndarray:
    """The edge marks of causal-learn's FCI PAG on the coded data (``test``: ``"gsq"`` G^2 or
    ``"chisq"``; ``alpha`` in (0, 1))."""
    codes = _check_codes(codes)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise ValueError(f"`alpha` must be a significance level in (0, 1), got {alpha!r}.")
    require_choice(test, "test", ("gsq", "chisq"))
    from lightning_info.core.optional import require_extra

    require_extra("causallearn", "causal", "The ancestral-graph search's skeleton")
    from causallearn.search.ConstraintBased.FCI import fci

    from lightning_info.methods.ancestral_search.graphs import from_causallearn

    graph, _ = fci(codes, test, float(alpha), show_progress=False, verbose=False)
    return from_causallearn(graph)


def initial_graph(
    codes: np.ndarray, alpha: float = 0.05, test: str = "gsq", pag: np.ndarray | None = None
) -> np.ndarray:
    """Edge types of the FCI PAG (``pag``, computed by :func:`fci_pag` when not given),
    ``o->`` read as directed and ``o-o`` / ``o-`` as undirected; a PAG whose arrowheads do not
    make an ancestral graph starts from its skeleton, every edge undirected."""
    marks = fci_pag(codes, alpha, test) if pag is None else check_marks(pag)
    types = edge_types(np.where(marks == CIRCLE, TAIL, marks))  # circles: undirected ends
    return types if _is_ancestral(types) else np.where(types != 0, UNDIRECTED, 0).astype(np.int8)


# ----------------------------------------------------------------------------- step 1


def _gain(score: Score, target: int, added: Sequence[int], base: Sequence[int]) -> float:
    """``sum_k I'(X; a_k | base u a_<k)``, the chain-rule gain of adding ``added`` in order."""
    total, conditioning = 0.0, list(base)
    for candidate in added:
        z = tuple(conditioning)
        total += _finite_score(score((target,), (candidate,), z), (target,), (candidate,), z)
        conditioning.append(candidate)
    return total


def best_conditioning_set(score: Score, target: int, candidates: Sequence[int]) -> tuple[int, ...]:
    """The subset of ``candidates`` of the largest chain-rule information with ``target``
    (module docstring, step 1): exhaustive over each size while there are at most 4
    candidates, greedy beyond; stops at the first size that brings no positive gain.
    ``target`` and ``candidates`` are distinct column indices; ``score`` must return finite
    numbers."""
    if isinstance(candidates, (str, bytes)):
        raise TypeError(f"`candidates` must be a sequence of column indices, got {candidates!r}.")
    target = require_index(target, "target")
    candidates = [require_index(c, "candidates") for c in candidates]
    if len(set(candidates)) != len(candidates) or target in candidates:
        raise ValueError(
            f"`candidates` must be distinct columns other than `target` {target}, got {candidates}."
        )
    return _best_conditioning_set(score, target, candidates)


def _best_conditioning_set(score: Score, target: int, candidates: list[int]) -> tuple[int, ...]:
    current: tuple[int, ...] = ()
    for size in range(1, len(candidates) + 1):
        if size > 1 and (size > _EXHAUSTIVE_UP_TO or len(candidates) > _EXHAUSTIVE_UP_TO):
            options = [(*current, c) for c in candidates if c not in current]
        else:
            options = list(itertools.combinations(candidates, size))
        best, best_score = None, 0.0
        for option in options:
            shared = [c for c in current if c in option]
            removed = [c for c in current if c not in option]
            added = [c for c in option if c not in current]
            gain = _gain(score, target, added, shared) - _gain(score, target, removed, shared)
            if best is None or gain > best_score:
                best, best_score = option, gain
        if best is None or best_score <= 0:
            break
        current = tuple(best)
    return current


def _orient_undirected(types: np.ndarray) -> np.ndarray:
    counts = (types == UNDIRECTED).sum(axis=0)
    for node in np.argsort(-counts, kind="stable"):
        for neighbour in np.flatnonzero(types[:, node] == UNDIRECTED):
            anc = _directed_ancestors(types)
            if not anc[neighbour, node]:  # node -> neighbour keeps the graph acyclic
                types[node, neighbour], types[neighbour, node] = DIRECTED, -DIRECTED
            elif not anc[node, neighbour]:
                types[node, neighbour], types[neighbour, node] = -DIRECTED, DIRECTED
    return types


def node_step(types: np.ndarray, score: Score, max_rounds: int = 100) -> np.ndarray:
    """Step 1 of the module docstring to a fixed point, then the acyclic orientation of the
    remaining undirected edges; a new matrix."""
    types = _check_types(types).copy()
    for _ in range(require_int(max_rounds, "max_rounds", 0)):
        dropped = np.zeros(types.shape, dtype=bool)  # dropped[n, x]: x dropped neighbour n
        for node in range(len(types)):
            neighbours = np.flatnonzero(types[:, node] != 0).tolist()
            if neighbours:
                kept = set(_best_conditioning_set(score, node, neighbours))
                dropped[[n for n in neighbours if n not in kept], node] = True
        updated = types.copy()
        both = dropped & dropped.T
        updated[both] = 0
        one = dropped & ~dropped.T  # [n, x]: x dropped n, n kept x: x -> n
        rows, cols = np.nonzero(one)
        updated[cols, rows], updated[rows, cols] = DIRECTED, -DIRECTED
        if np.array_equal(updated, types):
            break
        types = updated
    return _orient_undirected(types)


# ----------------------------------------------------------------------------- step 2


def _orientation_scores(types: np.ndarray, score: Score, x: int, y: int) -> dict[int, float]:
    """``{type of types[x, y]: score}`` of the admissible orientations of the edge x - y."""
    pa_x, pa_y = _parents_and_spouses(types, x, y), _parents_and_spouses(types, y, x)
    sets = {-DIRECTED: pa_x, DIRECTED: pa_y}  # x <- y, x -> y
    if pa_x and pa_y:
        sets[BIDIRECTED] = tuple(sorted(set(pa_x) | set(pa_y)))
    return {kind: -_finite_score(score((x,), (y,), z), (x,), (y,), z) for kind, z in sets.items()}


def with_type(types: np.ndarray, x: int, y: int, kind: int) -> np.ndarray:
    """A copy of ``types`` with the edge x - y of type ``kind`` (as ``types[x, y]``; one of 0,
    1, 2, -2, 6)."""
    types = _check_types(types)
    x, y = _check_edge(types, x, y)
    if isinstance(kind, bool) or kind not in _TYPES:
        raise ValueError(f"`kind` must be one of {_TYPES} (an edge type), got {kind!r}.")
    return _with_type(types, x, y, int(kind))


def _with_type(types: np.ndarray, x: int, y: int, kind: int) -> np.ndarray:
    moved = types.copy()
    moved[x, y] = kind
    moved[y, x] = -kind if kind == DIRECTED or kind == -DIRECTED else kind
    return moved


def edge_deltas(
    types: np.ndarray, score: Score, edges: Sequence[tuple[int, int]] | None = None
) -> list[tuple[float, int, int, int]]:
    """``(delta, x, y, new type of types[x, y])`` of the best ancestral reorientation of each
    edge (``edges``: a subset, e.g. one rank's share, each a pair of adjacent nodes),
    ``delta = s(best) - s(current)``; ``score`` must return finite numbers."""
    types = _check_types(types)
    if edges is not None:
        edges = [_check_edge(types, *edge) for edge in edges]
        absent = [(x, y) for x, y in edges if types[x, y] == 0]
        if absent:
            raise ValueError(f"`edges` {absent[:3]} are not edges of `types`; give adjacent pairs.")
    return _edge_deltas(types, score, edges)


def _edge_deltas(
    types: np.ndarray, score: Score, edges: Sequence[tuple[int, int]] | None
) -> list[tuple[float, int, int, int]]:
    if edges is None:
        edges = list(zip(*np.nonzero(np.triu(types != 0))))
    moves = []
    for x, y in edges:
        x, y = int(x), int(y)
        options = _orientation_scores(types, score, x, y)
        current = types[x, y]
        # an edge not scorable as it stands (undirected, or bidirected with no other parent or
        # spouse on one side) is scored by its unconditional information
        current_score = (
            options[current]
            if current in options
            else -_finite_score(score((x,), (y,), ()), (x,), (y,), ())
        )
        admissible = {
            kind: value
            for kind, value in options.items()
            if kind != current and _is_ancestral(_with_type(types, x, y, kind))
        }
        if admissible:
            kind = min(admissible, key=lambda k: (admissible[k], k))
            moves.append((admissible[kind] - current_score, x, y, int(kind)))
    return moves


def edge_step(
    types: np.ndarray,
    score: Score,
    max_moves: int = 1000,
    on_move: Callable[[np.ndarray, tuple[float, int, int, int]], None] | None = None,
) -> np.ndarray:
    """Step 2 of the module docstring until no admissible move improves the score (or
    ``max_moves``); ``on_move(types, move)`` after each applied move; a new matrix."""
    types = _check_types(types).copy()
    seen = {types.tobytes()}
    last = None
    for _ in range(require_int(max_moves, "max_moves", 0)):
        move = _choose_move(types, _edge_deltas(types, score, None), seen, last)
        if move is None:
            break
        last = (move[1], move[2], int(types[move[1], move[2]]))  # the edge's previous type
        types = _with_type(types, move[1], move[2], move[3])
        seen.add(types.tobytes())
        if on_move is not None:
            on_move(types, move)
    return types


def choose_move(
    types: np.ndarray,
    moves: Sequence[tuple[float, int, int, int]],
    seen: set[bytes],
    last: tuple[int, int, int] | None,
) -> tuple[float, int, int, int] | None:
    """The most negative admissible move (module docstring), ties broken by the edge, or
    ``None``. ``moves``: ``(finite delta, x, y, kind)`` as :func:`edge_deltas` gives them;
    ``seen``: a set of the ``tobytes()`` of the int8 matrices visited; ``last``: the move to
    not undo, as ``(x, y, previous type)``."""
    types = _check_types(types)
    if not isinstance(seen, (set, frozenset)):
        raise TypeError(
            f"`seen` must be a set of visited matrices' tobytes(), got {type(seen).__name__}."
        )
    checked = []
    for delta, x, y, kind in moves:
        x, y = _check_edge(types, x, y)
        if isinstance(delta, bool) or not isinstance(delta, (int, float)):
            raise TypeError(f"a move's delta must be a real number, got {delta!r}.")
        if not math.isfinite(delta):
            raise ValueError(f"a move's delta must be finite, got {delta!r} for edge {x} - {y}.")
        if isinstance(kind, bool) or kind not in _TYPES:
            raise ValueError(f"a move's kind must be one of {_TYPES}, got {kind!r}.")
        checked.append((delta, x, y, int(kind)))
    return _choose_move(types, checked, seen, last)


def _choose_move(
    types: np.ndarray,
    moves: Sequence[tuple[float, int, int, int]],
    seen: set[bytes],
    last: tuple[int, int, int] | None,
) -> tuple[float, int, int, int] | None:
    for delta, x, y, kind in sorted(moves):
        if delta >= 0:
            return None
        if last is not None and (x, y, kind) == last:
            continue  # undoing the last move
        if _with_type(types, x, y, kind).tobytes() in seen:
            continue
        return delta, x, y, kind
    return None
