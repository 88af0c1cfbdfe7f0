"""AttributeMissingGraphDataModule for every source (SBM, the graphs networkx ships, files), its
views, the missing rate, and the sparse SBM generator."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch

from lightning_info.data.multiview import standardize_columns
from lightning_info.methods.cmv_nd import (
    NETWORKX_GRAPHS,
    AttributeMissingGraphDataModule,
    GraphFeatureOptions,
    GraphFiles,
    SBMOptions,
    load_graph_files,
    mean_impute,
    missing_mask,
    neighbourhood_views,
    networkx_graph,
    sign_views,
    stochastic_block_model,
)


def test_sbm_is_sparse_undirected_seeded_and_has_the_asked_structure():
    edge_index, x, labels = stochastic_block_model(
        6000, num_classes=3, average_degree=6.0, intra_inter_ratio=3.0, feature_dim=5, seed=1
    )
    assert x.shape == (6000, 5) and labels.shape == (6000,)
    assert torch.bincount(labels).tolist() == [2000, 2000, 2000]  # balanced
    source, target = edge_index
    assert not (source == target).any()
    pairs = set(zip(source.tolist(), target.tolist()))
    assert len(pairs) == edge_index.shape[1]  # no repeated edge
    assert all((b, a) in pairs for a, b in pairs)  # both directions listed
    degree = edge_index.shape[1] / 6000
    assert 5.9 < degree <= 6.0  # repeats dropped: a little below the asked degree
    intra = (labels[source] == labels[target]).float().mean().item()
    assert abs(intra - 0.75) < 0.02  # ratio 3 -> 3/4 of the edges inside a class
    class_means = torch.stack([x[labels == c].mean(0) for c in range(3)])
    assert torch.cdist(class_means, class_means).max() > 0.5  # features depend on the class
    again = stochastic_block_model(
        6000, num_classes=3, average_degree=6.0, intra_inter_ratio=3.0, feature_dim=5, seed=1
    )
    assert all(torch.equal(a, b) for a, b in zip(again, (edge_index, x, labels)))
    other = stochastic_block_model(6000, 3, 6.0, 3.0, 5, seed=2)[0]
    assert other.shape != edge_index.shape or not torch.equal(other, edge_index)


def test_networkx_graphs_take_labels_from_attributes_or_modularity():
    edge_index, x, labels = networkx_graph("karate_club", feature_dim=4)
    graph = nx.karate_club_graph()
    clubs = [graph.nodes[v]["club"] for v in graph.nodes]
    assert labels.tolist() == [0 if c == clubs[0] else 1 for c in clubs]
    assert edge_index.shape == (2, 2 * graph.number_of_edges()) and x.shape == (34, 4)
    _, _, women = networkx_graph("davis_southern_women")
    assert torch.bincount(women).tolist() == [18, 14]  # women, events
    _, _, families = networkx_graph("florentine_families")
    communities = nx.community.greedy_modularity_communities(nx.florentine_families_graph())
    assert torch.bincount(families).tolist() == [len(c) for c in communities]
    with pytest.raises(ValueError, match="unknown networkx graph"):
        networkx_graph("cora")


def test_missing_mask_hides_exactly_the_rate_seeded():
    observed = missing_mask(1000, 0.6, seed=3)
    assert observed.dtype == torch.bool and int((~observed).sum()) == 600
    assert torch.equal(observed, missing_mask(1000, 0.6, seed=3))
    assert not torch.equal(observed, missing_mask(1000, 0.6, seed=4))
    assert missing_mask(10, 0.0).all()
    with pytest.raises(ValueError, match="no observed node"):
        missing_mask(1, 0.6)
    with pytest.raises(ValueError, match="missing_rate"):
        missing_mask(10, 1.0)


@pytest.mark.parametrize("views", ["cmv_nd", "sign", "imputed"])
def test_sbm_datamodule_builds_the_asked_views(views):
    dm = AttributeMissingGraphDataModule(
        views=views,
        num_hops=3,
        sbm=SBMOptions(num_nodes=400, num_classes=3),
        features=GraphFeatureOptions(feature_dim=6),
        batch_size=32,
    )
    expected = {"cmv_nd": 4, "sign": 4, "imputed": 1}[views]
    assert dm.view_dims == [6] * expected and dm.num_classes == 3
    assert int((~dm.observed).sum()) == 240  # missing_rate 0.6 of 400
    graph = stochastic_block_model(400, 3, 4.0, 4.0, 6, seed=0)
    assert torch.equal(dm.x, graph[1]) and torch.equal(dm.edge_index, graph[0])  # x unaltered
    if views == "cmv_nd":
        raw = neighbourhood_views(dm.edge_index, dm.x, num_hops=3, observed=dm.observed)
    elif views == "sign":
        raw = sign_views(dm.edge_index, dm.x, None, 3, dm.observed)
    else:
        raw = [mean_impute(dm.x, dm.observed)]
    for got, view in zip(dm.views, raw):
        torch.testing.assert_close(got, standardize_columns(view))
    (batch_views, labels) = next(iter(dm.train_dataloader()))
    assert len(batch_views) == expected and batch_views[0].shape == (32, 6)
    assert labels.shape == (32,)


@pytest.mark.parametrize("source", sorted(NETWORKX_GRAPHS))
def test_networkx_sources(source):
    dm = AttributeMissingGraphDataModule(
        source=source, features=GraphFeatureOptions(feature_dim=5), batch_size=8
    )
    n = dm.x.shape[0]
    assert dm.view_dims == [5, 5, 5] and dm.num_views == 3
    assert dm.num_classes == int(dm.labels.max()) + 1 >= 2
    assert int((~dm.observed).sum()) == round(0.6 * n)
    assert dm.edge_index.max() < n


def test_files_source(tmp_path):
    edges = tmp_path / "edges.txt"
    edges.write_text("# source target\n0 1\n1 2\n2 3\n3 0\n4 5\n")
    rng = np.random.default_rng(0)
    features = rng.standard_normal((6, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", features)
    np.savetxt(tmp_path / "x.csv", features, delimiter=",")
    (tmp_path / "y.txt").write_text("0\n0\n1\n1\n2\n2\n")
    (tmp_path / "edges.csv").write_text("0,1\n1,2\n2,3\n3,0\n4,5\n")
    dm = AttributeMissingGraphDataModule(
        source="files",
        files=GraphFiles(str(edges), str(tmp_path / "x.npy"), str(tmp_path / "y.txt")),
        missing_rate=0.5,
        batch_size=2,
    )
    assert dm.num_classes == 3 and dm.view_dims == [3, 3, 3]
    assert int((~dm.observed).sum()) == 3
    assert torch.equal(dm.x, torch.from_numpy(features))
    csv = load_graph_files(tmp_path / "edges.csv", tmp_path / "x.csv")
    assert torch.equal(csv[0], dm.edge_index)
    torch.testing.assert_close(csv[1], dm.x)
    assert not csv[2].any()  # no label file: every label 0
    bad = tmp_path / "bad.txt"
    bad.write_text("0 9\n")
    with pytest.raises(ValueError, match="give every node a feature row"):
        load_graph_files(bad, tmp_path / "x.npy")
    bad.write_text("0 1 2\n")
    with pytest.raises(ValueError, match="two integer columns"):
        load_graph_files(bad, tmp_path / "x.npy")
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_graph_files(tmp_path / "missing.txt", tmp_path / "x.npy")
    (tmp_path / "y_short.txt").write_text("0\n1\n")
    with pytest.raises(ValueError, match="6 integer labels"):
        load_graph_files(edges, tmp_path / "x.npy", tmp_path / "y_short.txt")


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"source": "cora"}, ValueError, "`source`"),
        ({"views": "gcn"}, ValueError, "`views`"),
        ({"source": "files"}, ValueError, "edge_file"),
        ({"files": GraphFiles("e.txt", "x.npy")}, ValueError, 'needs source="files"'),
        ({"missing_rate": 1.0}, ValueError, "missing_rate"),
        ({"num_hops": 0}, ValueError, "num_hops"),
        ({"sbm": (100, 4)}, TypeError, "`sbm` must be a SBMOptions"),
        ({"sbm": {"num_nodes": 1}}, ValueError, "num_nodes"),
        ({"batch_size": 500}, ValueError, "batch_size"),
    ],
)
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        AttributeMissingGraphDataModule(
            **{"sbm": SBMOptions(num_nodes=100), "batch_size": 8, **kwargs}
        )


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: SBMOptions(num_nodes=1), "num_nodes"),
        (lambda: SBMOptions(num_nodes=3, num_classes=4), "exceeds `num_nodes`"),
        (lambda: SBMOptions(average_degree=-1.0), "average_degree"),
        (lambda: SBMOptions(intra_inter_ratio=0.0), "intra_inter_ratio"),
        (lambda: GraphFeatureOptions(feature_dim=0), "feature_dim"),
        (lambda: GraphFeatureOptions(noise=float("nan")), "noise"),
    ],
)
def test_bad_options(make, match):
    with pytest.raises(ValueError, match=match):
        make()
