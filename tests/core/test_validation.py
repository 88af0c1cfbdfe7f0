"""Finiteness checks: a finite sum proves it, anything else falls back to the element mask."""

import pytest
import torch

from lightning_info.core import validation
from lightning_info.core.validation import require_finite_tensor


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_finite_check_matches_isfinite_including_sums_that_overflow(dtype):
    big = torch.finfo(dtype).max
    cases = [
        torch.ones(5, 3, dtype=dtype),
        torch.full((4, 4), big, dtype=dtype),  # finite, but its sum overflows to inf
        torch.tensor([big, -big, big], dtype=dtype),
        torch.tensor([1.0, float("nan")], dtype=dtype),
        torch.tensor([[1.0, float("inf")], [float("-inf"), 2.0]], dtype=dtype),
        torch.tensor(float("nan"), dtype=dtype),
        torch.empty(0, 3, dtype=dtype),
    ]
    for tensor in cases:
        assert validation.all_finite(tensor) == bool(torch.isfinite(tensor).all())


def test_sliced_fallback_and_integer_tensors(monkeypatch):
    monkeypatch.setattr(validation, "_FINITE_CHECK_ELEMENTS", 8)  # force the sliced mask
    overflowing = torch.full((10, 3), torch.finfo(torch.float32).max)
    assert validation.all_finite(overflowing)
    overflowing[7, 1] = float("nan")
    assert not validation.all_finite(overflowing)
    assert validation.all_finite(torch.arange(10))  # integers are always finite


def test_require_finite_tensor_counts_bad_values_and_keeps_the_input():
    x = torch.tensor([1.0, float("nan"), float("inf")], requires_grad=True)
    with pytest.raises(ValueError, match="2 NaN/inf"):
        require_finite_tensor(x, "x")
    y = torch.randn(3, requires_grad=True)
    assert require_finite_tensor(y, "y") is y and y.grad is None
