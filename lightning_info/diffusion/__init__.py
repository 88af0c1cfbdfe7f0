"""Shared diffusion engine: noise schedules (VP, sub-VP, VE, EDM, DDIM scaled-linear)."""

from lightning_info.diffusion.noise_schedules import (
    DDIMScaledLinearSchedule,
    EDMSchedule,
    NoiseSchedule,
    SubVPSchedule,
    VESchedule,
    VPSchedule,
    noise_schedule,
)

__all__ = [
    "DDIMScaledLinearSchedule",
    "EDMSchedule",
    "NoiseSchedule",
    "SubVPSchedule",
    "VESchedule",
    "VPSchedule",
    "noise_schedule",
]
