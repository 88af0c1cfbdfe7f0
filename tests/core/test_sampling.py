"""EpochShuffleSampler: a permutation per epoch, fixed by (seed, epoch), restorable."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import RandomSampler

from lightning_info.core.sampling import EpochShuffleSampler


def test_each_epoch_is_the_permutation_of_its_seeded_generator():
    sampler = EpochShuffleSampler(50, seed=3)
    for epoch in (0, 1, 7):
        sampler.set_epoch(epoch)
        expected = torch.randperm(50, generator=torch.Generator().manual_seed(3 + epoch)).tolist()
        assert list(sampler) == expected
        assert list(sampler) == expected, "iterating twice must not advance the order"
    assert len(sampler) == 50 and sorted(sampler) == list(range(50))


def test_epochs_differ_and_restored_state_replays_the_same_order():
    sampler = EpochShuffleSampler(40, seed=0)
    sampler.set_epoch(2)
    epoch_two = list(sampler)
    sampler.set_epoch(3)
    assert list(sampler) != epoch_two
    restored = EpochShuffleSampler(40, seed=99)
    restored.load_state_dict({"epoch": 2, "seed": 0})
    assert list(restored) == epoch_two


def test_unlike_random_sampler_a_fresh_instance_replays_a_later_epoch():
    generator = torch.Generator().manual_seed(0)
    random_sampler = RandomSampler(range(30), generator=generator)
    _, second_epoch = list(random_sampler), list(random_sampler)
    fresh = RandomSampler(range(30), generator=torch.Generator().manual_seed(0))
    assert list(fresh) != second_epoch  # what a resumed run would get from RandomSampler
    ours = EpochShuffleSampler(30, seed=0)
    ours.set_epoch(1)
    resumed = EpochShuffleSampler(30, seed=0)
    resumed.set_epoch(1)
    assert list(ours) == list(resumed)


@pytest.mark.parametrize("bad", [dict(num_samples=0), dict(num_samples=5, seed=-1)])
def test_invalid_arguments(bad):
    with pytest.raises(ValueError):
        EpochShuffleSampler(**bad)
