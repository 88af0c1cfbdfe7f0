"""Labels that used to give silently wrong clustering scores are refused (issue 35): labels of
-1 gave ``num_classes`` 0 (or left those samples out of every class) and float labels were
truncated by ``.long()``. Valid labels still work."""

from __future__ import annotations

import pytest
import torch

from lightning_info.data.multiview import MultiViewDataset, TensorViewsDataModule, check_views

VIEWS = [torch.randn(6, 3, generator=torch.Generator().manual_seed(0)), torch.randn(6, 2)]
FIX = r"map the classes to 0, 1, \.\.\."

BAD_INPUT = [
    pytest.param(
        lambda: TensorViewsDataModule(VIEWS, torch.full((6,), -1), batch_size=2),
        ValueError,
        r"`labels` must be class indices >= 0, got -1; " + FIX,
        id="all-minus-one",
    ),
    pytest.param(
        lambda: TensorViewsDataModule(VIEWS, torch.tensor([0, 1, 2, -1, 0, 1]), batch_size=2),
        ValueError,
        "must be class indices >= 0, got -1",
        id="one-minus-one",
    ),
    pytest.param(
        lambda: TensorViewsDataModule(VIEWS, torch.tensor([0, 0.5, 1, 1, 2, 2.9]), batch_size=2),
        TypeError,
        r"`labels` must be integer class indices, got dtype torch.float32",
        id="float-labels",
    ),
    pytest.param(
        lambda: TensorViewsDataModule(VIEWS, torch.arange(6) % 2 == 0, batch_size=2),
        TypeError,
        "must be integer class indices, got dtype torch.bool",
        id="bool-labels",
    ),
    pytest.param(
        lambda: MultiViewDataset(VIEWS, torch.tensor([0.0] * 6)),
        TypeError,
        "must be integer class indices",
        id="dataset-float-labels",
    ),
    pytest.param(
        lambda: check_views(VIEWS, torch.arange(5)),
        ValueError,
        r"`labels` must be a tensor of shape \(6,\)",
        id="wrong-length",
    ),
]


def test_valid_labels_count_their_classes():
    data = TensorViewsDataModule(
        VIEWS, torch.tensor([0, 2, 2, 1, 0, 2], dtype=torch.int32), batch_size=2
    )
    assert data.num_classes == 3 and data.labels.dtype == torch.long
    assert data.labels.tolist() == [0, 2, 2, 1, 0, 2]
    one_class = TensorViewsDataModule(VIEWS, torch.zeros(6, dtype=torch.long), batch_size=6)
    assert one_class.num_classes == 1
