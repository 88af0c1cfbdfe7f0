"""The official DocRED scores on a hand-worked example, and the Metric's sums."""

from __future__ import annotations

import json

import pytest
import torch

from lightning_info.methods.docks_rag.docred import read_docred, read_relation_info
from lightning_info.methods.docks_rag.functional import (
    count_facts,
    docred_scores,
    train_fact_names,
)
from lightning_info.methods.docks_rag.metrics import DocREDScores


def _mention(name, sent=0, pos=(0, 1)):
    return {"name": name, "sent_id": sent, "pos": list(pos), "type": "MISC"}


GOLD = [
    {
        "title": "A",
        "sents": [["Paris", "is", "in", "France"], ["The", "Seine", "flows", "there"]],
        "vertexSet": [
            [_mention("Paris")],
            [_mention("France", 0, (3, 4))],
            [_mention("Seine", 1, (1, 2))],
        ],
        "labels": [
            {"h": 0, "t": 1, "r": "P17", "evidence": [0]},
            {"h": 2, "t": 1, "r": "P17", "evidence": [0, 1]},
        ],
    },
    {
        "title": "B",
        "sents": [["Bob", "met", "Alice"], ["he", "married", "her"]],
        "vertexSet": [[_mention("Bob"), _mention("he", 1)], [_mention("Alice", 0, (2, 3))]],
        "labels": [{"h": 0, "t": 1, "r": "P26", "evidence": [1]}],
    },
]
TRAIN = [
    {
        "title": "T",
        "sents": [["Paris", "France"]],
        "vertexSet": [[_mention("Paris")], [_mention("France", 0, (1, 2))]],
        "labels": [{"h": 0, "t": 1, "r": "P17", "evidence": [0]}],
    }
]
PREDICTIONS = [
    {"title": "A", "h_idx": 0, "t_idx": 1, "r": "P17", "evidence": [0, 1]},  # correct, in train
    {"title": "A", "h_idx": 0, "t_idx": 1, "r": "P17", "evidence": [1]},  # duplicate: dropped
    {"title": "A", "h_idx": 2, "t_idx": 1, "r": "P131"},  # wrong relation
    {"title": "B", "h_idx": 0, "t_idx": 1, "r": "P26", "evidence": [1]},  # correct
    {"title": "C", "h_idx": 0, "t_idx": 1, "r": "P17", "evidence": [0]},  # unknown title
]


def test_counts_and_scores_match_the_hand_worked_example():
    facts = train_fact_names(TRAIN)
    assert facts == {("Paris", "France", "P17")}
    counts = count_facts(PREDICTIONS, GOLD, facts)
    assert counts == {
        "correct": 2,
        "predicted": 4,
        "gold": 3,
        "correct_in_train": 1,
        "correct_evidence": 2,
        "predicted_evidence": 3,
        "gold_evidence": 4,
    }
    scores = docred_scores(PREDICTIONS, GOLD, facts)
    expected = {
        "precision": 1 / 2,
        "recall": 2 / 3,
        "f1": 4 / 7,
        "ign_precision": 1 / 3,
        "ign_f1": 4 / 9,
        "evidence_precision": 2 / 3,
        "evidence_recall": 1 / 2,
        "evidence_f1": 4 / 7,
    }
    assert scores == pytest.approx(expected, abs=1e-12)
    # without training facts Ign F1 is F1; with no predictions everything is 0
    plain = docred_scores(PREDICTIONS, GOLD)
    assert plain["ign_f1"] == pytest.approx(plain["f1"])
    assert set(docred_scores([], GOLD).values()) == {0.0}


def test_a_fact_is_in_train_through_any_mention_pair():
    # "he" -> "Alice" with P26 in training makes B's correct prediction "in train"
    train = [
        {
            **TRAIN[0],
            "vertexSet": [[_mention("he")], [_mention("Alice", 0, (1, 2))]],
            "labels": [{"h": 0, "t": 1, "r": "P26", "evidence": []}],
        }
    ]
    counts = count_facts(PREDICTIONS, GOLD, train_fact_names(train))
    assert counts["correct_in_train"] == 1
    # the same names with another relation do not count
    other = [{**train[0], "labels": [{"h": 0, "t": 1, "r": "P17", "evidence": []}]}]
    assert count_facts(PREDICTIONS, GOLD, train_fact_names(other))["correct_in_train"] == 0


def test_the_metric_sums_batches_and_ranks_to_the_whole_score():
    facts = train_fact_names(TRAIN)
    known = [p for p in PREDICTIONS if p["title"] in ("A", "B")]
    whole = docred_scores(known, GOLD, facts)
    metric = DocREDScores(facts)
    metric.update(PREDICTIONS, GOLD[:1])
    metric.update(PREDICTIONS, GOLD[1:])
    for name, value in metric.compute().items():
        assert value.item() == pytest.approx(whole[name], abs=1e-6), name
    # two ranks' states merged as DDP's sum reduction merges them
    rank0, rank1 = DocREDScores(facts), DocREDScores(facts)
    rank0.update(PREDICTIONS, GOLD[:1])
    rank1.update(PREDICTIONS, GOLD[1:])
    rank0.merge_state(rank1)
    merged = rank0.compute()
    assert all(torch.isclose(merged[k], torch.tensor(whole[k])) for k in whole)


def test_the_reader_refuses_what_would_be_mis_scored(tmp_path):
    relations = {"P17": "country", "P26": "spouse"}
    (tmp_path / "rel.json").write_text(json.dumps(relations))
    assert read_relation_info(tmp_path / "rel.json") == relations
    good = tmp_path / "dev.json"
    good.write_text(json.dumps(GOLD[1:]))
    assert read_docred(good, relations)[0]["title"] == "B"
    cases = {
        "not in rel_info": {**GOLD[0], "labels": [{"h": 0, "t": 1, "r": "P999", "evidence": []}]},
        "no mentions": {**GOLD[0], "vertexSet": [*GOLD[0]["vertexSet"], []]},
        "out of range": {**GOLD[0], "labels": [{"h": 0, "t": 7, "r": "P17", "evidence": []}]},
        "outside its sentence": {**GOLD[0], "vertexSet": [[_mention("Paris", 0, (2, 9))]]},
        "evidence sentences": {
            **GOLD[0],
            "labels": [{"h": 0, "t": 1, "r": "P17", "evidence": [5]}],
        },
    }
    for message, document in cases.items():
        path = tmp_path / "bad.json"
        path.write_text(json.dumps([document]))
        with pytest.raises(ValueError, match=message):
            read_docred(path, relations)
    path.write_text(json.dumps([GOLD[0], GOLD[0]]))
    with pytest.raises(ValueError, match="repeat"):
        read_docred(path)
