"""MinMaxScaling: the observed minimum and maximum per channel, constant channels kept, numpy
and torch round trips."""

from __future__ import annotations

import numpy as np
import torch

from lightning_info.data.scaling import MinMaxScaling


def test_scaling_uses_only_observed_values_and_round_trips():
    table = np.array([[1.0, 5.0, 2.0], [3.0, np.nan, 2.0], [100.0, 7.0, 2.0]])
    observed = np.array([[True, True, True], [True, False, True], [False, True, True]])
    scaling = MinMaxScaling(table, observed)
    np.testing.assert_array_equal(scaling.low, [1.0, 5.0, 2.0])
    np.testing.assert_array_equal(scaling.high, [3.0, 7.0, 2.0])
    np.testing.assert_array_equal(scaling.span, [2.0, 2.0, 1.0])  # constant channel: span 1
    scaled = scaling.forward(table)
    assert isinstance(scaled, np.ndarray)
    np.testing.assert_allclose(scaled[0], [0.0, 0.0, 0.0])
    np.testing.assert_allclose(scaling.inverse(scaled), table)


def test_windows_scale_per_last_axis_as_tensors():
    windows = torch.randn(4, 6, 3, dtype=torch.float64)
    scaling = MinMaxScaling(windows)
    flat = windows.reshape(-1, 3)
    assert torch.equal(scaling.low, flat.min(0).values)
    assert torch.equal(scaling.high, flat.max(0).values)
    scaled = scaling.forward(windows)
    assert scaled.dtype == torch.float64 and scaled.min() == 0 and scaled.max() == 1
    assert torch.allclose(scaling.inverse(scaled), windows)
