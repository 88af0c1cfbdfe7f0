"""Schedules against their closed forms."""

from __future__ import annotations

import math

import pytest

from lightning_info import ConstantSchedule, CosineSchedule, ExponentialSchedule, LinearSchedule
from lightning_info.core.schedules import as_schedule


@pytest.mark.parametrize("step", [0, 1, 5, 9, 10, 50])
def test_closed_forms(step):
    p = min(step, 10) / 10
    assert LinearSchedule(4.0, 2.0, 10)(step) == pytest.approx(4.0 - 2.0 * p)
    assert CosineSchedule(4.0, 2.0, 10)(step) == pytest.approx(2.0 + (1 + math.cos(math.pi * p)))
    assert ExponentialSchedule(8.0, 2.0, 10)(step) == pytest.approx(8.0 * 0.25**p)
    assert ConstantSchedule(3.0)(step) == 3.0


def test_as_schedule_wraps_numbers_and_rejects_the_rest():
    assert as_schedule(2, "x")(7) == 2.0
    schedule = LinearSchedule(1.0, 0.5, 3)
    assert as_schedule(schedule, "x") is schedule
    with pytest.raises(TypeError, match="`x`"):
        as_schedule("2.0", "x")


@pytest.mark.parametrize(
    "make",
    [
        lambda: LinearSchedule(1.0, 0.0, 0),
        lambda: ExponentialSchedule(1.0, 0.0, 5),
        lambda: ConstantSchedule(float("nan")),
        lambda: LinearSchedule(1.0, 2.0, 2.5),
    ],
)
def test_invalid_arguments(make):
    with pytest.raises(ValueError):
        make()


@pytest.mark.parametrize("step", [0, 3, 10, 55, 100, 140])
def test_warmup_cosine_closed_form(step):
    import torch

    from lightning_info.core.schedules import warmup_cosine

    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=2.0)
    schedule = warmup_cosine(optimizer, total_steps=100, warmup_steps=10, floor=0.1)
    if step < 10:
        expected = 0.1 + 0.9 * step / 10
    else:
        expected = 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min((step - 10) / 90, 1.0)))
    assert schedule.lr_lambdas[0](step) == pytest.approx(expected)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(2.0 * 0.1)  # factor(0) at start
