"""A gold file that lists a fact twice is scored as the official DocRED scorer scores it (issue
35): the fact counts once, its evidence total counts every listing (``tot_evidences +=
len(label['evidence'])`` in ``thunlp/DocRED``'s ``evaluation.py``), and the last listing's
evidence set is the one matched. No error is added: the scorer's rule is well defined."""

from __future__ import annotations

import json

import pytest

from lightning_info.methods.docks_rag.docred import read_docred
from lightning_info.methods.docks_rag.functional import count_facts, docred_scores
from lightning_info.methods.docks_rag.metrics import DocREDScores


def _mention(name, sent=0, pos=(0, 1)):
    return {"name": name, "sent_id": sent, "pos": list(pos), "type": "LOC"}


REPEATED = {
    "title": "R",
    "sents": [["Lyon", "is", "in", "France"], ["France", "has", "Lyon"], ["Lyon", "again"]],
    "vertexSet": [[_mention("Lyon"), _mention("Lyon", 2)], [_mention("France", 0, (3, 4))]],
    "labels": [
        {"h": 0, "t": 1, "r": "P17", "evidence": [2]},  # listed first ...
        {"h": 0, "t": 1, "r": "P17", "evidence": [0, 1]},  # ... and again: this set is matched
        {"h": 1, "t": 0, "r": "P150", "evidence": [1, 1]},  # a sentence id listed twice
    ],
}
PREDICTIONS = [
    {"title": "R", "h_idx": 0, "t_idx": 1, "r": "P17", "evidence": [1, 2]},  # {0, 1} & {1, 2}: 1
    {"title": "R", "h_idx": 1, "t_idx": 0, "r": "P150", "evidence": [1]},  # {1} & {1}: 1
]


def test_a_repeated_gold_label_is_scored_as_the_official_scorer_does(tmp_path):
    path = tmp_path / "dev.json"
    path.write_text(json.dumps([REPEATED]))
    gold = read_docred(path)  # accepted, as the scorer accepts it
    # by hand: 2 distinct facts; gold evidence 1 + 2 + 2 = 5 (every listing, list lengths);
    # predicted evidence 2 + 1 = 3; correct evidence 1 + 1 = 2
    assert count_facts(PREDICTIONS, gold) == {
        "correct": 2,
        "predicted": 2,
        "gold": 2,
        "correct_in_train": 0,
        "correct_evidence": 2,
        "predicted_evidence": 3,
        "gold_evidence": 5,
    }
    scores = docred_scores(PREDICTIONS, gold)
    assert scores["f1"] == pytest.approx(1.0, abs=1e-12)
    assert scores["evidence_precision"] == pytest.approx(2 / 3, abs=1e-12)
    assert scores["evidence_recall"] == pytest.approx(2 / 5, abs=1e-12)
    assert scores["evidence_f1"] == pytest.approx(1 / 2, abs=1e-12)  # 2 (4/15) / (16/15)
    metric = DocREDScores()  # the Metric counts through the same function
    metric.update(PREDICTIONS, gold)
    assert metric.compute()["evidence_recall"].item() == pytest.approx(2 / 5, abs=1e-6)


def test_without_repeats_the_evidence_total_is_unchanged():
    single = {**REPEATED, "labels": REPEATED["labels"][1:2]}
    counts = count_facts(PREDICTIONS[:1], [single])
    assert counts["gold_evidence"] == 2 and counts["correct_evidence"] == 1
