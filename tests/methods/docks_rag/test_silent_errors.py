"""String (or float) entity indices are refused where documents and predictions enter (issue
35): a string ``h_idx`` never equals the gold facts' int, so it scored F1 0, silently; a string
label index failed with an unhelpful comparison error. A NaN data-module setting failed late,
after the DocKG was fitted. Int indices (numpy's too) still work."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest

from lightning_info.methods.docks_rag.datamodule import DocKGOptions, DocREDSource
from lightning_info.methods.docks_rag.docred import check_document, check_predictions, read_docred
from lightning_info.methods.docks_rag.functional import (
    answer_text,
    count_facts,
    docred_scores,
    document_text,
    entity_name,
    entity_pairs,
    kg_subgraph,
    mention_graph,
    mentions,
    pair_relations,
    scores_from_counts,
    serialise_triples,
    without_query,
)
from lightning_info.methods.docks_rag.metrics import DocREDScores
from lightning_info.methods.docks_rag.module import DocKSRAG
from tests.methods.docks_rag import tiny

DOCUMENT = {
    "title": "A",
    "sents": [["Paris", "is", "in", "France"]],
    "vertexSet": [
        [{"name": "Paris", "sent_id": 0, "pos": [0, 1], "type": "LOC"}],
        [{"name": "France", "sent_id": 0, "pos": [3, 4], "type": "LOC"}],
    ],
    "labels": [{"h": 0, "t": 1, "r": "P17", "evidence": [0]}],
}
INTS = r"convert them with int\(\.\.\.\)"


def _document(path, value):
    document = copy.deepcopy(DOCUMENT)
    target = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return document


BAD_INPUT = [
    pytest.param(
        lambda: check_document(_document(["labels", 0, "h"], "0")),
        TypeError,
        rf"document 'A': label .*: h is '0' \(str\); DocRED indices .*{INTS}",
        id="label-head-string",
    ),
    pytest.param(
        lambda: check_document(_document(["labels", 0, "t"], 1.0)),
        TypeError,
        r"label .*: t is 1\.0 \(float\)",
        id="label-tail-float",
    ),
    pytest.param(
        lambda: check_document(_document(["labels", 0, "evidence"], ["0"])),
        TypeError,
        r"evidence sentence is '0' \(str\)",
        id="evidence-string",
    ),
    pytest.param(
        lambda: check_document(_document(["vertexSet", 1, 0, "sent_id"], "0")),
        TypeError,
        r"mention 'France' of entity 1: sent_id is '0'",
        id="mention-sentence-string",
    ),
    pytest.param(
        lambda: check_predictions([{"title": "A", "h_idx": "0", "t_idx": 1, "r": "P17"}]),
        TypeError,
        rf"h_idx is '0' \(str\); entity indices are ints .*{INTS}",
        id="prediction-head-string",
    ),
    pytest.param(
        lambda: check_predictions([{"title": "A", "h_idx": 0, "t_idx": True, "r": "P17"}]),
        TypeError,
        r"t_idx is True \(bool\)",
        id="prediction-tail-bool",
    ),
    pytest.param(
        lambda: docred_scores([{"title": "A", "h_idx": "0", "t_idx": 1, "r": "P17"}], []),
        TypeError,
        r"h_idx",
        id="scorer-prediction-head-string",
    ),
    pytest.param(
        lambda: check_predictions([{"title": "A", "h_idx": 0, "r": "P17"}]),
        ValueError,
        r"lacks \['t_idx'\]",
        id="prediction-missing-tail",
    ),
    pytest.param(
        lambda: tiny.data(negatives_per_positive=math.nan),
        ValueError,
        "`negatives_per_positive` must be finite",
        id="datamodule-negatives-nan",
    ),
    pytest.param(
        lambda: DocKGOptions(tau=math.nan),
        ValueError,
        "`tau` must be finite",
        id="datamodule-tau-nan",
    ),
    pytest.param(
        lambda: DocKGOptions(kg_folds=1),
        ValueError,
        "`kg_folds` must be >= 2",
        id="datamodule-one-fold",
    ),
    pytest.param(
        lambda: DocREDSource(num_train=1),
        ValueError,
        "`num_train` must be >= 2",
        id="datamodule-one-training-document",
    ),
    pytest.param(
        lambda: tiny.data(seed=0.5), TypeError, "`seed` must be an int", id="datamodule-seed-float"
    ),
]


def test_a_file_with_string_indices_is_refused_naming_the_document(tmp_path):
    path = tmp_path / "dev.json"
    path.write_text(json.dumps([_document(["labels", 0, "h"], "0")]))
    with pytest.raises(TypeError, match=r"document 'A': label .*: h is '0'"):
        read_docred(path)


class _StringIndices(DocKSRAG):
    def predict_relations(self, batch):
        return [{"title": "A", "h_idx": "0", "t_idx": "1", "r": "P17"}]


def test_docksrag_refuses_string_predictions_before_they_are_scored():
    module = _StringIndices(tiny.language_model(), lora=None)
    scores = DocREDScores()
    with pytest.raises(TypeError, match=r"h_idx is '0' \(str\)"):
        module._evaluate({"documents": [DOCUMENT]}, scores)
    assert int(scores.predicted) == 0  # nothing was counted


def test_int_indices_still_score_by_hand():
    assert check_document(copy.deepcopy(DOCUMENT)) == DOCUMENT
    predictions = [
        {"title": "A", "h_idx": np.int64(0), "t_idx": 1, "r": "P17"},
        {"title": "A", "h_idx": 1, "t_idx": 0, "r": "P17"},
    ]
    assert check_predictions(iter(predictions)) == predictions
    scores = docred_scores(predictions, [DOCUMENT])
    # 1 of 2 predictions correct, the one gold fact found: P = 1/2, R = 1, F1 = 2/3
    assert scores["precision"] == 0.5 and scores["recall"] == 1.0
    assert scores["f1"] == pytest.approx(2 / 3, abs=1e-15)


def test_prompt_parts_of_valid_input_are_unchanged():
    document = copy.deepcopy(DOCUMENT)
    relations = {"P17": "country"}
    # more sentences than the document holds: the whole document (it raised IndexError)
    assert document_text(document, 5) == document_text(document) == "Paris is in France"
    assert document_text(document, 0) == ""
    assert entity_name(document, np.int64(1)) == "France"
    assert entity_pairs(document) == [(0, 1), (1, 0)]
    assert pair_relations(document) == {(0, 1): {"P17"}}
    assert mentions(document) == [
        (0, DOCUMENT["vertexSet"][0][0]),
        (1, DOCUMENT["vertexSet"][1][0]),
    ]
    assert mention_graph(document, 0) == ([0, 1], [1, 0], [0, 0])  # co-occurrence both ways
    triples = [(0, "P17", 1), (1, "P17", 0)]
    assert without_query(triples, (1, 0)) == [] and kg_subgraph(triples, (0, 1), True) == triples
    assert serialise_triples(document, triples[:1], relations) == ["Paris | country | France"]
    assert answer_text({"P17"}, relations) == " country" and answer_text([], relations) == " none"
    counts = count_facts([{"title": "A", "h_idx": 0, "t_idx": 1, "r": "P17"}], [document])
    assert scores_from_counts(counts)["f1"] == 1.0
    assert document == DOCUMENT  # nothing mutated
