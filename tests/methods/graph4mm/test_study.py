"""The study's Bayes reference: the mode of the neighbours' digits equals the full posterior's
maximiser under the digit graphs' likelihood, computed here by enumeration."""

from __future__ import annotations

import pytest
import torch

from lab.graph4mm.study import bayes_label_accuracy
from lightning_info.data.digits import load_digits_images
from lightning_info.methods.graph4mm.graphs import DIGIT_WORDS, digit_graphs


def _posterior_accuracy(graph, homophily, captioned_only):
    if captioned_only:
        seen = [
            DIGIT_WORDS.index(w)
            for v in graph.neighbours()
            if not graph.has_image[v]
            for w in graph.texts[v].split()
            if w in DIGIT_WORDS
        ]
    else:
        seen = [DIGIT_WORDS.index(w) for w in graph.target.split()]
    likelihood = torch.ones(10, dtype=torch.float64)
    for y in seen:
        likelihood *= torch.tensor(
            [homophily * (y == c) + (1 - homophily) / 10 for c in range(10)], dtype=torch.float64
        )
    best = torch.isclose(likelihood, likelihood.max(), rtol=1e-12)
    return float(best[graph.label]) / int(best.sum())


@pytest.mark.parametrize("captioned_only", [False, True])
def test_the_bayes_reference_is_the_posterior_maximiser(captioned_only):
    images, labels = load_digits_images()
    graphs = digit_graphs(images, labels, 200, homophily=0.8, seed=7)
    expected = sum(_posterior_accuracy(g, 0.8, captioned_only) for g in graphs) / len(graphs)
    assert bayes_label_accuracy(graphs, captioned_only) == pytest.approx(expected, abs=1e-12)
    assert 0.1 < expected < 1
