"""ProDiff's prototype math against brute force: the cluster-prototype matching, the
contrastive and cross-entropy losses, the endpoint query attention, the endpoints-only input."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from lightning_info.methods.prodiff.functional import (
    endpoints_only,
    match_clusters,
    prototype_attention,
    prototype_contrastive_loss,
    prototype_cross_entropy,
)


def _cost(centres, prototypes, assignment):
    return sum(float((centres[c] - prototypes[p]).norm()) for c, p in enumerate(assignment))


@pytest.mark.parametrize("clusters", [5, 3])
def test_match_clusters_is_the_cheapest_one_to_one_assignment(clusters):
    g = torch.Generator().manual_seed(0)
    prototypes = torch.randn(5, 4, generator=g, dtype=torch.float64)
    centres = torch.randn(clusters, 4, generator=g, dtype=torch.float64)
    assignment = match_clusters(centres, prototypes).tolist()
    assert len(set(assignment)) == clusters  # one to one
    best = min(_cost(centres, prototypes, p) for p in itertools.permutations(range(5), clusters))
    assert _cost(centres, prototypes, assignment) == pytest.approx(best, rel=1e-12)


def test_match_clusters_recovers_a_shuffled_copy():
    prototypes = torch.randn(20, 8, generator=torch.Generator().manual_seed(1))
    order = torch.randperm(20, generator=torch.Generator().manual_seed(2))
    centres = prototypes[order] + 1e-3
    assert torch.equal(match_clusters(centres, prototypes), order)


def test_match_clusters_refuses_more_clusters_than_prototypes():
    with pytest.raises(ValueError, match="one to one"):
        match_clusters(torch.randn(4, 2), torch.randn(3, 2))
    with pytest.raises(ValueError, match=r"\(m, d\) and \(K, d\)"):
        match_clusters(torch.randn(3, 2), torch.randn(3, 5))


def test_contrastive_loss_equals_a_per_sample_loop_and_reaches_the_chosen_prototypes():
    g = torch.Generator().manual_seed(3)
    features = torch.randn(7, 6, generator=g, dtype=torch.float64, requires_grad=True)
    prototypes = torch.randn(4, 6, generator=g, dtype=torch.float64, requires_grad=True)
    margin = 2.5
    loss = prototype_contrastive_loss(features, prototypes, margin)
    terms = []
    for f in features:
        distances = torch.stack([(f - p).norm() for p in prototypes])
        near, far = prototypes[distances.argmin()], prototypes[distances.argmax()]
        terms.append(F.relu((f - near).norm() - (f - far).norm() + margin))
    expected = torch.stack(terms).mean()
    torch.testing.assert_close(loss, expected, rtol=1e-12, atol=1e-12)
    loss.backward()
    nearest = torch.cdist(features, prototypes).argmin(1)
    farthest = torch.cdist(features, prototypes).argmax(1)
    touched = set(nearest.tolist()) | set(farthest.tolist())
    for index in range(4):
        assert (prototypes.grad[index].abs().sum() > 0) == (index in touched)


def test_contrastive_loss_is_zero_once_the_margin_is_met():
    prototypes = torch.tensor([[0.0, 0.0], [10.0, 0.0]])
    features = torch.tensor([[0.5, 0.0], [9.0, 0.0]])
    assert prototype_contrastive_loss(features, prototypes, 1.0) == 0


def test_cross_entropy_uses_normalised_detached_prototypes():
    g = torch.Generator().manual_seed(4)
    features = torch.randn(6, 5, generator=g, requires_grad=True)
    prototypes = torch.randn(3, 5, generator=g, requires_grad=True)
    labels = torch.tensor([0, 1, 2, 2, 1, 0])
    loss = prototype_cross_entropy(features, prototypes, labels)
    logits = features @ (prototypes / prototypes.norm(dim=1, keepdim=True)).T
    expected = -torch.log_softmax(logits, 1)[torch.arange(6), labels].mean()
    torch.testing.assert_close(loss, expected)
    loss.backward()
    assert prototypes.grad is None and features.grad.abs().sum() > 0


def test_prototype_attention_is_the_cosine_softmax_mixture():
    g = torch.Generator().manual_seed(5)
    query = torch.randn(4, 16, generator=g, dtype=torch.float64)
    prototypes = torch.randn(5, 16, generator=g, dtype=torch.float64)
    out = prototype_attention(query, prototypes)
    for b in range(4):
        cosines = torch.stack([F.cosine_similarity(query[b], p, dim=0) for p in prototypes])
        weights = torch.exp(cosines / math.sqrt(16))
        expected = (weights[:, None] * prototypes).sum(0) / weights.sum()
        torch.testing.assert_close(out[b], expected, rtol=1e-12, atol=1e-12)


def test_endpoints_only_zeroes_the_interior_and_never_reads_it():
    window = torch.randn(3, 6, 3)
    window[:, 1:-1] = float("nan")
    out = endpoints_only(window)
    assert torch.equal(out[:, [0, -1]], window[:, [0, -1]])
    assert torch.equal(out[:, 1:-1], torch.zeros(3, 4, 3))
