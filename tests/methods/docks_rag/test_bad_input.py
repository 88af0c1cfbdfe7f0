"""Bad arguments to the DocKS-RAG options, the synthetic documents and the Ign-F1 fact set are
refused with a message naming the argument: strings as prompt switches, floats, bools and
strings as counts or seeds, a single document or file name where a list of documents belongs,
and string, float, bool or out-of-range entity indices in a training label."""

from __future__ import annotations

import copy
import math

import pytest

from lightning_info.methods.docks_rag import (
    DocREDDataModule,
    HybridPromptOptions,
    read_relation_info,
    synthetic_docred,
    train_fact_names,
)
from lightning_info.methods.docks_rag.functional import (
    COUNTS,
    answer_text,
    count_facts,
    document_text,
    entity_name,
    entity_pairs,
    hybrid_prompt,
    kg_subgraph,
    mention_graph,
    mentions,
    pair_relations,
    scores_from_counts,
    sentence_text,
    serialise_triples,
    without_query,
)
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


def _labelled(**label):
    document = copy.deepcopy(DOCUMENT)
    document["labels"][0].update(label)
    return [document]


BAD_INPUT = [
    pytest.param(
        lambda: HybridPromptOptions(use_kg="no"),
        TypeError,
        r"`use_kg` must be True or False, got 'no'",
        id="prompt-use-kg-str",
    ),
    pytest.param(
        lambda: HybridPromptOptions(query_triples="False"),
        TypeError,
        r"`query_triples` must be True or False, got 'False'",
        id="prompt-query-triples-str",
    ),
    pytest.param(
        lambda: HybridPromptOptions(top_k=2.5),
        TypeError,
        r"`top_k` must be an int, got 2.5",
        id="prompt-top-k-float",
    ),
    pytest.param(
        lambda: HybridPromptOptions(use_document=False, use_kg=False, use_set_rag=False),
        ValueError,
        r"a prompt needs at least one of",
        id="prompt-empty",
    ),
    pytest.param(
        lambda: synthetic_docred(2.5),
        TypeError,
        r"`num_documents` must be an int, got 2.5",
        id="synthetic-count-float",
    ),
    pytest.param(
        lambda: synthetic_docred(True),
        TypeError,
        r"`num_documents` must be an int, got True",
        id="synthetic-count-bool",
    ),
    pytest.param(
        lambda: synthetic_docred(0),
        ValueError,
        r"`num_documents` must be >= 1, got 0",
        id="synthetic-count-zero",
    ),
    pytest.param(
        lambda: synthetic_docred(1, seed=1.5),
        TypeError,
        r"`seed` must be an int, got 1.5",
        id="synthetic-seed-float",
    ),
    pytest.param(
        lambda: synthetic_docred(1, seed="1"),
        TypeError,
        r"`seed` must be an int, got '1'",
        id="synthetic-seed-str",
    ),
    pytest.param(
        lambda: synthetic_docred(1, world_seed=math.nan),
        TypeError,
        r"`world_seed` must be an int, got nan",
        id="synthetic-world-seed-nan",
    ),
    pytest.param(
        lambda: synthetic_docred(1, people_per_document=1.5),
        TypeError,
        r"`people_per_document` must be an int, got 1.5",
        id="synthetic-people-float",
    ),
    pytest.param(
        lambda: synthetic_docred(1, people_per_document=5, world_people=4),
        ValueError,
        r"1 <= people_per_document <= world_people",
        id="synthetic-people-above-world",
    ),
    pytest.param(
        lambda: train_fact_names(DOCUMENT),
        TypeError,
        r"`train_documents` must be a list of DocRED documents, got a single dict",
        id="train-facts-one-document",
    ),
    pytest.param(
        lambda: train_fact_names("train_annotated.json"),
        TypeError,
        r"got a single str; .*read_docred\(path\)",
        id="train-facts-file-name",
    ),
    pytest.param(
        lambda: train_fact_names(_labelled(h="0")),
        TypeError,
        r"document 'A': label .*: h is '0' \(str\)",
        id="train-facts-str-head",
    ),
    pytest.param(
        lambda: train_fact_names(_labelled(h=0.0)),
        TypeError,
        r"h is 0.0 \(float\)",
        id="train-facts-float-head",
    ),
    pytest.param(
        lambda: train_fact_names(_labelled(h=True)),
        TypeError,
        r"h is True \(bool\)",
        id="train-facts-bool-head",
    ),
    pytest.param(
        lambda: train_fact_names(_labelled(h=-1)),
        ValueError,
        r"names an entity out of range",
        id="train-facts-negative-head",
    ),
    pytest.param(
        lambda: train_fact_names(_labelled(t=5)),
        ValueError,
        r"names an entity out of range",
        id="train-facts-tail-out-of-range",
    ),
    pytest.param(
        lambda: DocREDDataModule(tiny.tokenizer(), prompt={"top_k": 3}),
        TypeError,
        r"`prompt` must be a HybridPromptOptions, got dict",
        id="datamodule-prompt-dict",
    ),
    pytest.param(
        lambda: DocREDDataModule(tiny.tokenizer(), eval_documents=1.5),
        TypeError,
        r"`eval_documents` must be an int, got 1.5",
        id="datamodule-eval-documents-float",
    ),
    pytest.param(
        lambda tmp: read_relation_info(_write(tmp / "rel_info.json", '{"P17": "country"')),
        ValueError,
        r"rel_info.json, line 1, column \d+: not valid JSON",
        id="relation-info-truncated",
    ),
    pytest.param(
        lambda tmp: read_relation_info(_write(tmp / "rel_info.json", '["P17"]')),
        ValueError,
        r"must hold a non-empty JSON object of relation id -> name",
        id="relation-info-list",
    ),
    pytest.param(
        lambda: answer_text("P17", RELATIONS),
        TypeError,
        r"`relation_ids` must be a sequence of strings, got a single str",
        id="answer-text-bare-id",
    ),
    pytest.param(
        lambda: answer_text(["P99"], RELATIONS),
        ValueError,
        r"relation id 'P99' is not in `relations`",
        id="answer-text-unknown-relation",
    ),
    pytest.param(
        lambda: answer_text(["P17"], ["country"]),
        TypeError,
        r"`relations` must be a dict of relation id -> name",
        id="answer-text-relations-list",
    ),
    pytest.param(
        lambda: count_facts([], DOCUMENT),
        TypeError,
        r"`documents` must be a list of DocRED documents, got a single dict",
        id="count-facts-one-document",
    ),
    pytest.param(
        lambda: count_facts([], [DOCUMENT], "train.json"),
        TypeError,
        r"`train_facts` must be the set of train_fact_names",
        id="count-facts-train-facts-str",
    ),
    pytest.param(
        lambda: count_facts([], _labelled(h=True)),
        TypeError,
        r"h is True \(bool\)",
        id="count-facts-bool-label-head",
    ),
    pytest.param(
        lambda: document_text(DOCUMENT, -1),
        ValueError,
        r"`sentences` must be >= 0, got -1",
        id="document-text-negative",
    ),
    pytest.param(
        lambda: document_text(DOCUMENT, 1.5),
        TypeError,
        r"`sentences` must be an int, got 1.5",
        id="document-text-float",
    ),
    pytest.param(
        lambda: entity_name(DOCUMENT, True),
        TypeError,
        r"`entity` must be an integer index, got bool True",
        id="entity-name-bool",
    ),
    pytest.param(
        lambda: entity_name(DOCUMENT, -1),
        ValueError,
        r"`entity` must be an index in \[0, 2\), got -1",
        id="entity-name-negative",
    ),
    pytest.param(
        lambda: entity_pairs([DOCUMENT]),
        TypeError,
        r"`document` must be one DocRED document \(a dict\), got list",
        id="entity-pairs-list",
    ),
    pytest.param(
        lambda: pair_relations("A"),
        TypeError,
        r"`document` must be one DocRED document \(a dict\), got str",
        id="pair-relations-str",
    ),
    pytest.param(
        lambda: mentions([DOCUMENT]),
        TypeError,
        r"`document` must be one DocRED document",
        id="mentions-list",
    ),
    pytest.param(
        lambda: mention_graph(DOCUMENT, True),
        TypeError,
        r"`window` must be an int, got True",
        id="mention-graph-window-bool",
    ),
    pytest.param(
        lambda: mention_graph(DOCUMENT, math.nan),
        TypeError,
        r"`window` must be an int, got nan",
        id="mention-graph-window-nan",
    ),
    pytest.param(
        lambda: mention_graph(DOCUMENT, -1),
        ValueError,
        r"`window` must be >= 0, got -1",
        id="mention-graph-window-negative",
    ),
    pytest.param(
        lambda: scores_from_counts({"correct": 1}),
        ValueError,
        r"`counts` lacks \['predicted'",
        id="scores-from-counts-missing-key",
    ),
    pytest.param(
        lambda: scores_from_counts(_counts(correct=-1)),
        ValueError,
        r"`counts\['correct'\]` must be a finite count >= 0, got -1",
        id="scores-from-counts-negative",
    ),
    pytest.param(
        lambda: scores_from_counts(_counts(correct=math.nan)),
        ValueError,
        r"must be a finite count >= 0, got nan",
        id="scores-from-counts-nan",
    ),
    pytest.param(
        lambda: scores_from_counts(_counts(correct=3)),
        ValueError,
        r"correct = 3 > predicted = 1: not the counts of one evaluation",
        id="scores-from-counts-correct-above-predicted",
    ),
    pytest.param(
        lambda: scores_from_counts(_counts(correct="1")),
        TypeError,
        r"`counts\['correct'\]` must be a number, got '1'",
        id="scores-from-counts-str",
    ),
    pytest.param(
        lambda: sentence_text(DOCUMENT, -1),
        ValueError,
        r"`sent_id` must be an index in \[0, 1\), got -1",
        id="sentence-text-negative",
    ),
    pytest.param(
        lambda: sentence_text(DOCUMENT, 0.0),
        TypeError,
        r"`sent_id` must be an integer index, got float 0.0",
        id="sentence-text-float",
    ),
    pytest.param(
        lambda: serialise_triples(DOCUMENT, [(0, "P9", 1)], RELATIONS),
        ValueError,
        r"relation id 'P9' is not in `relations`",
        id="serialise-triples-unknown-relation",
    ),
    pytest.param(
        lambda: serialise_triples(DOCUMENT, [(-1, "P17", 1)], RELATIONS),
        ValueError,
        r"`entity` must be an index in \[0, 2\), got -1",
        id="serialise-triples-negative-entity",
    ),
    pytest.param(
        lambda: serialise_triples(DOCUMENT, (0, "P17", 1), RELATIONS),
        TypeError,
        r"`triples` must be a list of \(head, relation id, tail\) triples, got item 0",
        id="serialise-triples-bare-triple",
    ),
    pytest.param(
        lambda: without_query([(0, "P17", 1)], "01"),
        TypeError,
        r"`query` must be a pair \(head entity, tail entity\), got '01'",
        id="without-query-query-str",
    ),
    pytest.param(
        lambda: without_query([(0, "P17", 0), (0, "P17", 1)], (0, 0)),
        ValueError,
        r"`query` must pair two entities, got entity 0 twice",
        id="without-query-same-entity",
    ),
    pytest.param(
        lambda: kg_subgraph([(0, "P17", 1)], (0, 1), keep_query_triples="no"),
        TypeError,
        r"`keep_query_triples` must be True or False, got 'no'",
        id="kg-subgraph-keep-str",
    ),
    pytest.param(
        lambda: kg_subgraph([(0, "P17", 1)], (0, 1, 2)),
        TypeError,
        r"`query` must be a pair",
        id="kg-subgraph-query-triple",
    ),
    pytest.param(
        lambda: hybrid_prompt(DOCUMENT, (0, -1), RELATIONS),
        ValueError,
        r"`query\[1\]` must be an index in \[0, 2\), got -1",
        id="hybrid-prompt-negative-tail",
    ),
    pytest.param(
        lambda: hybrid_prompt(DOCUMENT, (0, 1), RELATIONS, retrieved=[-1]),
        ValueError,
        r"`retrieved` must be an index in \[0, 1\), got -1",
        id="hybrid-prompt-negative-sentence",
    ),
    pytest.param(
        lambda: hybrid_prompt(DOCUMENT, (0, 1), RELATIONS, include_document="no"),
        TypeError,
        r"`include_document` must be True or False, got 'no'",
        id="hybrid-prompt-include-document-str",
    ),
]


def _counts(**changed):
    return dict.fromkeys(COUNTS, 1) | changed


RELATIONS = {"P17": "country"}


def _write(path, text: str):
    path.write_text(text)
    return path


def test_train_fact_names_of_valid_documents():
    assert train_fact_names(_labelled()) == {("Paris", "France", "P17")}
    documents = synthetic_docred(3, seed=0)
    expected = {
        (head["name"], tail["name"], label["r"])
        for document in documents
        for label in document["labels"]
        for head in document["vertexSet"][label["h"]]
        for tail in document["vertexSet"][label["t"]]
    }
    assert train_fact_names(documents) == expected
    assert train_fact_names(iter(documents)) == expected
