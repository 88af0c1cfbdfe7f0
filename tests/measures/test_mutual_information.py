"""Mutual-information bounds and alignment terms against closed forms and brute-force loops."""

from __future__ import annotations

import math

import pytest
import torch
from torch.distributions import Normal, kl_divergence

from lightning_info.measures.mutual_information import (
    donsker_varadhan,
    gaussian_kl_standard_normal,
    infonce,
    jensen_shannon_mi,
    mean_embedding_distance,
    mmd2,
    nt_xent,
)


def correlated_gaussians(n: int, d: int, rho: float, seed: int) -> tuple[torch.Tensor, ...]:
    """``n`` pairs with ``(x_k, y_k)`` standard bivariate normal of correlation ``rho``."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=generator, dtype=torch.float64)
    noise = torch.randn(n, d, generator=generator, dtype=torch.float64)
    return x, rho * x + math.sqrt(1 - rho**2) * noise


def optimal_critic(x: torch.Tensor, y: torch.Tensor, rho: float) -> torch.Tensor:
    """``log p(x, y) / (p(x) p(y))``, summed over the independent coordinate pairs."""
    r2 = rho**2
    quad = (r2 * x**2 - 2 * rho * x * y + r2 * y**2) / (2 * (1 - r2))
    return (-0.5 * math.log(1 - r2) - quad).sum(-1)


def true_mi(d: int, rho: float) -> float:
    return -d / 2 * math.log(1 - rho**2)


def test_gaussian_kl_matches_torch_distributions():
    generator = torch.Generator().manual_seed(0)
    mu = torch.randn(7, 5, dtype=torch.float64, generator=generator)
    sigma = torch.rand(7, 5, dtype=torch.float64, generator=generator) * 2 + 0.05
    expected = kl_divergence(Normal(mu, sigma), Normal(0.0, 1.0)).sum(-1)
    by_log_var = gaussian_kl_standard_normal(mu, 2 * sigma.log())
    by_sigma = gaussian_kl_standard_normal(mu, sigma=sigma)
    assert by_log_var.shape == (7,)
    torch.testing.assert_close(by_log_var, expected, rtol=0, atol=1e-10)
    torch.testing.assert_close(by_sigma, expected, rtol=0, atol=1e-10)
    assert gaussian_kl_standard_normal(torch.zeros(3, 2), torch.zeros(3, 2)).abs().max() == 0


def test_gaussian_kl_rejects_bad_input():
    mu = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="exactly one"):
        gaussian_kl_standard_normal(mu)
    with pytest.raises(ValueError, match="exactly one"):
        gaussian_kl_standard_normal(mu, mu, sigma=mu)
    with pytest.raises(ValueError, match="same shape"):
        gaussian_kl_standard_normal(mu, torch.zeros(2, 4))
    with pytest.raises(ValueError, match="> 0"):
        gaussian_kl_standard_normal(mu, sigma=torch.zeros(2, 3))
    with pytest.raises(ValueError, match="NaN"):
        gaussian_kl_standard_normal(torch.tensor([[float("nan")]]), torch.zeros(1, 1))


def test_jensen_shannon_of_zero_critic_is_minus_two_log_two():
    value = jensen_shannon_mi(torch.zeros(10, dtype=torch.float64), torch.zeros(20))
    assert value.item() == pytest.approx(-2 * math.log(2), abs=1e-7)


def test_jensen_shannon_grows_with_a_separating_critic():
    pos, neg = torch.full((8,), 5.0), torch.full((8,), -5.0)
    assert jensen_shannon_mi(pos, neg) > jensen_shannon_mi(torch.zeros(8), torch.zeros(8))
    assert jensen_shannon_mi(pos, neg) < 0


@pytest.mark.parametrize("n", [1, 2, 17])
def test_infonce_never_exceeds_log_n(n):
    scores = torch.randn(n, n, generator=torch.Generator().manual_seed(n)) * 10
    scores.diagonal().add_(100.0)
    assert infonce(scores) <= math.log(n) + 1e-6
    assert infonce(scores) == pytest.approx(math.log(n), abs=1e-4)


def test_infonce_of_constant_critic_is_zero():
    assert infonce(torch.ones(5, 5)).item() == pytest.approx(0.0, abs=1e-6)


def test_infonce_with_optimal_critic_approaches_mi_below_log_n():
    d, rho, n = 2, 0.5, 512
    x, y = correlated_gaussians(n, d, rho, seed=0)
    scores = optimal_critic(x[:, None, :], y[None, :, :], rho)
    value = infonce(scores).item()
    assert value <= math.log(n)
    assert value == pytest.approx(true_mi(d, rho), abs=0.05)


def test_infonce_with_optimal_critic_saturates_at_log_n():
    d, rho, n = 4, 0.99, 16
    assert true_mi(d, rho) > 2 * math.log(n)
    values = []
    for seed in range(20):
        x, y = correlated_gaussians(n, d, rho, seed=seed)
        values.append(infonce(optimal_critic(x[:, None, :], y[None, :, :], rho)).item())
    assert max(values) <= math.log(n)
    assert sum(values) / len(values) == pytest.approx(math.log(n), abs=0.05)


def test_donsker_varadhan_with_optimal_critic_equals_mi():
    d, rho, n = 2, 0.5, 200_000
    x, y = correlated_gaussians(n, d, rho, seed=1)
    x_indep, _ = correlated_gaussians(n, d, rho, seed=2)
    value = donsker_varadhan(optimal_critic(x, y, rho), optimal_critic(x_indep, y, rho))
    assert value.item() == pytest.approx(true_mi(d, rho), abs=0.02)


def test_donsker_varadhan_is_stable_for_large_critic_values():
    pos, neg = torch.full((4,), 1000.0), torch.tensor([1000.0, 999.0, -1000.0])
    expected = 1000.0 - (1000.0 + math.log((1 + math.exp(-1)) / 3))
    assert donsker_varadhan(pos, neg).item() == pytest.approx(expected, abs=1e-4)


def brute_force_nt_xent(z1: torch.Tensor, z2: torch.Tensor, temperature: float) -> float:
    views = [v / v.norm() for v in torch.cat([z1, z2])]
    n = z1.shape[0]
    total = 0.0
    for i, anchor in enumerate(views):
        positive = (i + n) % (2 * n)
        sims = [math.exp(float(anchor @ other) / temperature) for other in views]
        denominator = sum(s for k, s in enumerate(sims) if k != i)
        total -= math.log(sims[positive] / denominator)
    return total / (2 * n)


@pytest.mark.parametrize("temperature", [0.1, 0.5, 2.0])
def test_nt_xent_matches_brute_force(temperature):
    generator = torch.Generator().manual_seed(3)
    z1 = torch.randn(5, 4, dtype=torch.float64, generator=generator)
    z2 = torch.randn(5, 4, dtype=torch.float64, generator=generator)
    value = nt_xent(z1, z2, temperature)
    assert value.item() == pytest.approx(brute_force_nt_xent(z1, z2, temperature), abs=1e-10)


def test_nt_xent_rejects_bad_input():
    with pytest.raises(ValueError, match="same shape"):
        nt_xent(torch.randn(3, 2), torch.randn(4, 2))
    with pytest.raises(ValueError, match="temperature"):
        nt_xent(torch.randn(3, 2), torch.randn(3, 2), temperature=0.0)
    with pytest.raises(ValueError, match="2-D"):
        nt_xent(torch.randn(3), torch.randn(3))


def test_mean_embedding_distance_by_hand():
    a = torch.tensor([[0.0, 1.0], [2.0, 3.0]])
    b = torch.tensor([[1.0, -1.0], [1.0, 1.0], [1.0, 0.0]])
    # means (1, 2) and (1, 0): difference (0, 2)
    assert mean_embedding_distance(a, b).item() == pytest.approx(4.0)
    assert mean_embedding_distance(a, b, p=1).item() == pytest.approx(2.0)
    assert mean_embedding_distance(a, b, p=3).item() == pytest.approx(8.0)
    assert mean_embedding_distance(a, b, p=math.inf).item() == pytest.approx(2.0)
    with pytest.raises(ValueError, match="`p`"):
        mean_embedding_distance(a, b, p=0.5)
    with pytest.raises(ValueError, match="feature size"):
        mean_embedding_distance(a, torch.zeros(2, 3))


def brute_force_mmd2(x: torch.Tensor, y: torch.Tensor, bandwidths: list[float]) -> float:
    def k(u, v):
        return sum(math.exp(-float((u - v).pow(2).sum()) / (2 * s * s)) for s in bandwidths)

    m, n = len(x), len(y)
    xx = sum(k(x[i], x[j]) for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
    yy = sum(k(y[i], y[j]) for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
    xy = sum(k(x[i], y[j]) for i in range(m) for j in range(n)) / (m * n)
    return xx + yy - 2 * xy


@pytest.mark.parametrize("bandwidths", [1.0, [0.5, 1.0, 4.0]])
def test_mmd2_matches_brute_force(bandwidths):
    generator = torch.Generator().manual_seed(4)
    x = torch.randn(7, 3, dtype=torch.float64, generator=generator)
    y = torch.randn(9, 3, dtype=torch.float64, generator=generator) + 0.5
    expected = brute_force_mmd2(x, y, [bandwidths] if isinstance(bandwidths, float) else bandwidths)
    assert mmd2(x, y, bandwidths).item() == pytest.approx(expected, abs=1e-12)


def test_mmd2_separates_shifted_samples():
    generator = torch.Generator().manual_seed(5)
    x, y = (torch.randn(400, 2, generator=generator, dtype=torch.float64) for _ in range(2))
    same = mmd2(x, y, [0.5, 1.0, 2.0]).item()
    shifted = mmd2(x, y + 1.0, [0.5, 1.0, 2.0]).item()
    assert abs(same) < 0.01
    assert shifted > 0.2


def test_mmd2_rejects_bad_input():
    with pytest.raises(ValueError, match="at least 2"):
        mmd2(torch.zeros(1, 2), torch.zeros(3, 2))
    with pytest.raises(ValueError, match="bandwidths"):
        mmd2(torch.zeros(2, 2), torch.zeros(3, 2), bandwidths=-1.0)
    with pytest.raises(ValueError, match="empty"):
        mmd2(torch.zeros(2, 2), torch.zeros(3, 2), bandwidths=[])
    with pytest.raises(ValueError, match="NaN"):
        mmd2(torch.full((2, 2), float("inf")), torch.zeros(3, 2))


def test_bounds_are_differentiable():
    scores = torch.randn(4, 4, requires_grad=True)
    x = torch.randn(5, 3, requires_grad=True)
    total = infonce(scores) + mmd2(x, torch.randn(6, 3)) + nt_xent(x, torch.randn(5, 3))
    total.backward()
    assert torch.isfinite(scores.grad).all() and torch.isfinite(x.grad).all()


def test_jensen_shannon_weights_equal_repeated_negatives():
    generator = torch.Generator().manual_seed(3)
    positive, negative = torch.randn(7, generator=generator), torch.randn(4, generator=generator)
    weights = torch.tensor([1.0, 3.0, 0.0, 2.0])
    repeated = torch.repeat_interleave(negative, weights.long())
    torch.testing.assert_close(
        jensen_shannon_mi(positive, negative, weights), jensen_shannon_mi(positive, repeated)
    )
    with pytest.raises(ValueError, match="neg_weights"):
        jensen_shannon_mi(positive, negative, -weights)
