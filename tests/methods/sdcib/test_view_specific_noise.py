"""The synthetic views with view-specific nuisance clusters, against their definition: the
default views are unchanged, the nuisance is an added term, independent across views and of the
classes, strong in its own view only, and it costs k-means on the joined views."""

from __future__ import annotations

import pytest
import torch
from sklearn.cluster import KMeans

from lightning_info.data.multiview import standardize_columns
from lightning_info.measures.clustering import clustering_scores
from lightning_info.methods.sdcib import ClusteringViewsDataModule, SyntheticViewsOptions
from lightning_info.methods.sdcib.datamodule import (
    _synthetic_views,
    shared_latent_views,
    view_specific_parts,
)


def _defined_views(n, k, v, latent, dim, separation, noise, seed):
    """The documented default: ``tanh(z A_v) B_v + noise * N(0, I)``, drawn in this order."""
    g = torch.Generator().manual_seed(seed)
    labels = (torch.arange(n) % k)[torch.randperm(n, generator=g)]
    z = (separation * torch.randn(k, latent, generator=g))[labels]
    z = z + torch.randn(n, latent, generator=g)
    views = []
    for _ in range(v):
        a = torch.randn(latent, dim, generator=g) / latent**0.5
        b = torch.randn(dim, dim, generator=g) / dim**0.5
        views.append(torch.tanh(z @ a) @ b + noise * torch.randn(n, dim, generator=g))
    return views, labels, g


def _kmeans(x: torch.Tensor, k: int) -> torch.Tensor:
    return torch.from_numpy(KMeans(k, n_init=3, random_state=0).fit_predict(x.numpy()))


def _explained(x: torch.Tensor, groups: torch.Tensor) -> float:
    """The share of ``x``'s variance explained by the group means (between / total)."""
    means = torch.stack([x[groups == g].mean(0) for g in groups.unique()])
    fitted = means[torch.searchsorted(groups.unique(), groups)]
    return float(((fitted - x.mean(0)) ** 2).sum() / ((x - x.mean(0)) ** 2).sum())


def test_default_views_are_the_documented_ones():
    views, labels = shared_latent_views(120, 3, 2, 4, 6, separation=1.5, noise=0.7, seed=3)
    expected, expected_labels, _ = _defined_views(120, 3, 2, 4, 6, 1.5, 0.7, 3)
    assert torch.equal(labels, expected_labels)
    assert all(torch.equal(a, b) for a, b in zip(views, expected))


def test_the_nuisance_is_an_added_term_drawn_after_the_shared_views():
    views, labels, (parts, nuisance) = _synthetic_views(150, 3, 3, 4, 6, 1.0, 0.5, 7, 4, 2.0)
    default, default_labels, g = _defined_views(150, 3, 3, 4, 6, 1.0, 0.5, 7)
    replayed, replayed_nuisance = view_specific_parts(150, 3, 4, 6, 4, 2.0, g)
    assert torch.equal(labels, default_labels) and torch.equal(nuisance, replayed_nuisance)
    for view, shared, part, again in zip(views, default, parts, replayed):
        assert view.shape == (150, 6) and torch.equal(part, again)
        torch.testing.assert_close(view - part, shared, rtol=0, atol=1e-6)
    assert nuisance.shape == (3, 150) and set(nuisance.unique().tolist()) == {0, 1, 2, 3}
    again, _ = shared_latent_views(150, 3, 3, 4, 6, 1.0, 0.5, 7, 4, 2.0)
    other, _ = shared_latent_views(150, 3, 3, 4, 6, 1.0, 0.5, 8, 4, 2.0)
    assert all(torch.equal(a, b) for a, b in zip(views, again))  # seeded
    assert not torch.equal(views[0], other[0])


def test_the_nuisance_is_independent_across_views_and_of_the_classes():
    _, labels, (parts, nuisance) = _synthetic_views(3000, 4, 3, 4, 6, 1.0, 0.5, 0, 4, 20.0)
    for a in range(3):
        # NMI of independent labels over 3,000 samples: about 0.001; of the same labels: 1
        assert clustering_scores(nuisance[a], labels)["nmi"] < 0.01
        for b in range(a + 1, 3):
            assert clustering_scores(nuisance[a], nuisance[b])["nmi"] < 0.01
        # the part is (nearly) a function of its view's nuisance label (clusters 20 apart), and
        # carries nothing of another view's
        assert _explained(parts[a], nuisance[a]) > 0.9
        assert _explained(parts[a], nuisance[(a + 1) % 3]) < 0.01


def test_the_nuisance_is_strong_in_its_own_view_only_and_costs_joined_kmeans():
    args = dict(num_samples=600, num_clusters=4, num_views=3, latent_dim=8, view_dim=32)
    args.update(separation=1.0, noise=0.5, seed=0)
    views, labels, (_, nuisance) = _synthetic_views(**args, private_clusters=4)
    clean, _ = shared_latent_views(**args)
    found = _kmeans(standardize_columns(views[0]), 4)
    own = clustering_scores(found, nuisance[0])["nmi"]
    assert own > 0.3 and clustering_scores(found, nuisance[1])["nmi"] < 0.02
    joined = [torch.cat([standardize_columns(v) for v in vs], 1) for vs in (views, clean)]
    noisy_acc, clean_acc = (clustering_scores(_kmeans(x, 4), labels)["acc"] for x in joined)
    assert noisy_acc < clean_acc - 0.1


def test_the_data_module_passes_the_nuisance_on():
    data = ClusteringViewsDataModule(
        "synthetic",
        synthetic=SyntheticViewsOptions(num_samples=60, latent_clusters=3, private_clusters=2),
        batch_size=8,
    )
    views, labels = shared_latent_views(60, 3, private_clusters=2, noise=0.5)
    assert torch.equal(data.labels, labels)
    for got, raw in zip(data.views, views):
        torch.testing.assert_close(got, standardize_columns(raw))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"private_clusters": 1}, "at least 2"),
        ({"private_clusters": -1}, "private_clusters"),
        ({"private_clusters": 3, "private_separation": 0.0}, "private_separation"),
    ],
)
def test_bad_nuisance_arguments_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        shared_latent_views(30, 3, **kwargs)
