"""DocKG: a graph neural network over a document's mentions that scores entity pairs per relation.

The document-level knowledge graph of DocKS-RAG (Xu et al., ICML 2025): each mention is a node
(features: its entity type, its relative position in its sentence and the sentence's embedding),
joined by the typed edges of :func:`functional.mention_graph`; ``layers`` relational graph
convolutions (R-GCN, Schlichtkrull et al. 2018,
``h_i' = relu(W_0 h_i + sum_k mean_{j in N_k(i)} W_k h_j)``) mix them, an entity is the mean of its
mentions, and a pair ``(h, t)`` is scored from ``[e_h, e_t, e_h * e_t, s_ht]`` (``s_ht`` the mean
embedding of the sentences both mention, zero if none) as a softmax over ``none`` and the
relations. Triples whose probability exceeds ``tau`` become the DocKG.

The convolution is the few lines of ``index_add_`` below rather than torch-geometric's
``RGCNConv``: the graphs have tens of nodes, and the core package does not need the ``graph``
extra.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from lightning_info.methods.docks_rag.functional import (
    EDGE_TYPES,
    entity_pairs,
    mention_graph,
    mentions,
    pair_relations,
)

__all__ = [
    "ENTITY_TYPES",
    "DocKGScorer",
    "DocumentGraph",
    "batch_graphs",
    "document_graph",
    "fit_doc_kg",
    "kept_triples",
]

ENTITY_TYPES = ("PER", "LOC", "ORG", "TIME", "NUM", "MISC")
"""DocRED's entity types; any other type shares the last slot."""


@dataclass
class DocumentGraph:
    """One document as tensors: ``M`` mentions, ``E`` edges, ``P`` ordered entity pairs."""

    node_features: Tensor  # (M, F)
    edge_index: Tensor  # (2, E) long: source, target
    edge_type: Tensor  # (E,) long
    node_entity: Tensor  # (M,) long
    num_entities: int
    pairs: Tensor  # (P, 2) long
    pair_context: Tensor  # (P, S): mean embedding of the sentences both entities are in
    targets: Tensor  # (P, 1 + R): 0 is "none"; a pair's gold relations share its mass


def document_graph(
    document: dict[str, Any],
    sentence_embeddings: np.ndarray | Tensor,
    relation_ids: Sequence[str],
    window: int = 1,
) -> DocumentGraph:
    """The tensors of ``document``; ``sentence_embeddings`` holds one row per sentence."""
    emb = torch.as_tensor(np.asarray(sentence_embeddings), dtype=torch.float32)
    if emb.ndim != 2 or emb.shape[0] != len(document["sents"]):
        raise ValueError(
            f"document {document.get('title')!r}: sentence_embeddings must be (num_sentences, S) "
            f"= ({len(document['sents'])}, S), got {tuple(emb.shape)}"
        )
    nodes = mentions(document)
    types = torch.zeros(len(nodes), len(ENTITY_TYPES))
    position = torch.zeros(len(nodes), 1)
    for i, (_, m) in enumerate(nodes):
        kind = m.get("type", "MISC")
        types[i, ENTITY_TYPES.index(kind) if kind in ENTITY_TYPES else -1] = 1.0
        position[i, 0] = m["pos"][0] / max(len(document["sents"][m["sent_id"]]), 1)
    sent_ids = torch.tensor([m["sent_id"] for _, m in nodes], dtype=torch.long)
    features = torch.cat([types, position, emb[sent_ids]], dim=1)
    sources, targets, kinds = mention_graph(document, window)
    sentences_of = [{m["sent_id"] for m in entity} for entity in document["vertexSet"]]
    pairs = entity_pairs(document)
    context = torch.zeros(len(pairs), emb.shape[1])
    for p, (h, t) in enumerate(pairs):
        shared = sorted(sentences_of[h] & sentences_of[t])
        if shared:
            context[p] = emb[shared].mean(0)
    index = {r: 1 + i for i, r in enumerate(relation_ids)}
    gold = pair_relations(document)
    target = torch.zeros(len(pairs), 1 + len(relation_ids))
    for p, pair in enumerate(pairs):
        relations = [index[r] for r in gold.get(pair, ()) if r in index]
        if relations:
            target[p, relations] = 1.0 / len(relations)
        else:
            target[p, 0] = 1.0
    return DocumentGraph(
        node_features=features,
        edge_index=torch.tensor([sources, targets], dtype=torch.long).reshape(2, -1),
        edge_type=torch.tensor(kinds, dtype=torch.long),
        node_entity=torch.tensor([e for e, _ in nodes], dtype=torch.long),
        num_entities=len(document["vertexSet"]),
        pairs=torch.tensor(pairs, dtype=torch.long).reshape(-1, 2),
        pair_context=context,
        targets=target,
    )


