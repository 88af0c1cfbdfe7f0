"""The pure core of DocKS-RAG: the official DocRED evaluation (relation F1, Ign F1 and evidence
F1) as functions of predictions and gold documents (``evaluation.DocREDScores`` is its
torchmetrics Metric), and the queries, mention graph and prompt parts of the hybrid prompt.

As the official scorer (``thunlp/DocRED``, ``evaluation.py``) defines them, after removing
duplicate predictions ``(title, h, t, r)``:

- ``P = correct / predicted``, ``R = correct / gold``, ``F1 = 2 P R / (P + R)``;
- a correct prediction is *in train* when some mention-name pair ``(n_h, n_t)`` of its head and
  tail with its relation is a training fact (:func:`train_fact_names`);
  ``P_ign = (correct - correct_in_train) / (predicted - correct_in_train)`` and
  ``Ign F1 = 2 P_ign R / (P_ign + R)``, with the ordinary recall (the scorer adds ``1e-5`` to
  the denominator; here an empty one gives 0);
- evidence: ``P_evi = |gold evidence ∩ predicted evidence| / |predicted evidence|`` summed over
  correct predictions, ``R_evi`` over all gold evidence sentences. As in the scorer, the gold
  total sums every label's ``len(evidence)``: a fact a gold document lists twice counts its
  evidence twice (and a repeated sentence id twice), while the fact itself counts once and is
  matched against its last listing's evidence set.

A prediction for a title missing from the gold documents counts as predicted and never as
correct, as in the scorer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from lightning_info.core.validation import (
    require_bool,
    require_index,
    require_int,
    require_string_sequence,
)
from lightning_info.methods.docks_rag.docred import check_document, check_predictions

__all__ = [
    "document_text",
    "entity_name",
    "mentions",
    "sentence_text",
    "COUNTS",
    "EDGE_TYPES",
    "NO_RELATION",
    "answer_text",
    "count_facts",
    "docred_scores",
    "entity_pairs",
    "hybrid_prompt",
    "kg_subgraph",
    "mention_graph",
    "pair_relations",
    "scores_from_counts",
    "serialise_triples",
    "train_fact_names",
    "without_query",
]

COUNTS = (
    "correct",
    "predicted",
    "gold",
    "correct_in_train",
    "correct_evidence",
    "predicted_evidence",
    "gold_evidence",
)


def _require_documents(documents: object, name: str) -> None:
    if isinstance(documents, (dict, str, bytes)):
        raise TypeError(
            f"`{name}` must be a list of DocRED documents, got a single "
            f"{type(documents).__name__}; wrap one document in a list, or read a file "
            "with read_docred(path)."
        )


def _require_document(document: object) -> dict[str, Any]:
    if not isinstance(document, dict):
        raise TypeError(
            f"`document` must be one DocRED document (a dict), got {type(document).__name__}; "
            "pass one element of read_docred(path)."
        )
    return document


def _triples(triples: Iterable[tuple[int, str, int]]) -> list[tuple[int, str, int]]:
    triples = list(triples)
    for triple in triples:
        if not isinstance(triple, (tuple, list)) or len(triple) != 3:
            raise TypeError(
                f"`triples` must be a list of (head, relation id, tail) triples, got item "
                f"{triple!r}; wrap a single triple in a list."
            )
    return triples


def _query(query: tuple[int, int], document: dict[str, Any] | None = None) -> tuple[int, int]:
    if not isinstance(query, (tuple, list)) or len(query) != 2:
        raise TypeError(f"`query` must be a pair (head entity, tail entity), got {query!r}.")
    size = None if document is None else len(document["vertexSet"])
    h, t = require_index(query[0], "query[0]", size), require_index(query[1], "query[1]", size)
    if h == t:
        raise ValueError(f"`query` must pair two entities, got entity {h} twice.")
    return h, t


def _relation_name(relations: dict[str, str], relation: str) -> str:
    if not isinstance(relations, dict):
        raise TypeError(
            f"`relations` must be a dict of relation id -> name (read_relation_info), got "
            f"{type(relations).__name__}."
        )
    if relation not in relations:
        raise ValueError(
            f"relation id {relation!r} is not in `relations`; give its name in the dict "
            "(read_relation_info(path))."
        )
    return relations[relation]


def train_fact_names(train_documents: Iterable[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """``(head mention name, tail mention name, relation)`` for every mention pair of every
    training label: what makes a correct prediction "in train" for Ign F1. Each document is
    checked by :func:`~.docred.check_document` (integer entity indices in range)."""
    _require_documents(train_documents, "train_documents")
    facts = set()
    for document in train_documents:
        check_document(document)
        entities = document["vertexSet"]
        for label in document.get("labels", []):
            for head in entities[label["h"]]:
                for tail in entities[label["t"]]:
                    facts.add((head["name"], tail["name"], label["r"]))
    return facts


def _dedupe(predictions: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    seen, kept = set(), []
    for p in sorted(predictions, key=lambda p: (p["title"], p["h_idx"], p["t_idx"], p["r"])):
        key = (p["title"], p["h_idx"], p["t_idx"], p["r"])
        if key not in seen:
            seen.add(key)
            kept.append(p)
    return kept


def count_facts(
    predictions: Iterable[dict[str, Any]],
    documents: Sequence[dict[str, Any]],
    train_facts: set[tuple[str, str, str]] = frozenset(),
) -> dict[str, int]:
    """The scorer's counts (:data:`COUNTS`) of ``predictions`` (dicts with ``title``,
    ``h_idx``, ``t_idx``, ``r`` and optionally ``evidence``) against the gold ``documents``
    (a list, each checked by :func:`~.docred.check_document`); ``train_facts``: a set from
    :func:`train_fact_names`."""
    predictions = check_predictions(predictions)
    _require_documents(documents, "documents")
    if not isinstance(train_facts, (set, frozenset)):
        raise TypeError(
            f"`train_facts` must be the set of train_fact_names(train_documents), got "
            f"{type(train_facts).__name__}."
        )
    gold, evidence_total = {}, 0
    entities = {}
    for document in documents:
        check_document(document)
        entities[document["title"]] = document["vertexSet"]
        for label in document.get("labels", []):
            key = (document["title"], label["r"], label["h"], label["t"])
            gold[key] = set(label.get("evidence", []))  # the last listing wins, as in the scorer
            evidence_total += len(label.get("evidence", []))  # every listing counts (scorer)
    counts = dict.fromkeys(COUNTS, 0)
    counts["gold"], counts["gold_evidence"] = len(gold), evidence_total
    for p in _dedupe(predictions):
        counts["predicted"] += 1
        title = p["title"]
        if title not in entities:
            continue
        evidence = set(p.get("evidence", []))
        counts["predicted_evidence"] += len(evidence)
        key = (title, p["r"], p["h_idx"], p["t_idx"])
        if key not in gold:
            continue
        counts["correct"] += 1
        counts["correct_evidence"] += len(gold[key] & evidence)
        heads, tails = entities[title][p["h_idx"]], entities[title][p["t_idx"]]
        if any((h["name"], t["name"], p["r"]) in train_facts for h in heads for t in tails):
            counts["correct_in_train"] += 1
    return counts


def _f1(precision: float, recall: float) -> float:
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else 0.0


def scores_from_counts(counts: dict[str, float]) -> dict[str, float]:
    """Precision, recall, F1, Ign precision, Ign F1 and evidence precision / recall / F1 of
    the counts :func:`count_facts` gives (every key of :data:`COUNTS`, finite and >= 0, with
    ``correct <= predicted``, ``correct <= gold``, ``correct_in_train <= correct`` and
    ``correct_evidence`` at most ``predicted_evidence`` and ``gold_evidence``)."""
    missing = [name for name in COUNTS if name not in counts]
    if missing:
        raise ValueError(f"`counts` lacks {missing}; give every key of COUNTS (count_facts).")
    for name in COUNTS:
        value = counts[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"`counts[{name!r}]` must be a number, got {value!r}.")
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"`counts[{name!r}]` must be a finite count >= 0, got {value!r}.")
    c = counts
    for small, large in (
        ("correct", "predicted"),
        ("correct", "gold"),
        ("correct_in_train", "correct"),
        ("correct_evidence", "predicted_evidence"),
        ("correct_evidence", "gold_evidence"),
    ):
        if c[small] > c[large]:
            raise ValueError(
                f"`counts` has {small} = {c[small]!r} > {large} = {c[large]!r}: not the counts "
                "of one evaluation; sum count_facts outputs key by key."
            )
    precision, recall = _ratio(c["correct"], c["predicted"]), _ratio(c["correct"], c["gold"])
    ign_precision = _ratio(
        c["correct"] - c["correct_in_train"], c["predicted"] - c["correct_in_train"]
    )
    evidence_p = _ratio(c["correct_evidence"], c["predicted_evidence"])
    evidence_r = _ratio(c["correct_evidence"], c["gold_evidence"])
    return {
        "precision": precision,
        "recall": recall,
        "f1": _f1(precision, recall),
        "ign_precision": ign_precision,
        "ign_f1": _f1(ign_precision, recall),
        "evidence_precision": evidence_p,
        "evidence_recall": evidence_r,
        "evidence_f1": _f1(evidence_p, evidence_r),
    }


def docred_scores(predictions, documents, train_facts=frozenset()) -> dict[str, float]:
    """The official scores of ``predictions`` on ``documents`` (module docstring)."""
    return scores_from_counts(count_facts(predictions, documents, train_facts))


# ---------------------------------------------------------------------------------------------
# Queries, the mention graph, and the prompt parts
# ---------------------------------------------------------------------------------------------

NO_RELATION = "none"
"""The answer for an entity pair that holds no relation."""

CO_OCCURRENCE, COREFERENCE, NEARBY = 0, 1, 2
EDGE_TYPES = ("co-occurrence", "coreference", "nearby")
"""Mention-graph edge types: two entities' mentions in one sentence; two mentions of one entity;
two entities' mentions in sentences at most ``window`` apart (the sentence distance standing for
the syntactic distance)."""


def entity_name(document: dict[str, Any], entity: int) -> str:
    """An entity's name in prompts: its first mention's (the full name; later ones are aliases)."""
    entities = _require_document(document)["vertexSet"]
    return entities[require_index(entity, "entity", len(entities))][0]["name"]


def entity_pairs(document: dict[str, Any]) -> list[tuple[int, int]]:
    """Every ordered pair ``(h, t)``, ``h != t``: the queries of a document."""
    n = len(_require_document(document)["vertexSet"])
    return [(h, t) for h in range(n) for t in range(n) if h != t]


def pair_relations(document: dict[str, Any]) -> dict[tuple[int, int], set[str]]:
    """Gold relation ids per ordered pair (pairs without a label are absent)."""
    out: dict[tuple[int, int], set[str]] = {}
    for label in _require_document(document).get("labels", []):
        out.setdefault((label["h"], label["t"]), set()).add(label["r"])
    return out


def mentions(document: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """Every mention as ``(entity, mention)``, entity by entity: the mention graph's nodes."""
    entities = _require_document(document)["vertexSet"]
    return [(e, m) for e, entity in enumerate(entities) for m in entity]


