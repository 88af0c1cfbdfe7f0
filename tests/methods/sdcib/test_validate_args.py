"""SDCIB reads nothing back from the device in a training step unless ``validate_args`` asks
for the finiteness checks of its representations, assignments and critic scores."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from lightning_info.methods.sdcib import SDCIB
from tests.test_hot_path import count_host_reads
from tests.tiny import QUIET

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _views(nan: bool = False) -> DataLoader:
    generator = torch.Generator().manual_seed(0)
    first, second = torch.randn(16, 5, generator=generator), torch.randn(16, 3, generator=generator)
    if nan:
        first[3, 1] = float("nan")
    dataset = TensorDataset(first, second, torch.arange(16) % 3)
    return DataLoader(dataset, batch_size=8, collate_fn=lambda rows: _batch(rows))


def _batch(rows):
    first, second, labels = (torch.stack(column) for column in zip(*rows))
    return [first, second], labels


def _fit(model, loader, steps=2):
    pl.seed_everything(0)
    with count_host_reads() as reads:
        pl.Trainer(max_steps=steps, **QUIET).fit(model, loader)
    return reads


def test_a_step_reads_nothing_without_the_switch():
    model = SDCIB([5, 3], 3, hidden=(6, 4))
    assert model.validate_args is False
    reads = _fit(model, _views())
    assert reads.batches == 2 and reads.total == 0, reads.describe()
    checked = _fit(SDCIB([5, 3], 3, hidden=(6, 4), validate_args=True), _views())
    assert checked.total > 0  # the checks the switch turns on are reads of values


def test_with_the_switch_a_nan_batch_is_refused():
    with pytest.raises(ValueError, match=r"contains \d+ NaN/inf value"):
        _fit(SDCIB([5, 3], 3, hidden=(6, 4), validate_args=True), _views(nan=True), steps=1)
    unchecked = SDCIB([5, 3], 3, hidden=(6, 4))
    reads = _fit(unchecked, _views(nan=True), steps=1)
    assert reads.total == 0
    weights = torch.cat([p.detach().flatten() for p in unchecked.encoders[0].parameters()])
    assert torch.isnan(weights).any()  # the NaN reached the weights, as in any torch model
    with pytest.raises(TypeError, match="validate_args"):
        SDCIB([5, 3], 3, validate_args="no")
