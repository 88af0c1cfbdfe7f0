"""Primitives shared by several methods: schedules, validation, logging, strategy checks."""

from lightning_info.core.options import AdamWOptions
from lightning_info.core.schedules import (
    ConstantSchedule,
    CosineSchedule,
    ExponentialSchedule,
    LinearSchedule,
    Schedule,
)

__all__ = [
    "AdamWOptions",
    "ConstantSchedule",
    "CosineSchedule",
    "ExponentialSchedule",
    "LinearSchedule",
    "Schedule",
]
