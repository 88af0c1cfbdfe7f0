"""The plug-in mutual information is the plug-in entropy less ``(d/2) log(2 pi e t)`` computed in
float64: the Gaussian entropy used to be built in torch's default float32, an error of up to
``1e-6`` nats that grows with ``d |log(2 pi e t)|``."""

from __future__ import annotations

import math

import pytest
import torch

from lightning_info.methods.smoothed_information import (
    SmoothedEntropy,
    SmoothedEstimatorOptions,
    SmoothedFisherInformation,
    SmoothedInformation,
    SmoothedMutualInformation,
    fisher_from_mmse,
    mmse_from_fisher,
    smoothed_entropy,
    smoothed_information,
    smoothed_mutual_information,
)


@pytest.mark.parametrize("d", [1, 3, 8])
@pytest.mark.parametrize("t", [0.37, 1e-3, 123.4])
def test_plug_in_mutual_information_is_the_entropy_less_a_float64_constant(d, t):
    options = SmoothedEstimatorOptions(num_mc=64, estimator="plug_in", method="monte_carlo")
    samples = torch.randn(30, d, generator=torch.Generator().manual_seed(d), dtype=torch.float64)
    entropy = smoothed_entropy(samples, [t], options)
    mutual = smoothed_mutual_information(samples, [t], options)
    gaussian = 0.5 * d * math.log(2 * math.pi * math.e * t)  # Python float64
    assert mutual.dtype == torch.float64
    assert abs(float(mutual[0]) - (float(entropy[0]) - gaussian)) <= 1e-12 * max(1.0, gaussian)


def test_a_point_mass_gives_the_gaussian_closed_forms():
    """One sample is a point mass: ``f_t = N(x0, t I)``, so ``J = d / t``, ``h = (d/2) log(2 pi e
    t)`` and ``I = 0`` at every ``t``, in each field of :class:`SmoothedInformation` and in the
    metrics (integer samples are read as the numbers they hold)."""
    options = SmoothedEstimatorOptions(num_mc=32)
    times = [0.5, 2.0]
    d = 2
    fisher = torch.tensor([d / t for t in times], dtype=torch.float64)
    entropy = torch.tensor([0.5 * d * math.log(2 * math.pi * math.e * t) for t in times])
    info = smoothed_information(torch.tensor([[3.0, 1.0]]), times, options)
    assert isinstance(info, SmoothedInformation)
    torch.testing.assert_close(info.fisher, fisher)
    torch.testing.assert_close(info.entropy, entropy.double())
    torch.testing.assert_close(info.mutual_information, torch.zeros(2, dtype=torch.float64))
    expected = {
        SmoothedFisherInformation: fisher,
        SmoothedEntropy: entropy.double(),
        SmoothedMutualInformation: torch.zeros(2, dtype=torch.float64),
    }
    for metric_class, value in expected.items():
        metric = metric_class(times, options)
        samples = torch.tensor([[3, 1]])
        metric.update(samples)
        torch.testing.assert_close(metric.compute(), value)
        assert torch.equal(samples, torch.tensor([[3, 1]]))


def test_browns_identity_round_trips_and_matches_the_gaussian():
    """``X ~ N(0, s I)``: ``J(f_t) = d / (s + t)`` and ``mmse = t d s / (s + t)``."""
    s, t, d = 0.7, 0.3, 3
    fisher = d / (s + t)
    mmse = t * d * s / (s + t)
    assert mmse_from_fisher(fisher, t, d) == pytest.approx(mmse, rel=1e-12)
    assert fisher_from_mmse(mmse, t, d) == pytest.approx(fisher, rel=1e-12)
    times = torch.tensor([0.3, 0.6], dtype=torch.float64)
    out = mmse_from_fisher(d / (s + times), times, d)
    torch.testing.assert_close(out, times * d * s / (s + times))
