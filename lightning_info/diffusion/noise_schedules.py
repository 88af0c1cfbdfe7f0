"""Noise schedules of diffusion models, with the coefficients of their SDE and probability-flow ODE.

A schedule gives the marginal ``x_t = alpha_t x_0 + sigma_t eps`` (``eps ~ N(0, I)``) and the
linear SDE ``dx = f(t) x dt + g(t) dW`` that has these marginals, with

    f(t) = d log alpha_t / dt,      g^2(t) = d sigma_t^2 / dt - 2 f(t) sigma_t^2,     (SDE coef)

so that the variance ``v_t = alpha_t^2 s^2 + sigma_t^2`` of ``x_t`` for ``x_0 ~ N(0, s^2 I)``
solves ``dv/dt = 2 f v + g^2`` (Song et al., "Score-Based Generative Modeling through Stochastic
Differential Equations", ICLR 2021, eqs. 5.50-5.51; Kingma et al., "Variational Diffusion
Models", NeurIPS 2021, appendix A). The probability-flow ODE of the same marginals is
``dx/dt = f x - 1/2 g^2 grad log q_t(x)``.

Schedules here, each a frozen dataclass with ``alpha``, ``sigma``, ``f``, ``g2`` on a time ``t``
(a float or a tensor; floats are evaluated in float64) and a usable time range
``[t_min, t_max]``:

- :class:`VPSchedule`: ``beta(t) = beta_min + t (beta_max - beta_min)``,
  ``alpha = exp(-1/2 int_0^t beta)``, ``sigma^2 = 1 - alpha^2``; ``f = -beta/2``, ``g^2 = beta``;
- :class:`SubVPSchedule`: the same ``alpha``, ``sigma = 1 - alpha^2``;
  ``g^2 = beta (1 - alpha^4)``;
- :class:`VESchedule`: ``alpha = 1``, ``sigma = sigma_min (sigma_max / sigma_min)^t``; ``f = 0``,
  ``g^2 = 2 sigma^2 log(sigma_max / sigma_min)``;
- :class:`EDMSchedule`: ``alpha = 1``, ``sigma = t`` (Karras et al., NeurIPS 2022); ``g^2 = 2t``;
- :class:`DDIMScaledLinearSchedule`: the discrete ``scaled_linear`` betas of Stable Diffusion
  (``beta_k = (linspace(sqrt 0.00085, sqrt 0.012, 1000)_k)^2``), made continuous by a C^1 cubic
  Hermite interpolation of ``log alpha_bar`` over ``t_k = k / 1000`` (exact at the knots:
  ``alpha_bar(t = (k + 1) / 1000) = prod_{i <= k} (1 - beta_i)``, diffusers' ``alphas_cumprod[k]``);
  ``alpha = alpha_bar^(1/2)``, ``sigma^2 = 1 - alpha_bar``, ``f = 1/2 d log alpha_bar / dt``,
  ``g^2 = -d log alpha_bar / dt``.

:meth:`NoiseSchedule.time_grid` gives the step times of fixed-step ODE solvers, uniform in ``t``
or in the log signal-to-noise ratio ``lambda_t = log(alpha_t / sigma_t)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor

from lightning_info.core.validation import require_finite, require_int, require_positive

SPACINGS = ("uniform", "log_snr")


def _time(t: float | Tensor) -> Tensor:
    """``t`` as a floating tensor: floats in float64, tensors as they are (integers to float64)."""
    if isinstance(t, Tensor):
        return t if t.is_floating_point() else t.to(torch.float64)
    if isinstance(t, bool) or not isinstance(t, (int, float)):
        raise TypeError(f"`t` must be a float or a tensor, got {type(t).__name__}.")
    return torch.tensor(float(t), dtype=torch.float64)


class NoiseSchedule:
    """Base of the schedules: ``x_t = alpha_t x_0 + sigma_t eps``, ``dx = f x dt + g dW``.

    Subclasses define ``alpha``, ``sigma``, ``f`` and ``g2`` (eq. SDE coef) and the fields
    ``t_min``, ``t_max``; the rest is generic.
    """

    name: str = "schedule"
    t_min: float
    t_max: float

    def alpha(self, t: float | Tensor) -> Tensor:
        """Signal scale ``alpha_t``."""
        raise NotImplementedError

    def sigma(self, t: float | Tensor) -> Tensor:
        """Noise scale ``sigma_t > 0``."""
        raise NotImplementedError

    def f(self, t: float | Tensor) -> Tensor:
        """Drift coefficient ``f(t) = d log alpha_t / dt``."""
        raise NotImplementedError

    def g2(self, t: float | Tensor) -> Tensor:
        """Squared diffusion coefficient ``g^2(t) = d sigma_t^2/dt - 2 f(t) sigma_t^2``."""
        raise NotImplementedError

    def coefficients(self, t: float | Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``(alpha_t, sigma_t, f(t), g^2(t))`` in one call."""
        return self.alpha(t), self.sigma(t), self.f(t), self.g2(t)

    def log_snr(self, t: float | Tensor) -> Tensor:
        """``lambda_t = log(alpha_t / sigma_t)``, decreasing in ``t``."""
        return torch.log(self.alpha(t)) - torch.log(self.sigma(t))

    def t_from_log_snr(self, log_snr: Tensor, iterations: int = 80) -> Tensor:
        """Invert :meth:`log_snr` on ``[t_min, t_max]`` by bisection (float64).

        Values outside ``[log_snr(t_max), log_snr(t_min)]`` give the nearer end of the range.
        """
        target = torch.as_tensor(log_snr, dtype=torch.float64)
        low = torch.full_like(target, self.t_min)
        high = torch.full_like(target, self.t_max)
        for _ in range(iterations):
            middle = 0.5 * (low + high)
            above = self.log_snr(middle) > target  # log_snr decreases: the root lies later
            low = torch.where(above, middle, low)
            high = torch.where(above, high, middle)
        return 0.5 * (low + high)

    def check_time(self, t: float, name: str = "t") -> float:
        """Return ``t`` as float, or raise unless ``t_min <= t <= t_max``."""
        t = require_finite(t, name)
        if not self.t_min <= t <= self.t_max:
            raise ValueError(
                f"`{name}` must lie in [{self.t_min:g}, {self.t_max:g}] for the {self.name} "
                f"schedule, got {t!r}."
            )
        return t

    def time_grid(
        self,
        steps: int,
        t_start: float | None = None,
        t_end: float | None = None,
        spacing: str = "log_snr",
    ) -> Tensor:
        """``steps + 1`` float64 times from ``t_start`` to ``t_end`` (either order).

        ``spacing="uniform"`` is ``linspace`` in ``t``; ``"log_snr"`` is uniform in ``lambda_t``,
        which puts the steps where ``sigma_t`` changes on its own scale (small steps near
        ``sigma -> 0``, where the probability-flow ODE is stiffest). Defaults: ``t_min -> t_max``.
        """
        steps = require_int(steps, "steps", 1)
        start = self.check_time(self.t_min if t_start is None else t_start, "t_start")
        end = self.check_time(self.t_max if t_end is None else t_end, "t_end")
        if start == end:
            raise ValueError("`t_start` and `t_end` must differ.")
        if spacing == "uniform":
            grid = torch.linspace(start, end, steps + 1, dtype=torch.float64)
        elif spacing == "log_snr":
            ends = self.log_snr(torch.tensor([start, end], dtype=torch.float64))
            levels = torch.linspace(float(ends[0]), float(ends[1]), steps + 1, dtype=torch.float64)
            grid = self.t_from_log_snr(levels)
        else:
            raise ValueError(f"`spacing` must be one of {SPACINGS}, got {spacing!r}.")
        grid[0], grid[-1] = start, end
        return grid


