"""Primitives shared by several methods: schedules, validation, logging, strategy checks."""

from lightning_info.core.schedules import (
    ConstantSchedule,
    CosineSchedule,
    ExponentialSchedule,
    LinearSchedule,
    Schedule,
)

__all__ = [
    "ConstantSchedule",
    "CosineSchedule",
    "ExponentialSchedule",
    "LinearSchedule",
    "Schedule",
]
