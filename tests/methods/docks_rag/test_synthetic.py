"""The generated DocRED-format documents: well-formed, seeded, with coreference, cross-sentence
relations, distractors and a train-fact overlap that separates Ign F1 from F1."""

from __future__ import annotations

import pytest

from lightning_info.methods.docks_rag.docred import check_document
from lightning_info.methods.docks_rag.functional import (
    count_facts,
    docred_scores,
    train_fact_names,
)
from lightning_info.methods.docks_rag.synthetic import RELATIONS, synthetic_docred


@pytest.fixture(scope="module")
def splits():
    return synthetic_docred(120, seed=0), synthetic_docred(40, seed=1)


def _sentences_of(document, entity):
    return {m["sent_id"] for m in document["vertexSet"][entity]}


def test_documents_are_well_formed_and_seeded(splits):
    train, dev = splits
    for document in train + dev:
        check_document(document, RELATIONS)
        for mentions in document["vertexSet"]:
            for m in mentions:  # the mention's tokens are its name
                start, end = m["pos"]
                assert " ".join(document["sents"][m["sent_id"]][start:end]) == m["name"]
    assert synthetic_docred(3, seed=1) == dev[:3]
    assert synthetic_docred(3, seed=2) != dev[:3]
    assert len({d["title"] for d in train}) == len(train)
    with pytest.raises(ValueError, match="people_per_document"):
        synthetic_docred(2, people_per_document=0)


def test_relations_need_coreference_and_cross_sentence_reading(splits):
    _, dev = splits
    by_alias = cross = 0
    for document in dev:
        for label in document["labels"]:
            head, tail = _sentences_of(document, label["h"]), _sentences_of(document, label["t"])
            evidence = set(label["evidence"])
            if label["r"] == "P27":
                # told by neither sentence alone: one names the person, the other the country
                assert len(evidence) == 2
                assert not any(s in head and s in tail for s in evidence)
                assert evidence & head and evidence & tail
                cross += 1
            else:
                assert all(s in head and s in tail for s in evidence)
            mentions = document["vertexSet"][label["h"]]
            full = mentions[0]["name"]
            in_evidence = [m["name"] for m in mentions if m["sent_id"] in evidence]
            if mentions[0]["type"] == "PER" and full not in in_evidence:
                assert in_evidence == [full.split()[-1]] * len(in_evidence)
                by_alias += 1
        spouses = {(lab["h"], lab["t"]) for lab in document["labels"] if lab["r"] == "P26"}
        assert spouses == {(t, h) for h, t in spouses}
    assert cross > 0 and by_alias > 0


def test_distractors_and_the_train_overlap(splits):
    train, dev = splits
    unlabelled = 0
    for document in dev:
        used = {lab["h"] for lab in document["labels"]} | {lab["t"] for lab in document["labels"]}
        unlabelled += len(document["vertexSet"]) - len(used)
    assert unlabelled > 0
    gold = [
        {"title": d["title"], "h_idx": lab["h"], "t_idx": lab["t"], "r": lab["r"]}
        for d in dev
        for lab in d["labels"]
    ]
    facts = train_fact_names(train)
    counts = count_facts(gold, dev, facts)
    assert 0 < counts["correct_in_train"] < counts["correct"] == counts["gold"]
    # with false positives, ignoring training facts lowers the precision
    wrong = [{**p, "r": "P159" if p["r"] != "P159" else "P17"} for p in gold[::3]]
    scores = docred_scores(gold + wrong, dev, facts)
    assert scores["ign_f1"] < scores["f1"] < 1