def mention_graph(
    document: dict[str, Any], window: int = 1
) -> tuple[list[int], list[int], list[int]]:
    """Edges of the mention graph as ``(source, target, type)`` lists over :func:`mentions`.

    Both directions of every edge, no self-loops: ``COREFERENCE`` joins the mentions of one
    entity; ``CO_OCCURRENCE`` mentions of two entities in one sentence; ``NEARBY`` mentions of two
    entities whose sentences are ``1..window`` apart.
    """
    require_int(window, "window", 0)
    nodes = mentions(document)
    sources, targets, types = [], [], []
    for i, (ei, mi) in enumerate(nodes):
        for j, (ej, mj) in enumerate(nodes):
            if i == j:
                continue
            gap = abs(mi["sent_id"] - mj["sent_id"])
            if ei == ej:
                kind = COREFERENCE
            elif gap == 0:
                kind = CO_OCCURRENCE
            elif gap <= window:
                kind = NEARBY
            else:
                continue
            sources.append(i)
            targets.append(j)
            types.append(kind)
    return sources, targets, types


def sentence_text(document: dict[str, Any], sent_id: int) -> str:
    """The words of sentence ``sent_id`` (an index into ``document["sents"]``) joined by
    spaces."""
    sents = _require_document(document)["sents"]
    return " ".join(sents[require_index(sent_id, "sent_id", len(sents))])


