"""Small multimodal graphs for Graph4MM: one graph per sample, node 0 its centre.

A :class:`MultimodalGraph` holds each node's text, its image (if any), the undirected edges, the
centre's class (the discriminative task) and the text to generate (the generative task).

:func:`digit_graphs` builds them from scikit-learn's digits (nothing is downloaded). Each graph
is a centre with 1..``max_neighbours`` neighbours and up to ``max_distractors`` nodes two hops
away (each linked to one neighbour). The centre's class is uniform; a neighbour shares it with
probability ``homophily``, else draws uniformly; a two-hop node draws uniformly. Every
non-centre node is, with probability ``text_node_rate``, a *text node* (a caption naming its
digit, no image), else an *image node* (a digit image of its class, an uninformative
description). The centre has neither image nor digit word. Tasks: generate the digit words of
the centre's neighbours, in increasing order ("one three three"), and classify the centre.
Neither task can be solved from the text nodes alone (half the neighbours show their digit only
in an image), nor without the graph (the two-hop nodes look like neighbours).

:func:`read_graphs_json` reads a user's graphs (format in its docstring).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath

import numpy as np
import torch
from torch import Tensor

from lightning_info.core.files import read_json_or_lines
from lightning_info.core.validation import (
    require_finite,
    require_finite_tensor,
    require_index,
    require_int,
    require_real_floating,
    require_real_tensor,
    require_string_sequence,
)

__all__ = [
    "DIGIT_WORDS",
    "MultimodalGraph",
    "digit_graphs",
    "read_graphs_json",
]

DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
CAPTIONS = ("a note about the number {}", "the digit {} is written here", "a page on {}")
DESCRIPTIONS = ("an image", "a scanned digit", "a picture")
CENTRE_TEXT = "the item in question"


@dataclass(frozen=True)
class MultimodalGraph:
    """One sample: ``texts`` (one per node, node 0 the centre), ``images`` (``(N, C, H, W)``,
    zeros where a node has none), ``has_image`` ``(N,)``, ``edges`` ``(E, 2)`` undirected pairs,
    ``label`` (the centre's class index, or -1) and ``target`` (the text to generate)."""

    texts: tuple[str, ...]
    images: Tensor
    has_image: Tensor
    edges: Tensor
    label: int
    target: str

    def __post_init__(self) -> None:
        n = len(require_string_sequence(self.texts, "texts"))
        require_finite_tensor(require_real_floating(self.images, "images"), "images")
        if require_real_tensor(self.has_image, "has_image").dtype != torch.bool:
            raise TypeError(f"`has_image` must be a bool tensor, got dtype {self.has_image.dtype}.")
        if require_real_tensor(self.edges, "edges").dtype.is_floating_point or (
            self.edges.dtype == torch.bool
        ):
            raise TypeError(
                f"`edges` must hold integer node indices, got dtype {self.edges.dtype}."
            )
        require_int(self.label, "label", -1)
        if n == 0:
            raise ValueError("a graph needs at least one node (its centre, node 0)")
        if self.images.dim() != 4 or self.images.shape[0] != n or self.has_image.shape != (n,):
            raise ValueError(
                f"images must be ({n}, C, H, W) and has_image ({n},) for {n} nodes, got "
                f"{tuple(self.images.shape)} and {tuple(self.has_image.shape)}"
            )
        if self.edges.numel() and (
            self.edges.dim() != 2
            or self.edges.shape[1] != 2
            or int(self.edges.min()) < 0
            or int(self.edges.max()) >= n
            or bool((self.edges[:, 0] == self.edges[:, 1]).any())
        ):
            raise ValueError(f"edges must be (E, 2) pairs of distinct node indices 0..{n - 1}")

    def adjacency(self) -> Tensor:
        """The symmetric boolean ``(N, N)`` adjacency, no self loops."""
        n = len(self.texts)
        adjacency = torch.zeros(n, n, dtype=torch.bool)
        if self.edges.numel():
            adjacency[self.edges[:, 0], self.edges[:, 1]] = True
            adjacency[self.edges[:, 1], self.edges[:, 0]] = True
        return adjacency

    def neighbours(self, node: int = 0) -> list[int]:
        """The nodes linked to ``node`` (an index in ``[0, N)``), in index order."""
        node = require_index(node, "node", len(self.texts))
        return torch.nonzero(self.adjacency()[node]).flatten().tolist()


def digit_graphs(
    images: Tensor,
    labels: Tensor,
    count: int,
    max_neighbours: int = 3,
    max_distractors: int = 3,
    homophily: float = 0.8,
    text_node_rate: float = 0.5,
    seed: int = 0,
) -> list[MultimodalGraph]:
    """``count`` graphs (module docstring) whose image nodes show ``images`` of their class
    (``labels`` in ``0..9``); the node order after the centre is shuffled."""
    count = require_int(count, "count", 1)
    max_neighbours = require_int(max_neighbours, "max_neighbours", 1)
    max_distractors = require_int(max_distractors, "max_distractors", 0)
    homophily = _probability(homophily, "homophily")
    text_node_rate = _probability(text_node_rate, "text_node_rate")
    seed = require_int(seed, "seed", 0)
    pools = [torch.nonzero(labels == c).flatten() for c in range(len(DIGIT_WORDS))]
    if any(len(pool) == 0 for pool in pools):
        raise ValueError("the images must hold every digit class 0..9")
    rng = np.random.default_rng(seed)
    graphs = []
    for _ in range(count):
        centre = int(rng.integers(10))
        k = int(rng.integers(1, max_neighbours + 1))
        same = rng.random(k) < homophily
        classes = [centre if s else int(rng.integers(10)) for s in same]
        d = int(rng.integers(0, max_distractors + 1))
        classes += [int(rng.integers(10)) for _ in range(d)]
        anchors = [int(rng.integers(k)) for _ in range(d)]  # the neighbour each 2-hop node hangs on
        order = rng.permutation(k + d)  # node 1 + order[j] holds item j
        texts, node_images = [CENTRE_TEXT] * (k + d + 1), [None] * (k + d + 1)
        for item, c in enumerate(classes):
            node = 1 + int(order[item])
            if rng.random() < text_node_rate:
                texts[node] = CAPTIONS[int(rng.integers(len(CAPTIONS)))].format(DIGIT_WORDS[c])
            else:
                texts[node] = DESCRIPTIONS[int(rng.integers(len(DESCRIPTIONS)))]
                node_images[node] = images[pools[c][int(rng.integers(len(pools[c])))]]
        edges = [(0, 1 + int(order[j])) for j in range(k)]
        edges += [(1 + int(order[k + j]), 1 + int(order[a])) for j, a in enumerate(anchors)]
        target = " ".join(DIGIT_WORDS[c] for c in sorted(classes[:k]))
        graphs.append(_graph(texts, node_images, images.shape[1:], edges, centre, target))
    return graphs


def _probability(value: float, name: str) -> float:
    value = require_finite(value, name)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"`{name}` is a probability: it must lie in [0, 1], got {value!r}")
    return value


