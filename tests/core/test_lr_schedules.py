"""WarmupCosineLR keeps an estimated length across a resume and an explicit one as given."""

from __future__ import annotations

import pytest
import torch
from lightning.pytorch import Trainer

from lightning_info.core.schedules import warmup_cosine, warmup_cosine_config
from tests.tiny import QUIET, TinyClassifier, TinyDataModule


def _scheduler(total: int, estimated: bool):
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    return optimizer, warmup_cosine(optimizer, total, total // 10, 0.1, estimated)


def _trained_state(total: int) -> dict:
    optimizer, schedule = _scheduler(total, estimated=True)
    for _ in range(7):
        optimizer.step()
        schedule.step()
    return schedule.state_dict()


def test_an_estimated_length_is_taken_from_the_checkpoint_with_a_warning():
    optimizer, schedule = _scheduler(100, estimated=True)
    with pytest.warns(UserWarning, match="checkpoint's learning-rate schedule \\(40 steps\\)"):
        schedule.load_state_dict(_trained_state(40))
    reference = _scheduler(40, estimated=True)[1]
    assert (schedule.total_steps, schedule.warmup_steps, schedule.last_epoch) == (40, 4, 7)
    assert [schedule.factor(t) for t in (3, 7, 20, 40, 60)] == [
        reference.factor(t) for t in (3, 7, 20, 40, 60)
    ]


def test_an_explicit_length_is_kept():
    _, schedule = _scheduler(100, estimated=False)
    schedule.load_state_dict(_trained_state(40))
    assert (schedule.total_steps, schedule.last_epoch) == (100, 7)


class ScheduledClassifier(TinyClassifier):
    """TinyClassifier under warmup-cosine of the trainer's estimated length."""

    def __init__(self) -> None:
        super().__init__()
        self.rates: list[float] = []

    def on_train_batch_start(self, *_) -> None:
        self.rates.append(self.trainer.optimizers[0].param_groups[0]["lr"])

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        return warmup_cosine_config(optimizer, self.trainer, 0.25, schedule_steps=None)


def test_a_run_continued_to_more_epochs_keeps_its_schedule(tmp_path):
    first = Trainer(max_epochs=2, default_root_dir=tmp_path, **QUIET)
    model = ScheduledClassifier()
    first.fit(model, datamodule=TinyDataModule())
    first.save_checkpoint(tmp_path / "two.ckpt")
    longer = ScheduledClassifier()
    with pytest.warns(UserWarning, match="checkpoint's learning-rate schedule"):
        Trainer(max_epochs=4, default_root_dir=tmp_path, **QUIET).fit(
            longer, datamodule=TinyDataModule(), ckpt_path=tmp_path / "two.ckpt"
        )
    reference = warmup_cosine(
        torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1),
        first.global_step,
        int(0.25 * first.global_step),
    )
    expected = [0.1 * reference.factor(first.global_step + t) for t in range(len(longer.rates))]
    assert longer.rates == pytest.approx(expected)
    assert longer.rates[-1] == pytest.approx(0.0)  # past the two-epoch schedule's end
