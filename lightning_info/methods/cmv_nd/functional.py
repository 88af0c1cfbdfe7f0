"""Complementary multi-view neighbourhood differentiation (CMV-ND): exact hop views of a graph.

For a node ``v`` of a graph with adjacency ``A`` the recursive neighbourhood search of the paper
grows balls of shortest-path radius ``k``,

    B_0(v) = {v},      B_k(v) = B_{k-1}(v) ∪ N(B_{k-1}(v)),

and neighbourhood differentiation keeps the new layer only,

    D_k(v) = B_k(v) \\ B_{k-1}(v)      (exactly the nodes at distance k from v),

so ``D_1(v), ..., D_K(v)`` are pairwise disjoint and, with ``{v}``, cover ``B_K(v)``. The hop
representation averages the features of the nodes whose attributes are observed
(``m_u = 1``) over each layer,

    H_k[v] = sum_{u in D_k(v)} m_u x_u / sum_{u in D_k(v)} m_u      (a zero row if the sum is 0),

and the views are ``[X ⊙ m, H_1, ..., H_K]`` (:func:`neighbourhood_views`). This is not
``Â^k X`` (walks of length ``k`` re-enter nearer layers and count nodes several times) nor
``Â^k - Â^(k-1)`` (whose differences go negative): the layers need boolean reachability.

How it is computed, one hop at a time for all nodes. A node at distance ``k`` from ``v`` is at
distance ``k - 1`` from a neighbour of ``v``, and a neighbour's layer ``D_{k-1}(u)`` lies within
``D_{k-2}(v) ∪ D_{k-1}(v) ∪ D_k(v)`` (undirected graphs), so

    D_k(v) = ∪_{u in N(v)} D_{k-1}(u)  \\  (D_{k-1}(v) ∪ D_{k-2}(v))

(on a directed graph, following edges out of ``v``, the whole ball ``B_{k-1}(v)`` is removed).
With the layers of hop ``k - 1`` stored as a sparse 0/1 matrix, one sparse product per chunk
of ``chunk_size`` source rows gives, for every candidate ``w``,

    C[v, w] = c_vw - b [w in D_{k-1}(v) ∪ D_{k-2}(v)],   c_vw = #{u in N(v): w in D_{k-1}(u)},

with ``b = (max out-degree) + 1``: the left row of ``v`` lists its neighbours (weight 1) and
``v`` itself once per excluded layer (weight ``-b``), the right matrix stacks those layers, all
in exact small-integer arithmetic (scipy's SMMP kernel, a dense accumulator per row, no
sorting). ``D_k = {w: C[v, w] > 0}``. A row reads ``deg(v)`` rows of the stored layer (its
neighbours') and its own rows, which lie in order; the cost is the
``sum_{u in N(v)} |D_{k-1}(u)|`` candidates. The chunks of a hop run in threads (the kernel
releases the GIL).

The layer sums are then read off linearly. Every count ``c_vw`` is known, so with
``x̄ = [X ⊙ m, m]`` (the last column counts the observed nodes; it is kept apart, in exact
int64) and ``S_k(v) = sum_{w in D_k(v)} x̄_w``,

    S_k(v) = sum_{u in N(v)} S_{k-1}(u) - sum_w r_vw x̄_w,
    r_vw = c_vw - 1 on D_k(v),   r_vw = c_vw on the excluded layers,

i.e. ``S_k = A S_{k-1} - R_k x̄``: one product with ``A`` per hop, as in SIGN, plus the sparse
correction ``R_k`` (about one entry per node of ``D_{k-2}(v)`` on a locally tree-like graph).
A row takes this form only where it is cheaper than summing ``x̄`` over ``D_k(v)`` and its
cancellation is bounded (``sum_w r_vw <= |D_k(v)|``: at most twice as many terms are added as
in the direct sum, so float rounding stays that of a direct sum); other rows are summed
directly. Every row is computed on its own, so results do not depend on ``chunk_size`` or
``threads``.

Memory: the layers ``D_{K-1}`` and ``D_{K-2}`` of every node (every earlier layer on a directed
graph) are kept as sparse rows, 5 bytes an entry (20M entries, 100 MB, for K = 3 on a 1M-node
graph of average degree 4), plus ``chunk_size`` rows of candidates per thread at a time; never
a dense ``N x N`` array. On graphs whose layers are huge the stored layers grow with them.

:func:`sign_views` gives the SIGN baseline ``[X̃, ÂX̃, ..., Â^K X̃]`` with
``Â = D^-1/2 (A + I) D^-1/2`` and ``X̃`` the mean-imputed attributes (:func:`mean_impute`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor

from lightning_info.core.validation import (
    require_bool,
    require_finite_tensor,
    require_int,
    require_real_tensor,
)

__all__ = [
    "graph_adjacency",
    "mean_impute",
    "neighbourhood_views",
    "normalized_adjacency",
    "sign_views",
]

try:  # scipy's SMMP kernel without its symbolic pass (the output size is bounded beforehand)
    from scipy.sparse._sparsetools import csr_matmat as _CSR_MATMAT
except ImportError:  # pragma: no cover - a scipy without the private module: public product
    _CSR_MATMAT = None

_LINEAR_FORM = True
"""Whether rows may take the linear form (tests switch it off to check it against direct sums)."""


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


def _check_features(x: Tensor, finite: bool = True) -> Tensor:
    """Check ``x``'s shape and dtype and, with ``finite``, that every row is finite."""
    require_real_tensor(x, "x")
    if x.dim() != 2:
        raise ValueError(
            f"`x` must be a 2-D (num_nodes, num_features) tensor, got shape {tuple(x.shape)}; "
            "reshape a 1-D feature to (N, 1)."
        )
    if not x.is_floating_point():
        raise TypeError(
            f"`x` must be a floating-point tensor, got {x.dtype}; convert it with .float()."
        )
    if x.shape[0] == 0:
        raise ValueError("`x` has no rows: the graph needs at least one node.")
    return require_finite_tensor(x, "x") if finite else x


