"""Scalar schedules over optimizer steps (constraint thresholds, loss weights, ...).

A schedule maps the optimizer-step index ``t`` (``trainer.global_step``) to a float. Because it is
a pure function of ``t``, and ``global_step`` is restored from checkpoints, a resumed run sees the
same values as an uninterrupted one without any schedule state.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

from lightning_info.core.validation import require_finite, require_positive


class Schedule(ABC):
    """A value ``v(t)`` for optimizer step ``t >= 0``."""

    @abstractmethod
    def __call__(self, step: int) -> float: ...


def as_schedule(value: float | Schedule, name: str) -> Schedule:
    """Wrap a plain number in a :class:`ConstantSchedule`; pass schedules through."""
    if isinstance(value, Schedule):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"`{name}` must be a number or a lightning_info Schedule, got {value!r}.")
    return ConstantSchedule(float(value))


class ConstantSchedule(Schedule):
    """``v(t) = value``."""

    def __init__(self, value: float) -> None:
        self.value = require_finite(value, "value")

    def __call__(self, step: int) -> float:
        return self.value

    def __repr__(self) -> str:
        return f"ConstantSchedule({self.value})"


class _RampSchedule(Schedule):
    """Shared shape of schedules that move from ``start`` to ``end`` over ``num_steps`` steps."""

    def __init__(self, start: float, end: float, num_steps: int) -> None:
        self.start = require_finite(start, "start")
        self.end = require_finite(end, "end")
        if isinstance(num_steps, bool) or not isinstance(num_steps, int) or num_steps < 1:
            raise ValueError(f"`num_steps` must be a positive integer, got {num_steps!r}.")
        self.num_steps = num_steps

    def _progress(self, step: int) -> float:
        return min(max(step, 0), self.num_steps) / self.num_steps

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.start}, {self.end}, {self.num_steps})"


class LinearSchedule(_RampSchedule):
    """``v(t) = start + (end - start) * min(t / T, 1)``."""

    def __call__(self, step: int) -> float:
        return self.start + (self.end - self.start) * self._progress(step)


class CosineSchedule(_RampSchedule):
    """``v(t) = end + (start - end) * (1 + cos(pi * min(t / T, 1))) / 2``."""

    def __call__(self, step: int) -> float:
        return self.end + (self.start - self.end) * 0.5 * (
            1 + math.cos(math.pi * self._progress(step))
        )


class ExponentialSchedule(_RampSchedule):
    """Geometric interpolation ``v(t) = start * (end / start) ** min(t / T, 1)``; both positive."""

    def __init__(self, start: float, end: float, num_steps: int) -> None:
        super().__init__(start, end, num_steps)
        require_positive(self.start, "start")
        require_positive(self.end, "end")

    def __call__(self, step: int) -> float:
        return self.start * (self.end / self.start) ** self._progress(step)


def warmup_cosine(
    optimizer, total_steps: int, warmup_steps: int, floor: float = 0.0, estimated: bool = False
):
    """A per-step learning-rate factor: linear warmup from ``floor`` to 1 over ``warmup_steps``,
    then cosine decay from 1 to ``floor`` at ``total_steps`` (held at ``floor`` after it).

    ``factor(t) = floor + (1 - floor) t / W`` for ``t < W``, else ``floor + (1 - floor)
    (1 + cos(pi min((t - W) / (N - W), 1))) / 2``. Step it every optimizer step (Lightning's
    ``"interval": "step"``). The length is checkpointed with the scheduler
    (:class:`~lightning_info.core.lr_schedules.WarmupCosineLR`): an ``estimated`` one is taken
    from the checkpoint on resume, so a resumed run sees the rates it was trained under.
    """
    from lightning_info.core.lr_schedules import WarmupCosineLR

    return WarmupCosineLR(optimizer, total_steps, warmup_steps, floor, estimated)


def warmup_cosine_config(
    optimizer,
    trainer,
    warmup_fraction: float,
    schedule_steps: int | None = None,
    floor: float = 0.0,
) -> dict:
    """What ``configure_optimizers`` returns for ``optimizer`` under :func:`warmup_cosine`,
    stepped every optimizer step: ``schedule_steps`` in all, the first ``warmup_fraction`` of
    them warming up. ``None``: the trainer's ``estimated_stepping_batches`` at the first fit;
    a run resumed from a checkpoint keeps that length (the checkpoint's), also when it is
    continued to a larger ``max_epochs`` (a warning says so; give ``schedule_steps`` to choose)."""
    estimated = schedule_steps is None
    steps = trainer.estimated_stepping_batches if estimated else schedule_steps
    total = max(int(steps), 1)
    schedule = warmup_cosine(optimizer, total, int(warmup_fraction * total), floor, estimated)
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}
