"""Shared diffusion engine: noise schedules (VP, sub-VP, VE, EDM, DDIM scaled-linear),
fixed-step ODE integration, and discrete DDPM / DDIM sampling with guidance and pinned entries."""

from lightning_info.diffusion.discrete import (
    BetaSchedule,
    ddim_sample,
    ddim_timesteps,
    ddpm_sample,
    guided,
)
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
    "BetaSchedule",
    "ddim_sample",
    "ddim_timesteps",
    "ddpm_sample",
    "guided",
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
