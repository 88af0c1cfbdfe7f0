"""k-means pseudo-labels: a Lloyd fixed point, the planted clusters recovered, close to
scikit-learn's inertia, seeded, bad input refused."""

from __future__ import annotations

import pytest
import torch

from lightning_info.measures.clustering import adjusted_rand_index
from lightning_info.methods.prodiff.pseudo_labels import kmeans


def blobs(n=600, k=5, d=8, spread=0.3, seed=0):
    g = torch.Generator().manual_seed(seed)
    centres = 4 * torch.randn(k, d, generator=g, dtype=torch.float64)
    truth = torch.arange(n) % k
    return centres[truth] + spread * torch.randn(n, d, generator=g, dtype=torch.float64), truth


def test_the_result_is_a_lloyd_fixed_point():
    points, _ = blobs(spread=1.5)
    labels, centres = kmeans(points, 5, iterations=100, generator=torch.Generator().manual_seed(1))
    assert torch.equal(labels, torch.cdist(points, centres).argmin(1))  # nearest centre
    for j in range(5):  # every centre the mean of its points
        assert torch.allclose(centres[j], points[labels == j].mean(0))


def test_planted_clusters_are_recovered_and_inertia_is_near_sklearns():
    from sklearn.cluster import KMeans

    points, truth = blobs()
    labels, centres = kmeans(points, 5, generator=torch.Generator().manual_seed(2))
    assert adjusted_rand_index(labels, truth).item() == pytest.approx(1.0)
    noisy, _ = blobs(spread=2.5, seed=3)
    labels, centres = kmeans(noisy, 5, iterations=100, generator=torch.Generator().manual_seed(4))
    inertia = ((noisy - centres[labels]) ** 2).sum().item()
    reference = KMeans(5, n_init=10, random_state=0).fit(noisy.numpy()).inertia_
    assert inertia <= 1.05 * reference


def test_kmeans_is_seeded_and_handles_repeated_points():
    points, _ = blobs(spread=1.0)
    a = kmeans(points, 4, generator=torch.Generator().manual_seed(5))
    b = kmeans(points, 4, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    same = torch.ones(6, 3)
    labels, centres = kmeans(same, 2, generator=torch.Generator().manual_seed(0))
    assert labels.shape == (6,) and torch.equal(centres, torch.ones(2, 3))


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="at least 4 points"):
        kmeans(torch.zeros(3, 2), 4)
    with pytest.raises(ValueError, match=r"\(n, d\)"):
        kmeans(torch.zeros(3), 2)
    with pytest.raises(ValueError, match="NaN"):
        kmeans(torch.tensor([[0.0, float("nan")], [1.0, 1.0]]), 1)