def _check_range(t_min: float, t_max: float) -> None:
    require_finite(t_min, "t_min")
    require_finite(t_max, "t_max")
    if not 0 <= t_min < t_max:
        raise ValueError(f"Need 0 <= t_min < t_max, got t_min={t_min!r}, t_max={t_max!r}.")


@dataclass(frozen=True)
class VPSchedule(NoiseSchedule):
    """Variance-preserving SDE with linear ``beta(t)`` (DDPM in continuous time).

        alpha_t = exp(-1/2 B(t)),  B(t) = beta_min t + 1/2 (beta_max - beta_min) t^2,
        sigma_t^2 = 1 - alpha_t^2,  f = -beta(t)/2,  g^2 = beta(t).

    ``t_min`` is the usual ``eps`` (1e-3 for sampling; Song et al. use 1e-5 for likelihoods).
    """

    beta_min: float = 0.1
    beta_max: float = 20.0
    t_min: float = 1e-3
    t_max: float = 1.0
    name: str = field(default="vp", init=False)

    def __post_init__(self) -> None:
        require_positive(self.beta_min, "beta_min")
        require_positive(self.beta_max, "beta_max")
        _check_range(self.t_min, self.t_max)
        if self.t_min == 0:
            raise ValueError("`t_min` must be > 0: sigma_0 = 0.")

    def beta(self, t: float | Tensor) -> Tensor:
        """``beta(t) = beta_min + t (beta_max - beta_min)``."""
        return self.beta_min + _time(t) * (self.beta_max - self.beta_min)

    def integral(self, t: float | Tensor) -> Tensor:
        """``B(t) = int_0^t beta = -2 log alpha_t``."""
        t = _time(t)
        return self.beta_min * t + 0.5 * (self.beta_max - self.beta_min) * t * t

    def alpha(self, t: float | Tensor) -> Tensor:
        return torch.exp(-0.5 * self.integral(t))

    def sigma(self, t: float | Tensor) -> Tensor:
        return torch.sqrt(-torch.expm1(-self.integral(t)))

    def f(self, t: float | Tensor) -> Tensor:
        return -0.5 * self.beta(t)

    def g2(self, t: float | Tensor) -> Tensor:
        return self.beta(t)


