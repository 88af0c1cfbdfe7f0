"""The digit graphs and a user's JSON graphs: structure, targets and labels recovered by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from lightning_info.data.digits import load_digits_images
from lightning_info.methods.graph4mm.graphs import (
    CENTRE_TEXT,
    DIGIT_WORDS,
    MultimodalGraph,
    digit_graphs,
    read_graphs_json,
)


@pytest.fixture(scope="module")
def digits():
    return load_digits_images()


def _node_class(graph, node, images, labels):
    """A node's digit, read back from its caption's word or from the digit its image is."""
    if graph.has_image[node]:
        same = (images == graph.images[node]).flatten(1).all(1)
        found = set(labels[same].tolist())
        assert len(found) == 1  # every image the graph shows is a digit of one class
        return found.pop()
    words = [w for w in graph.texts[node].split() if w in DIGIT_WORDS]
    assert len(words) == 1
    return DIGIT_WORDS.index(words[0])


def test_digit_graphs_targets_are_the_neighbours_digits_in_order(digits):
    images, labels = digits
    graphs = digit_graphs(images, labels, 60, max_neighbours=3, max_distractors=2, seed=1)
    for g in graphs:
        adjacency = g.adjacency()
        assert torch.equal(adjacency, adjacency.T) and not bool(adjacency.diagonal().any())
        neighbours = g.neighbours(0)
        assert 1 <= len(neighbours) <= 3 and g.texts[0] == CENTRE_TEXT
        assert not bool(g.has_image[0])
        others = [v for v in range(1, len(g.texts)) if v not in neighbours]
        assert len(others) <= 2
        for v in others:  # a two-hop node hangs on exactly one neighbour, never on the centre
            assert g.neighbours(v) and set(g.neighbours(v)) <= set(neighbours)
        classes = sorted(_node_class(g, v, images, labels) for v in neighbours)
        assert g.target == " ".join(DIGIT_WORDS[c] for c in classes)
        assert 0 <= g.label < 10


def test_digit_graphs_homophily_and_text_node_rate_are_as_asked(digits):
    images, labels = digits
    graphs = digit_graphs(images, labels, 600, homophily=0.7, text_node_rate=0.3, seed=2)
    same, total, text_nodes, nodes = 0, 0, 0, 0
    for g in graphs:
        for v in g.neighbours(0):
            # a neighbour not drawn equal still matches 1 time in 10: P(same) = h + (1 - h) / 10
            same += _node_class(g, v, images, labels) == g.label
            total += 1
        text_nodes += int((~g.has_image[1:]).sum())
        nodes += len(g.texts) - 1
    p_same = 0.7 + 0.3 / 10
    assert abs(same / total - p_same) < 4 * np.sqrt(p_same * (1 - p_same) / total)
    assert abs(text_nodes / nodes - 0.3) < 4 * np.sqrt(0.21 / nodes)


def test_digit_graphs_are_seeded(digits):
    images, labels = digits
    a, b = (digit_graphs(images, labels, 5, seed=3) for _ in range(2))
    c = digit_graphs(images, labels, 5, seed=4)
    assert all(x.texts == y.texts and torch.equal(x.images, y.images) for x, y in zip(a, b))
    assert any(x.texts != y.texts or x.target != y.target for x, y in zip(a, c))


def test_bad_digit_graph_arguments_are_refused(digits):
    images, labels = digits
    with pytest.raises(ValueError, match="homophily"):
        digit_graphs(images, labels, 3, homophily=1.5)
    with pytest.raises(ValueError, match="every digit class"):
        digit_graphs(images[labels < 5], labels[labels < 5], 3)
    with pytest.raises(ValueError, match="count"):
        digit_graphs(images, labels, 0)


def test_a_users_json_graph_moves_its_centre_to_node_0(tmp_path):
    np.save(tmp_path / "chart.npy", np.full((2, 2), 0.5, dtype=np.float32))
    graph = {
        "nodes": [
            {"text": "sales chart", "image": "chart.npy", "label": "finance"},
            {"text": "a photo", "image": [[0.0, 1.0], [1.0, 0.0]], "label": "travel"},
            {"text": "quarterly report", "label": "finance"},
            {"text": "an aside"},
        ],
        "edges": [[2, 0], [1, 2], [0, 3]],
        "centre": 2,
    }
    other = {
        "nodes": [{"text": "x", "label": "travel"}, {"text": "y"}],
        "edges": [[0, 1]],
        "target": "anything at all",
    }
    (tmp_path / "graphs.json").write_text(json.dumps([graph, other]))
    graphs, classes = read_graphs_json(tmp_path / "graphs.json")
    assert classes == ["finance", "travel"]
    g = graphs[0]
    # new order: centre (old 2), then old 0, 1, 3
    assert g.texts == ("quarterly report", "sales chart", "a photo", "an aside")
    assert g.has_image.tolist() == [False, True, True, False]
    assert torch.equal(g.images[1], torch.full((1, 2, 2), 0.5))
    assert torch.equal(g.images[2], torch.tensor([[[0.0, 1.0], [1.0, 0.0]]]))
    assert sorted(map(tuple, g.edges.tolist())) == [(0, 1), (1, 3), (2, 0)]
    assert g.neighbours(0) == [1, 2] and g.label == 0
    assert g.target == "finance travel"  # the neighbours' labels in class order
    assert graphs[1].target == "anything at all" and graphs[1].label == 1
    lines = tmp_path / "graphs.jsonl"
    lines.write_text("\n".join(json.dumps(r) for r in (graph, other)) + "\n")
    again, _ = read_graphs_json(lines, class_names=["travel", "finance", "sports"])
    assert [x.texts for x in again] == [x.texts for x in graphs] and again[0].label == 1


@pytest.mark.parametrize(
    "graph, message",
    [
        ({"nodes": []}, "'nodes' is empty"),
        ({"nodes": [{"text": "a"}], "centre": 3}, "centre 3"),
        ({"nodes": [{"text": "a"}, {"text": "b"}], "edges": [[0, 5]]}, "edges must be"),
        ({"nodes": [{"text": "a", "image": [[float("nan")]]}]}, "NaN"),
        ({"nodes": [{"text": "a", "image": [[[[1.0]]]]}]}, "H x W"),
        ({"nodes": [{"text": "a", "image": [[1.0]]}, {"image": [[1.0, 2.0]]}]}, "one shape"),
    ],
)
def test_bad_json_graphs_are_refused(tmp_path, graph, message):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(graph))
    with pytest.raises(ValueError, match=message):
        read_graphs_json(path)


def test_unknown_label_and_self_loops_are_refused(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"nodes": [{"text": "a", "label": "z"}]}))
    with pytest.raises(ValueError, match="not among the classes"):
        read_graphs_json(path, class_names=["x", "y"])
    with pytest.raises(ValueError, match="distinct node indices"):
        MultimodalGraph(
            ("a", "b"),
            torch.zeros(2, 1, 2, 2),
            torch.zeros(2, dtype=torch.bool),
            torch.tensor([[1, 1]]),
            0,
            "",
        )
