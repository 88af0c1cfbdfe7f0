"""``FisherMonitor``: the empirical Fisher trace of every layer, for any Lightning run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from torch import Tensor
from torch.optim import Optimizer

from lightning_info.core.logging import metric_key
from lightning_info.core.schedules import Schedule, as_schedule
from lightning_info.core.strategies import gradient_norm_source
from lightning_info.core.validation import require_int
from lightning_info.methods.fic_tsc.callback import check_fisher_bound
from lightning_info.methods.fic_tsc.functional import gradient_norm


class FisherMonitor(Callback):
    """Per-layer empirical Fisher trace ``tr F_l = ||g_l||^2`` of the gradient each optimizer
    step uses, its running mean, and the fraction of steps a :class:`FisherConstraint` bound
    would bind.

    Measured in ``on_before_optimizer_step``: after gradient accumulation, after AMP's
    ``GradScaler`` has unscaled the gradients and, under DDP, after the all-reduce, so the trace
    is that of the gradient the optimizer applies (FIC-TSC's ``tr F_hat = ||g||^2``, summed here
    over each group's parameters only: the groups' traces add up to the whole model's). Under
    ``ModelParallelStrategy`` (FSDP2 ``fully_shard``, DTensor gradients) each group's trace is
    reduced over its shards by ``torch.nn.utils.get_total_norm`` (one collective per group per
    step), so every rank holds the whole model's numbers. ``FSDPStrategy`` (FSDP1: flat
    parameters) and DeepSpeed are refused at setup.

    Nothing is read back to the host in the step: the traces, their running sums and the count
    of binding steps stay on the device. Every ``every_n_steps`` optimizer steps, at the end of
    that batch, they are read once and sent to the trainer's loggers with the step Lightning
    logs that batch's own metrics at (as ``LearningRateMonitor`` does; with no logger nothing is
    read) and kept in :attr:`last_logged`.

    Logged, with ``P = log_prefix`` and ``G`` each group (a parameter-owning module by default,
    e.g. ``net.0``): ``P/G/trace`` (this step) and ``P/G/trace_mean`` (mean over every step of
    the run, resumes included), ``P/trace`` and ``P/trace_mean`` (the whole model), and with
    ``max_fisher``: ``P/max_fisher`` and ``P/binding_fraction``, the fraction of steps so far
    whose whole trace exceeded the bound (those a ``FisherConstraint(max_fisher)`` would have
    rescaled).

    Args:
        every_n_steps: optimizer steps between two logs (>= 1).
        depth: group the parameters by the first ``depth`` parts of their names (``1``:
            ``net``; ``2``: ``net.0``); ``None`` (default): by the module that owns them.
        groups: a mapping ``{group name: [parameter-name prefixes]}`` that replaces ``depth``:
            a parameter joins the first group with a prefix of its name, else ``other``.
        max_fisher: the bound whose binding fraction is reported (> 0, or a
            :class:`~lightning_info.core.schedules.Schedule` of ``global_step``); ``None``
            (default): not reported.
        log_prefix: prefix of the logged names.
    """

    def __init__(
        self,
        every_n_steps: int = 50,
        depth: int | None = None,
        groups: Mapping[str, Sequence[str]] | None = None,
        max_fisher: float | Schedule | None = None,
        log_prefix: str = "fisher_monitor",
    ) -> None:
        self.every_n_steps = require_int(every_n_steps, "every_n_steps", 1)
        self.depth = None if depth is None else require_int(depth, "depth", 1)
        self.groups = _checked_groups(groups)
        if groups is not None and depth is not None:
            raise ValueError("pass `groups` or `depth`, not both: `groups` replaces `depth`.")
        self.max_fisher = None if max_fisher is None else as_schedule(max_fisher, "max_fisher")
        if self.max_fisher is not None:
            bound = self.max_fisher(0)
            check_fisher_bound(
                bound,
                f"FisherMonitor needs max_fisher > 0, got {bound!r}",
                "pass the bound a FisherConstraint would use (the paper's is 2.0), or None to "
                "report no bound.",
            )
        if not isinstance(log_prefix, str) or not log_prefix:
            raise TypeError(f"`log_prefix` must be a non-empty str, got {log_prefix!r}.")
        metric_key(log_prefix)  # raises for a prefix with nothing a logger can show
        self.log_prefix = log_prefix
        self.group_names: list[str] | None = None
        self.num_steps = 0
        self.trace_sums: list[float] | None = None  # per group, from the checkpoint
        self.num_binding = 0
        self._parameters: list[list[Tensor]] = []
        self._sums: Tensor | None = None  # the running sums on the device
        self._binding: Tensor | None = None
        self._due: dict[str, Tensor] | None = None  # to log at the end of the batch
        self.last_logged: dict[str, float] = {}

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if stage != "fit":
            return
        source = gradient_norm_source(trainer, type(self).__name__)
        if source == "fsdp":
            raise RuntimeError(
                "FisherMonitor measures each layer's gradient, which FSDPStrategy's flat "
                "parameters do not keep apart; use ModelParallelStrategy (FSDP2 fully_shard), "
                "DDP or a single device, or FisherConstraint for the whole model's trace."
            )

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Group the optimizer's parameters (the optimizers are final here, after a resume)."""
        if len(trainer.optimizers) != 1:
            raise ValueError(
                f"FisherMonitor measures one optimizer's gradient; the module configures "
                f"{len(trainer.optimizers)}. Attach it to a module with one optimizer."
            )
        names = {id(p): name for name, p in pl_module.named_parameters()}
        grouped: dict[str, list[Tensor]] = {}
        for group in trainer.optimizers[0].param_groups:
            for param in group["params"]:
                if id(param) not in names:
                    raise ValueError(
                        f"the optimizer updates a tensor of shape {tuple(param.shape)} that is "
                        "not a parameter of the module; FisherMonitor names layers by the "
                        "module's parameter names."
                    )
                grouped.setdefault(self._group_of(names[id(param)]), []).append(param)
        group_names = sorted(grouped)
        if self.group_names is not None and self.group_names != group_names:
            raise ValueError(
                f"the checkpoint's FisherMonitor measured the groups {self.group_names}, this "
                f"run's are {group_names}; resume the same model with the same `depth`/`groups`."
            )
        self.group_names = group_names
        self._parameters = [grouped[name] for name in group_names]
        device = pl_module.device
        sums = self.trace_sums or [0.0] * len(group_names)
        self._sums = torch.tensor(sums, dtype=torch.float64, device=device)
        self._binding = torch.tensor(self.num_binding, dtype=torch.int64, device=device)

    def _group_of(self, name: str) -> str:
        if self.groups is not None:
            return next(
                (group for group, prefixes in self.groups.items() if name.startswith(prefixes)),
                "other",
            )
        parts = name.split(".")
        owner = parts[:-1] or parts  # a parameter of the root module is its own group
        return ".".join(owner if self.depth is None else parts[: self.depth])

    def on_before_optimizer_step(
        self, trainer: Trainer, pl_module: LightningModule, optimizer: Optimizer
    ) -> None:
        device = self._sums.device  # a group without gradients measures 0 on the CPU
        traces = torch.stack(
            [gradient_norm(p).to(device, torch.float64).pow(2) for p in self._parameters]
        )
        total = traces.sum()
        self._sums += traces
        self.num_steps += 1
        if self.max_fisher is not None:
            eps = self.max_fisher(trainer.global_step)
            self._binding += (total > eps).to(torch.int64)
        if self.num_steps % self.every_n_steps:
            return
        means = self._sums / self.num_steps
        due = {"trace": total, "trace_mean": means.sum()}
        if self.max_fisher is not None:
            due["max_fisher"] = torch.full((), float(eps), dtype=torch.float64, device=total.device)
            due["binding_fraction"] = self._binding.to(torch.float64) / self.num_steps
        for k, group in enumerate(self.group_names):
            due[f"{group}/trace"], due[f"{group}/trace_mean"] = traces[k], means[k]
        self._due = due

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, *args: Any) -> None:
        """Send the figures of a due step to the loggers: the one read of the device."""
        due, self._due = self._due, None
        if due is None or not trainer.loggers:
            return
        values = torch.stack([v.to(torch.float64) for v in due.values()]).tolist()
        metrics = {metric_key(self.log_prefix, name): v for name, v in zip(due, values)}
        self.last_logged = metrics
        step = trainer.fit_loop.epoch_loop._batches_that_stepped
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=step)

    @property
    def trace_means(self) -> dict[str, float]:
        """Each group's mean trace over the steps so far (one read of the device)."""
        self._fold()
        if not self.num_steps:
            return {}
        return {g: s / self.num_steps for g, s in zip(self.group_names, self.trace_sums)}

    @property
    def binding_fraction(self) -> float:
        """Fraction of the steps so far whose whole trace exceeded ``max_fisher``."""
        self._fold()
        return self.num_binding / self.num_steps if self.num_steps else 0.0

    def _fold(self) -> None:
        """Read the device's running sums into the plain fields (a checkpoint, a property)."""
        if self._sums is not None:
            self.trace_sums = self._sums.tolist()
            self.num_binding = int(self._binding)

    def state_dict(self) -> dict[str, Any]:
        self._fold()
        return {
            "group_names": None if self.group_names is None else list(self.group_names),
            "num_steps": self.num_steps,
            "trace_sums": None if self.trace_sums is None else list(self.trace_sums),
            "num_binding": self.num_binding,
            "every_n_steps": self.every_n_steps,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the running sums; refuses a state that contradicts itself."""
        steps = require_int(state_dict["num_steps"], "num_steps", 0)
        binding = require_int(state_dict["num_binding"], "num_binding", 0)
        names, sums = state_dict["group_names"], state_dict["trace_sums"]
        if binding > steps or (names is None) != (sums is None):
            raise ValueError("the saved state is not a FisherMonitor checkpoint state.")
        if names is not None:
            if len(names) != len(sums) or not all(isinstance(n, str) for n in names):
                raise ValueError("the saved FisherMonitor state names and sums do not match.")
            if not all(isinstance(s, (int, float)) and not isinstance(s, bool) for s in sums):
                raise TypeError("the saved FisherMonitor `trace_sums` must be floats.")
        self.group_names = None if names is None else list(names)
        self.trace_sums = None if sums is None else [float(s) for s in sums]
        self.num_steps, self.num_binding = steps, binding
        self._sums = self._binding = None


def _checked_groups(groups: Mapping[str, Sequence[str]] | None) -> dict[str, tuple] | None:
    if groups is None:
        return None
    if not isinstance(groups, Mapping) or not groups:
        raise TypeError(
            f"`groups` must be a non-empty mapping {{name: [parameter-name prefixes]}}, got "
            f"{groups!r}."
        )
    checked = {}
    for name, prefixes in groups.items():
        if isinstance(prefixes, str):
            prefixes = [prefixes]
        if not isinstance(name, str) or not name or not prefixes:
            raise TypeError(f"`groups` needs str names and prefixes; got {name!r}: {prefixes!r}.")
        if not all(isinstance(p, str) and p for p in prefixes):
            raise TypeError(f"`groups[{name!r}]` must hold non-empty str prefixes.")
        metric_key(name)
        checked[name] = tuple(prefixes)
    return checked
