"""Attribute-missing graphs for clustering, seen through CMV-ND hop views (or a baseline's).

Sources (nothing is downloaded):

- ``"sbm"``: a sparse stochastic block model sampled in ``O(E)``
  (:func:`stochastic_block_model`): ``num_nodes`` nodes in ``num_classes`` balanced classes,
  about ``num_nodes * average_degree / 2`` undirected edges of which a share
  ``intra_inter_ratio / (1 + intra_inter_ratio)`` join two nodes of the same class; features
  are class-dependent Gaussians (:func:`class_features`);
- a small graph that networkx ships (:data:`NETWORKX_GRAPHS`): ``"karate_club"`` (labels: the
  ``club`` attribute), ``"davis_southern_women"`` (the ``bipartite`` attribute: women vs
  events), ``"les_miserables"`` and ``"florentine_families"`` (no label attribute: the
  communities of networkx's deterministic greedy modularity maximisation, largest first);
  features are generated from the labels as for the SBM;
- ``"files"``: :class:`GraphFiles`, an ``edge_file`` (two integer columns, whitespace or comma
  separated, ``#`` comments), a ``feature_file`` (``.npy`` or CSV, one row per node) and an
  optional ``label_file`` (``.npy`` or one integer per line; without it every label is 0).

The SBM's graph is :class:`SBMOptions` and the generated features :class:`GraphFeatureOptions`:
the arguments of :func:`stochastic_block_model` and :func:`class_features`, given to the data
module as two objects.

A seeded share ``missing_rate`` of the nodes has its attribute row treated as unobserved
(:func:`missing_mask`): ``observed`` flags the others; ``x`` itself is kept as it is. The views:
``"cmv_nd"``: ``[X ⊙ m, H_1, ..., H_K]``
(:func:`~lightning_info.methods.cmv_nd.functional.neighbourhood_views`); ``"sign"``: the SIGN
baseline ``[X̃, ÂX̃, ..., Â^K X̃]`` on mean-imputed attributes; ``"imputed"``: ``[X̃]`` alone.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from os import PathLike
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from lightning_info.core.options import as_options
from lightning_info.core.validation import (
    require_bool,
    require_choice,
    require_finite_tensor,
    require_fraction,
    require_int,
    require_non_negative,
    require_positive,
)
from lightning_info.data.multiview import MultiViewDataModule
from lightning_info.methods.cmv_nd.functional import (
    mean_impute,
    neighbourhood_views,
    sign_views,
)

__all__ = [
    "NETWORKX_GRAPHS",
    "AttributeMissingGraphDataModule",
    "GraphFeatureOptions",
    "GraphFiles",
    "SBMOptions",
    "class_features",
    "load_graph_files",
    "missing_mask",
    "networkx_graph",
    "stochastic_block_model",
]

NETWORKX_GRAPHS = {
    "karate_club": ("karate_club_graph", "club"),
    "les_miserables": ("les_miserables_graph", None),
    "davis_southern_women": ("davis_southern_women_graph", "bipartite"),
    "florentine_families": ("florentine_families_graph", None),
}
"""Source name -> (networkx generator, node attribute holding the labels or ``None``)."""

SOURCES = ("sbm", "files", *NETWORKX_GRAPHS)
VIEWS = ("cmv_nd", "sign", "imputed")


@dataclass(frozen=True)
class SBMOptions:
    """The graph of :func:`stochastic_block_model`: ``num_nodes`` nodes in ``num_classes``
    balanced classes, ``average_degree`` and the share ``intra_inter_ratio / (1 +
    intra_inter_ratio)`` of its edges inside a class."""

    num_nodes: int = 2000
    num_classes: int = 4
    average_degree: float = 4.0
    intra_inter_ratio: float = 4.0

    def __post_init__(self) -> None:
        require_int(self.num_nodes, "num_nodes", 2)
        require_int(self.num_classes, "num_classes", 1)
        if self.num_classes > self.num_nodes:
            raise ValueError(
                f"`num_classes` ({self.num_classes}) exceeds `num_nodes` ({self.num_nodes})."
            )
        require_non_negative(self.average_degree, "average_degree")
        require_positive(self.intra_inter_ratio, "intra_inter_ratio")


@dataclass(frozen=True)
class GraphFeatureOptions:
    """Node features generated from the labels (:func:`class_features`): ``feature_dim``
    columns, class means ``separation * N(0, I)`` and per-node noise of scale ``noise``."""

    feature_dim: int = 32
    separation: float = 1.0
    noise: float = 1.0

    def __post_init__(self) -> None:
        require_int(self.feature_dim, "feature_dim", 1)
        require_non_negative(self.separation, "separation")
        require_non_negative(self.noise, "noise")


@dataclass(frozen=True)
class GraphFiles:
    """A graph on disk (:func:`load_graph_files`): an edge list, a feature table and optional
    labels."""

    edge_file: str
    feature_file: str
    label_file: str | None = None

    def __post_init__(self) -> None:
        for name in ("edge_file", "feature_file", "label_file"):
            value = getattr(self, name)
            if value is None and name == "label_file":
                continue
            if not isinstance(value, (str, PathLike)):
                raise TypeError(
                    f"`{name}` must be a path (a str or a Path), got {type(value).__name__} "
                    f"{value!r}."
                )


def class_features(
    labels: np.ndarray,
    feature_dim: int,
    separation: float = 1.0,
    noise: float = 1.0,
    rng: np.random.Generator | None = None,
) -> Tensor:
    """``x_v = mu_{y_v} + noise * N(0, I)`` with class means ``mu_c = separation * N(0, I)``;
    ``labels`` are class indices ``0..C-1`` (a non-empty integer array)."""
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size == 0 or labels.dtype.kind not in "iu":
        raise ValueError(
            f"`labels` must be a non-empty 1-D array of integer class indices, got shape "
            f"{labels.shape} of {labels.dtype}."
        )
    if labels.min() < 0:
        raise ValueError(
            f"`labels` must be class indices >= 0, got {labels.min()}; map the classes to 0, 1, ..."
        )
    feature_dim = require_int(feature_dim, "feature_dim", 1)
    separation = require_non_negative(separation, "separation")
    noise = require_non_negative(noise, "noise")
    rng = np.random.default_rng(0) if rng is None else rng
    means = separation * rng.standard_normal((int(labels.max()) + 1, feature_dim))
    x = means.astype(np.float32)[labels]
    x += noise * rng.standard_normal(x.shape, dtype=np.float32)
    return torch.from_numpy(x)


def stochastic_block_model(
    num_nodes: int = 2000,
    num_classes: int = 4,
    average_degree: float = 4.0,
    intra_inter_ratio: float = 4.0,
    feature_dim: int = 32,
    separation: float = 1.0,
    noise: float = 1.0,
    seed: int = 0,
) -> tuple[Tensor, Tensor, Tensor]:
    """A sparse SBM: ``(edge_index (2, 2E), x (N, feature_dim), labels (N,))``.

    Sampled in ``O(E)``, not from an ``N x N`` probability matrix: ``round(N *
    average_degree / 2)`` pairs, a share ``intra_inter_ratio / (1 + intra_inter_ratio)`` of them
    ``(u, v)`` with ``u`` uniform and ``v`` uniform in ``u``'s class, the others with ``v``
    uniform among the nodes of the other classes. Self pairs and repeats are dropped (one sort of
    the ``E`` pair keys), so the realised degree is a little below ``average_degree``; every edge
    is listed in both directions (PyG's undirected convention). Classes are balanced (sizes
    differ by at most one) and seeded.
    """
    num_nodes = require_int(num_nodes, "num_nodes", 2)
    num_classes = require_int(num_classes, "num_classes", 1)
    if num_classes > num_nodes:
        raise ValueError(f"`num_classes` ({num_classes}) exceeds `num_nodes` ({num_nodes}).")
    average_degree = require_non_negative(average_degree, "average_degree")
    ratio = require_positive(intra_inter_ratio, "intra_inter_ratio")
    rng = np.random.default_rng(require_int(seed, "seed", 0))
    labels = rng.permutation(np.arange(num_nodes) % num_classes)
    members = np.argsort(labels, kind="stable")  # nodes grouped by class
    sizes = np.bincount(labels, minlength=num_classes)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])

    pairs = round(num_nodes * average_degree / 2)
    inside = pairs if num_classes == 1 else round(pairs * ratio / (1 + ratio))
    u = rng.integers(0, num_nodes, size=pairs)
    c = labels[u]
    pick = rng.random(pairs)
    v = np.empty(pairs, dtype=np.int64)
    same = slice(0, inside)
    v[same] = members[offsets[c[same]] + (pick[same] * sizes[c[same]]).astype(np.int64)]
    other = slice(inside, pairs)  # uniform over the N - n_c nodes outside u's class
    slot = (pick[other] * (num_nodes - sizes[c[other]])).astype(np.int64)
    slot += np.where(slot >= offsets[c[other]], sizes[c[other]], 0)
    v[other] = members[slot]

    low, high = np.minimum(u, v), np.maximum(u, v)
    keys = np.unique((low * num_nodes + high)[low != high])
    low, high = keys // num_nodes, keys % num_nodes
    edge_index = torch.from_numpy(np.stack([np.r_[low, high], np.r_[high, low]]))
    x = class_features(labels, feature_dim, separation, noise, rng)
    return edge_index, x, torch.from_numpy(labels)


def networkx_graph(
    name: str,
    feature_dim: int = 16,
    separation: float = 1.0,
    noise: float = 1.0,
    seed: int = 0,
) -> tuple[Tensor, Tensor, Tensor]:
    """A graph networkx ships (:data:`NETWORKX_GRAPHS`) as ``(edge_index, x, labels)``; nodes are
    numbered in networkx's node order, features drawn by :func:`class_features`."""
    if not isinstance(name, str) or name not in NETWORKX_GRAPHS:
        raise ValueError(f"unknown networkx graph {name!r}; choose one of {list(NETWORKX_GRAPHS)}.")
    import networkx as nx

    generator, attribute = NETWORKX_GRAPHS[name]
    graph = getattr(nx, generator)()
    nodes = list(graph.nodes())
    index = {node: i for i, node in enumerate(nodes)}
    if attribute is not None:
        values = [graph.nodes[node][attribute] for node in nodes]
        names = sorted(set(values), key=values.index)  # first appearance order
        labels = np.array([names.index(value) for value in values], dtype=np.int64)
    else:
        communities = nx.community.greedy_modularity_communities(graph)
        labels = np.empty(len(nodes), dtype=np.int64)
        for label, community in enumerate(communities):  # largest first
            labels[[index[node] for node in community]] = label
    edges = np.array([(index[a], index[b]) for a, b in graph.edges()], dtype=np.int64)
    edge_index = torch.from_numpy(np.concatenate([edges, edges[:, ::-1]]).T.copy())
    rng = np.random.default_rng(require_int(seed, "seed", 0))
    x = class_features(labels, feature_dim, separation, noise, rng)
    return edge_index, x, torch.from_numpy(labels)


