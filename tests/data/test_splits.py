"""TensorRows (a batch gathered in one indexing equals the default per-row collate) and
SplitDataModule (seeded per-epoch order, empty splits give no batches)."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, default_collate

from lightning_info.data.splits import SplitDataModule, TensorRows, gathered_batch


def rows(n=10):
    return TensorRows(x=torch.arange(n * 3.0).reshape(n, 3), flag=torch.arange(n) % 2 == 0)


def test_a_gathered_batch_equals_the_default_collate_of_its_rows():
    data = rows()
    indices = [7, 2, 2, 9]
    batch = data.__getitems__(indices)
    expected = default_collate([data[i] for i in indices])
    assert batch.keys() == expected.keys()
    assert all(torch.equal(batch[k], expected[k]) for k in batch)
    loader = DataLoader(data, batch_size=4, collate_fn=gathered_batch)
    first = next(iter(loader))
    assert torch.equal(first["x"], data.tensors["x"][:4])


def test_rows_need_tensors_of_one_length():
    with pytest.raises(ValueError, match="one length"):
        TensorRows(a=torch.zeros(3), b=torch.zeros(4))
    with pytest.raises(ValueError, match="one length"):
        TensorRows()


class Halves(SplitDataModule):
    batch_size = 3
    shuffle_seed = 5

    def dataset(self, split: str) -> Dataset:
        return {"train": rows(8), "val": rows(0), "test": rows(4)}[split]


def test_split_loaders_shuffle_by_epoch_and_skip_empty_splits():
    module = Halves()
    loader = module.train_dataloader()
    order = [torch.cat([b["x"][:, 0] for b in loader])]
    loader.sampler.set_epoch(1)
    order.append(torch.cat([b["x"][:, 0] for b in loader]))
    again = module.train_dataloader()
    assert torch.equal(torch.cat([b["x"][:, 0] for b in again]), order[0])  # epoch 0 again
    assert not torch.equal(order[0], order[1])
    assert sorted(order[0].tolist()) == [3.0 * i for i in range(8)]
    assert module.val_dataloader() == []
    assert [len(b["x"]) for b in module.test_dataloader()] == [3, 1]
    with pytest.raises(NotImplementedError, match="dataset"):
        SplitDataModule().train_dataloader()
