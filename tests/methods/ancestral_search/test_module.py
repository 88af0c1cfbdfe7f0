"""AncestralGraphSearch: a Trainer run makes the functional search's moves and stops at its
fixed point; two DDP processes splitting the scores find the same graph as one; F1 against a
known truth is logged; errors before any work."""

from __future__ import annotations

import numpy as np
import pytest

from lightning_info.core.trainers import quiet_trainer
from lightning_info.methods.ancestral_search import AncestralGraphSearch, BayesianNetworkDataModule
from lightning_info.methods.ancestral_search.datamodule import monotone_binary_samples
from lightning_info.methods.ancestral_search.functional import (
    edge_step,
    initial_graph,
    marks_from_types,
    node_step,
)
from lightning_info.methods.ancestral_search.information import InformationCache
from tests.methods.ancestral_search.test_functional import TOYS

pytest.importorskip("pgmpy")


def _toy_table(n: int = 20_000):
    dag, latent, expected, _ = TOYS["confounded_pair"]
    observed = [v for v in range(len(dag)) if v not in latent]
    return monotone_binary_samples(dag, n, 0)[:, observed], expected


def _search(data, **trainer) -> tuple[AncestralGraphSearch, object]:
    model = AncestralGraphSearch()
    run = quiet_trainer(max_epochs=50, accelerator="cpu", **trainer)
    run.fit(model, datamodule=data)
    return model, run


def test_a_trainer_run_is_the_functional_search_and_stops_at_its_fixed_point():
    codes, expected = _toy_table()
    model, trainer = _search(BayesianNetworkDataModule.from_table(codes, moves=1))
    score = InformationCache(codes)
    functional = edge_step(node_step(initial_graph(codes), score), score)
    assert np.array_equal(model.graph, marks_from_types(functional))
    assert np.array_equal(model.graph, expected)
    assert trainer.global_step < 50 and trainer.callback_metrics["search/converged"] == 1.0


def test_ddp_ranks_split_the_scores_and_find_the_same_graph():
    codes, _ = _toy_table()
    single, _ = _search(BayesianNetworkDataModule.from_table(codes, moves=2))
    split, trainer = _search(
        BayesianNetworkDataModule.from_table(codes, moves=2), strategy="ddp_spawn", devices=2
    )
    assert trainer.world_size == 2
    assert np.array_equal(split.graph, single.graph)


def test_f1_against_a_known_truth_is_logged_and_the_graph_converts():
    data = BayesianNetworkDataModule("asia", num_samples=5000, hidden=["either"], data_seed=0)
    model, trainer = _search(data)
    f1 = trainer.callback_metrics["search/orientation_f1"]
    assert 0.0 < float(f1) <= 1.0
    assert float(trainer.callback_metrics["search/skeleton_f1"]) > 0.5
    graph = model.to_causallearn()
    assert [node.get_name() for node in graph.get_nodes()] == data.names


def test_bad_settings_and_data_are_refused_before_any_search():
    with pytest.raises(ValueError, match="`method`"):
        AncestralGraphSearch(method="aic")
    with pytest.raises(ValueError, match="too few"):
        _search(BayesianNetworkDataModule.from_table(np.array([[0, 1], [1, 0]] * 3)))
