"""FIC-TSC reads nothing back from the device in a training step unless asked: the classifier's
label range sits behind ``validate_args`` (default off), the constraint's skip of non-finite
steps behind ``skip_non_finite`` (default off), and a schedule's bound is checked before
training, never per step."""

from __future__ import annotations

import math

import pytest
import torch
from lightning.pytorch import Trainer, seed_everything
from torch.utils.data import DataLoader, TensorDataset

from lightning_info.core.schedules import Schedule
from lightning_info.methods.fic_tsc.callback import FisherConstraint
from lightning_info.methods.fic_tsc.module import InceptionTimeClassifier
from tests.test_hot_path import count_host_reads
from tests.tiny import QUIET, TinyClassifier


def _series(labels: torch.Tensor) -> DataLoader:
    x = torch.randn(len(labels), 1, 16, generator=torch.Generator().manual_seed(0))
    return DataLoader(TensorDataset(x, labels), batch_size=4)


def _classifier(**kwargs) -> InceptionTimeClassifier:
    torch.manual_seed(0)
    return InceptionTimeClassifier(1, 3, num_filters=4, depth=1, kernel_size=8, **kwargs)


def _fit(model, loader, callbacks=(), **kwargs):
    trainer = Trainer(callbacks=list(callbacks), **{**QUIET, "max_steps": 2, **kwargs})
    with count_host_reads() as reads:
        trainer.fit(model, loader)
    return reads


def test_the_classifier_checks_label_values_only_when_asked():
    assert _classifier().validate_args is False
    bad = _series(torch.tensor([0, 1, 2, 5] * 2))
    with pytest.raises(ValueError, match=r"`y` must hold class indices in \[0, 3\)"):
        _fit(_classifier(validate_args=True), bad)
    reads = _fit(_classifier(), _series(torch.tensor([0, 1, 2, 1] * 2)))
    assert reads.batches == 2 and reads.total == 0, reads.describe()
    checked = _fit(_classifier(validate_args=True), _series(torch.tensor([0, 1, 2, 1] * 2)))
    assert checked.total == 2  # one read of (min, max) per batch


def test_the_label_dtype_is_checked_without_the_switch():
    floats = _series(torch.tensor([0.0, 1.0, 2.0, 1.0]))
    with pytest.raises(TypeError, match="integer class indices"):
        _fit(_classifier(), floats)


def _loader(nan_batch: int | None = None) -> DataLoader:
    generator = torch.Generator().manual_seed(0)
    x, y = torch.randn(16, 6, generator=generator), torch.randint(0, 3, (16,), generator=generator)
    if nan_batch is not None:
        x[8 * nan_batch] = float("nan")
    return DataLoader(TensorDataset(x, y), batch_size=8)


def test_the_constraint_reads_one_flag_per_step_only_with_the_skip():
    assert FisherConstraint().skip_non_finite is False
    seed_everything(0)
    plain = _fit(TinyClassifier(), _loader(), [FisherConstraint(max_fisher=1e-2)])
    assert plain.batches == 2 and plain.total == 0, plain.describe()
    seed_everything(0)
    skipping = FisherConstraint(max_fisher=1e-2, skip_non_finite=True)
    reads = _fit(TinyClassifier(), _loader(nan_batch=1), [skipping])
    assert reads.total == 2 and {site.function for site in reads.calls} == {
        "on_before_optimizer_step"
    }
    assert skipping.num_skipped == 1  # the NaN batch's step, as before the default changed


class _Dip(Schedule):
    """2.0, except a negative bound at ``step`` (no shape known in advance)."""

    def __init__(self, step: int) -> None:
        self.step = step
        self.calls = 0

    def __call__(self, step: int) -> float:
        self.calls += 1
        return -1.0 if step == self.step else 2.0


def test_a_schedule_is_checked_at_every_step_of_the_run_before_training():
    seed_everything(0)
    model = TinyClassifier()
    initial = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(ValueError, match=r"max_fisher > 0 at every step, got -1\.0"):
        _fit(model, _loader(), [FisherConstraint(max_fisher=_Dip(3))], max_steps=5)
    assert all(torch.equal(a, b) for a, b in zip(initial, model.parameters()))  # no step taken
    dip = _Dip(5)
    _fit(TinyClassifier(), _loader(), [FisherConstraint(max_fisher=dip)], max_steps=5)
    # step 0 at construction, steps 0-4 before training, one value per step: no check per step
    assert dip.calls == 1 + 5 + 5


def test_a_run_of_unknown_length_checks_its_next_steps():
    dip = _Dip(10**9)
    constraint = FisherConstraint(max_fisher=dip)
    trainer = Trainer(max_epochs=-1, max_steps=-1, **QUIET)
    assert math.isinf(trainer.estimated_stepping_batches)
    dip.calls = 0
    constraint.on_train_start(trainer, TinyClassifier())
    assert dip.calls == 100_000
