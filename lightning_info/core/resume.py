"""Exact mid-epoch resume for the suite's train loaders.

Lightning restores its loop progress from a checkpoint but restarts the epoch's data from the
first batch unless the loader is stateful, and a checkpoint written by ``trainer.save_checkpoint()``
after a ``max_steps`` stop counts the unfinished epoch as done, so the resumed run starts the next
epoch. :class:`ResumableDataLoader` reads the restored progress when Lightning creates its
iterator: it leaves out the batches the interrupted run had trained on (sampler indices only, no
data is loaded for them) and, in the ``max_steps`` case, moves the epoch counter back to the
unfinished epoch. Orders that are a function of ``(seed, epoch)``
(:class:`~lightning_info.core.sampling.EpochShuffleSampler`) then give the uninterrupted run's
remaining batches, also under DDP (the skip applies to each rank's own batches, and the
``DistributedSampler`` that Lightning puts in is seeded by the loader, not the global seed).

Kept instead of torchdata's ``StatefulDataLoader`` (a further dependency): that loader saves its
own position, but two of the problems above sit in Lightning, not in the loader (the epoch that a
``max_steps`` checkpoint counts as done, and the ``DistributedSampler`` that Lightning wraps
around the sampler with the global seed); a stateful loader alone addresses neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sized
from itertools import islice
from typing import Any

from lightning.pytorch import Trainer
from torch.utils.data import DataLoader, DistributedSampler


def _epoch_batches(trainer: Trainer, length: int) -> int:
    """Batches in one training epoch of a loader of ``length`` under ``limit_train_batches``."""
    limit = trainer.limit_train_batches
    if isinstance(limit, int):
        return min(length, limit)
    return int(length * limit)


def batches_to_skip(trainer: Trainer | None, length: int) -> int:
    """The batches of the current epoch that the run being resumed had already trained on.

    Lightning creates the first iterator of a fit after it restores the loops from the checkpoint
    (and every later one after it resets them), so a value of the epoch loop's processed-batch
    count strictly between 0 and the epoch's length means the fit resumes mid-epoch. When the
    fit loop counts that epoch as finished (a ``max_steps`` stop), its epoch counter is moved back
    so that the resumed run finishes the epoch as the uninterrupted run does.
    """
    if trainer is None or not trainer.training:
        return 0
    fit_loop = trainer.fit_loop
    done = fit_loop.epoch_loop.batch_progress.current.processed
    if not 0 < done < _epoch_batches(trainer, length):
        return 0
    epochs = fit_loop.epoch_progress.current
    if epochs.processed == epochs.started > 0:
        epochs.processed -= 1
        epochs.completed = epochs.processed
        fit_loop.restarting = True
    return done


class _SkipFirst(Iterable):
    """``index_sampler`` without its first ``skip`` items, drawn lazily (the sampler's epoch is
    set after the iterator is created)."""

    def __init__(self, index_sampler: Sized, skip: int) -> None:
        self.index_sampler, self.skip = index_sampler, skip

    def __iter__(self) -> Iterator[Any]:
        yield from islice(self.index_sampler, self.skip, None)

    def __len__(self) -> int:
        return len(self.index_sampler) - self.skip


class ResumableDataLoader(DataLoader):
    """A ``DataLoader`` that resumes an interrupted epoch at the first batch not yet trained on.

    Under DDP, Lightning puts a ``DistributedSampler`` around the loader's sampler that shuffles
    again with the global seed (``PL_GLOBAL_SEED``), which a resumed run may set otherwise; this
    loader gives that sampler ``distributed_seed`` instead, so the order is a function of the
    loader's own arguments and the epoch.

    Args:
        *args, **kwargs: those of ``torch.utils.data.DataLoader``.
        trainer: the ``Trainer`` whose restored progress says where to resume (a DataModule
            passes ``self.trainer``); ``None`` behaves as a plain ``DataLoader``.
        distributed_seed: the seed of the ``DistributedSampler`` Lightning puts in under DDP.
    """

    def __init__(
        self, *args: Any, trainer: Trainer | None = None, distributed_seed: int = 0, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.trainer = trainer
        self.distributed_seed = distributed_seed
        self._skip = 0

    @property
    def _index_sampler(self):
        index_sampler = super()._index_sampler
        return _SkipFirst(index_sampler, self._skip) if self._skip else index_sampler

    def state_dict(self) -> dict[str, Any]:
        """Empty: the position is Lightning's own restored loop progress. Having the method makes
        the loader stateful for Lightning, which then does not warn that it cannot resume."""
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Nothing to load (see :meth:`state_dict`)."""

    def __iter__(self):
        if isinstance(self.sampler, DistributedSampler):
            self.sampler.seed = self.distributed_seed
        self._skip = batches_to_skip(self.trainer, len(self))
        try:
            return super().__iter__()
        finally:
            self._skip = 0