@dataclass(frozen=True)
class SubVPSchedule(VPSchedule):
    """Sub-VP SDE (Song et al., 2021): the VP ``alpha_t`` with ``sigma_t = 1 - alpha_t^2``.

        f = -beta(t)/2,  g^2 = beta(t) (1 - alpha_t^4) = beta(t) (1 - exp(-2 B(t))).

    Its variance stays below the VP one, ``sigma_t^2 = (1 - alpha_t^2)^2``.
    """

    name: str = field(default="sub_vp", init=False)

    def sigma(self, t: float | Tensor) -> Tensor:
        return -torch.expm1(-self.integral(t))

    def g2(self, t: float | Tensor) -> Tensor:
        return -self.beta(t) * torch.expm1(-2 * self.integral(t))


@dataclass(frozen=True)
class VESchedule(NoiseSchedule):
    """Variance-exploding SDE (SMLD): ``alpha_t = 1``, ``sigma_t`` geometric in ``t``.

        sigma_t = sigma_min (sigma_max / sigma_min)^t,  f = 0,
        g^2 = d sigma_t^2 / dt = 2 sigma_t^2 log(sigma_max / sigma_min).

    ``sigma_0 = sigma_min > 0``, so ``t`` may start at 0.
    """

    sigma_min: float = 0.01
    sigma_max: float = 50.0
    t_min: float = 0.0
    t_max: float = 1.0
    name: str = field(default="ve", init=False)

    def __post_init__(self) -> None:
        require_positive(self.sigma_min, "sigma_min")
        require_positive(self.sigma_max, "sigma_max")
        if self.sigma_max <= self.sigma_min:
            raise ValueError("`sigma_max` must exceed `sigma_min`.")
        _check_range(self.t_min, self.t_max)

    def alpha(self, t: float | Tensor) -> Tensor:
        return torch.ones_like(_time(t))

    def sigma(self, t: float | Tensor) -> Tensor:
        return self.sigma_min * torch.exp(_time(t) * math.log(self.sigma_max / self.sigma_min))

    def f(self, t: float | Tensor) -> Tensor:
        return torch.zeros_like(_time(t))

    def g2(self, t: float | Tensor) -> Tensor:
        return 2 * self.sigma(t) ** 2 * math.log(self.sigma_max / self.sigma_min)


@dataclass(frozen=True)
class EDMSchedule(NoiseSchedule):
    """EDM (Karras et al., NeurIPS 2022): ``alpha_t = 1``, ``sigma_t = t``, ``f = 0``, ``g^2 = 2t``.

    The default range is EDM's ``[sigma_min, sigma_max] = [0.002, 80]``.
    """

    t_min: float = 0.002
    t_max: float = 80.0
    name: str = field(default="edm", init=False)

    def __post_init__(self) -> None:
        _check_range(self.t_min, self.t_max)
        if self.t_min == 0:
            raise ValueError("`t_min` must be > 0: sigma_0 = 0.")

    def alpha(self, t: float | Tensor) -> Tensor:
        return torch.ones_like(_time(t))

    def sigma(self, t: float | Tensor) -> Tensor:
        return _time(t).clone()

    def f(self, t: float | Tensor) -> Tensor:
        return torch.zeros_like(_time(t))

    def g2(self, t: float | Tensor) -> Tensor:
        return 2 * _time(t)


