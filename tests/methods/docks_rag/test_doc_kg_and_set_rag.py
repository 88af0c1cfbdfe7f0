"""DocKG: the batched graph equals its documents one by one, the R-GCN mean aggregation matches a
per-node loop, and a trained scorer recovers held-out facts. SetRAG: retrieval is the brute-force
cosine ranking of the query's entity embeddings against the sentences."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lightning_info.methods.docks_rag.doc_kg import (
    DocKGScorer,
    batch_graphs,
    document_graph,
    fit_doc_kg,
    kept_triples,
)
from lightning_info.methods.docks_rag.functional import (
    EDGE_TYPES,
    docred_scores,
    entity_pairs,
    train_fact_names,
)
from lightning_info.methods.docks_rag.set_rag import (
    entity_text,
    index_documents,
    retrieve_sentences,
)
from lightning_info.methods.docks_rag.synthetic import RELATIONS, synthetic_docred

RELATION_IDS = list(RELATIONS)


def _graphs(documents, dim=8, seed=0):
    rng = np.random.default_rng(seed)
    return [
        document_graph(d, rng.normal(size=(len(d["sents"]), dim)), RELATION_IDS) for d in documents
    ]


def test_document_graph_shapes_and_targets():
    (d,) = synthetic_docred(1, seed=0, world_seed=0)
    (g,) = _graphs([d])
    num_mentions = sum(len(e) for e in d["vertexSet"])
    assert g.node_features.shape == (num_mentions, 6 + 1 + 8)
    assert g.pairs.tolist() == [list(p) for p in entity_pairs(d)]
    torch.testing.assert_close(g.targets.sum(1), torch.ones(len(g.pairs)))
    labelled = {(lab["h"], lab["t"]): RELATION_IDS.index(lab["r"]) + 1 for lab in d["labels"]}
    for p, (h, t) in enumerate(g.pairs.tolist()):
        assert int(g.targets[p].argmax()) == labelled.get((h, t), 0)
    with pytest.raises(ValueError, match="num_sentences"):
        document_graph(d, np.zeros((len(d["sents"]) + 1, 4)), RELATION_IDS)


def test_batched_scores_equal_each_document_alone():
    documents = synthetic_docred(3, seed=1, world_seed=1)
    graphs = _graphs(documents)
    torch.manual_seed(0)
    model = DocKGScorer(graphs[0].node_features.shape[1], 8, len(RELATION_IDS), hidden=16)
    alone = torch.cat([model(g) for g in graphs])
    torch.testing.assert_close(model(batch_graphs(graphs)), alone)
    with pytest.raises(ValueError, match="no document graphs"):
        batch_graphs([])


def test_relational_mean_aggregation_matches_a_per_node_loop():
    (d,) = synthetic_docred(1, seed=2, world_seed=2)
    (g,) = _graphs([d])
    torch.manual_seed(0)
    model = DocKGScorer(g.node_features.shape[1], 8, len(RELATION_IDS), hidden=8, layers=1)
    h = torch.relu(model.input(g.node_features))
    kinds = len(EDGE_TYPES)
    messages = model.relational[0](h).view(h.shape[0], kinds, -1)
    expected = model.self_loops[0](h).clone()
    src, dst = g.edge_index.tolist()
    for i in range(h.shape[0]):
        for k in range(kinds):
            neighbours = [s for s, t, e in zip(src, dst, g.edge_type.tolist()) if t == i and e == k]
            if neighbours:
                expected[i] += messages[neighbours, k].mean(0)
    expected = torch.relu(expected)
    # the scorer's entity means of its layer-1 states, by the loop above
    entities = torch.stack([expected[g.node_entity == e].mean(0) for e in range(g.num_entities)])
    head, tail = entities[g.pairs[:, 0]], entities[g.pairs[:, 1]]
    logits = model.pair(torch.cat([head, tail, head * tail, g.pair_context], dim=1))
    torch.testing.assert_close(model(g), logits)


def test_trained_doc_kg_recovers_held_out_facts():
    train = synthetic_docred(40, seed=0, world_seed=4)
    dev = synthetic_docred(10, seed=1, world_seed=4)
    indices = index_documents(train + dev, encoder="tfidf", dim=24)
    graphs = [document_graph(d, i.sentences, RELATION_IDS) for d, i in zip(train + dev, indices)]
    model = fit_doc_kg(graphs[:40], len(RELATION_IDS), hidden=32, steps=150, seed=0)
    predictions = [
        {"title": d["title"], "h_idx": h, "t_idx": t, "r": r}
        for d, g in zip(dev, graphs[40:])
        for h, r, t, _ in kept_triples(model, g, RELATION_IDS, tau=0.5)
    ]
    untrained = DocKGScorer(graphs[0].node_features.shape[1], 24, len(RELATION_IDS), hidden=32)
    chance = [
        {"title": d["title"], "h_idx": h, "t_idx": t, "r": r}
        for d, g in zip(dev, graphs[40:])
        for h, r, t, _ in kept_triples(untrained, g, RELATION_IDS, tau=0.0)
    ]
    scores = docred_scores(predictions, dev, train_fact_names(train))
    assert scores["f1"] > 0.6 > docred_scores(chance, dev)["f1"]
    probabilities = [p for g in graphs[40:] for *_, p in kept_triples(model, g, RELATION_IDS, 0.9)]
    assert probabilities and min(probabilities) > 0.9
    with pytest.raises(ValueError, match="tau"):
        kept_triples(model, graphs[40], RELATION_IDS, tau=1.0)


def test_set_rag_is_the_brute_force_cosine_ranking():
    documents = synthetic_docred(2, seed=5, world_seed=5)
    indices = index_documents(documents, encoder="tfidf", dim=16)
    for d, index in zip(documents, indices):
        assert index.sentences.shape == (len(d["sents"]), 16)
        assert index.entities.shape == (len(d["vertexSet"]), 16)
        for h, t in entity_pairs(d)[:20]:
            q = index.entities[h] + index.entities[t]
            cos = [
                float(q @ s / (np.linalg.norm(q) * np.linalg.norm(s)))
                if np.linalg.norm(s) > 0 and np.linalg.norm(q) > 0
                else 0.0
                for s in index.sentences
            ]
            expected = sorted(range(len(cos)), key=lambda i: (-round(cos[i], 5), i))[:3]
            assert retrieve_sentences(index, (h, t), 3) == expected
    # a pair's sentences with both of its names come first under TF-IDF
    d, index = documents[0], indices[0]
    label = d["labels"][0]
    top = retrieve_sentences(index, (label["h"], label["t"]), 1)[0]
    assert top in label["evidence"]
    assert entity_text(d, 0).split(" ; ")[0] == d["vertexSet"][0][0]["name"]
    with pytest.raises(ValueError, match="no documents"):
        index_documents([])
