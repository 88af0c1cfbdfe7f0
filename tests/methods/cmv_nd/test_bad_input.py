"""Unobserved rows of ``x`` are never read (issue 35): NaN or any value there is accepted and
changes nothing, while NaN/inf in an observed row is refused with a message."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
import torch

import lightning_info.methods.cmv_nd as cmv_nd
from lightning_info.methods.cmv_nd.datamodule import (
    AttributeMissingGraphDataModule,
    GraphFeatureOptions,
    GraphFiles,
    SBMOptions,
    class_features,
    load_graph_files,
    missing_mask,
    networkx_graph,
    stochastic_block_model,
)
from lightning_info.methods.cmv_nd.functional import (
    graph_adjacency,
    mean_impute,
    neighbourhood_views,
    normalized_adjacency,
    sign_views,
)

PATH = torch.tensor([[0, 1], [1, 2]])


def _transform(*args, **kwargs):
    pytest.importorskip("torch_geometric")
    return cmv_nd.NeighbourhoodDifferentiation(*args, **kwargs)


def _transformed(data_fields, **kwargs):
    transform = _transform(1, **kwargs)
    from torch_geometric.data import Data

    return transform(Data(**data_fields))


def _small_data(**kwargs) -> AttributeMissingGraphDataModule:
    return AttributeMissingGraphDataModule(sbm=SBMOptions(num_nodes=20, num_classes=2), **kwargs)


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
    pytest.param(
        lambda: graph_adjacency(PATH, 3, undirected="no"),
        TypeError,
        r"`undirected` must be True or False, got 'no'",
        id="adjacency-undirected-string",
    ),
    pytest.param(
        lambda: graph_adjacency(PATH, 3, undirected=0),
        TypeError,
        r"`undirected` must be True or False, got 0",
        id="adjacency-undirected-int",
    ),
    pytest.param(
        lambda: graph_adjacency(PATH, 3.0),
        TypeError,
        r"`num_nodes` must be an int, got 3.0",
        id="adjacency-num-nodes-float",
    ),
    pytest.param(
        lambda: graph_adjacency(PATH.float(), 3),
        TypeError,
        r"`edge_index` must hold integer node ids \(torch.long\), got torch.float32",
        id="adjacency-float-edges",
    ),
    pytest.param(
        lambda: graph_adjacency(PATH, 2),
        ValueError,
        r"`edge_index` holds node ids in \[0, 2\] but the graph has 2 nodes",
        id="adjacency-node-past-the-end",
    ),
    pytest.param(
        lambda: normalized_adjacency(np.eye(3)),
        TypeError,
        r"`adjacency` must be a scipy sparse matrix, got ndarray",
        id="normalized-dense-array",
    ),
    pytest.param(
        lambda: normalized_adjacency(torch.eye(3)),
        TypeError,
        r"`adjacency` must be a scipy sparse matrix, got Tensor",
        id="normalized-tensor",
    ),
    pytest.param(
        lambda: normalized_adjacency(sp.csr_matrix(np.ones((2, 3)))),
        ValueError,
        r"`adjacency` must be square \(N, N\), got shape \(2, 3\)",
        id="normalized-not-square",
    ),
    pytest.param(
        lambda: normalized_adjacency(sp.csr_matrix(np.array([[0.0, -1.0], [-1.0, 0.0]]))),
        ValueError,
        r"`adjacency` must hold finite, non-negative weights",
        id="normalized-negative-weight",
    ),
    pytest.param(
        lambda: normalized_adjacency(sp.csr_matrix(np.array([[0.0, np.nan], [1.0, 0.0]]))),
        ValueError,
        r"`adjacency` must hold finite, non-negative weights",
        id="normalized-nan-weight",
    ),
    pytest.param(
        lambda: normalized_adjacency(graph_adjacency(PATH, 3), dtype=np.int32),
        TypeError,
        r"`dtype` must be a floating-point dtype .*got int32",
        id="normalized-integer-dtype",
    ),
    pytest.param(
        lambda: missing_mask(3, 1.0),
        ValueError,
        r"`missing_rate` must lie in \[0, 1\), got 1.0",
        id="missing-mask-rate-one",
    ),
    pytest.param(
        lambda: missing_mask(4, True),
        TypeError,
        r"`missing_rate` must be a real number, got True",
        id="missing-mask-rate-bool",
    ),
    pytest.param(
        lambda: missing_mask(True, 0.5),
        TypeError,
        r"`num_nodes` must be an int, got True",
        id="missing-mask-num-nodes-bool",
    ),
    pytest.param(
        lambda: missing_mask(4, 0.5, seed=-1),
        ValueError,
        r"`seed` must be >= 0, got -1",
        id="missing-mask-seed-negative",
    ),
    pytest.param(
        lambda: networkx_graph(["karate_club"]),
        ValueError,
        r"unknown networkx graph \['karate_club'\]; choose one of \['karate_club'",
        id="networkx-name-list",
    ),
    pytest.param(
        lambda: networkx_graph("karate"),
        ValueError,
        r"unknown networkx graph 'karate'",
        id="networkx-unknown-name",
    ),
    pytest.param(
        lambda: networkx_graph("karate_club", feature_dim=0),
        ValueError,
        r"`feature_dim` must be >= 1, got 0",
        id="networkx-feature-dim-zero",
    ),
    pytest.param(
        lambda: stochastic_block_model(True),
        TypeError,
        r"`num_nodes` must be an int, got True",
        id="sbm-num-nodes-bool",
    ),
    pytest.param(
        lambda: stochastic_block_model(10, 2, float("nan")),
        ValueError,
        r"`average_degree` must be finite, got nan",
        id="sbm-degree-nan",
    ),
    pytest.param(
        lambda: stochastic_block_model(3, 4),
        ValueError,
        r"`num_classes` \(4\) exceeds `num_nodes` \(3\)",
        id="sbm-more-classes-than-nodes",
    ),
    pytest.param(
        lambda: SBMOptions(num_nodes=2.0),
        TypeError,
        r"`num_nodes` must be an int, got 2.0",
        id="sbm-options-num-nodes-float",
    ),
    pytest.param(
        lambda: SBMOptions(intra_inter_ratio=0.0),
        ValueError,
        r"`intra_inter_ratio` must be > 0, got 0.0",
        id="sbm-options-ratio-zero",
    ),
    pytest.param(
        lambda: GraphFeatureOptions(feature_dim=True),
        TypeError,
        r"`feature_dim` must be an int, got True",
        id="feature-options-dim-bool",
    ),
    pytest.param(
        lambda: GraphFeatureOptions(separation=float("inf")),
        ValueError,
        r"`separation` must be finite, got inf",
        id="feature-options-separation-inf",
    ),
    pytest.param(
        lambda: GraphFiles(3, "features.csv"),
        TypeError,
        r"`edge_file` must be a path \(a str or a Path\), got int 3",
        id="graph-files-int-path",
    ),
    pytest.param(
        lambda: GraphFiles("edges.txt", "features.csv", label_file=["labels.txt"]),
        TypeError,
        r"`label_file` must be a path \(a str or a Path\), got list",
        id="graph-files-label-list",
    ),
    pytest.param(
        lambda: _small_data(standardize="no"),
        TypeError,
        r"`standardize` must be True or False, got 'no'",
        id="datamodule-standardize-string",
    ),
    pytest.param(
        lambda: _small_data(views="hops"),
        ValueError,
        r"`views` must be one of \('cmv_nd', 'sign', 'imputed'\), got 'hops'",
        id="datamodule-unknown-views",
    ),
    pytest.param(
        lambda: _small_data(num_hops=True),
        TypeError,
        r"`num_hops` must be an int, got True",
        id="datamodule-num-hops-bool",
    ),
    pytest.param(
        lambda: _small_data(files=GraphFiles("a", "b")),
        ValueError,
        r"`files` needs source=\"files\", got 'sbm'",
        id="datamodule-files-without-the-files-source",
    ),
    pytest.param(
        lambda: AttributeMissingGraphDataModule(sbm={"nodes": 3}),
        TypeError,
        r"unexpected keyword argument 'nodes'",
        id="datamodule-sbm-unknown-field",
    ),
    pytest.param(
        lambda: _transform(True),
        TypeError,
        r"`num_hops` must be an int, got True",
        id="transform-num-hops-bool",
    ),
    pytest.param(
        lambda: _transform(1, undirected=1),
        TypeError,
        r"`undirected` must be a bool, got 1",
        id="transform-undirected-int",
    ),
    pytest.param(
        lambda: _transform(1, observed_key=3),
        TypeError,
        r"`observed_key` must be a str or None, got 3",
        id="transform-observed-key-int",
    ),
    pytest.param(
        lambda: _transformed({"edge_index": PATH}),
        ValueError,
        r"NeighbourhoodDifferentiation needs `data.x`",
        id="transform-data-without-x",
    ),
    pytest.param(
        lambda: _transformed({"edge_index": PATH, "x": torch.ones(3, 2)}, observed_key="seen"),
        ValueError,
        r"`data.seen` \(observed_key\) is missing",
        id="transform-missing-observed-key",
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
