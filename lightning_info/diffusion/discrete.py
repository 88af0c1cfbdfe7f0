"""Discrete-time diffusion: a beta schedule, forward noising, and the DDPM and DDIM samplers, with
classifier-free guidance and known entries re-pinned after every step.

With ``T`` betas ``beta_t`` (``t = 0 .. T-1``), ``alpha_t = 1 - beta_t`` and
``abar_t = prod_{i <= t} alpha_i`` (Ho et al., "Denoising Diffusion Probabilistic Models",
NeurIPS 2020):

- forward: ``x_t = sqrt(abar_t) x_0 + sqrt(1 - abar_t) eps`` (eq. 4);
- the noise predictor's clean estimate ``x0_hat = (x_t - sqrt(1 - abar_t) eps_hat) / sqrt(abar_t)``;
- DDPM step ``t -> t-1``: the posterior ``q(x_{t-1} | x_t, x0_hat)``, mean
  ``sqrt(abar_{t-1}) beta_t / (1 - abar_t) x0_hat + sqrt(alpha_t) (1 - abar_{t-1}) / (1 - abar_t)
  x_t`` and variance ``beta_t (1 - abar_{t-1}) / (1 - abar_t)`` (eqs. 6-7), no noise at ``t = 0``;
- DDIM step ``t -> s < t`` (Song et al., "Denoising Diffusion Implicit Models", ICLR 2021, eq. 12):
  ``x_s = sqrt(abar_s) x0_hat + sqrt(1 - abar_s - sigma^2) eps_hat + sigma z`` with
  ``sigma = eta sqrt((1 - abar_s) / (1 - abar_t)) sqrt(1 - abar_t / abar_s)`` and
  ``abar_{-1} = 1``; ``eta = 0`` is deterministic, ``eta = 1`` has DDPM's variance;
- classifier-free guidance (Ho & Salimans, 2022): ``eps = eps_c + w (eps_c - eps_u)``.

Clipping (``clip_x0=(low, high)``, DDPM's ``clip_denoised``): each step's ``x0_hat`` is clamped
to the data's range before it is used, and DDIM re-derives its noise from the clamped estimate,
``eps = (x_t - sqrt(abar_t) x0_hat) / sqrt(1 - abar_t)``, so the step stays on one trajectory
(diffusers' ``clip_sample`` with ``use_clipped_model_output``). On a schedule whose last
``abar_T`` is tiny, ``x0_hat = (x_t - sqrt(1 - abar_t) eps_hat) / sqrt(abar_t)`` multiplies the
noise predictor's error by ``sqrt((1 - abar_t) / abar_t)`` (about 600 at ProDiff's ``T = 500``,
``beta_T = 0.05``); deterministic DDIM integrates that error without forgetting it, and the
clamp bounds it.

Imputation conditions on known entries (e.g. a trajectory's two endpoints): ``known`` marks them
and ``values`` holds them; both samplers start from ``x_T`` with the known entries set and set
them again after every step, so the returned sample holds them bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from lightning_info.core.validation import require_int, require_non_negative

__all__ = ["BetaSchedule", "ddim_sample", "ddim_timesteps", "ddpm_sample", "guided"]

Denoiser = Callable[[Tensor, Tensor], Tensor]
"""``eps_hat = denoiser(x_t, t)`` with ``t`` a long tensor ``(B,)`` of step indices."""


class BetaSchedule:
    """``T`` betas and their cumulative products (float64)."""

    def __init__(self, betas: Tensor) -> None:
        betas = torch.as_tensor(betas, dtype=torch.float64)
        if betas.ndim != 1 or betas.numel() < 1 or not ((betas > 0) & (betas < 1)).all():
            raise ValueError("`betas` must be a non-empty 1-D tensor of values in (0, 1).")
        self.betas = betas
        self.alphas = 1 - betas
        self.alpha_bars = torch.cumprod(self.alphas, 0)

    @classmethod
    def linear(cls, steps: int, start: float = 1e-4, end: float = 0.02) -> BetaSchedule:
        """``linspace(start, end, steps)`` (DDPM's schedule; ProDiff uses 500 steps to 0.05)."""
        return cls(torch.linspace(start, end, require_int(steps, "steps", 1), dtype=torch.float64))

    @property
    def num_steps(self) -> int:
        return self.betas.numel()

    def alpha_bar(self, t: Tensor) -> Tensor:
        """``abar_t``, with ``abar_{-1} = 1``."""
        padded = torch.cat([self.alpha_bars.new_ones(1), self.alpha_bars])
        return padded[t.long() + 1]

    def q_sample(self, x0: Tensor, t: Tensor, noise: Tensor) -> Tensor:
        """``x_t = sqrt(abar_t) x_0 + sqrt(1 - abar_t) noise``, ``t`` of shape ``(B,)``."""
        abar = _per_row(self.alpha_bar(t), x0)
        return abar.sqrt() * x0 + (1 - abar).sqrt() * noise

    def predict_x0(self, x: Tensor, t: Tensor, eps: Tensor) -> Tensor:
        abar = _per_row(self.alpha_bar(t), x)
        return (x - (1 - abar).sqrt() * eps) / abar.sqrt()


def _per_row(coefficient: Tensor, like: Tensor) -> Tensor:
    return coefficient.to(like.dtype).to(like.device).reshape(-1, *([1] * (like.ndim - 1)))


def guided(conditional: Denoiser, unconditional: Denoiser, weight: float) -> Denoiser:
    """Classifier-free guidance ``eps_c + w (eps_c - eps_u)``."""
    weight = require_non_negative(weight, "weight")

    def denoiser(x: Tensor, t: Tensor) -> Tensor:
        eps_c = conditional(x, t)
        return eps_c + weight * (eps_c - unconditional(x, t))

    return denoiser


def ddim_timesteps(num_steps: int, sampling_steps: int) -> list[int]:
    """``sampling_steps`` step indices from ``T - 1`` down to 0, evenly spaced."""
    sampling_steps = require_int(sampling_steps, "sampling_steps", 1)
    if sampling_steps > num_steps:
        raise ValueError(f"{sampling_steps} sampling steps exceed the schedule's {num_steps}.")
    grid = torch.linspace(num_steps - 1, 0, sampling_steps, dtype=torch.float64).round().long()
    return grid.tolist()


def _clip(x0: Tensor, clip_x0: tuple[float, float] | None) -> Tensor:
    return x0 if clip_x0 is None else x0.clamp(clip_x0[0], clip_x0[1])


def _check_clip(clip_x0: tuple[float, float] | None) -> tuple[float, float] | None:
    if clip_x0 is None:
        return None
    low, high = (float(v) for v in clip_x0)
    if not low < high:
        raise ValueError(f"`clip_x0` must be (low, high) with low < high, got {clip_x0}.")
    return low, high


def _pin(x: Tensor, known: Tensor | None, values: Tensor | None) -> Tensor:
    return x if known is None else torch.where(known, values, x)


def _start(shape, known, values, generator, device, dtype) -> Tensor:
    if (known is None) != (values is None):
        raise ValueError("give both `known` and `values`, or neither.")
    noise = torch.randn(shape, generator=generator, dtype=dtype).to(device)
    return _pin(noise, known, values)


def _draw(like: Tensor, generator: torch.Generator | None) -> Tensor:
    return torch.randn(like.shape, generator=generator, dtype=like.dtype).to(like.device)


@torch.no_grad()
def ddpm_sample(
    denoiser: Denoiser,
    schedule: BetaSchedule,
    shape: tuple[int, ...],
    known: Tensor | None = None,
    values: Tensor | None = None,
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    clip_x0: tuple[float, float] | None = None,
) -> Tensor:
    """Ancestral DDPM sampling over all ``T`` steps (see the module docstring); noise from
    ``generator`` (CPU), ``x0_hat`` clamped to ``clip_x0``, known entries re-pinned after
    every step."""
    clip_x0 = _check_clip(clip_x0)
    x = _start(shape, known, values, generator, device, dtype)
    for step in range(schedule.num_steps - 1, -1, -1):
        t = torch.full((shape[0],), step, dtype=torch.long, device=x.device)
        x0 = _clip(schedule.predict_x0(x, t, denoiser(x, t)), clip_x0)
        if step == 0:
            x = x0
        else:
            beta, abar, abar_prev = (
                schedule.betas[step],
                schedule.alpha_bars[step],
                schedule.alpha_bars[step - 1],
            )
            mean = (abar_prev.sqrt() * beta / (1 - abar)) * x0 + (
                schedule.alphas[step].sqrt() * (1 - abar_prev) / (1 - abar)
            ) * x
            std = (beta * (1 - abar_prev) / (1 - abar)).sqrt()
            x = (mean + std * _draw(x, generator)).to(dtype)
        x = _pin(x, known, values)
    return x


@torch.no_grad()
def ddim_sample(
    denoiser: Denoiser,
    schedule: BetaSchedule,
    shape: tuple[int, ...],
    sampling_steps: int = 50,
    eta: float = 0.0,
    known: Tensor | None = None,
    values: Tensor | None = None,
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    clip_x0: tuple[float, float] | None = None,
) -> Tensor:
    """DDIM sampling over ``sampling_steps`` of the schedule's steps (``eta`` 0: deterministic
    given ``x_T``); ``x0_hat`` clamped to ``clip_x0`` (and the noise re-derived from it),
    known entries re-pinned after every step."""
    clip_x0 = _check_clip(clip_x0)
    eta = require_non_negative(eta, "eta")
    if eta > 1:
        raise ValueError(
            f"`eta` must lie in [0, 1] (0: deterministic, 1: DDPM's variance), got {eta}."
        )
    x = _start(shape, known, values, generator, device, dtype)
    steps = ddim_timesteps(schedule.num_steps, sampling_steps)
    for current, following in zip(steps, [*steps[1:], -1]):
        t = torch.full((shape[0],), current, dtype=torch.long, device=x.device)
        eps = denoiser(x, t)
        x0 = schedule.predict_x0(x, t, eps)
        abar = schedule.alpha_bars[current]
        if clip_x0 is not None:
            x0 = _clip(x0, clip_x0)
            eps = (x - abar.sqrt() * x0) / (1 - abar).sqrt()
        abar_next = schedule.alpha_bars[following] if following >= 0 else abar.new_ones(())
        sigma = eta * ((1 - abar_next) / (1 - abar)).sqrt() * (1 - abar / abar_next).sqrt()
        x = abar_next.sqrt() * x0 + (1 - abar_next - sigma**2).clamp_min(0).sqrt() * eps
        if eta > 0 and following >= 0:
            x = x + sigma * _draw(x, generator)
        x = _pin(x.to(dtype), known, values)
    return x