def _read_table(path: Path, dtype) -> np.ndarray:
    """A 2-D table from ``.npy`` or UTF-8 text (whitespace or comma separated, ``#`` comments,
    a byte-order mark accepted); a line that does not parse is named with the file."""
    if path.suffix == ".npy":
        table = np.load(path, allow_pickle=False)
    else:
        with path.open(encoding="utf-8-sig") as handle:
            first = next((ln for ln in handle if ln.strip() and not ln.startswith("#")), "")
        delimiter = "," if "," in first else None
        kind = "integers" if np.issubdtype(dtype, np.integer) else "numbers"
        try:
            table = np.loadtxt(
                path,
                dtype=dtype,
                comments="#",
                delimiter=delimiter,
                ndmin=2,
                encoding="utf-8-sig",
            )
        except ValueError as error:
            raise ValueError(
                f"{path} could not be read as a table of {kind} ({error}); fix that line (a "
                "truncated file loses its last row's fields)."
            ) from error
    return np.asarray(table)


def load_graph_files(
    edge_file: str | Path, feature_file: str | Path, label_file: str | Path | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """``(edge_index, x, labels)`` from an edge list, a feature table and optional labels (see
    the module docstring); every node id must have a feature row."""
    edge_path, feature_path = Path(edge_file), Path(feature_file)
    for path in (edge_path, feature_path, *([Path(label_file)] if label_file else [])):
        if not path.is_file():
            raise FileNotFoundError(f"no such file: {path}")
    features = _read_table(feature_path, np.float32)
    if features.ndim == 1:
        features = features[:, None]
    if features.ndim != 2 or not np.issubdtype(features.dtype, np.number):
        raise ValueError(f"{feature_path} must hold a numeric (num_nodes, d) table.")
    x = require_finite_tensor(torch.from_numpy(features.astype(np.float32)), str(feature_path))
    n = x.shape[0]
    edges = _read_table(edge_path, np.int64)
    if edges.size == 0:
        edges = edges.reshape(0, 2)
    if edges.ndim != 2 or edges.shape[1] != 2 or not np.issubdtype(edges.dtype, np.integer):
        raise ValueError(
            f"{edge_path} must hold two integer columns (source, target), got shape "
            f"{edges.shape} of {edges.dtype}."
        )
    if edges.size and (edges.min() < 0 or edges.max() >= n):
        raise ValueError(
            f"{edge_path} names node ids in [{edges.min()}, {edges.max()}] but {feature_path} "
            f"has {n} rows (ids 0..{n - 1}): give every node a feature row."
        )
    if label_file is None:
        labels = np.zeros(n, dtype=np.int64)
    else:
        labels = _read_table(Path(label_file), np.int64).reshape(-1)
        if labels.shape != (n,) or not np.issubdtype(labels.dtype, np.integer):
            raise ValueError(f"{label_file} must hold {n} integer labels, one per node.")
        if labels.min() < 0:
            raise ValueError(f"{label_file} holds negative labels; use 0..C-1.")
    edge_index = torch.from_numpy(edges.astype(np.int64).T.copy())
    return edge_index, x, torch.from_numpy(labels.astype(np.int64))


def missing_mask(num_nodes: int, missing_rate: float, seed: int = 0) -> Tensor:
    """``observed``: a bool ``(N,)`` mask with exactly ``round(missing_rate * N)`` False entries
    at seeded random nodes (at least one node stays observed)."""
    num_nodes = require_int(num_nodes, "num_nodes", 1)
    missing_rate = require_fraction(missing_rate, "missing_rate")
    missing = round(missing_rate * num_nodes)
    if missing >= num_nodes:
        raise ValueError(
            f"`missing_rate` {missing_rate} leaves no observed node among {num_nodes}; lower it."
        )
    generator = torch.Generator().manual_seed(require_int(seed, "seed", 0))
    observed = torch.ones(num_nodes, dtype=torch.bool)
    observed[torch.randperm(num_nodes, generator=generator)[:missing]] = False
    return observed


# checkpoints hold the data module's options in its hyperparameters (``weights_only`` loading)
torch.serialization.add_safe_globals([SBMOptions, GraphFeatureOptions, GraphFiles])


class AttributeMissingGraphDataModule(MultiViewDataModule):
    """A graph with missing node attributes as multi-view clustering data (module docstring).

    ``edge_index``, ``x`` (all attributes, unchanged), ``observed`` and ``labels`` exist after
    construction, as do ``views``, ``view_dims`` and ``num_classes``.

    Args:
        source: ``"sbm"``, ``"files"`` or a name of :data:`NETWORKX_GRAPHS`.
        views: ``"cmv_nd"``, ``"sign"`` or ``"imputed"``.
        num_hops: ``K`` of the hop views (``cmv_nd``, ``sign``).
        missing_rate: share of nodes whose attributes are unobserved, in ``[0, 1)``.
        sbm: the SBM's graph (:class:`SBMOptions`), for ``source="sbm"``.
        features: the generated features (:class:`GraphFeatureOptions`), for the SBM and the
            networkx graphs.
        files: the graph's files (:class:`GraphFiles`), for ``source="files"``. Each of
            ``sbm``, ``features`` and ``files`` may also be a mapping of its fields.
        chunk_size: source rows per sparse product of the CMV-ND views.
        batch_size, seed, standardize: as in ``MultiViewDataModule``; ``seed`` also draws the
            graph, the features and the missing nodes.
    """

    def __init__(
        self,
        source: Literal[
            "sbm",
            "files",
            "karate_club",
            "les_miserables",
            "davis_southern_women",
            "florentine_families",
        ] = "sbm",
        views: Literal["cmv_nd", "sign", "imputed"] = "cmv_nd",
        num_hops: int = 2,
        missing_rate: float = 0.6,
        sbm: SBMOptions = SBMOptions(),
        features: GraphFeatureOptions = GraphFeatureOptions(),
        files: GraphFiles | None = None,
        chunk_size: int = 16384,
        batch_size: int = 128,
        seed: int = 0,
        standardize: bool = True,
    ) -> None:
        require_choice(source, "source", SOURCES)
        require_choice(views, "views", VIEWS)
        sbm = as_options(sbm, "sbm", SBMOptions)
        features = as_options(features, "features", GraphFeatureOptions)
        if files is not None:
            files = as_options(files, "files", GraphFiles)
        if source == "files" and files is None:
            raise ValueError('source="files" needs `files` (its `edge_file` and `feature_file`).')
        if source != "files" and files is not None:
            raise ValueError(f'`files` needs source="files", got {source!r}.')
        self.source, self.view_kind = source, views
        self.num_hops = require_int(num_hops, "num_hops", 1)
        self.missing_rate = require_fraction(missing_rate, "missing_rate")
        self.chunk_size = require_int(chunk_size, "chunk_size", 1)
        self.sbm, self.features, self.files = sbm, features, files
        super().__init__(batch_size, seed, require_bool(standardize, "standardize"))
        self.save_hyperparameters()

    def build_views(self) -> tuple[list[Tensor], Tensor]:
        seed = require_int(self.seed, "seed", 0)
        features = asdict(self.features)
        if self.source == "sbm":
            graph = stochastic_block_model(**asdict(self.sbm), **features, seed=seed)
        elif self.source == "files":
            graph = load_graph_files(**asdict(self.files))
        else:
            graph = networkx_graph(self.source, **features, seed=seed)
        self.edge_index, self.x, labels = graph
        self.observed = missing_mask(self.x.shape[0], self.missing_rate, seed)
        if self.view_kind == "cmv_nd":
            views = neighbourhood_views(
                self.edge_index,
                self.x,
                num_hops=self.num_hops,
                observed=self.observed,
                chunk_size=self.chunk_size,
            )
        elif self.view_kind == "sign":
            views = sign_views(self.edge_index, self.x, None, self.num_hops, self.observed)
        else:
            views = [mean_impute(self.x, self.observed)]
        return views, labels
