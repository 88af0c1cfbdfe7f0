"""Shared set-up of the bottleneck tests: one torch thread, sklearn's digits in [0, 1]."""

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_torch_thread):
    """Every test here runs on one torch thread (``tests/conftest.py``)."""


def shuffled_digits(max_class: int = 9) -> tuple[torch.Tensor, torch.Tensor]:
    """sklearn's bundled 8x8 digits of classes ``0..max_class``, flat, pixels scaled to [0, 1],
    in a fixed shuffled order (seed 0)."""
    from sklearn.datasets import load_digits

    features, labels = load_digits(return_X_y=True)
    keep = labels <= max_class
    x = torch.tensor(features[keep] / 16.0, dtype=torch.float32)
    y = torch.tensor(labels[keep])
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    return x[order], y[order]
