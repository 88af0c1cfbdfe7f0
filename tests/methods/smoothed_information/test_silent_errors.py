"""The plug-in mutual information is the plug-in entropy less ``(d/2) log(2 pi e t)`` computed in
float64: the Gaussian entropy used to be built in torch's default float32, an error of up to
``1e-6`` nats that grows with ``d |log(2 pi e t)|``."""

from __future__ import annotations

import math

import pytest
import torch

from lightning_info.methods.smoothed_information import (
    SmoothedEstimatorOptions,
    smoothed_entropy,
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
