"""``FisherConstraint``: the FIC-TSC gradient rescaling as a Lightning Callback."""

from __future__ import annotations

from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from torch.optim import Optimizer

from lightning_info.core.schedules import Schedule, as_schedule
from lightning_info.core.strategies import gradient_norm_source
from lightning_info.methods.fic_tsc.functional import constrain_fisher_trace_


class FisherConstraint(Callback):
    """Keep the empirical Fisher trace of every optimizer step below ``max_fisher``.

    After backward and before ``optimizer.step()`` (``on_before_optimizer_step``), the trace
    ``tr F_hat = ||g||^2`` of the mini-batch gradient is measured and, when it exceeds
    ``eps_t = max_fisher(global_step)``, the gradients are rescaled by ``sqrt(eps_t / tr F_hat)``
    (see :mod:`lightning_info.methods.fic_tsc.functional`). With a constant ``max_fisher`` this is
    exactly
    ``torch.nn.utils.clip_grad_norm_(params, sqrt(max_fisher))``.

    Lightning calls the hook once per optimizer step, after gradient accumulation, after AMP's
    ``GradScaler`` has unscaled the gradients and, under DDP, after they have been all-reduced, so
    the constraint applies to the gradient the optimizer actually uses.

    Sharded training: under ``ModelParallelStrategy`` (FSDP2 ``fully_shard``, DTensor gradients)
    the trace is reduced over the shards by ``torch.nn.utils.get_total_norm``; under
    ``FSDPStrategy`` it is FSDP's own ``clip_grad_norm_`` reduction (called with an infinite
    bound, so it only measures; one optimizer). Each rank then rescales its shard by the same
    factor, which equals ``clip_grad_norm_`` of the whole model. DeepSpeed is refused.

    Logged (per step): ``{prefix}/trace_before``, ``{prefix}/trace_after``, ``{prefix}/max_fisher``;
    (per epoch) ``{prefix}/constrained_fraction``, the fraction of steps that were rescaled. With
    several optimizers each is constrained on its own parameters and logged under
    ``{prefix}/opt{i}/...``.

    Args:
        max_fisher: the bound ``eps`` (> 0), or a :class:`~lightning_info.core.schedules.Schedule`
            of ``global_step`` (e.g. ``LinearSchedule(20.0, 2.0, 1000)``).
        log_prefix: prefix of the logged metric names.
    """

    def __init__(self, max_fisher: float | Schedule = 2.0, log_prefix: str = "fisher") -> None:
        self.max_fisher = as_schedule(max_fisher, "max_fisher")
        self._check_bound(self.max_fisher(0))
        self.log_prefix = log_prefix
        self.num_steps = 0
        self.num_constrained = 0
        self._norm_source = "gradients"  # set for the run's strategy in setup
        self._constrained_since_sync: torch.Tensor | None = None

    @staticmethod
    def _check_bound(value: float) -> float:
        if not value > 0:
            raise ValueError(
                f"FisherConstraint needs max_fisher > 0 at every step, got {value!r}; "
                "choose a positive bound (the paper uses 2.0) or a schedule that stays positive."
            )
        return value

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        self._norm_source = gradient_norm_source(trainer, type(self).__name__)

    def on_before_optimizer_step(
        self, trainer: Trainer, pl_module: LightningModule, optimizer: Optimizer
    ) -> None:
        eps = self._check_bound(self.max_fisher(trainer.global_step))
        params = [p for group in optimizer.param_groups for p in group["params"]]
        total_norm = None
        if self._norm_source == "fsdp":
            if len(trainer.optimizers) > 1:
                raise RuntimeError(
                    "FisherConstraint under FSDPStrategy measures the whole model's gradient "
                    "with FSDP's clip_grad_norm_, so it supports one optimizer only; use "
                    "ModelParallelStrategy (FSDP2) for several."
                )
            # An infinite bound only measures: the clip factor clamps to 1.
            total_norm = trainer.strategy.model.clip_grad_norm_(float("inf"))
        before, after = constrain_fisher_trace_(params, eps, total_norm=total_norm)
        constrained = (after < before).to(torch.float32)
        self.num_steps += 1
        # Kept on the device and folded into the plain counter only when read: no sync per step.
        if self._constrained_since_sync is None:
            self._constrained_since_sync = torch.zeros((), device=constrained.device)
        self._constrained_since_sync += constrained
        prefix = self._prefix_for(trainer, optimizer)
        pl_module.log_dict(
            {
                f"{prefix}/trace_before": before,
                f"{prefix}/trace_after": after,
                f"{prefix}/max_fisher": torch.tensor(eps),
            },
            on_step=True,
            on_epoch=False,
            batch_size=1,
        )
        pl_module.log(
            f"{prefix}/constrained_fraction",
            constrained,
            on_step=False,
            on_epoch=True,
            batch_size=1,
        )

    def _prefix_for(self, trainer: Trainer, optimizer: Optimizer) -> str:
        """``log_prefix``, or ``log_prefix/opt{i}`` when the module has several optimizers."""
        optimizers = trainer.optimizers
        if len(optimizers) <= 1:
            return self.log_prefix
        index = next(i for i, o in enumerate(optimizers) if o is optimizer)
        return f"{self.log_prefix}/opt{index}"

    @property
    def constrained_fraction(self) -> float:
        """Fraction of all optimizer steps seen so far (resumes included) that were rescaled."""
        self._sync_counter()
        return self.num_constrained / self.num_steps if self.num_steps else 0.0

    def _sync_counter(self) -> None:
        if self._constrained_since_sync is not None:
            self.num_constrained += int(self._constrained_since_sync.item())
            self._constrained_since_sync = None

    def state_dict(self) -> dict[str, Any]:
        self._sync_counter()
        return {"num_steps": self.num_steps, "num_constrained": self.num_constrained}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.num_steps = int(state_dict["num_steps"])
        self.num_constrained = int(state_dict["num_constrained"])
        self._constrained_since_sync = None
