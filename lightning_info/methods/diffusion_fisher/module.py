"""A small diffusion model for low-dimensional data, with the trace-matching head of DF-TM.

``eps_net(x_t, t)`` predicts the noise of ``x_t = alpha_t x_0 + sigma_t eps`` (so the score is
``s = -eps_net / sigma_t``), trained with ``E ||eps_net(x_t, t) - eps||^2`` for
``t ~ U(t_min, t_max)`` of the chosen noise schedule (Ho et al., 2020; Song et al., 2021). With
``trace_matching=True`` a scalar head is trained alongside to give ``T(x_t, t) ~ E[||x_0||^2 |
x_t]``, the one quantity the diffusion-Fisher trace needs beyond the score when the data set is
not at hand (DF-TM, Wang et al., ICML 2025; see
:func:`~lightning_info.methods.diffusion_fisher.functional.trace_matching_fisher_trace`), in one of
two ways:

- ``trace_target="second_moment"`` (the paper's): the head regresses ``||x_0||^2`` directly;
- ``trace_target="denoising_error"`` (default): the head ``V >= 0`` regresses the network's own
  squared denoising error ``||eps_hat(x_t) - eps||^2`` (``eps_hat`` detached), and
  ``T = ||x0_hat||^2 + (sigma^2 / alpha^2) V`` with the Tweedie estimate
  ``x0_hat = (x_t - sigma eps_hat) / alpha``. Since ``alpha^2 ||x_0 - x0_hat||^2 / sigma^2 =
  ||eps_hat - eps||^2``, both heads target the same ``T``, but in DF-TM's
  ``tr F = d / sigma^2 - (alpha^2 / sigma^4) (T - ||x0_hat||^2)`` this one gives
  ``tr F = (d - V) / sigma^2``: the head's error is divided by ``sigma^2`` instead of being the
  difference of two ``O(||x_0||^2 / sigma^4)`` terms, which ruins the trace at small noise.

The noise and times of a step are drawn from a generator seeded by ``(seed, step, rank)``, so a
resumed run continues exactly and DDP ranks draw different noise.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lightning_info.core.sampling import keyed_generator
from lightning_info.core.validation import (
    require_bool,
    require_choice,
    require_int,
    require_non_negative,
    require_positive,
)
from lightning_info.diffusion.noise_schedules import NoiseSchedule, noise_schedule
from lightning_info.methods.diffusion_fisher.functional import trace_matching_loss


class TimeConditionedMLP(nn.Module):
    """``net([x, fourier(log sigma_t)])``: an MLP on the point and a Fourier embedding of time.

    ``dim``, ``out`` and ``hidden`` are ints >= 1, ``layers`` and ``frequencies`` ints >= 0;
    ``forward`` takes ``(B, dim)`` points and ``(B,)`` time features.
    """

    def __init__(self, dim: int, out: int, hidden: int, layers: int, frequencies: int = 8):
        super().__init__()
        self.dim = require_int(dim, "dim", 1)
        require_int(out, "out", 1)
        require_int(hidden, "hidden", 1)
        require_int(layers, "layers", 0)
        require_int(frequencies, "frequencies", 0)
        self.register_buffer("frequencies", 2.0 ** torch.arange(frequencies) * math.pi / 8)
        blocks: list[nn.Module] = []
        width = dim + 2 * frequencies
        for _ in range(layers):
            blocks += [nn.Linear(width, hidden), nn.SiLU()]
            width = hidden
        blocks.append(nn.Linear(width, out))
        self.net = nn.Sequential(*blocks)

    def forward(self, x: Tensor, time_feature: Tensor) -> Tensor:
        if x.dim() != 2 or x.shape[1] != self.dim:
            raise ValueError(f"`x` must be (B, {self.dim}) points, got {tuple(x.shape)}.")
        if time_feature.shape != (x.shape[0],):
            raise ValueError(
                f"`time_feature` must have shape ({x.shape[0]},), one value per point, got "
                f"{tuple(time_feature.shape)}."
            )
        angles = time_feature[:, None] * self.frequencies[None].to(x.dtype)
        return self.net(torch.cat([x, angles.sin(), angles.cos()], dim=1))


TRACE_TARGETS = ("denoising_error", "second_moment")


class DiffusionModel(pl.LightningModule):
    """Denoising diffusion on ``(x,)`` batches of ``dim``-dimensional points.

    Args:
        dim: data dimension.
        schedule: a noise-schedule name (``vp``, ``sub_vp``, ``ve``, ``edm``, ``ddim``).
        eps_net: the noise predictor, called as ``eps_net(x_t, log sigma_t)`` on ``(B, dim)``
            points and ``(B,)`` log noise levels and returning ``(B, dim)``; ``None`` builds
            ``TimeConditionedMLP(dim, dim, hidden, layers)``.
        hidden, layers: width and depth of the default ``eps_net`` and of the trace head.
        trace_matching: also train ``T(x_t, t) ~ E[||x_0||^2 | x_t]``.
        trace_target: ``"denoising_error"`` or ``"second_moment"`` (module docstring).
        trace_weight: weight of the trace-matching loss.
        lr: Adam learning rate.
        seed: seeds the initialisation of the default networks and the per-step noise.
    """

    def __init__(
        self,
        dim: int = 2,
        schedule: str = "vp",
        eps_net: nn.Module | None = None,
        hidden: int = 128,
        layers: int = 3,
        trace_matching: bool = True,
        trace_target: Literal["denoising_error", "second_moment"] = "denoising_error",
        trace_weight: float = 0.1,
        lr: float = 2e-3,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["eps_net"])
        self.dim = require_int(dim, "dim", 1)
        if not isinstance(schedule, str):
            raise TypeError(
                f"`schedule` must be a schedule name such as 'vp', got {type(schedule).__name__}."
            )
        self.schedule: NoiseSchedule = noise_schedule(schedule)
        require_int(hidden, "hidden", 1)
        require_int(layers, "layers", 0)
        require_bool(trace_matching, "trace_matching")
        self.trace_weight = require_non_negative(trace_weight, "trace_weight")
        self.trace_target = require_choice(trace_target, "trace_target", TRACE_TARGETS)
        self.lr = require_positive(lr, "lr")
        self.seed = require_int(seed, "seed", 0)
        if eps_net is not None:
            _check_eps_net(eps_net, self.dim)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            self.eps_net = (
                TimeConditionedMLP(self.dim, self.dim, hidden, layers)
                if eps_net is None
                else eps_net
            )
            self.trace_net = (
                TimeConditionedMLP(self.dim, 1, hidden, layers) if trace_matching else None
            )

    def _time_feature(self, t: Tensor) -> Tensor:
        return torch.log(self.schedule.sigma(t)).to(self.dtype)

    def _per_point(self, t: float | Tensor, x: Tensor) -> Tensor:
        t = torch.as_tensor(t, dtype=x.dtype, device=x.device)
        return t.expand(x.shape[0]) if t.dim() == 0 else t

    def _checked(self, x: Tensor, t: float | Tensor) -> Tensor:
        """``t`` per point, after checking that ``x`` is ``(B, dim)`` and every ``t`` lies in the
        schedule's ``[t_min, t_max]`` (where the network was trained; ``sigma_0 = 0`` makes the
        score at ``t = 0`` undefined). For the public methods, not the training step."""
        if not isinstance(x, Tensor) or x.dim() != 2 or x.shape[1] != self.dim:
            shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"`x` must be (B, {self.dim}) points, got {shape}.")
        if isinstance(t, Tensor):
            if t.dtype == torch.bool or t.is_complex() or t.dim() > 1:
                raise TypeError(f"`t` must be a number or a (B,) tensor of times, got {t!r}.")
            if t.dim() == 1 and t.shape[0] != x.shape[0]:
                raise ValueError(f"`t` has {t.shape[0]} times for {x.shape[0]} points.")
            if t.numel():
                self.schedule.check_time(float(t.min()), "t")
                self.schedule.check_time(float(t.max()), "t")
        else:
            self.schedule.check_time(t, "t")
        return self._per_point(t, x)

    def _epsilon(self, x: Tensor, t: Tensor) -> Tensor:
        return self.eps_net(x, self._time_feature(t))

    def epsilon(self, x: Tensor, t: float | Tensor) -> Tensor:
        """The predicted noise ``eps_net(x, t)``, ``(B, dim)``; ``t`` in ``[t_min, t_max]``."""
        return self._epsilon(x, self._checked(x, t))

    def score(self, x: Tensor, t: float | Tensor) -> Tensor:
        """``grad log q_t(x) ~ -eps_net(x, t) / sigma_t``; ``t`` in ``[t_min, t_max]``."""
        t = self._checked(x, t)
        return -self._epsilon(x, t) / self.schedule.sigma(t).to(x.dtype)[:, None]

    def expected_sq_norm(self, x: Tensor, t: float | Tensor) -> Tensor:
        """The trace head ``T(x, t) ~ E[||x_0||^2 | x_t = x]``, ``(B,)``; ``t`` in
        ``[t_min, t_max]``."""
        if self.trace_net is None:
            raise RuntimeError("this model has no trace head: build it with trace_matching=True.")
        return self._expected_sq_norm(x, self._checked(x, t))

    def _expected_sq_norm(self, x: Tensor, t: Tensor) -> Tensor:
        t = self._per_point(t, x)
        head = self.trace_net(x, self._time_feature(t)).squeeze(1)
        if self.trace_target == "second_moment":
            return head
        alpha = self.schedule.alpha(t).to(x.dtype)
        sigma = self.schedule.sigma(t).to(x.dtype)
        x0_hat = (x - sigma[:, None] * self._epsilon(x, t)) / alpha[:, None]
        return (x0_hat * x0_hat).sum(1) + (sigma / alpha) ** 2 * F.softplus(head)

    def denoising_error(self, x: Tensor, t: float | Tensor) -> Tensor:
        """The head ``V(x, t) ~ E[||eps_hat(x_t) - eps||^2 | x_t = x]`` (``denoising_error``);
        ``t`` in ``[t_min, t_max]``."""
        if self.trace_net is None:
            raise RuntimeError("this model has no trace head: build it with trace_matching=True.")
        return self._denoising_error(x, self._checked(x, t))

    def _denoising_error(self, x: Tensor, t: Tensor) -> Tensor:
        return F.softplus(self.trace_net(x, self._time_feature(t)).squeeze(1))

    def losses(self, x0: Tensor, generator: torch.Generator) -> dict[str, Tensor]:
        """Denoising and trace-matching losses at random times and noise."""
        if x0.dim() != 2 or x0.shape[1] != self.dim:
            raise ValueError(f"batches must be (B, {self.dim}) points, got {tuple(x0.shape)}.")
        s = self.schedule
        u = torch.rand(x0.shape[0], generator=generator, dtype=torch.float64)
        t = (s.t_min + (s.t_max - s.t_min) * u).to(x0.device)
        noise = torch.randn(x0.shape, generator=generator).to(x0)
        alpha = s.alpha(t).to(x0.dtype)[:, None]
        sigma = s.sigma(t).to(x0.dtype)[:, None]
        xt = alpha * x0 + sigma * noise
        t = t.to(x0.dtype)
        predicted = self._epsilon(xt, t)
        losses = {"denoising": ((predicted - noise) ** 2).sum(1).mean()}
        if self.trace_net is not None and self.trace_target == "denoising_error":
            target = ((predicted.detach() - noise) ** 2).sum(1)
            losses["trace_matching"] = ((self._denoising_error(xt, t) - target) ** 2).mean()
        elif self.trace_net is not None:
            losses["trace_matching"] = trace_matching_loss(self._expected_sq_norm, x0, t, noise, s)
        return losses

    def _generator(self, stage: int, step: int) -> torch.Generator:
        return keyed_generator(self.seed, stage, step, self.global_rank)

    def _total(self, losses: dict[str, Tensor]) -> Tensor:
        return losses["denoising"] + self.trace_weight * losses.get("trace_matching", 0.0)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        losses = self.losses(batch[0], self._generator(0, self.global_step))
        for name, value in losses.items():
            self.log(f"train/{name}", value, prog_bar=name == "denoising", sync_dist=True)
        return self._total(losses)

    def _evaluate(self, batch: Any, batch_idx: int, stage: int, prefix: str) -> None:
        losses = self.losses(batch[0], self._generator(stage, batch_idx))
        for name, value in losses.items():
            self.log(f"{prefix}/{name}", value, sync_dist=True)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self._evaluate(batch, batch_idx, 1, "val")

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self._evaluate(batch, batch_idx, 2, "test")

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def _check_eps_net(eps_net: nn.Module, dim: int) -> None:
    """Raise unless ``eps_net`` maps ``(1, dim)`` points and ``(1,)`` times to ``(1, dim)``: one
    forward on zeros at construction, in eval mode and without gradients."""
    if not isinstance(eps_net, nn.Module):
        raise TypeError(f"`eps_net` must be an nn.Module, got {type(eps_net).__name__}.")
    signature = (
        f"`eps_net` must take (B, {dim}) points and (B,) times, called as "
        f"eps_net(x_t, log_sigma_t), and return (B, {dim}) (a plain nn.Linear takes one input; "
        "wrap it or use TimeConditionedMLP)"
    )
    was_training = eps_net.training
    eps_net.eval()
    try:
        with torch.no_grad():
            output = eps_net(torch.zeros(1, dim), torch.zeros(1))
    except (RuntimeError, TypeError, ValueError) as error:
        raise ValueError(f"{signature}; calling it failed: {error}") from error
    finally:
        eps_net.train(was_training)
    if not isinstance(output, Tensor):
        raise ValueError(f"{signature}; it returned {type(output).__name__}.")
    shape = tuple(output.shape)
    if shape != (1, dim):
        raise ValueError(f"`eps_net` must predict (B, {dim}) noise, got shape {shape} for B = 1.")
