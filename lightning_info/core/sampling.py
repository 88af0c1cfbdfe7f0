"""Samplers and random generators that are pure functions of (seed, epoch or step), so runs
resume exactly."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import Sampler

from lightning_info.core.validation import require_int


class EpochShuffleSampler(Sampler[int]):
    """Random permutation of ``range(num_samples)`` drawn from a generator seeded ``seed + epoch``.

    ``torch.utils.data.RandomSampler`` draws from a generator that advances with every epoch, so a
    run resumed from a checkpoint sees other batches than the uninterrupted run. Here epoch ``e``
    always gives the same permutation (as ``DistributedSampler`` does): Lightning calls
    :meth:`set_epoch` before every epoch, also when resuming, and under DDP wraps this sampler in
    its ``DistributedSamplerWrapper`` (which forwards ``set_epoch``), so every rank shuffles
    identically before sharding. Return it through
    :class:`~lightning_info.core.resume.ResumableDataLoader` so that a run resumed in the middle
    of an epoch continues at the first batch not yet trained on.
    """

    def __init__(self, num_samples: int, seed: int = 0) -> None:
        self.num_samples = require_int(num_samples, "num_samples", 1)
        self.seed = require_int(seed, "seed", 0)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        return iter(torch.randperm(self.num_samples, generator=generator).tolist())

    def __len__(self) -> int:
        return self.num_samples

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "seed": self.seed}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.epoch = int(state_dict["epoch"])
        self.seed = int(state_dict["seed"])


def keyed_generator(*entropy: int) -> torch.Generator:
    """A CPU generator seeded by a hash of ``entropy`` (e.g. ``seed, stage, step, rank``).

    A model that draws noise in its training step from ``keyed_generator(seed, step, rank)``
    draws the same noise in a run resumed from a checkpoint as in the uninterrupted run, and
    different noise on every rank; ``numpy``'s ``SeedSequence`` mixes the keys so that nearby
    keys give unrelated streams. Draw on the CPU and move the tensor to the model's device.
    """
    state = np.random.SeedSequence([int(key) for key in entropy]).generate_state(1)[0]
    return torch.Generator().manual_seed(int(state))
