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
