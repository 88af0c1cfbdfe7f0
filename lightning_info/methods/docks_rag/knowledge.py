"""The two knowledge sources of a split, built once: SetRAG's sentence indices and DocKG's triples.

DocKG triples of the training documents are cross-fitted: the documents are split into
``folds``, and each fold's triples come from a scorer trained on the other folds, so the
training prompts carry triples as noisy as the held-out documents' (whose scorer is trained on
every training document). A scorer's triples on its own training documents would be nearly the
gold facts, and the language model would learn to trust them more than it should.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lightning_info.methods.docks_rag.doc_kg import document_graph, fit_doc_kg, kept_triples
from lightning_info.methods.docks_rag.set_rag import DocumentIndex, index_documents

__all__ = ["Knowledge", "build_knowledge"]

Triple = tuple[int, str, int]


@dataclass
class Knowledge:
    """Per document (training documents first, then the held-out ones): its SetRAG index and its
    DocKG triples ``(h, relation id, t)``, most probable first."""

    indices: list[DocumentIndex]
    triples: list[list[Triple]]


def build_knowledge(
    train: Sequence[dict[str, Any]],
    held_out: Sequence[dict[str, Any]],
    relation_ids: Sequence[str],
    *,
    use_kg: bool = True,
    encoder: str = "auto",
    encoder_dim: int = 64,
    tau: float = 0.5,
    folds: int = 2,
    kg_steps: int = 300,
    kg_hidden: int = 64,
    seed: int = 0,
) -> Knowledge:
    """Embed every sentence and entity; with ``use_kg``, train DocKG scorers and keep their
    triples with probability above ``tau`` (module docstring for the cross-fitting)."""
    documents = [*train, *held_out]
    indices = index_documents(documents, encoder=encoder, dim=encoder_dim, seed=seed)
    triples: list[list[Triple]] = [[] for _ in documents]
    if not use_kg:
        return Knowledge(indices, triples)
    if folds < 2 or folds > len(train):
        raise ValueError(f"kg folds must be in [2, {len(train)}] (the training documents)")
    graphs = [document_graph(d, i.sentences, relation_ids) for d, i in zip(documents, indices)]

    def fit(rows: Sequence[int]):
        picked = [graphs[i] for i in rows]
        return fit_doc_kg(picked, len(relation_ids), kg_hidden, steps=kg_steps, seed=seed)

    def keep(model, rows: Sequence[int]) -> None:
        for i in rows:
            triples[i] = [
                (h, r, t) for h, r, t, _ in kept_triples(model, graphs[i], relation_ids, tau)
            ]

    n = len(train)
    for fold in range(folds):
        inside = [i for i in range(n) if i % folds == fold]
        keep(fit([i for i in range(n) if i % folds != fold]), inside)
    keep(fit(range(n)), range(n, len(documents)))
    return Knowledge(indices, triples)