def _check_observed_rows(x: Tensor, mask: np.ndarray) -> Tensor:
    """Refuse NaN/inf in the observed rows of ``x``; unobserved rows may hold anything."""
    keep = torch.from_numpy(mask).to(x.device)
    bad = int((~torch.isfinite(x if mask.all() else x[keep])).any(1).sum())
    if bad:
        raise ValueError(
            f"`x` has {bad} observed row(s) with NaN/inf: clean or impute them, or mark those "
            "nodes unobserved in `observed` (unobserved rows are never read)."
        )
    return keep


def _check_num_nodes(num_nodes: int | None, x: Tensor) -> int:
    if num_nodes is None:
        return x.shape[0]
    require_int(num_nodes, "num_nodes", 1)
    if num_nodes != x.shape[0]:
        raise ValueError(
            f"`num_nodes` is {num_nodes} but `x` has {x.shape[0]} rows: pass one feature row per "
            "node (or num_nodes=None)."
        )
    return num_nodes


def _edges(edge_index: Tensor, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """``(source, target)`` as int64 numpy arrays, after checking shape, dtype and range."""
    require_real_tensor(edge_index, "edge_index")
    if edge_index.dtype == torch.bool or edge_index.is_floating_point() or edge_index.is_complex():
        raise TypeError(
            f"`edge_index` must hold integer node ids (torch.long), got {edge_index.dtype}."
        )
    if edge_index.dim() != 2 or edge_index.shape[0] != 2:
        raise ValueError(
            f"`edge_index` must have shape (2, num_edges) (PyG convention), got "
            f"{tuple(edge_index.shape)}; transpose an (E, 2) edge list with .t()."
        )
    edges = edge_index.detach().cpu().to(torch.int64).numpy()
    if edges.size:
        low, high = int(edges.min()), int(edges.max())
        if low < 0 or high >= num_nodes:
            raise ValueError(
                f"`edge_index` holds node ids in [{low}, {high}] but the graph has {num_nodes} "
                f"nodes (ids 0..{num_nodes - 1}); pass the right num_nodes or x."
            )
    return edges[0], edges[1]


def _check_observed(observed: Tensor | None, num_nodes: int) -> np.ndarray:
    """The mask as a numpy bool array (all True for ``None``)."""
    if observed is None:
        return np.ones(num_nodes, dtype=bool)
    require_real_tensor(observed, "observed")
    if observed.dtype != torch.bool:
        raise TypeError(
            f"`observed` must be a bool mask of the nodes with known attributes, got "
            f"{observed.dtype}; convert it, e.g. observed == 1 or observed.bool()."
        )
    if observed.shape != (num_nodes,):
        raise ValueError(
            f"`observed` must have shape ({num_nodes},) (one flag per node), got "
            f"{tuple(observed.shape)}."
        )
    return observed.detach().cpu().numpy()


# --------------------------------------------------------------------------------------------
# Adjacency
# --------------------------------------------------------------------------------------------


def graph_adjacency(
    edge_index: Tensor, num_nodes: int, undirected: bool = True, dtype=np.int32
) -> sp.csr_matrix:
    """The 0/1 adjacency ``A[u, w] = 1`` for an edge ``u -> w`` as a scipy CSR matrix.

    Self loops are dropped and duplicate edges merged; ``undirected=True`` adds every reverse
    edge. Row ``u`` lists the out-neighbours of ``u`` (``edge_index[0] -> edge_index[1]``).
    """
    require_int(num_nodes, "num_nodes", 1)
    undirected = require_bool(undirected, "undirected")
    source, target = _edges(edge_index, num_nodes)
    return _adjacency(source, target, num_nodes, undirected, dtype)


def _adjacency(
    source: np.ndarray, target: np.ndarray, num_nodes: int, undirected: bool, dtype
) -> sp.csr_matrix:
    keep = source != target
    source, target = source[keep], target[keep]
    if undirected:
        source, target = np.concatenate([source, target]), np.concatenate([target, source])
    index = np.int32 if num_nodes < 2**31 else np.int64
    adjacency = sp.csr_matrix(
        (np.ones(source.size, dtype=dtype), (source.astype(index), target.astype(index))),
        shape=(num_nodes, num_nodes),
    )  # COO -> CSR sums duplicates
    adjacency.data[:] = 1
    return adjacency


def normalized_adjacency(adjacency: sp.csr_matrix, dtype=np.float32) -> sp.csr_matrix:
    """``D^-1/2 (A + I) D^-1/2`` (GCN/SIGN normalisation, ``D`` the degrees of ``A + I``).

    ``adjacency`` is a square scipy sparse matrix of finite, non-negative weights (e.g.
    :func:`graph_adjacency`); ``dtype`` is a floating-point dtype."""
    if not sp.issparse(adjacency):
        raise TypeError(
            f"`adjacency` must be a scipy sparse matrix, got {type(adjacency).__name__}; build "
            "one with graph_adjacency(edge_index, num_nodes) or scipy.sparse.csr_matrix(a)."
        )
    if adjacency.ndim != 2 or adjacency.shape[0] != adjacency.shape[1]:
        raise ValueError(f"`adjacency` must be square (N, N), got shape {adjacency.shape}.")
    if np.dtype(dtype).kind != "f":
        raise TypeError(
            f"`dtype` must be a floating-point dtype (the weights are fractions), got "
            f"{np.dtype(dtype)}; pass np.float32 or np.float64."
        )
    adjacency = adjacency.tocsr()
    if adjacency.dtype.kind not in "biuf":
        raise TypeError(f"`adjacency` must hold real weights, got dtype {adjacency.dtype}.")
    if adjacency.nnz and not (np.isfinite(adjacency.data).all() and (adjacency.data >= 0).all()):
        raise ValueError(
            "`adjacency` must hold finite, non-negative weights: a negative degree has no "
            "square root (D^-1/2 would be inf or NaN)."
        )
    n = adjacency.shape[0]
    with_loops = (adjacency.astype(dtype) + sp.identity(n, dtype=dtype, format="csr")).tocsr()
    scale = 1.0 / np.sqrt(np.asarray(with_loops.sum(axis=1), dtype=np.float64).ravel())
    rows = np.repeat(np.arange(n), np.diff(with_loops.indptr))
    with_loops.data = (scale[rows] * with_loops.data * scale[with_loops.indices]).astype(dtype)
    return with_loops


# --------------------------------------------------------------------------------------------
# Sparse helpers on raw CSR arrays (indptr, indices[, data])
# --------------------------------------------------------------------------------------------


def _csr(indptr, indices, data, shape) -> sp.csr_matrix:
    return sp.csr_matrix((data, indices, indptr), shape=shape)


def _segment_sum(values: np.ndarray, indptr: np.ndarray, dtype=np.int32) -> np.ndarray:
    """Per-row sums of ``values`` laid out by ``indptr`` (empty rows give 0). A bool mask is
    summed through its int8 view: numpy's bool -> int casts are several times slower."""
    if values.dtype == np.bool_:
        values = values.view(np.int8)
    lengths = np.diff(indptr)
    out = np.zeros(lengths.size, dtype=dtype)
    rows = np.flatnonzero(lengths)
    if rows.size:
        out[rows] = np.add.reduceat(values, indptr[rows], dtype=dtype)
    return out


def _indptr(lengths: np.ndarray) -> np.ndarray:
    out = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


class _Product:
    """``left @ right`` for small-integer CSR operands with a fixed right matrix.

    scipy's ``@`` runs the SMMP kernel twice (a symbolic pass for the output size, then the
    numeric pass); here the size is bounded beforehand by the candidates' count,
    ``sum_j rowlen(right)[left_j]``, and only the numeric pass runs. Without scipy's private
    kernel (or with 64-bit indices) the public product is used: same kernel, same output.
    """

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, columns: int, dtype) -> None:
        self.dtype = dtype
        small = max(indices.size, indptr.size) < 2**31 - 1  # int32 indices suffice
        self.fast = _CSR_MATMAT is not None and small
        index = np.int32 if self.fast else np.int64
        self.indptr = indptr.astype(index)
        self.indices = indices.astype(index, copy=False)
        self.data = np.ones(indices.size, dtype=dtype)
        self.shape = (indptr.size - 1, columns)
        self.row_lengths = np.diff(self.indptr)

    def __call__(self, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray):
        rows = indptr.size - 1
        bound = int(self.row_lengths[indices].sum(dtype=np.int64))
        if self.fast and bound < 2**31 - 1:
            out_indptr = np.empty(rows + 1, dtype=np.int32)
            out_indices = np.empty(bound, dtype=np.int32)
            out_data = np.empty(bound, dtype=self.dtype)
            _CSR_MATMAT(
                rows,
                self.shape[1],
                indptr.astype(np.int32),
                indices.astype(np.int32, copy=False),
                data,
                self.indptr,
                self.indices,
                self.data,
                out_indptr,
                out_indices,
                out_data,
            )
            nnz = int(out_indptr[-1])
            return out_indptr.astype(np.int64), out_indices[:nnz], out_data[:nnz]
        right = _csr(self.indptr, self.indices, self.data, self.shape)
        product = _csr(indptr, indices, data, (rows, self.shape[0])) @ right
        return product.indptr.astype(np.int64), product.indices, product.data