def batch_graphs(graphs: Sequence[DocumentGraph]) -> DocumentGraph:
    """Disjoint union of ``graphs``: node and entity indices offset, everything concatenated."""
    if not graphs:
        raise ValueError("no document graphs to batch")
    node_offsets = np.cumsum([0] + [g.node_features.shape[0] for g in graphs])
    entity_offsets = np.cumsum([0] + [g.num_entities for g in graphs])
    return DocumentGraph(
        node_features=torch.cat([g.node_features for g in graphs]),
        edge_index=torch.cat([g.edge_index + int(o) for g, o in zip(graphs, node_offsets)], 1),
        edge_type=torch.cat([g.edge_type for g in graphs]),
        node_entity=torch.cat([g.node_entity + int(o) for g, o in zip(graphs, entity_offsets)]),
        num_entities=int(entity_offsets[-1]),
        pairs=torch.cat([g.pairs + int(o) for g, o in zip(graphs, entity_offsets)]),
        pair_context=torch.cat([g.pair_context for g in graphs]),
        targets=torch.cat([g.targets for g in graphs]),
    )


class DocKGScorer(nn.Module):
    """R-GCN over mentions, mean-pooled entities and a pair MLP giving ``(P, 1 + R)`` logits."""

    def __init__(
        self,
        feature_dim: int,
        context_dim: int,
        num_relations: int,
        hidden: int = 64,
        layers: int = 2,
    ):
        super().__init__()
        if min(feature_dim, context_dim, num_relations, hidden) < 1 or layers < 0:
            raise ValueError("DocKGScorer needs positive dimensions and layers >= 0")
        self.input = nn.Linear(feature_dim, hidden)
        self.self_loops = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(layers))
        self.relational = nn.ModuleList(
            nn.Linear(hidden, hidden * len(EDGE_TYPES), bias=False) for _ in range(layers)
        )
        self.pair = nn.Sequential(
            nn.Linear(3 * hidden + context_dim, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 1 + num_relations),
        )

    def forward(self, graph: DocumentGraph) -> Tensor:
        h = torch.relu(self.input(graph.node_features))
        src, dst = graph.edge_index
        kinds = len(EDGE_TYPES)
        slot = dst * kinds + graph.edge_type  # one mean per (node, edge type)
        degree = torch.zeros(h.shape[0] * kinds, dtype=h.dtype).index_add_(
            0, slot, torch.ones_like(slot, dtype=h.dtype)
        )
        for self_loop, relational in zip(self.self_loops, self.relational):
            messages = relational(h).view(h.shape[0], kinds, -1)[src, graph.edge_type]
            summed = torch.zeros(h.shape[0] * kinds, h.shape[1], dtype=h.dtype)
            summed.index_add_(0, slot, messages)
            mean = summed / degree.clamp(min=1).unsqueeze(1)
            h = torch.relu(self_loop(h) + mean.view(h.shape[0], kinds, -1).sum(1))
        counts = torch.zeros(graph.num_entities, dtype=h.dtype).index_add_(
            0, graph.node_entity, torch.ones_like(graph.node_entity, dtype=h.dtype)
        )
        entities = torch.zeros(graph.num_entities, h.shape[1], dtype=h.dtype)
        entities = entities.index_add_(0, graph.node_entity, h) / counts.clamp(min=1).unsqueeze(1)
        head, tail = entities[graph.pairs[:, 0]], entities[graph.pairs[:, 1]]
        return self.pair(torch.cat([head, tail, head * tail, graph.pair_context], dim=1))


def fit_doc_kg(
    graphs: Sequence[DocumentGraph],
    num_relations: int,
    hidden: int = 64,
    layers: int = 2,
    steps: int = 300,
    lr: float = 1e-2,
    seed: int = 0,
) -> DocKGScorer:
    """Train a :class:`DocKGScorer` on annotated ``graphs``: full-batch Adam on the cross-entropy
    of each pair's softmax against its target distribution."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    batch = batch_graphs(graphs)
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    model = DocKGScorer(
        batch.node_features.shape[1], batch.pair_context.shape[1], num_relations, hidden, layers
    )
    torch.random.set_rng_state(generator_state)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        optimiser.zero_grad()
        loss = -(batch.targets * torch.log_softmax(model(batch), dim=1)).sum(1).mean()
        loss.backward()
        optimiser.step()
    return model.eval()


@torch.no_grad()
def kept_triples(
    model: DocKGScorer, graph: DocumentGraph, relation_ids: Sequence[str], tau: float = 0.5
) -> list[tuple[int, str, int, float]]:
    """The DocKG of one document: ``(h, relation id, t, p)`` for every pair and relation with
    softmax probability ``p > tau`` (never ``none``), most probable first."""
    if not 0.0 <= tau < 1.0:
        raise ValueError(f"tau must be in [0, 1), got {tau}")
    probabilities = torch.softmax(model(graph), dim=1)[:, 1:]
    rows, columns = torch.nonzero(probabilities > tau, as_tuple=True)
    triples = [
        (
            int(graph.pairs[p, 0]),
            relation_ids[int(r)],
            int(graph.pairs[p, 1]),
            float(probabilities[p, r]),
        )
        for p, r in zip(rows, columns)
    ]
    return sorted(triples, key=lambda x: -x[3])
