"""ROME and the information bottleneck read nothing back from the device in a training step
unless ``validate_args`` (``ib_validate_args``) asks for the per-step value checks."""

from __future__ import annotations

import pytest
import torch
from lightning.pytorch import seed_everything

from lightning_info.methods.rome.augment import DSA
from tests.methods.rome import tiny_ib
from tests.methods.rome.conftest import quiet_trainer, shuffled_digits, small_rome
from tests.test_hot_path import count_host_reads
from tests.tiny import TinyDataModule


@pytest.fixture(scope="module")
def digits():
    x, y = shuffled_digits(max_class=2)
    return x[:150].view(-1, 1, 8, 8), y[:150]


def _rome(x, y, **kwargs):
    """Every per-step path: the augmentation, the attack, a pool that trains and grows."""
    return small_rome(
        x,
        y,
        distillation={"real_batch": 8, "dsa_strategy": "color_crop_flip"},
        pool={"num_nets": 2, "max_nets": 3, "add_every": 1, "refresh_every": 1, "train_steps": 1},
        **kwargs,
    )


def _fit(module, steps=2):
    with count_host_reads() as reads:
        quiet_trainer(steps).fit(module)
    return reads


def _poison(net):
    with torch.no_grad():
        for parameter in net.parameters():
            parameter.fill_(float("nan"))


def test_a_distillation_step_reads_nothing_without_the_switch(digits):
    module = _rome(*digits)
    assert module.validate_args is False
    reads = _fit(module)
    assert reads.batches == 2 and reads.total == 0, reads.describe()
    assert int(module.iteration) == module._iteration == 2
    assert int(module.nets_built) == module._nets_built == 4


def test_with_the_switch_a_diverged_network_is_refused(digits):
    module = _rome(*digits, validate_args=True, attack={"robust": False})
    for net in module.nets:
        _poison(net)
    with pytest.raises(ValueError, match=r"NaN/inf"):
        quiet_trainer(1).fit(module)
    silent = _rome(*digits, attack={"robust": False})
    for net in silent.nets:
        _poison(net)
    reads = _fit(silent, steps=1)
    assert reads.total == 0 and torch.isnan(silent.synthetic).any()  # as in plain torch


def test_the_host_counters_follow_a_loaded_state(digits):
    module = _rome(*digits)
    quiet_trainer(3).fit(module)
    fresh = _rome(*digits)
    fresh.pool.replace(fresh._build_net(i) for i in range(len(module.nets)))
    fresh.load_state_dict(module.state_dict())
    assert (fresh._iteration, fresh._nets_built) == (3, 5)


def test_a_given_augmentation_family_is_not_drawn(monkeypatch):
    from lightning_info.methods.rome import augment

    def drawn(*args, **kwargs):
        raise AssertionError("the family was given")

    monkeypatch.setattr(augment, "choose_family", drawn)
    dsa = DSA("crop_flip", (0.5,), (0.25,))
    x = torch.rand(4, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    flipped = dsa(x, torch.Generator().manual_seed(1), family="flip")
    assert flipped.shape == x.shape
    with pytest.raises(ValueError, match="one of the strategy's families"):
        dsa(x, torch.Generator().manual_seed(1), family="rotate")


class _CheckedIB(tiny_ib.TinyIBClassifier):
    ib_validate_args = True


class _NaNInputs(TinyDataModule):
    def train_dataloader(self):
        loader = super().train_dataloader()
        for x, y in loader:
            yield x.fill_(float("nan")), y


def test_the_bottleneck_checks_its_rate_only_when_asked():
    seed_everything(0)
    with count_host_reads() as reads:
        quiet_trainer(2).fit(tiny_ib.TinyIBClassifier(), TinyDataModule())
    assert reads.batches == 2 and reads.total == 0, reads.describe()
    seed_everything(0)
    with pytest.raises(ValueError, match=r"`mu` contains \d+ NaN/inf"):
        quiet_trainer(1).fit(_CheckedIB(), _NaNInputs())
    with pytest.raises(TypeError, match="ib_validate_args"):

        class _Bad(tiny_ib.TinyIBClassifier):
            ib_validate_args = "yes"

        _Bad()