# --------------------------------------------------------------------------------------------
# Neighbourhood differentiation
# --------------------------------------------------------------------------------------------


def neighbourhood_views(
    edge_index: Tensor,
    x: Tensor,
    num_nodes: int | None = None,
    num_hops: int = 2,
    observed: Tensor | None = None,
    chunk_size: int = 16384,
    undirected: bool = True,
    threads: int | None = None,
) -> list[Tensor]:
    """The CMV-ND views ``[X ⊙ m, H_1, ..., H_K]`` of a graph (module docstring).

    Args:
        edge_index: ``(2, E)`` integer node ids, edges ``edge_index[0] -> edge_index[1]`` (PyG
            convention). Self loops and duplicate edges are ignored.
        x: ``(N, d)`` float node attributes; rows of unobserved nodes are never read (they may
            hold anything, NaN included); observed rows must be finite.
        num_nodes: ``N``; ``None`` takes ``x.shape[0]`` (they must agree).
        num_hops: ``K >= 1``, the number of hop views.
        observed: ``(N,)`` bool mask of the nodes whose attributes are known; ``None``: all.
        chunk_size: source rows per sparse product. The result does not depend on it.
        undirected: symmetrise the edges (default). ``False`` follows the edges' direction:
            ``D_k(v)`` are the nodes at directed distance ``k`` from ``v`` (networkx's
            ``single_source_shortest_path_length`` on a ``DiGraph``); pass
            ``edge_index.flip(0)`` to average over in-neighbourhoods instead.
        threads: threads that work on the chunks of a hop (scipy's sparse product releases the
            GIL); ``None`` takes ``torch.get_num_threads()``. The result does not depend on it.

    Returns:
        ``K + 1`` new ``(N, d)`` tensors of ``x``'s dtype and device: ``X ⊙ m`` (``x``'s
        observed rows, zero rows elsewhere), then ``H_1 .. H_K``. ``H_k[v]`` is the mean of
        the observed rows of ``x`` over the nodes at distance exactly ``k`` from ``v``, a zero
        row when there is none.

    Raises ``ValueError`` when no node is observed: every view would be all zeros.
    """
    x = _check_features(x, finite=False)  # the observed rows are checked below
    n = _check_num_nodes(num_nodes, x)
    require_int(num_hops, "num_hops", 1)
    require_int(chunk_size, "chunk_size", 1)
    threads = torch.get_num_threads() if threads is None else require_int(threads, "threads", 1)
    if not isinstance(undirected, bool):
        raise TypeError(f"`undirected` must be a bool, got {undirected!r}.")
    source, target = _edges(edge_index, n)
    mask = _check_observed(observed, n)
    if not mask.any():
        raise ValueError(
            f"`observed` marks none of the {n} nodes observed: every view would be all zeros. "
            "Mark the nodes whose attributes are known (True), or pass observed=None for all."
        )
    keep = _check_observed_rows(x, mask)[:, None]

    masked = torch.where(keep, x, torch.zeros((), dtype=x.dtype, device=x.device))
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    feats = masked.detach().to(device="cpu", dtype=work).numpy()  # X ⊙ m, read, never written
    adjacency = _adjacency(source, target, n, undirected, np.int32)
    hops = _hop_sums(adjacency, feats, mask, num_hops, chunk_size, undirected, threads)
    views = [masked]
    views += [torch.from_numpy(h).to(device=x.device, dtype=x.dtype) for h in hops]
    return views


