"""SetRAG: the sentences of a document most similar to a query pair, by sentence embedding.

DocKS-RAG's sentence-level semantic retrieval (Xu et al., ICML 2025): every sentence and every
entity of a document is embedded with one sentence encoder (``lm.sentence_encoders.embed_texts``:
the packaged all-MiniLM-L6-v2, or TF-IDF + SVD without the ``context`` extra); the query of a pair
``(h, t)`` is ``q = (e_h + e_t) / |e_h + e_t|`` over the unit embeddings of the two entities'
names, and its top-``k`` sentences by ``cos(q, s)`` (``top_k_cosine``) are written into the prompt
with their triples. Sentences and entities of every document are embedded in one call, so that
TF-IDF, which is fitted on the texts it is given, puts all of them in one space.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from lightning_info.lm.sentence_encoders import embed_texts, top_k_cosine
from lightning_info.methods.docks_rag.functional import sentence_text

__all__ = ["DocumentIndex", "entity_text", "index_documents", "retrieve_sentences"]


@dataclass
class DocumentIndex:
    """One document's unit embeddings: ``sentences (S, E)`` and ``entities (N, E)``."""

    sentences: np.ndarray
    entities: np.ndarray


def entity_text(document: dict[str, Any], entity: int) -> str:
    """An entity's distinct mention names, in order: what its embedding is made from."""
    names = dict.fromkeys(m["name"] for m in document["vertexSet"][entity])
    return " ; ".join(names)


def index_documents(
    documents: Sequence[dict[str, Any]], encoder: str = "auto", dim: int = 64, seed: int = 0
) -> list[DocumentIndex]:
    """Embed every sentence and entity of ``documents`` in one ``embed_texts`` call."""
    if not documents:
        raise ValueError("no documents to index")
    texts, sizes = [], []
    for d in documents:
        texts += [sentence_text(d, i) for i in range(len(d["sents"]))]
        texts += [entity_text(d, e) for e in range(len(d["vertexSet"]))]
        sizes.append((len(d["sents"]), len(d["vertexSet"])))
    embeddings = embed_texts(texts, encoder=encoder, dim=dim, seed=seed)
    out, start = [], 0
    for num_sentences, num_entities in sizes:
        middle, end = start + num_sentences, start + num_sentences + num_entities
        out.append(DocumentIndex(embeddings[start:middle], embeddings[middle:end]))
        start = end
    return out


def retrieve_sentences(index: DocumentIndex, query: tuple[int, int], k: int = 5) -> list[int]:
    """The ids of the ``min(k, S)`` sentences most similar to the query pair, best first."""
    h, t = query
    q = torch.as_tensor(index.entities[h] + index.entities[t]).unsqueeze(0)
    _, ids = top_k_cosine(q, torch.as_tensor(index.sentences), k)
    return ids[0].tolist()