def _graph(texts, node_images, image_shape, edges, label, target) -> MultimodalGraph:
    stacked = torch.zeros(len(texts), *image_shape)
    has_image = torch.zeros(len(texts), dtype=torch.bool)
    for i, image in enumerate(node_images):
        if image is not None:
            stacked[i], has_image[i] = torch.as_tensor(image, dtype=torch.float32), True
    edge_tensor = torch.tensor(edges, dtype=torch.long).reshape(-1, 2)
    return MultimodalGraph(tuple(texts), stacked, has_image, edge_tensor, label, target)


def read_graphs_json(
    path: str | Path, class_names: Sequence[str] | None = None
) -> tuple[list[MultimodalGraph], list[str]]:
    """Graphs from a JSON file (a list) or JSON lines (one graph per line), and the class names.

    Each graph::

        {"nodes": [{"text": "a chart of sales", "image": [[0.0, 0.5, ...], ...]},
                   {"text": "quarterly report", "label": "finance"}, ...],
         "edges": [[0, 1], [1, 2]],
         "centre": 0,
         "target": "text to generate for the centre"}

    ``image`` is a nested list ``H x W`` (one channel) or ``C x H x W``, or the path of a
    ``.npy`` file (relative to the JSON file's folder and inside it, also once symbolic links
    are resolved; never unpickled), of numbers in the value range the image encoder expects;
    every image in the file has one shape; a node without ``image`` is a text node. ``centre``
    (default 0, an integer node index) is moved to node 0; ``edges`` hold integer node indices
    (a float or bool is refused, not truncated). ``label`` on the centre is its class (a name
    among ``class_names``, default: the centres' labels sorted); without it the graph has label
    -1 and only the generative task can use it. ``target`` defaults to the centre's neighbours'
    labels, space-separated, in class order. Edges are undirected. A file with a UTF-8 BOM is
    read; a syntax error is reported with the file, line and column.
    """
    path = Path(path)
    records = read_json_or_lines(path)
    records = [records] if isinstance(records, dict) else records
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise ValueError(f"{path} must hold graphs: JSON objects, in a list or one per line")
    if not records:
        raise ValueError(f"{path} holds no graph")
    if class_names is None:
        found = {_centre_label(r) for r in records}
        class_names = sorted(str(label) for label in found if label is not None)
    class_names = require_string_sequence(class_names, "class_names")
    if len(set(class_names)) != len(class_names):
        repeated = sorted({name for name in class_names if class_names.count(name) > 1})
        raise ValueError(f"`class_names` repeats {repeated}; give each class once.")
    index = {name: i for i, name in enumerate(class_names)}
    parsed = [_parse_record(r, f"{path}, graph {i}", path, index) for i, r in enumerate(records)]
    shapes = {tuple(im.shape) for p in parsed for im in p[1] if im is not None}
    if len(shapes) > 1:
        raise ValueError(f"{path}: images of shapes {sorted(shapes)}; every image needs one shape")
    shape = shapes.pop() if shapes else (1, 1, 1)
    graphs = [
        _graph(texts, images, shape, edges, label, target)
        for texts, images, edges, label, target in parsed
    ]
    return graphs, [str(n) for n in class_names]