def _count_dtype(bound: int):
    """The smallest integer type holding every value of the products (in ``[-bound, bound]``):
    the kernel's accumulator and the values it streams are then as small as they can be."""
    for dtype in (np.int8, np.int16, np.int32):
        if bound <= np.iinfo(dtype).max:
            return dtype
    raise ValueError(f"a node has {bound - 1} neighbours; at most 2^31 - 2 are supported.")


def _hop_sums(
    adjacency: sp.csr_matrix,
    feats: np.ndarray,
    mask: np.ndarray,
    num_hops: int,
    chunk_size: int,
    undirected: bool,
    threads: int,
) -> list[np.ndarray]:
    """The means ``H_1 .. H_K`` as ``(N, d)`` arrays (module docstring).

    ``S_k`` (features) and its count column are kept apart: the feature sums of hop ``k`` are
    written into the array that becomes ``H_k`` once hop ``k + 1`` has read them, the counts,
    exact int64, into an ``(N,)`` vector. The chunks of a hop run in ``threads`` threads
    (scipy's SMMP kernel releases the GIL); each writes its own rows, so the result does not
    depend on the schedule.
    """
    n = adjacency.shape[0]
    graph = _Graph(adjacency, feats, mask)
    sums = adjacency.astype(feats.dtype) @ feats  # S_1: row v sums X ⊙ m over N(v) = D_1(v)
    counts = adjacency.astype(np.int64) @ graph.observed
    hops = [sums]
    # layers as (row lengths, [id arrays]), newest first: D_1, D_0 (every earlier one if directed)
    layers = [
        (graph.degree, [graph.indices]),
        (np.ones(n, np.int64), [np.arange(n, dtype=np.int32)]),
    ]
    right = _stack(layers)
    starts = range(0, n, chunk_size)
    pool = ThreadPoolExecutor(threads) if threads > 1 and len(starts) > 1 else None
    try:
        for k in range(2, num_hops + 1):
            hop = _Hop(graph, right, len(layers), sums, counts, chunk_size, k < num_hops)
            parts = list(pool.map(hop, starts) if pool is not None else map(hop, starts))
            _to_means(sums, counts)  # hop k - 1 is read for the last time
            sums, counts = hop.sums, hop.counts
            hops.append(sums)
            if k < num_hops:  # D_k joins the stored layers (copied once, from its chunks)
                sizes, members = zip(*parts)
                kept = layers[:1] if undirected else layers
                layers = [(np.concatenate(sizes), list(members)), *kept]
                right = _stack(layers)
    finally:
        if pool is not None:
            pool.shutdown()
    _to_means(sums, counts)
    return hops


