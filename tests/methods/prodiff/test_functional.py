"""ProDiff's pure core: the interpolation baselines (endpoints bit-exact, exact on straight
constant-speed routes), the k-means pseudo-labels (a Lloyd fixed point, planted clusters,
near scikit-learn's inertia) and the diffusion loss, guidance and x0-to-noise map against hand
computations."""

from __future__ import annotations

import math

import pytest
import torch

from lightning_info.measures.clustering import adjusted_rand_index
from lightning_info.methods.prodiff.functional import (
    classifier_free_guidance,
    epsilon_from_x0,
    great_circle_interpolation,
    interior_fractions,
    interior_l1_loss,
    kmeans,
    linear_interpolation,
)
from lightning_info.methods.prodiff.geometry import great_circle_interpolate

BASELINES = (linear_interpolation, great_circle_interpolation)


def _random_windows(batch: int = 6, k: int = 9, seed: int = 0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    hours = 7.0 + torch.rand(batch, k, generator=g).cumsum(1) / 3.0
    lat = 40.0 + 0.05 * torch.randn(batch, k, generator=g)
    lng = 116.3 + 0.05 * torch.randn(batch, k, generator=g)
    return torch.stack((hours, lat, lng), -1).to(dtype)


@pytest.mark.parametrize("baseline", BASELINES)
@pytest.mark.parametrize("interior_times", ["interpolate", "given"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_endpoints_bit_exact_and_input_untouched(baseline, interior_times, dtype):
    window = _random_windows(dtype=dtype)
    window[0, -1, 0] = window[0, 0, 0]  # equal endpoint times: the index fallback
    before = window.clone()
    out = baseline(window, interior_times=interior_times)
    assert out.shape == window.shape and out.dtype == dtype
    assert torch.equal(out[:, 0], window[:, 0]) and torch.equal(out[:, -1], window[:, -1])
    assert torch.equal(window, before)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("baseline", BASELINES)
def test_only_the_endpoints_are_read(baseline):
    window = _random_windows()
    hidden = window.clone()
    hidden[:, 1:-1] = float("nan")
    torch.testing.assert_close(baseline(hidden), baseline(window), rtol=0, atol=0)


def test_linear_is_exact_on_a_straight_constant_speed_trajectory():
    k = 12
    f = torch.linspace(0, 1, k, dtype=torch.float64)
    start = torch.tensor([8.0, 40.01, 116.28], dtype=torch.float64)
    end = torch.tensor([8.25, 39.97, 116.35], dtype=torch.float64)
    straight = (start + f.unsqueeze(-1) * (end - start)).unsqueeze(0)  # evenly timed
    for mode in ("interpolate", "given"):
        torch.testing.assert_close(
            linear_interpolation(straight, interior_times=mode), straight, rtol=0, atol=1e-12
        )
    # irregular fixes of a constant speed: exact once the times are given
    g = torch.Generator().manual_seed(1)
    steps = torch.rand(k - 1, generator=g, dtype=torch.float64) + 0.2
    f = torch.cat((torch.zeros(1, dtype=torch.float64), steps.cumsum(0) / steps.sum()))
    irregular = (start + f.unsqueeze(-1) * (end - start)).unsqueeze(0)
    out = linear_interpolation(irregular, interior_times="given")
    torch.testing.assert_close(out, irregular, rtol=0, atol=1e-12)
    assert not torch.allclose(linear_interpolation(irregular), irregular, atol=1e-6)


def test_great_circle_is_exact_on_a_great_circle_constant_speed_trajectory():
    k = 10
    f = torch.linspace(0, 1, k, dtype=torch.float64)
    start = torch.tensor([[40.0, 116.3], [-33.9, 151.2]], dtype=torch.float64)
    end = torch.tensor([[40.08, 116.41], [-20.0, 170.0]], dtype=torch.float64)  # 13 km, 2,500 km
    positions = great_circle_interpolate(start, end, f)
    positions[:, 0], positions[:, -1] = start, end
    times = 9.0 + 0.5 * f.expand(2, k)
    window = torch.cat((times.unsqueeze(-1), positions), -1)
    torch.testing.assert_close(great_circle_interpolation(window), window, rtol=0, atol=1e-9)
    # the linear baseline is not: on the long segment it is kilometres off
    assert float((linear_interpolation(window) - window)[1].abs().max()) > 0.1


def test_fractions_follow_times_and_fall_back_to_the_index():
    window = torch.zeros(2, 5, 3, dtype=torch.float64)
    window[0, :, 0] = torch.tensor([1.0, 1.1, 1.5, 1.6, 2.0])
    window[1, :, 0] = 3.0  # equal endpoint times
    given = interior_fractions(window, "given")
    torch.testing.assert_close(given[0], torch.tensor([0.1, 0.5, 0.6], dtype=torch.float64))
    torch.testing.assert_close(given[1], torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64))
    torch.testing.assert_close(interior_fractions(window), given[1].expand(2, 3))
    out = linear_interpolation(window, interior_times="given")
    assert torch.equal(out[:, :, 0], window[:, :, 0])  # given times are kept
    out = linear_interpolation(window)
    torch.testing.assert_close(
        out[0, :, 0], torch.tensor([1.0, 1.25, 1.5, 1.75, 2.0], dtype=torch.float64)
    )


def test_errors():
    window = _random_windows()
    with pytest.raises(ValueError, match="k must be >= 3"):
        linear_interpolation(window[:, :2])
    with pytest.raises(ValueError, match=r"\(B, k, 3\)"):
        linear_interpolation(window[..., :2])
    with pytest.raises(ValueError, match="interior_times"):
        linear_interpolation(window, interior_times="known")
    with pytest.raises(TypeError, match="floating"):
        great_circle_interpolation(window.long())
    bad = window.clone()
    bad[2, -1, 1] = math.nan
    with pytest.raises(ValueError, match="endpoints"):
        great_circle_interpolation(bad)
    bad = window.clone()
    bad[2, 3, 0] = math.nan
    linear_interpolation(bad)  # the interior time is not read ...
    with pytest.raises(ValueError, match="interior times"):
        linear_interpolation(bad, interior_times="given")  # ... unless it is given


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


# ----------------------------------------------------------------------------- diffusion loss


def test_interior_l1_loss_scores_the_interior_points_only():
    # one window, two channels, four points: interior points 1 and 2
    predicted = torch.tensor([[[9.0, 1.0, 2.0, -9.0], [5.0, 0.5, -1.0, 7.0]]])
    target = torch.tensor([[[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]])
    # |1| + |2| + |0.5| + |-1| over 4 values; the endpoints' 9, 9, 5, 7 are not scored
    assert interior_l1_loss(predicted, target).item() == pytest.approx(4.5 / 4)
    with pytest.raises(ValueError, match=r"\(B, C, k >= 3\) of one shape"):
        interior_l1_loss(predicted, target[..., :3])
    with pytest.raises(ValueError, match=r"\(B, C, k >= 3\)"):
        interior_l1_loss(predicted[..., :2], target[..., :2])


def test_classifier_free_guidance_by_hand():
    conditional, unconditional = torch.tensor([1.0, -2.0]), torch.tensor([0.5, 1.0])
    # 1 + 2 (1 - 0.5) = 2; -2 + 2 (-2 - 1) = -8
    assert classifier_free_guidance(conditional, unconditional, 2.0).tolist() == [2.0, -8.0]
    assert torch.equal(classifier_free_guidance(conditional, unconditional, 0.0), conditional)


def test_epsilon_from_x0_inverts_the_forward_process():
    abar = torch.tensor([0.64])  # sqrt 0.8, sqrt(1 - abar) 0.6
    x0, eps = torch.tensor([2.0]), torch.tensor([-1.0])
    noisy = 0.8 * x0 + 0.6 * eps  # 1.0
    assert epsilon_from_x0(noisy, x0, abar).item() == pytest.approx(-1.0)
    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(4, 3, 6, generator=g, dtype=torch.float64)
    eps = torch.randn(4, 3, 6, generator=g, dtype=torch.float64)
    abar = torch.rand(4, 1, 1, generator=g, dtype=torch.float64)
    noisy = abar.sqrt() * x0 + (1 - abar).sqrt() * eps
    torch.testing.assert_close(epsilon_from_x0(noisy, x0, abar), eps, rtol=1e-10, atol=1e-10)
