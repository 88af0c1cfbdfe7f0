"""The FIC-TSC callbacks: ``FisherConstraint``, the gradient rescaling, and ``Lookahead``, the
optimizer wrapper the paper trains with."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from torch.optim import Optimizer
from torch.utils.hooks import RemovableHandle

from lightning_info.core.logging import metric_key
from lightning_info.core.schedules import (
    ConstantSchedule,
    CosineSchedule,
    ExponentialSchedule,
    LinearSchedule,
    Schedule,
    as_schedule,
)
from lightning_info.core.strategies import gradient_norm_source
from lightning_info.core.validation import require_fraction, require_int
from lightning_info.methods.fic_tsc.functional import _rescale_to_fisher_bound_

_MONOTONE_SCHEDULES = (LinearSchedule, CosineSchedule, ExponentialSchedule)
_STEPS_CHECKED_WITHOUT_A_LENGTH = 100_000


def check_fisher_bound(value: float, problem: str, remedy: str) -> float:
    """``value`` as a float when it is a finite bound above 0; else a ``ValueError`` saying
    ``problem`` and ``remedy`` (the checks of ``FisherConstraint`` and ``FisherMonitor``)."""
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{problem}; {remedy}")
    return float(value)


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

    A step whose gradient is not finite (NaN or infinite trace: a diverged loss, a bad batch)
    goes ahead by default (``skip_non_finite=False``) on the gradients as they are, as in plain
    PyTorch: the hook reads nothing back from the device, and the non-finite values reach the
    weights. Under a ``GradScaler`` (``precision="16-mixed"``) the scaler skips such a step
    itself. With ``skip_non_finite=True`` such a step is skipped as the scaler would skip it: the
    gradients of the optimizer's parameters are set to ``None`` before ``optimizer.step()``, so
    neither the weights nor the optimizer state (momentum, Adam moments, step counts) change, as
    when ``training_step`` returns ``None``. Knowing that a step is non-finite takes one read of
    a flag on the host per step (one device synchronisation), which the user asks for with the
    switch; under a ``GradScaler`` no flag is read. Scheduler steps and optimizer step hooks
    still run on a skipped step.

    Logged (per step): ``{prefix}/trace_before``, ``{prefix}/trace_after``, ``{prefix}/max_fisher``;
    (per epoch) ``{prefix}/constrained_fraction``, the fraction of steps that were rescaled. With
    several optimizers each is constrained on its own parameters and logged under
    ``{prefix}/opt{i}/...``.

    Args:
        max_fisher: the bound ``eps`` (> 0), or a :class:`~lightning_info.core.schedules.Schedule`
            of ``global_step`` (e.g. ``LinearSchedule(20.0, 2.0, 1000)``). Constant, linear,
            cosine and exponential schedules are checked once here (> 0 at both ends); any other
            ``Schedule`` is checked here at step 0 and once more when training starts, at every
            step the run will take (``trainer.estimated_stepping_batches``; a run of unknown
            length: its next 100,000 steps). Never per step.
        log_prefix: prefix of the logged metric names (lowercased, punctuation as ``_``).
        skip_non_finite: skip steps whose gradient is not finite, one host read per step
            (above); default ``False``.
    """

    def __init__(
        self,
        max_fisher: float | Schedule = 2.0,
        log_prefix: str = "fisher",
        skip_non_finite: bool = False,
    ) -> None:
        self.max_fisher = as_schedule(max_fisher, "max_fisher")
        self._checked_every_step = self._check_schedule(self.max_fisher)
        if not isinstance(log_prefix, str) or not log_prefix:
            raise TypeError(f"`log_prefix` must be a non-empty str, got {log_prefix!r}.")
        metric_key(log_prefix)  # raises for a prefix with nothing a logger can show
        if not isinstance(skip_non_finite, bool):
            raise TypeError(f"`skip_non_finite` must be a bool, got {skip_non_finite!r}.")
        self.log_prefix = log_prefix
        self.skip_non_finite = skip_non_finite
        self.num_steps = 0
        self.num_constrained = 0
        self.num_skipped = 0
        self._norm_source = "gradients"  # set for the run's strategy in setup
        self._constrained_since_sync: torch.Tensor | None = None

    @classmethod
    def _check_schedule(cls, schedule: Schedule) -> bool:
        """Check the bound where its values are known in advance; whether that covered every
        step (a constant, or a monotone ramp whose two ends are its extremes)."""
        if type(schedule) is ConstantSchedule:
            cls._check_bound(schedule.value, schedule)
            return True
        if type(schedule) in _MONOTONE_SCHEDULES:
            cls._check_bound(min(schedule.start, schedule.end), schedule)
            return True
        cls._check_bound(schedule(0), schedule)
        return False

    @staticmethod
    def _check_bound(value: float, schedule: Schedule | None = None) -> float:
        source = f" (from {schedule!r})" if schedule is not None else ""
        return check_fisher_bound(
            value,
            f"FisherConstraint needs max_fisher > 0 at every step, got {value!r}{source}",
            "choose a positive bound (the paper uses 2.0) or a schedule that stays positive.",
        )

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        self._norm_source = gradient_norm_source(trainer, type(self).__name__)

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Check a schedule whose extremes are not known in advance at every step of the run,
        before the first one (the run's length is known once its loaders are set up)."""
        if self._checked_every_step:
            return
        first = trainer.global_step
        try:
            horizon = trainer.estimated_stepping_batches
        except Exception:  # a length Lightning cannot estimate (e.g. a varying accumulation)
            horizon = math.inf
        if not (isinstance(horizon, int) and horizon >= 0):
            horizon = first + _STEPS_CHECKED_WITHOUT_A_LENGTH
        for step in range(first, max(int(horizon), first + 1)):
            self._check_bound(self.max_fisher(step), self.max_fisher)

    def on_before_optimizer_step(
        self, trainer: Trainer, pl_module: LightningModule, optimizer: Optimizer
    ) -> None:
        eps = self.max_fisher(trainer.global_step)
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
        before, after = _rescale_to_fisher_bound_(params, eps, total_norm=total_norm)
        constrained = (after < before).to(torch.float32)
        self.num_steps += 1
        skip = self.skip_non_finite and not _scaler_skips_non_finite(trainer)
        if skip and not bool(torch.isfinite(before)):  # the one host read of the step
            for param in params:
                param.grad = None
            self.num_skipped += 1
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
        """``log_prefix``, or ``log_prefix/opt{i}`` when the module has several optimizers, as
        :func:`~lightning_info.core.logging.metric_key` writes it."""
        optimizers = trainer.optimizers
        if len(optimizers) <= 1:
            return metric_key(self.log_prefix)
        index = next(i for i, o in enumerate(optimizers) if o is optimizer)
        return metric_key(self.log_prefix, f"opt{index}")

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
        return {
            "num_steps": self.num_steps,
            "num_constrained": self.num_constrained,
            "num_skipped": self.num_skipped,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the counts; refuses counts that are not ints or contradict each other."""
        steps = require_int(state_dict["num_steps"], "num_steps", 0)
        constrained = require_int(state_dict["num_constrained"], "num_constrained", 0)
        skipped = require_int(state_dict.get("num_skipped", 0), "num_skipped", 0)
        if constrained > steps or skipped > steps:
            raise ValueError(
                f"the saved FisherConstraint state counts {constrained} constrained of {steps} "
                f"steps ({skipped} skipped); it is not a FisherConstraint checkpoint state."
            )
        self.num_steps, self.num_constrained, self.num_skipped = steps, constrained, skipped
        self._constrained_since_sync = None


def _scaler_skips_non_finite(trainer: Trainer) -> bool:
    """Whether AMP's ``GradScaler`` (which skips steps with inf/NaN gradients) runs the step."""
    precision = getattr(trainer, "precision_plugin", None)
    return getattr(precision, "scaler", None) is not None


class Lookahead(Callback):
    """Lookahead (Zhang, Lucas, Hinton & Ba, 2019) around whatever optimizer a module configures:
    ``k`` fast steps per slow step, slow step size ``alpha``.

    Every ``k`` optimizer steps the slow weights ``phi`` move ``alpha`` of the way to the fast
    weights ``theta`` and the fast weights restart from them:

        phi <- phi + alpha (theta - phi),    theta <- phi.

    The inner optimizer (e.g. AdamW) takes the fast steps and keeps its own state; the weights are
    the module's trainable parameters. Each optimizer's steps are counted on their own (a step
    hook on the optimizer), and its ``k``-th step synchronises the parameters it updates, right
    after that step, as the Lookahead optimizer wrapper would: with two optimizers, e.g. a GAN's,
    each keeps its own period whatever the other does. A step is counted when the optimizer
    steps: gradient accumulation is respected, and a step that AMP's scaler skips (inf gradients)
    is not counted. The slow weights and the counts are saved in the checkpoint (exact resume),
    and under DDP every rank holds the same weights, so every rank makes the same update without
    any communication.
    """

    def __init__(self, k: int = 5, alpha: float = 0.5) -> None:
        self.k = require_int(k, "k", 1)
        self.alpha = require_fraction(alpha, "alpha", inclusive_zero=False)
        self.slow: list[torch.Tensor] | None = None
        self.steps: list[int] | None = None  # steps taken by each optimizer
        self._handles: list[RemovableHandle] = []

    @staticmethod
    def _weights(pl_module: LightningModule) -> list[torch.Tensor]:
        return [p for p in pl_module.parameters() if p.requires_grad]

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        weights = self._weights(pl_module)
        if self.slow is None:
            self.slow = [w.detach().clone() for w in weights]
            return
        if len(self.slow) != len(weights):
            raise ValueError(
                f"the checkpoint's Lookahead holds {len(self.slow)} slow tensors for "
                f"{len(weights)} trainable parameters: resume the same model"
            )
        for i, (slow, weight) in enumerate(zip(self.slow, weights)):
            if slow.shape != weight.shape:
                raise ValueError(
                    f"the checkpoint's Lookahead slow tensor {i} has shape {tuple(slow.shape)} "
                    f"but parameter {i} has shape {tuple(weight.shape)}: resume the same model"
                )
        self.slow = [s.to(w.device, w.dtype) for s, w in zip(self.slow, weights)]

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # after the checkpoint is restored: the counts and the optimizers are final here
        optimizers = trainer.optimizers
        if self.steps is None:
            self.steps = [0] * len(optimizers)
        elif len(self.steps) != len(optimizers):
            raise ValueError(
                f"the checkpoint's Lookahead counted the steps of {len(self.steps)} optimizer(s), "
                f"but the module configures {len(optimizers)}: resume the same model"
            )
        slot = {id(w): i for i, w in enumerate(self._weights(pl_module))}
        self._remove()
        for index, optimizer in enumerate(optimizers):
            params = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]
            outside = [tuple(p.shape) for p in params if id(p) not in slot]
            if outside:
                raise ValueError(
                    f"optimizer {index} updates tensors of shapes {outside} that are not "
                    "trainable parameters of the module; Lookahead keeps slow weights of the "
                    "module's parameters only."
                )
            if not hasattr(optimizer, "register_step_post_hook"):
                raise TypeError(
                    f"Lookahead counts steps with torch.optim.Optimizer's step hooks; optimizer "
                    f"{index} ({type(optimizer).__name__}) has none."
                )
            pairs = [(p, slot[id(p)]) for p in params]
            self._handles.append(
                optimizer.register_step_post_hook(partial(self._after_step, index, pairs))
            )

    @torch.no_grad()
    def _after_step(self, index: int, pairs: list[tuple[torch.Tensor, int]], *_: Any) -> None:
        self.steps[index] += 1
        if self.steps[index] % self.k:
            return
        for fast, i in pairs:
            slow = self.slow[i]
            slow.add_(fast - slow, alpha=self.alpha)
            fast.copy_(slow)

    def _remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._remove()

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: Any) -> None:
        self._remove()

    def teardown(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        self._remove()

    def state_dict(self) -> dict[str, Any]:
        """A snapshot: copies of the slow weights (on the CPU) and of the counts, which later
        steps do not change."""
        slow = None if self.slow is None else [s.detach().to("cpu", copy=True) for s in self.slow]
        steps = None if self.steps is None else list(self.steps)
        return {"k": self.k, "alpha": self.alpha, "slow": slow, "steps": steps}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the slow weights and the counts (copies, so the dict can be reused).

        The state must come from a Lookahead of the same ``k`` and ``alpha``: one saved under
        other settings is refused (construct the callback with the saved ones to resume it).
        """
        k = require_int(state_dict["k"], "k", 1)
        alpha = require_fraction(state_dict["alpha"], "alpha", inclusive_zero=False)
        if (k, alpha) != (self.k, self.alpha):
            raise ValueError(
                f"the checkpoint's Lookahead state was saved by Lookahead(k={k}, alpha={alpha}) "
                f"but this one is Lookahead(k={self.k}, alpha={self.alpha}); construct it with "
                "the saved settings to resume that run."
            )
        slow = state_dict["slow"]
        if slow is not None:
            if not all(isinstance(s, torch.Tensor) for s in slow):
                raise TypeError("the checkpoint's Lookahead `slow` must be a list of tensors.")
            slow = [s.detach().clone() for s in slow]
        steps = state_dict.get("steps")
        if steps is None and "last_step" in state_dict:  # before per-optimizer counts
            steps = [state_dict["last_step"]]
        if steps is not None:
            steps = [require_int(s, f"steps[{i}]", 0) for i, s in enumerate(steps)]
        self.slow, self.steps = slow, steps