def _stack(layers) -> tuple[np.ndarray, np.ndarray]:
    """The stacked layers ``(row lengths (N,), [id arrays])``, newest first, as one CSR
    ``(indptr, ids)`` of ``N`` rows per layer; the layers' ids become views into it."""
    indptr = _indptr(np.concatenate([lengths for lengths, _ in layers]))
    ids = np.concatenate([part for _, parts in layers for part in parts]).astype(
        np.int32, copy=False
    )
    at = 0
    for index, (lengths, parts) in enumerate(layers):
        size = sum(part.size for part in parts)
        layers[index] = (lengths, [ids[at : at + size]])
        at += size
    return indptr, ids


class _Graph:
    """The adjacency's arrays, its largest degree and the observed features."""

    def __init__(self, adjacency: sp.csr_matrix, feats: np.ndarray, mask: np.ndarray) -> None:
        self.n = adjacency.shape[0]
        self.indptr = adjacency.indptr.astype(np.int64)
        self.indices = adjacency.indices
        self.degree = np.diff(self.indptr)
        self.ones = np.ones(self.indices.size, dtype=feats.dtype)
        self.b = int(self.degree.max(initial=0)) + 1
        self.count = _count_dtype(self.b)
        self.feats = feats
        self.observed = mask.astype(np.int64)