def _parse_record(record: dict, where: str, path: Path, index: dict[str, int]):
    """``(texts, images, edges, label, target)`` of one JSON graph, its centre moved to 0."""
    nodes = record.get("nodes") or []
    if not isinstance(nodes, list) or not all(isinstance(node, dict) for node in nodes):
        raise ValueError(f"{where}: 'nodes' must be a list of JSON objects, one per node")
    if not nodes:
        raise ValueError(f"{where}: 'nodes' is empty")
    centre = record.get("centre", 0)
    if _node_index(centre, len(nodes)) is None:
        raise ValueError(
            f"{where}: centre {centre!r} is not a node index; pass an int in [0, {len(nodes)})"
        )
    order = [centre] + [i for i in range(len(nodes)) if i != centre]
    position = {old: new for new, old in enumerate(order)}
    pairs = record.get("edges", [])
    if not isinstance(pairs, list) or not all(
        isinstance(pair, list) and len(pair) == 2 for pair in pairs
    ):
        raise ValueError(f"{where}: edges must be a list of [a, b] pairs of node indices")
    for e, pair in enumerate(pairs):
        if any(_node_index(node, len(nodes)) is None for node in pair):
            raise ValueError(
                f"{where}: edges must be [a, b] pairs of node indices, ints in "
                f"[0, {len(nodes)}); edge {e} is {pair!r}"
            )
    edges = [(position[a], position[b]) for a, b in pairs]
    if any(a == b for a, b in edges):
        raise ValueError(f"{where}: an edge links a node to itself; edges join distinct nodes")
    label = nodes[centre].get("label")
    if label is not None and str(label) not in index:
        raise ValueError(f"{where}: label {label!r} is not among the classes {list(index)}")
    linked = {b for a, b in edges if a == 0} | {a for a, b in edges if b == 0}
    linked_labels = [str(nodes[order[i]]["label"]) for i in linked if "label" in nodes[order[i]]]
    default = " ".join(sorted(linked_labels, key=lambda x: (index.get(x, len(index)), x)))
    texts = [str(nodes[i].get("text", "")) for i in order]
    images = [_read_image(nodes[i].get("image"), path, f"{where}, node {i}") for i in order]
    label_index = -1 if label is None else index[str(label)]
    return texts, images, edges, label_index, str(record.get("target", default))


