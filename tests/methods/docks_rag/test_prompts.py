"""The mention graph on a hand-worked document, the DocKG subgraph, and the hybrid prompt: it never
states the queried pair's relation, even when its graph and retrieval parts hold the gold facts."""

from __future__ import annotations

import pytest

from lightning_info.methods.docks_rag.functional import (
    CO_OCCURRENCE,
    COREFERENCE,
    NEARBY,
    answer_text,
    entity_pairs,
    hybrid_prompt,
    kg_subgraph,
    mention_graph,
    pair_relations,
    serialise_triples,
    without_query,
)
from lightning_info.methods.docks_rag.synthetic import RELATIONS, synthetic_docred


def _m(name, sent, start, end, kind="PER"):
    return {"name": name, "sent_id": sent, "pos": [start, end], "type": kind}


# sentence 0: "Ann Lee was born in Oslo ."; 1: "Lee works for Acme ."; 2: "Acme is in Oslo ."
DOC = {
    "title": "hand",
    "sents": [
        ["Ann", "Lee", "was", "born", "in", "Oslo", "."],
        ["Lee", "works", "for", "Acme", "."],
        ["Acme", "is", "in", "Oslo", "."],
    ],
    "vertexSet": [
        [_m("Ann Lee", 0, 0, 2), _m("Lee", 1, 0, 1)],  # mentions 0, 1
        [_m("Oslo", 0, 5, 6, "LOC"), _m("Oslo", 2, 3, 4, "LOC")],  # mentions 2, 3
        [_m("Acme", 1, 3, 4, "ORG"), _m("Acme", 2, 0, 1, "ORG")],  # mentions 4, 5
    ],
    "labels": [
        {"h": 0, "t": 1, "r": "P19", "evidence": [0]},
        {"h": 0, "t": 2, "r": "P108", "evidence": [1]},
        {"h": 2, "t": 1, "r": "P159", "evidence": [2]},
    ],
}


def test_mention_graph_edges_by_hand():
    edges = set(zip(*mention_graph(DOC, window=1)))
    undirected = {(min(a, b), max(a, b), k) for a, b, k in edges}
    assert undirected == {
        (0, 1, COREFERENCE),
        (2, 3, COREFERENCE),
        (4, 5, COREFERENCE),
        (0, 2, CO_OCCURRENCE),  # sentence 0
        (1, 4, CO_OCCURRENCE),  # sentence 1
        (3, 5, CO_OCCURRENCE),  # sentence 2
        (0, 4, NEARBY),  # sentences 0 and 1
        (1, 2, NEARBY),
        (1, 3, NEARBY),  # sentences 1 and 2
        (1, 5, NEARBY),
        (3, 4, NEARBY),
        (2, 4, NEARBY),  # sentences 0 and 1
    }
    assert len(edges) == 2 * len(undirected)  # both directions, no self-loops
    window_zero = {(min(a, b), max(a, b), k) for a, b, k in zip(*mention_graph(DOC, window=0))}
    assert window_zero == {e for e in undirected if e[2] != NEARBY}
    with pytest.raises(ValueError, match="window"):
        mention_graph(DOC, window=-1)


def test_queries_and_gold_relations():
    assert entity_pairs(DOC) == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
    assert pair_relations(DOC) == {(0, 1): {"P19"}, (0, 2): {"P108"}, (2, 1): {"P159"}}
    assert answer_text({"P19"}, RELATIONS) == " place of birth"
    assert answer_text(set(), RELATIONS) == " none"


def test_subgraph_keeps_the_neighbourhood_and_drops_the_queried_pair_both_ways():
    triples = [(0, "P19", 1), (1, "P17", 3), (0, "P26", 4), (4, "P26", 0), (5, "P17", 6)]
    assert without_query(triples, (4, 0)) == [(0, "P19", 1), (1, "P17", 3), (5, "P17", 6)]
    assert kg_subgraph(triples, (0, 4)) == [(0, "P19", 1)]
    assert kg_subgraph(triples, (1, 6)) == [(0, "P19", 1), (1, "P17", 3), (5, "P17", 6)]
    # a scorer's predicted triples for the queried pair are evidence, kept on request
    assert kg_subgraph(triples, (0, 4), keep_query_triples=True) == [
        (0, "P19", 1),
        (0, "P26", 4),
        (4, "P26", 0),
    ]
    assert serialise_triples(DOC, [(0, "P19", 1)], RELATIONS) == ["Ann Lee | place of birth | Oslo"]


def test_prompt_parts_by_hand():
    gold = [(label["h"], label["r"], label["t"]) for label in DOC["labels"]]
    prompt = hybrid_prompt(
        DOC, (0, 1), RELATIONS, kg_triples=gold, retrieved=[2, 0], retrieved_triples=gold
    )
    assert prompt.splitlines() == [
        "Document: Ann Lee was born in Oslo . Lee works for Acme . Acme is in Oslo .",
        "Graph: Ann Lee | employer | Acme; Acme | headquarters location | Oslo",
        "Related: Acme is in Oslo . [Acme | headquarters location | Oslo]"
        " Ann Lee was born in Oslo .",
        "Question: Ann Lee and Oslo? Relation:",
    ]
    predicted = [(0, "P19", 1), (2, "P159", 1)]  # a scorer's triples, one for the queried pair
    kept = hybrid_prompt(
        DOC,
        (0, 1),
        RELATIONS,
        kg_triples=predicted,
        retrieved=[0],
        retrieved_triples=predicted,
        keep_query_triples=True,
    )
    assert kept.splitlines()[1:3] == [
        "Graph: Ann Lee | place of birth | Oslo; Acme | headquarters location | Oslo",
        "Related: Ann Lee was born in Oslo . [Ann Lee | place of birth | Oslo]",
    ]
    plain = hybrid_prompt(DOC, (0, 1), RELATIONS)
    assert plain.splitlines()[1:] == ["Question: Ann Lee and Oslo? Relation:"]
    assert "Graph: nothing" in hybrid_prompt(DOC, (0, 1), RELATIONS, kg_triples=[])


def test_no_prompt_states_the_answer_of_its_own_pair():
    # the worst case: graph and retrieval parts built from the gold facts themselves
    documents = synthetic_docred(6, seed=3, world_seed=3)
    answers = others = 0
    for d in documents:
        gold = [(label["h"], label["r"], label["t"]) for label in d["labels"]]
        every_sentence = list(range(len(d["sents"])))
        for h, t in entity_pairs(d):
            prompt = hybrid_prompt(
                d,
                (h, t),
                RELATIONS,
                kg_triples=gold,
                retrieved=every_sentence,
                retrieved_triples=gold,
            )
            for r in pair_relations(d).get((h, t), ()):
                answers += 1
                for line in serialise_triples(d, [(h, r, t), (t, r, h)], RELATIONS):
                    assert line not in prompt, (d["title"], line)
            # the other pairs' facts are there: the check above is not vacuous
            others += sum(line in prompt for line in serialise_triples(d, gold, RELATIONS))
    assert answers > 30 and others > 10 * answers