class _Hop:
    """Hop ``k``: ``right`` stacks ``blocks`` layers, ``D_{k-1}`` (the neighbours' layers, also
    excluded) then the other excluded ones; ``sums``/``counts`` are ``S_{k-1}``."""

    def __init__(self, graph: _Graph, right, blocks, sums, counts, chunk_size, keep_layer):
        self.graph, self.blocks, self.chunk_size = graph, blocks, chunk_size
        self.previous, self.previous_counts = sums, counts
        self.keep_layer = keep_layer
        self.product = _Product(*right, graph.n, graph.count)
        self.sums = np.empty_like(graph.feats)
        self.counts = np.empty(graph.n, dtype=np.int64)

    def __call__(self, start: int):
        """Rows ``start..start + chunk_size``: write their ``S_k``; return their layer when the
        next hop needs it."""
        g, b = self.graph, self.graph.b
        stop = min(g.n, start + self.chunk_size)
        rows = stop - start
        left = _left_rows(g.indptr, g.indices, start, stop, self.blocks, g.n, b, g.count)
        c_indptr, c_indices, c_values = self.product(*left)
        new = c_values > 0
        layer_sizes = _segment_sum(new, c_indptr)
        correct = c_values != 1  # r = c - 1 on the new layer, c = value + b elsewhere
        correct &= c_values != -b
        r_indptr = _indptr(_segment_sum(correct, c_indptr))
        at = np.flatnonzero(correct)
        r = c_values[at].astype(np.int64)
        r = np.where(r > 0, r - 1, r + b)
        linear = g.degree[start:stop] + np.diff(r_indptr) < layer_sizes
        linear &= _segment_sum(r, r_indptr, np.int64) <= layer_sizes
        linear &= _LINEAR_FORM

        span = slice(g.indptr[start], g.indptr[stop])
        shape = (rows, g.n)
        neighbours = _csr(
            g.indptr[start : stop + 1] - g.indptr[start], g.indices[span], g.ones[span], shape
        )
        correction = _csr(r_indptr, c_indices[at], r.astype(g.feats.dtype), shape)
        total = neighbours @ self.previous
        total -= correction @ g.feats
        counts = neighbours.astype(np.int64) @ self.previous_counts
        counts -= correction.astype(np.int64) @ g.observed
        direct = np.flatnonzero(~linear)
        if direct.size:  # sum x̄ over D_k(v) itself
            member = _csr(c_indptr, c_indices, c_values, shape)[direct]
            keep = member.data > 0
            ids = member.indices[keep]
            layer = _csr(
                _indptr(_segment_sum(keep, member.indptr)),
                ids,
                np.ones(ids.size, g.feats.dtype),
                (direct.size, g.n),
            )
            total[direct] = layer @ g.feats
            counts[direct] = layer.astype(np.int64) @ g.observed
        self.sums[start:stop] = total
        self.counts[start:stop] = counts
        if self.keep_layer:
            return layer_sizes, c_indices[np.flatnonzero(new)]
        return None


