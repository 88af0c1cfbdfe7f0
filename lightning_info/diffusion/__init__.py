"""Shared diffusion engine: noise schedules (VP, sub-VP, VE, EDM, DDIM scaled-linear) and
fixed-step ODE integration."""

from lightning_info.diffusion.noise_schedules import (
    DDIMScaledLinearSchedule,
    EDMSchedule,
    NoiseSchedule,
    SubVPSchedule,
    VESchedule,
    VPSchedule,
    noise_schedule,
)
from lightning_info.diffusion.ode import ODESolution, odeint_fixed

__all__ = [
    "ODESolution",
    "odeint_fixed",
    "DDIMScaledLinearSchedule",
    "EDMSchedule",
    "NoiseSchedule",
    "SubVPSchedule",
    "VESchedule",
    "VPSchedule",
    "noise_schedule",
]
