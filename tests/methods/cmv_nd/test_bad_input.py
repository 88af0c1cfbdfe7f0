"""Unobserved rows of ``x`` are never read (issue 35): NaN or any value there is accepted and
changes nothing, while NaN/inf in an observed row is refused with a message."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch

from lightning_info.methods.cmv_nd.datamodule import class_features, load_graph_files
from lightning_info.methods.cmv_nd.functional import mean_impute, neighbourhood_views, sign_views


def _graph(seed: int = 0):
    graph = nx.convert_node_labels_to_integers(nx.florentine_families_graph())
    edge_index = torch.tensor(list(graph.edges()), dtype=torch.long).T
    n = graph.number_of_nodes()
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, generator=generator, dtype=torch.float64)
    observed = torch.rand(n, generator=generator) < 0.6
    return edge_index, x, observed


def _with_nan_in_an_observed_row():
    edge_index, x, observed = _graph()
    x[int(observed.nonzero()[0])] = float("nan")
    return edge_index, x, observed


def _with_inf_everywhere_unmasked():
    edge_index, x, _ = _graph()
    x[2, 1] = float("inf")
    return edge_index, x


def _files(tmp_path, edges="0 1\n1 2\n", features="1,2\n3,4\n5,6\n", labels=None):
    (tmp_path / "edges.txt").write_text(edges)
    (tmp_path / "features.csv").write_text(features)
    label_file = None
    if labels is not None:
        label_file = tmp_path / "labels.txt"
        label_file.write_text(labels)
    return load_graph_files(tmp_path / "edges.txt", tmp_path / "features.csv", label_file)


BAD_INPUT = [
    pytest.param(
        lambda: neighbourhood_views(*_graph()[:2], observed=torch.zeros_like(_graph()[2])),
        ValueError,
        r"`observed` marks none of the 15 nodes observed: every view would be all zeros",
        id="views-nothing-observed",
    ),
    pytest.param(
        lambda: class_features(np.array([0, 1, -1]), 2),
        ValueError,
        r"`labels` must be class indices >= 0, got -1",
        id="class-features-negative-label",
    ),
    pytest.param(
        lambda: class_features(np.array([0.0, 1.5]), 2),
        ValueError,
        r"`labels` must be a non-empty 1-D array of integer class indices, got shape \(2,\) "
        "of float64",
        id="class-features-float-labels",
    ),
    pytest.param(
        lambda: class_features(np.array([], dtype=np.int64), 2),
        ValueError,
        r"non-empty 1-D array .*got shape \(0,\)",
        id="class-features-no-labels",
    ),
    pytest.param(
        lambda tmp_path: _files(tmp_path, edges="0 1\n1\n"),
        ValueError,
        r"edges\.txt could not be read as a table of integers \(.*\); fix that line",
        id="files-truncated-edge-line",
    ),
    pytest.param(
        lambda tmp_path: _files(tmp_path, edges="0.0 1.0\n1 2\n"),
        ValueError,
        r"edges\.txt could not be read as a table of integers \(.*'0\.0'",
        id="files-float-node-ids",
    ),
    pytest.param(
        lambda tmp_path: _files(tmp_path, labels="0\n1\n1.5\n"),
        ValueError,
        r"labels\.txt could not be read as a table of integers",
        id="files-float-labels",
    ),
    pytest.param(
        lambda tmp_path: _files(tmp_path, features="1,2\n3,x\n5,6\n"),
        ValueError,
        r"features\.csv could not be read as a table of numbers",
        id="files-text-feature",
    ),
    pytest.param(
        lambda: neighbourhood_views(*_with_nan_in_an_observed_row()[:2], observed=_graph()[2]),
        ValueError,
        r"`x` has 1 observed row\(s\) with NaN/inf: .*mark those nodes unobserved",
        id="views-nan-in-observed-row",
    ),
    pytest.param(
        lambda: neighbourhood_views(*_with_inf_everywhere_unmasked()),
        ValueError,
        r"`x` has 1 observed row\(s\) with NaN/inf",
        id="views-inf-all-observed",
    ),
    pytest.param(
        lambda: mean_impute(*_with_nan_in_an_observed_row()[1:]),
        ValueError,
        r"observed row\(s\) with NaN/inf",
        id="mean-impute-nan-in-observed-row",
    ),
    pytest.param(
        lambda: sign_views(*_with_nan_in_an_observed_row()[:2], None, 2, _graph()[2]),
        ValueError,
        r"observed row\(s\) with NaN/inf",
        id="sign-nan-in-observed-row",
    ),
    pytest.param(
        lambda: sign_views(*_with_inf_everywhere_unmasked(), None, 2),
        ValueError,
        r"`x` contains 1 NaN/inf value",
        id="sign-inf-all-observed",
    ),
]


@pytest.mark.parametrize("fill", [float("nan"), float("inf"), -float("inf"), 1e300, 0.0])
def test_views_do_not_depend_on_the_unobserved_rows(fill):
    edge_index, x, observed = _graph()
    reference = neighbourhood_views(edge_index, x, num_hops=3, observed=observed)
    dirty = x.clone()
    dirty[~observed] = fill
    dirty[int((~observed).nonzero()[-1]), 0] = float("nan")  # mixed values in one row
    views = neighbourhood_views(edge_index, dirty, num_hops=3, observed=observed)
    for view, expected in zip(views, reference, strict=True):
        assert torch.equal(view, expected)  # bit for bit
    assert not views[0][~observed].any() and torch.isfinite(torch.stack(views)).all()
    assert torch.equal(views[0][observed], x[observed])
    # the baseline reads the observed rows only as well
    sign = sign_views(edge_index, dirty, None, 2, observed)
    for view, expected in zip(sign, sign_views(edge_index, x, None, 2, observed), strict=True):
        assert torch.equal(view, expected)
    torch.testing.assert_close(mean_impute(dirty, observed), mean_impute(x, observed))


def test_hop_means_on_a_path_ignore_a_nan_row():
    """Path 0 - 1 - 2 - 3, node 1 unobserved and NaN: ``H_1[0]`` has no observed neighbour (a
    zero row), ``H_1[2] = x_3``, ``H_2[0] = x_2``, ``H_2[3] = x_1`` is unobserved (zero)."""
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 3]])
    x = torch.tensor([[1.0, 2.0], [np.nan, np.nan], [3.0, 5.0], [7.0, 11.0]])
    observed = torch.tensor([True, False, True, True])
    masked, hop1, hop2 = neighbourhood_views(edge_index, x, num_hops=2, observed=observed)
    assert torch.equal(masked, torch.tensor([[1.0, 2.0], [0, 0], [3.0, 5.0], [7.0, 11.0]]))
    assert torch.equal(hop1, torch.tensor([[0.0, 0.0], [2.0, 3.5], [7.0, 11.0], [3.0, 5.0]]))
    assert torch.equal(hop2, torch.tensor([[3.0, 5.0], [7.0, 11.0], [1.0, 2.0], [0.0, 0.0]]))


def test_views_with_one_observed_node_are_its_features_at_each_distance():
    """Path 0 - 1 - 2 - 3 with node 2 alone observed: ``H_k[v] = x_2`` where ``d(v, 2) = k``,
    zero rows elsewhere (the refusal is only for no observed node at all)."""
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 3]])
    x = torch.tensor([[9.0], [9.0], [4.0], [9.0]])
    observed = torch.tensor([False, False, True, False])
    masked, hop1, hop2 = neighbourhood_views(edge_index, x, num_hops=2, observed=observed)
    assert masked.flatten().tolist() == [0.0, 0.0, 4.0, 0.0]
    assert hop1.flatten().tolist() == [0.0, 4.0, 0.0, 4.0]
    assert hop2.flatten().tolist() == [4.0, 0.0, 0.0, 0.0]


def test_graph_files_with_a_byte_order_mark_read_as_without(tmp_path):
    plain = _files(tmp_path, labels="0\n1\n1\n")
    marked = _files(tmp_path, "\ufeff0 1\n1 2\n", "\ufeff1,2\n3,4\n5,6\n", "\ufeff0\n1\n1\n")
    for got, expected in zip(marked, plain, strict=True):
        assert torch.equal(got, expected)
    assert plain[1].tolist() == [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    assert plain[0].tolist() == [[0, 1], [1, 2]] and plain[2].tolist() == [0, 1, 1]