def _to_means(sums: np.ndarray, counts: np.ndarray) -> None:
    """``sums /= counts`` row by row in place; zero rows where the count is 0 (the linear form
    may leave rounding residue there)."""
    sums /= np.maximum(counts, 1).astype(sums.dtype)[:, None]
    sums[counts == 0] = 0


def _left_rows(indptr, indices, start, stop, blocks, n, b, dtype):
    """Left rows ``start..stop`` of the hop product: the neighbours of ``v`` (weight 1, rows of
    the newest layer) and ``v`` in every block (weight ``-b``: its own stored layers)."""
    rows = stop - start
    own = indptr[start : stop + 1] - indptr[start]
    lengths = np.diff(own) + blocks
    left_indptr = _indptr(lengths)
    index = np.int32 if blocks * n < 2**31 - 1 else np.int64
    left_indices = np.empty(int(left_indptr[-1]), dtype=index)
    left_data = np.full(left_indices.size, -b, dtype=dtype)
    slot = np.arange(own[-1]) + blocks * np.repeat(np.arange(rows), np.diff(own))
    left_indices[slot] = indices[indptr[start] : indptr[stop]]
    left_data[slot] = 1
    ends = left_indptr[1:]
    for j in range(blocks):
        left_indices[ends - blocks + j] = j * n + np.arange(start, stop)
    return left_indptr, left_indices, left_data


# --------------------------------------------------------------------------------------------
# SIGN baseline and imputation
# --------------------------------------------------------------------------------------------


def mean_impute(x: Tensor, observed: Tensor | None) -> Tensor:
    """A copy of ``x`` whose unobserved rows (never read, NaN allowed) are the mean of the
    observed rows."""
    x = _check_features(x, finite=False)
    mask = _check_observed(observed, x.shape[0])
    if not mask.any():
        raise ValueError("no node is observed: mean imputation needs at least one known row.")
    keep = _check_observed_rows(x, mask)
    mean = x[keep].mean(0, keepdim=True)
    return torch.where(keep[:, None], x, mean)


def sign_views(
    edge_index: Tensor,
    x: Tensor,
    num_nodes: int | None = None,
    num_hops: int = 2,
    observed: Tensor | None = None,
) -> list[Tensor]:
    """The SIGN views ``[X̃, ÂX̃, ..., Â^K X̃]`` (Frasca et al., 2020), the baseline of CMV-ND.

    ``X̃`` is :func:`mean_impute` of ``x`` (a copy of ``x`` when all is observed) and
    ``Â = D^-1/2 (A + I) D^-1/2`` with ``A`` the symmetrised adjacency without self loops or
    duplicate edges (:func:`normalized_adjacency`). Computed with scipy in float32 (float64 for a
    float64 ``x``); returns new tensors of ``x``'s dtype and device.
    """
    x = _check_features(x, finite=observed is None)  # else mean_impute checks the observed rows
    n = _check_num_nodes(num_nodes, x)
    require_int(num_hops, "num_hops", 1)
    source, target = _edges(edge_index, n)
    imputed = mean_impute(x, observed) if observed is not None else x.clone()
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    current = imputed.detach().to(device="cpu", dtype=work).numpy()
    propagate = normalized_adjacency(_adjacency(source, target, n, True, np.int32), current.dtype)
    views = [imputed]
    for _ in range(num_hops):
        current = propagate @ current
        views.append(torch.from_numpy(current).to(device=x.device, dtype=x.dtype))
    return views