@dataclass(frozen=True)
class DDIMScaledLinearSchedule(NoiseSchedule):
    """Discrete ``scaled_linear`` betas (Stable Diffusion, DDIM) as a continuous VP schedule.

    ``beta_k = (sqrt(beta_start) + k / (K - 1) (sqrt(beta_end) - sqrt(beta_start)))^2``,
    ``k = 0 .. K - 1``, and ``L_k = log alpha_bar_k = sum_{i < k} log(1 - beta_i)`` at
    ``t_k = k / K`` (``L_0 = 0``). Between knots ``L(t)`` is the cubic Hermite interpolant with
    slopes the mean of the neighbouring secants (one-sided at the ends), so ``L`` is C^1 and
    exact at the knots. Then

        alpha_t = exp(L/2),  sigma_t^2 = 1 - exp(L),  f = L'/2,  g^2 = -L'.

    ``t_min = 1 / K`` is the first training step (diffusers' timestep 0, ``sigma ~ 0.029``);
    :meth:`discrete_time` maps diffusers' timestep ``k`` to ``t = (k + 1) / K``.
    """

    beta_start: float = 0.00085
    beta_end: float = 0.012
    num_train_timesteps: int = 1000
    name: str = field(default="ddim", init=False)
    _knots: Tensor = field(init=False, repr=False, compare=False)
    _slopes: Tensor = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        require_positive(self.beta_start, "beta_start")
        require_positive(self.beta_end, "beta_end")
        if self.beta_end >= 1:
            raise ValueError("`beta_end` must be < 1.")
        steps = require_int(self.num_train_timesteps, "num_train_timesteps", 2)
        roots = torch.linspace(
            math.sqrt(self.beta_start), math.sqrt(self.beta_end), steps, dtype=torch.float64
        )
        knots = torch.cat(
            [torch.zeros(1, dtype=torch.float64), torch.cumsum(torch.log1p(-(roots**2)), 0)]
        )
        secants = torch.diff(knots) * steps
        slopes = torch.cat([secants[:1], 0.5 * (secants[1:] + secants[:-1]), secants[-1:]])
        object.__setattr__(self, "_knots", knots)
        object.__setattr__(self, "_slopes", slopes)

    @property
    def t_min(self) -> float:  # type: ignore[override]
        return 1.0 / self.num_train_timesteps

    @property
    def t_max(self) -> float:  # type: ignore[override]
        return 1.0

    def discrete_time(self, timestep: int | Tensor) -> Tensor:
        """Continuous time ``(k + 1) / K`` of diffusers' training timestep ``k`` (0-based)."""
        return (_time(timestep) + 1) / self.num_train_timesteps

    def alphas_cumprod(self) -> Tensor:
        """``alpha_bar`` at the ``K`` training timesteps, as diffusers' ``alphas_cumprod``."""
        return torch.exp(self._knots[1:])

    def _hermite(self, t: float | Tensor) -> tuple[Tensor, Tensor]:
        """``L(t)`` and ``L'(t)``."""
        t = _time(t)
        steps = self.num_train_timesteps
        knots = self._knots.to(t.device)
        slopes = self._slopes.to(t.device)
        scaled = t.to(torch.float64) * steps
        index = scaled.floor().clamp(0, steps - 1).long()
        u = scaled - index
        h = 1.0 / steps
        y0, y1 = knots[index], knots[index + 1]
        m0, m1 = slopes[index] * h, slopes[index + 1] * h
        u2, u3 = u * u, u * u * u
        value = (
            (2 * u3 - 3 * u2 + 1) * y0
            + (u3 - 2 * u2 + u) * m0
            + (-2 * u3 + 3 * u2) * y1
            + (u3 - u2) * m1
        )
        derivative = (
            (6 * u2 - 6 * u) * y0
            + (3 * u2 - 4 * u + 1) * m0
            + (-6 * u2 + 6 * u) * y1
            + (3 * u2 - 2 * u) * m1
        ) * steps
        return value.to(t.dtype), derivative.to(t.dtype)

    def coefficients(self, t: float | Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        value, derivative = self._hermite(t)
        return (
            torch.exp(0.5 * value),
            torch.sqrt(-torch.expm1(value)),
            0.5 * derivative,
            -derivative,
        )

    def alpha(self, t: float | Tensor) -> Tensor:
        return torch.exp(0.5 * self._hermite(t)[0])

    def sigma(self, t: float | Tensor) -> Tensor:
        return torch.sqrt(-torch.expm1(self._hermite(t)[0]))

    def f(self, t: float | Tensor) -> Tensor:
        return 0.5 * self._hermite(t)[1]

    def g2(self, t: float | Tensor) -> Tensor:
        return -self._hermite(t)[1]


SCHEDULES: dict[str, type[NoiseSchedule]] = {
    "vp": VPSchedule,
    "sub_vp": SubVPSchedule,
    "ve": VESchedule,
    "edm": EDMSchedule,
    "ddim": DDIMScaledLinearSchedule,
}


def noise_schedule(name: str, **kwargs: float) -> NoiseSchedule:
    """The schedule called ``name`` (``vp``, ``sub_vp``, ``ve``, ``edm``, ``ddim``), with kwargs."""
    key = name.replace("-", "_").lower()
    if key not in SCHEDULES:
        raise ValueError(f"Unknown noise schedule {name!r}; choose one of {sorted(SCHEDULES)}.")
    return SCHEDULES[key](**kwargs)
