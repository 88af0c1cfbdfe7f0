"""The pure core of DocKS-RAG so far: the official DocRED evaluation (relation F1, Ign F1 and
evidence F1) as functions of predictions and gold documents; ``evaluation.DocREDScores`` is its
torchmetrics Metric.

As the official scorer (``thunlp/DocRED``, ``evaluation.py``) defines them, after removing
duplicate predictions ``(title, h, t, r)``:

- ``P = correct / predicted``, ``R = correct / gold``, ``F1 = 2 P R / (P + R)``;
- a correct prediction is *in train* when some mention-name pair ``(n_h, n_t)`` of its head and
  tail with its relation is a training fact (:func:`train_fact_names`);
  ``P_ign = (correct - correct_in_train) / (predicted - correct_in_train)`` and
  ``Ign F1 = 2 P_ign R / (P_ign + R)``, with the ordinary recall (the scorer adds ``1e-5`` to
  the denominator; here an empty one gives 0);
- evidence: ``P_evi = |gold evidence ∩ predicted evidence| / |predicted evidence|`` summed over
  correct predictions, ``R_evi`` over all gold evidence sentences.

A prediction for a title missing from the gold documents counts as predicted and never as
correct, as in the scorer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["COUNTS", "count_facts", "docred_scores", "scores_from_counts", "train_fact_names"]

COUNTS = ("correct", "predicted", "gold", "correct_in_train", "correct_evidence",
          "predicted_evidence", "gold_evidence")  # fmt: skip


def train_fact_names(train_documents: Iterable[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """``(head mention name, tail mention name, relation)`` for every mention pair of every
    training label: what makes a correct prediction "in train" for Ign F1."""
    facts = set()
    for document in train_documents:
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
    ``h_idx``, ``t_idx``, ``r`` and optionally ``evidence``) against the gold ``documents``."""
    gold, evidence_total = {}, 0
    entities = {}
    for document in documents:
        entities[document["title"]] = document["vertexSet"]
        for label in document.get("labels", []):
            key = (document["title"], label["r"], label["h"], label["t"])
            gold[key] = set(label.get("evidence", []))
    evidence_total = sum(len(e) for e in gold.values())
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
    """Precision, recall, F1, Ign precision, Ign F1 and evidence precision / recall / F1."""
    c = counts
    precision, recall = _ratio(c["correct"], c["predicted"]), _ratio(c["correct"], c["gold"])
    ign_precision = _ratio(c["correct"] - c["correct_in_train"],
                           c["predicted"] - c["correct_in_train"])  # fmt: skip
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
