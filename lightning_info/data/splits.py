"""In-memory rows as dicts of tensors, and a DataModule of train / val / test splits of them.

``TensorRows`` gathers a whole batch with one indexing per tensor (``__getitems__``, which the
DataLoader calls with a batch's indices), so small-model training is not bound by per-row
fetching and collation; ``gathered_batch`` is the matching ``collate_fn``.
``SplitDataModule`` turns a subclass's ``dataset(split)`` into loaders: the training order is
a function of (seed, epoch) (:class:`~lightning_info.core.sampling.EpochShuffleSampler`), so a
run resumed from a checkpoint sees the batches of the uninterrupted run; an empty validation or
test split gives no batches.
"""

from __future__ import annotations

import lightning.pytorch as pl
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from lightning_info.core.resume import ResumableDataLoader
from lightning_info.core.sampling import EpochShuffleSampler

__all__ = ["SplitDataModule", "TensorRows", "gathered_batch"]


class TensorRows(Dataset):
    """Rows ``i`` of named tensors of one length, as ``{name: tensor[i]}``."""

    def __init__(self, **tensors: Tensor) -> None:
        lengths = {name: len(tensor) for name, tensor in tensors.items()}
        if not tensors or len(set(lengths.values())) != 1:
            raise ValueError(f"need tensors of one length, got lengths {lengths}.")
        self.tensors = tensors

    def __len__(self) -> int:
        return len(next(iter(self.tensors.values())))

    def __getitem__(self, index) -> dict[str, Tensor]:
        return {name: tensor[index] for name, tensor in self.tensors.items()}

    def __getitems__(self, indices: list[int]) -> dict[str, Tensor]:
        return self[torch.as_tensor(indices, dtype=torch.long)]


def gathered_batch(batch: dict[str, Tensor]) -> dict[str, Tensor]:
    """The ``collate_fn`` of a :class:`TensorRows` loader: the batch is already assembled."""
    return batch


class SplitDataModule(pl.LightningDataModule):
    """Loaders of a subclass's ``dataset(split)`` for ``train``, ``val``, ``test`` (predict:
    the test split). Subclasses set ``batch_size``, ``num_workers`` and ``shuffle_seed``."""

    batch_size: int = 1
    num_workers: int = 0
    shuffle_seed: int = 0

    def dataset(self, split: str) -> Dataset:
        raise NotImplementedError(f"{type(self).__name__} must implement `dataset(split)`.")

    def _loader(self, split: str, shuffle: bool):
        data = self.dataset(split)
        if not shuffle and len(data) == 0:
            return []
        sampler = EpochShuffleSampler(len(data), self.shuffle_seed) if shuffle else None
        collate = gathered_batch if isinstance(data, TensorRows) else None
        return ResumableDataLoader(
            data,
            trainer=self.trainer,
            batch_size=self.batch_size,
            sampler=sampler,
            num_workers=self.num_workers,
            collate_fn=collate,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self):
        return self._loader("val", shuffle=False)

    def test_dataloader(self):
        return self._loader("test", shuffle=False)

    def predict_dataloader(self):
        return self._loader("test", shuffle=False)