def _node_index(value, size: int) -> int | None:
    """``value`` if it is an int node index in ``[0, size)`` (not a bool or a float), else
    ``None``."""
    try:
        return require_index(value, "node index", size)
    except (TypeError, ValueError):
        return None


def _centre_label(record: dict):
    """The centre's label, or ``None`` (a malformed graph is reported by ``_parse_record``)."""
    nodes = record.get("nodes") or []
    centre = record.get("centre", 0)
    valid = isinstance(nodes, list) and isinstance(centre, int) and not isinstance(centre, bool)
    if not valid or not 0 <= centre < len(nodes) or not isinstance(nodes[centre], dict):
        return None
    return nodes[centre].get("label")


def _read_image(value, path: Path, where: str) -> Tensor | None:
    if value is None:
        return None
    if isinstance(value, str):
        array = _load_npy(value, path, where)
    else:
        try:
            array = np.asarray(value)
        except ValueError:
            array = None  # a ragged nested list
        if array is None or array.dtype.kind not in "iuf":
            raise ValueError(
                f"{where}: an image must be a nested list of numbers of one shape (H x W or "
                "C x H x W), or the path of a .npy file"
            )
    if array.dtype.kind not in "iuf":
        raise ValueError(f"{where}: an image must hold numbers, got dtype {array.dtype}")
    image = torch.as_tensor(array.astype(np.float32), dtype=torch.float32)
    if image.dim() == 2:
        image = image.unsqueeze(0)
    if image.dim() != 3:
        raise ValueError(f"{where}: an image must be H x W or C x H x W, got {tuple(image.shape)}")
    if not bool(torch.isfinite(image).all()):
        raise ValueError(f"{where}: an image holds NaN or infinite values")
    return image


def _load_npy(value: str, path: Path, where: str) -> np.ndarray:
    """The array of the ``.npy`` file ``value`` names, relative to ``path``'s folder and inside
    it; never unpickled."""
    relative = PurePath(value)
    if relative.anchor or os.path.normpath(relative).split(os.sep)[0] == os.pardir:
        raise ValueError(
            f"{where}: image path {value!r} leaves the folder of {path.name}; image files are "
            "read only from that folder and below: copy the file there and give its path "
            "relative to the JSON file."
        )
    folder = path.parent.resolve()
    file = path.parent / relative
    if not file.resolve().is_relative_to(folder):
        raise ValueError(
            f"{where}: image path {value!r} resolves to {file.resolve()}, outside the folder "
            f"{folder} of {path.name} (through a symbolic link); image files are read only from "
            "that folder and below: copy the file there."
        )
    try:
        array = np.load(file, allow_pickle=False)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{where}: image file {value!r} not found (looked for {file}); paths are relative "
            "to the JSON file."
        ) from None
    except ValueError as error:
        raise ValueError(
            f"{where}: image file {file} is not a numeric .npy array ({error}); save one with "
            "numpy.save (object arrays are refused: loading them would unpickle code)."
        ) from None
    if not isinstance(array, np.ndarray):
        array.close()
        raise ValueError(f"{where}: image file {file} must be a .npy file holding one array")
    return array