def document_text(document: dict[str, Any], sentences: int | None = None) -> str:
    """The text of the document's first ``sentences`` sentences (an int >= 0; all by default,
    or when the document has fewer)."""
    total = len(_require_document(document)["sents"])
    count = total if sentences is None else min(require_int(sentences, "sentences", 0), total)
    return " ".join(sentence_text(document, i) for i in range(count))


def without_query(
    triples: Iterable[tuple[int, str, int]], query: tuple[int, int]
) -> list[tuple[int, str, int]]:
    """``triples`` less every triple between the query's two entities, in either direction: what
    a prompt may say about the queried pair is the document, never an answer for it."""
    pair = set(_query(query))
    return [(h, r, t) for h, r, t in _triples(triples) if {h, t} != pair]


def kg_subgraph(
    triples: Iterable[tuple[int, str, int]],
    query: tuple[int, int],
    keep_query_triples: bool = False,
) -> list[tuple[int, str, int]]:
    """The DocKG part of a query's prompt: the kept triples touching the query's head or tail
    (the subgraph its two entities induce with their neighbours). The queried pair's own triples
    are left out unless ``keep_query_triples``: right for a scorer's predicted triples (the
    paper's subgraph includes them), never for gold ones (they are the answer)."""
    h, t = _query(query)
    triples = _triples(triples)
    kept = triples if require_bool(keep_query_triples, "keep_query_triples") else None
    kept = without_query(triples, query) if kept is None else kept
    return [tr for tr in kept if {tr[0], tr[2]} & {h, t}]


def serialise_triples(
    document: dict[str, Any], triples: Iterable[tuple[int, str, int]], relations: dict[str, str]
) -> list[str]:
    """One ``"head | relation name | tail"`` line per triple, in the given order (entities are
    indices into the document's ``vertexSet``; every relation id must be in ``relations``)."""
    return [
        f"{entity_name(document, h)} | {_relation_name(relations, r)} | {entity_name(document, t)}"
        for h, r, t in _triples(triples)
    ]


def hybrid_prompt(
    document: dict[str, Any],
    query: tuple[int, int],
    relations: dict[str, str],
    kg_triples: Iterable[tuple[int, str, int]] | None = None,
    retrieved: Sequence[int] | None = None,
    retrieved_triples: Iterable[tuple[int, str, int]] | None = None,
    include_document: bool = True,
    document_sentences: int | None = None,
    keep_query_triples: bool = False,
) -> str:
    """The prompt for one query pair: ``P_doc + P_DocKG + P_SetRAG + question``.

    ``kg_triples``: the DocKG triples of the document, of which :func:`kg_subgraph` keeps those
    around the query; ``retrieved``: SetRAG's sentence ids, written in order of similarity with
    the triples (``retrieved_triples``) whose entities both appear in them. Every triple between
    the queried entities is dropped (:func:`without_query`), so no part states the answer, unless
    ``keep_query_triples``: the triples are then a scorer's predictions (cross-fitted on
    training documents), whose triple for the queried pair is evidence, not the answer, and the
    paper's subgraph includes it. The answer follows the final ``"Relation:"``.
    ``document_sentences`` keeps only the document's first sentences (what truncation to a
    model's context cuts). ``query`` holds two distinct entity indices and ``retrieved``
    sentence indices of the document.
    """
    h, t = _query(query, _require_document(document))
    keep_query_triples = require_bool(keep_query_triples, "keep_query_triples")
    parts = []
    if require_bool(include_document, "include_document"):
        parts.append("Document: " + document_text(document, document_sentences))
    if kg_triples is not None:
        subgraph = kg_subgraph(kg_triples, query, keep_query_triples)
        lines = serialise_triples(document, subgraph, relations)
        parts.append("Graph: " + ("; ".join(lines) if lines else "nothing"))
    if retrieved is not None:
        shown = list(retrieved_triples or ())
        shown = shown if keep_query_triples else without_query(shown, query)
        entities_in: dict[int, set[int]] = {}
        for e, m in mentions(document):
            entities_in.setdefault(m["sent_id"], set()).add(e)
        lines = []
        for s in retrieved:
            s = require_index(s, "retrieved", len(document["sents"]))
            in_sentence = entities_in.get(s, set())
            facts = [tr for tr in shown if tr[0] in in_sentence and tr[2] in in_sentence]
            text = sentence_text(document, s)
            if facts:
                text += " [" + "; ".join(serialise_triples(document, facts, relations)) + "]"
            lines.append(text)
        parts.append("Related: " + " ".join(lines))
    head, tail = entity_name(document, h), entity_name(document, t)
    parts.append(f"Question: {head} and {tail}? Relation:")
    return "\n".join(parts)


def answer_text(relation_ids: Iterable[str], relations: dict[str, str]) -> str:
    """The target after ``"Relation:"``: the relations' names (``relation_ids``: a collection
    of ids, each in ``relations``), or ``NO_RELATION``."""
    ids = sorted(require_string_sequence(relation_ids, "relation_ids"))
    return " " + ("; ".join(_relation_name(relations, r) for r in ids) if ids else NO_RELATION)
