"""``SmoothedInformationMonitor``: Fisher information, entropy and MI of a layer's noisy outputs.

During every (due) validation epoch a forward hook collects the outputs of each chosen layer
(by default: the input of the last ``nn.Linear`` *applied* in a validation step, i.e. the
penultimate features; the call order is recorded by hooks during the first validation batch,
not read from the registration order), one flattened row per sample, optionally projected onto
a fixed random ``max_dim``-dimensional subspace. At the end of the epoch the rows of all
processes are gathered (torchmetrics ``cat`` states) and, for every noise variance ``t``, the
plug-in estimates of
:mod:`lightning_info.methods.smoothed_information.functional` are logged, each under
``metric_key(prefix, layer, f"{symbol}_t={t:g}")`` (``info/net.1/j_t_0.1`` for ``J_t=0.1``):

- ``{prefix}/{layer}/j_t_{t}``: Fisher information ``J(f * phi_t)`` of the smoothed output law;
- ``{prefix}/{layer}/h_t_{t}``: its differential entropy (de Bruijn, nats);
- ``{prefix}/{layer}/i_t_{t}``: ``I(X; X + sqrt(t) Z)``, what a Gaussian channel of noise
  variance ``t`` carries about the representation ``X`` (nats, at most ``log n``).

The projection has orthonormal columns, so ``P^T (X + sqrt(t) Z) = P^T X + sqrt(t) Z'`` with
``Z'`` standard normal: the logged values are exactly those of the law of ``P^T X``, the
representation seen through that subspace. ``t`` is on the scale of the layer's outputs.

With ``probe`` the hook instead runs once per due epoch on that fixed batch (``pl_module(probe)``),
split across processes under DDP, so that the values follow one set of inputs through training.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.utilities import rank_zero_warn
from lightning.pytorch.utilities.model_helpers import is_overridden
from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle

from lightning_info.core.logging import metric_key
from lightning_info.core.validation import require_int
from lightning_info.methods.smoothed_information.functional import (
    SmoothedEstimatorOptions,
    check_estimator_options,
    check_times,
    smoothed_information,
)
from lightning_info.methods.smoothed_information.metrics import SampleReservoir


class SmoothedInformationMonitor(Callback):
    """Log ``J``, ``h`` and ``I`` of ``f * phi_t`` for the outputs of chosen layers.

    Args:
        layers: name(s) of submodules of the LightningModule (dotted paths as in
            ``named_modules()``, e.g. ``"net.1"`` or ``"model.encoder.layer.3"``) whose outputs
            are measured; a tuple output uses its first element. ``None``: the *input* of the
            last ``nn.Linear`` applied during a validation step (or the probe's forward),
            logged as ``input_of_<name>``, which every classifier has. It is found by hooks on
            every ``nn.Linear`` during the first validation batch (the sanity check's when
            there is one) and its rows from that batch are kept; name the layer when another
            Linear runs after the head (e.g. a loss's projection).
        t: noise variance(s) ``t > 0``, on the scale of the layer outputs.
        max_dim: project outputs wider than this onto a fixed random orthonormal basis of
            ``max_dim`` directions (seeded); ``None`` keeps every coordinate.
        max_samples: rows kept per layer (a seeded uniform subset of all validation samples,
            see :class:`~lightning_info.methods.smoothed_information.metrics.SampleReservoir`);
            ``None`` keeps all.
        probe: a fixed input batch; when given, the layers are read on it at the end of each due
            validation epoch instead of on the validation batches.
        options: the estimator's ``method``, ``num_mc``, ``grid``, ``log_step`` and
            ``tail_factor`` (:class:`SmoothedEstimatorOptions`; by default 1024 Monte Carlo
            draws), passed to
            :func:`~lightning_info.methods.smoothed_information.functional.smoothed_information`.
        seed: seed of the projection, of the subsample and of the Monte Carlo draws.
        every_n_epochs: measure on validation epochs whose ``current_epoch`` is a multiple of it.
        log_prefix: first part of the logged names (lowercased, punctuation as ``_``).
    """

    def __init__(
        self,
        layers: str | Sequence[str] | None = None,
        t: float | Sequence[float] = (0.1, 1.0),
        *,
        max_dim: int | None = 16,
        max_samples: int | None = 1024,
        probe: Tensor | None = None,
        options: SmoothedEstimatorOptions = SmoothedEstimatorOptions(num_mc=1024),
        seed: int = 0,
        every_n_epochs: int = 1,
        log_prefix: str = "info",
    ) -> None:
        names = None if layers is None else [layers] if isinstance(layers, str) else list(layers)
        if names is not None:
            if not names or not all(isinstance(n, str) and n for n in names):
                raise ValueError(
                    f"`layers` must be non-empty module name(s) or None, got {layers!r}."
                )
            if len(set(names)) != len(names):
                raise ValueError(f"`layers` must not repeat a name, got {names!r}.")
        times, _ = check_times(t)
        if probe is not None and not isinstance(probe, Tensor):
            raise TypeError(f"`probe` must be a tensor batch, got {type(probe).__name__}.")
        # the arguments, as given (a LightningCLI config reads them back)
        self.layers = layers
        self.t = t
        self.max_dim = None if max_dim is None else require_int(max_dim, "max_dim", 1)
        self.max_samples = (
            None if max_samples is None else require_int(max_samples, "max_samples", 1)
        )
        self.probe = probe
        self.options = check_estimator_options(options)
        self.seed = require_int(seed, "seed", 0)
        self.every_n_epochs = require_int(every_n_epochs, "every_n_epochs", 1)
        if not isinstance(log_prefix, str):
            raise TypeError(f"`log_prefix` must be a str, got {log_prefix!r}.")
        metric_key(log_prefix)  # raises for a prefix with nothing a logger can show
        self.log_prefix = log_prefix
        self._names = names
        self._times = times
        self.metrics: dict[str, SampleReservoir] = {}
        self._targets: dict[str, tuple[nn.Module, bool]] = {}
        self._projections: dict[tuple[str, int], Tensor] = {}
        self._handles: list[RemovableHandle] = []
        self._checks: list[RemovableHandle] = []
        self._linears: dict[str, nn.Module] = {}  # the default's candidates, until it is found
        self._trace: list[tuple[str, Tensor]] | None = None  # (Linear, its rows) in call order
        self._tracers: list[RemovableHandle] = []

    # -- hooks -----------------------------------------------------------------------------

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        # unknown names fail here, before any training
        self._targets = self._resolve(pl_module)
        if set(self.metrics) != set(self._targets):
            self.metrics = {name: self._reservoir() for name in self._targets}
        if stage == "fit" and not _has_validation_loop(trainer, pl_module):
            rank_zero_warn(
                "SmoothedInformationMonitor measures at the end of validation epochs, but this run "
                "has no validation loop (no validation_step, no val dataloader or "
                "limit_val_batches=0): it will log nothing. Add a validation loop, or call "
                "trainer.validate after fitting."
            )

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # the first forward of the run (sanity check or first training step) checks that every
        # measured layer yields a tensor, so a wrong layer fails before any optimizer step
        self._remove(self._checks)
        for name in self._targets:
            self._checks.append(self._register(name, self._check_once(name)))

    def _check_once(self, name: str):
        def check(value: Any) -> None:
            self._remove(self._checks)
            _first_tensor(name, value)

        return check

    def on_validation_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        for metric in self.metrics.values():
            metric.reset()
            metric.restart_keys()  # the same subset of the same validation rows every epoch
            metric.to(pl_module.device)
        if self._due(trainer) and self.probe is None:
            self._attach()

    def on_validation_batch_start(
        self, trainer: Trainer, pl_module: LightningModule, *args: Any
    ) -> None:
        if self._linears and self.probe is None:
            self._start_trace()

    def on_validation_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, *args: Any
    ) -> None:
        if self._trace is not None:
            self._finish_trace(pl_module, keep_rows=self._due(trainer))

    def on_validation_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._detach()
        if not self._due(trainer):
            return
        if self.probe is not None:
            self._run_probe(trainer, pl_module)
        for name, metric in self.metrics.items():
            samples = metric.compute()  # gathers every process's rows
            metric.reset()
            info = smoothed_information(
                samples,
                self._times,
                self.options,
                generator=torch.Generator().manual_seed(self.seed),
            )
            for k, t in enumerate(self._times):
                for symbol, values in (
                    ("J", info.fisher),
                    ("h", info.entropy),
                    ("I", info.mutual_information),
                ):
                    pl_module.log(
                        metric_key(self.log_prefix, name, f"{symbol}_t={t:g}"),
                        float(values[k]),
                        on_step=False,
                        on_epoch=True,
                        sync_dist=True,  # the same value on every process
                        batch_size=1,
                    )

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: Any) -> None:
        self._detach()
        self._remove(self._checks)
        self._stop_trace()

    def teardown(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        self._detach()
        self._remove(self._checks)
        self._stop_trace()

    # -- helpers ---------------------------------------------------------------------------

    def _due(self, trainer: Trainer) -> bool:
        return not trainer.sanity_checking and trainer.current_epoch % self.every_n_epochs == 0

    def _resolve(self, pl_module: LightningModule) -> dict[str, tuple[nn.Module, bool]]:
        """``{logged name: (module, reads its input)}`` of the layers to measure."""
        modules = dict(pl_module.named_modules())
        self._linears = {}
        if self._names is None:
            linears = {name: m for name, m in modules.items() if isinstance(m, nn.Linear)}
            if not linears:
                raise ValueError(
                    "SmoothedInformationMonitor: the model has no nn.Linear whose input to "
                    "measure; pass `layers=` the names of the layers to measure."
                )
            self._linears = linears  # the last one applied is found in the first forward
            return {}
        missing = [name for name in self._names if name not in modules]
        if missing:
            known = [name for name in modules if name]
            shown = ", ".join(known[:30]) + (", ..." if len(known) > 30 else "")
            raise ValueError(
                f"SmoothedInformationMonitor: the model has no submodule(s) {missing}; pass names "
                f"from `named_modules()`: {shown}."
            )
        return {name: (modules[name], False) for name in self._names}

    def _reservoir(self) -> SampleReservoir:
        return SampleReservoir(max_samples=self.max_samples, seed=self.seed)

    def _start_trace(self) -> None:
        """Record every ``nn.Linear`` call, in order, with the rows its input would give (small:
        projected to ``max_dim``), until :meth:`_finish_trace`."""
        self._stop_trace()
        self._trace = []

        def record(name: str, value: Tensor) -> None:
            self._trace.append((name, self._rows(f"input_of_{name}", value)))

        for name, module in self._linears.items():
            self._tracers.append(
                module.register_forward_pre_hook(lambda m, args, name=name: record(name, args[0]))
            )

    def _stop_trace(self) -> None:
        self._remove(self._tracers)
        self._trace = None

    def _finish_trace(self, pl_module: LightningModule, keep_rows: bool) -> None:
        """Measure the input of the last ``nn.Linear`` called since :meth:`_start_trace`; with
        ``keep_rows`` its rows of the traced batch go into the metric, in call order."""
        trace = self._trace
        self._stop_trace()
        if not trace:
            raise ValueError(
                "SmoothedInformationMonitor: no nn.Linear ran in the validation step, so there "
                "is no last Linear whose input to measure; pass `layers=` the names of the "
                "layers to measure."
            )
        last = trace[-1][0]
        logged = f"input_of_{last}"
        self._targets = {logged: (self._linears[last], True)}
        self._linears = {}
        self.metrics = {logged: self._reservoir().to(pl_module.device)}
        if keep_rows:
            for name, rows in trace:
                if name == last:
                    self.metrics[logged].update(rows)
            self._attach()  # the epoch's later batches

    def _register(self, name: str, consume) -> RemovableHandle:
        """A hook on layer ``name`` calling ``consume`` with its input or output."""
        module, reads_input = self._targets[name]
        if reads_input:
            return module.register_forward_pre_hook(lambda m, args: consume(args[0]))
        return module.register_forward_hook(lambda m, args, output: consume(output))

    def _attach(self) -> None:
        self._detach()
        for name in self._targets:
            self._handles.append(self._register(name, self._collector(name)))

    def _detach(self) -> None:
        self._remove(self._handles)

    @staticmethod
    def _remove(handles: list[RemovableHandle]) -> None:
        for handle in handles:
            handle.remove()
        handles.clear()

    def _collector(self, name: str):
        def collect(value: Any) -> None:
            self.metrics[name].update(self._rows(name, value))

        return collect

    def _rows(self, name: str, output: Any) -> Tensor:
        output = _first_tensor(name, output)
        rows = output.detach().reshape(output.shape[0], -1).to(torch.float64)
        width = rows.shape[1]
        if self.max_dim is not None and width > self.max_dim:
            rows = rows @ self._projection(name, width).to(rows.device)
        return rows

    def _projection(self, name: str, width: int) -> Tensor:
        """A fixed ``(width, max_dim)`` matrix with orthonormal columns (same on every process)."""
        key = (name, width)
        if key not in self._projections:
            generator = torch.Generator().manual_seed(self.seed)
            gaussian = torch.randn(width, self.max_dim, generator=generator, dtype=torch.float64)
            self._projections[key] = torch.linalg.qr(gaussian).Q
        return self._projections[key]

    def _run_probe(self, trainer: Trainer, pl_module: LightningModule) -> None:
        shard = self.probe[trainer.global_rank :: trainer.world_size]
        if self._linears:  # the default layer, not found yet: this forward finds it
            self._start_trace()
            # a process without probe rows still finds the layer, on one row it then drops
            self._forward(pl_module, shard if shard.shape[0] else self.probe[:1])
            self._finish_trace(pl_module, keep_rows=shard.shape[0] > 0)
            self._detach()
            return
        if shard.shape[0] == 0:
            return  # this process contributes nothing; the gather still runs in compute()
        self._attach()
        self._forward(pl_module, shard)

    def _forward(self, pl_module: LightningModule, batch: Tensor) -> None:
        """``pl_module(batch)`` in eval mode without gradients; every hook removed after."""
        was_training = pl_module.training
        pl_module.eval()
        try:
            with torch.no_grad():
                pl_module(batch.to(pl_module.device))
        finally:
            self._remove(self._tracers)
            self._detach()
            pl_module.train(was_training)


def _first_tensor(name: str, value: Any) -> Tensor:
    """``value``, or the first element of a tuple/list ``value``; raises unless a tensor."""
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], Tensor):
        value = value[0]
    if not isinstance(value, Tensor) or value.ndim == 0:
        raise TypeError(
            f"layer {name!r} gives {type(value).__name__}; SmoothedInformationMonitor reads a "
            "batched tensor (or the first tensor of a tuple): pass `layers=` a module that "
            "returns one."
        )
    return value


def _has_validation_loop(trainer: Trainer, pl_module: LightningModule) -> bool:
    if trainer.limit_val_batches == 0 or not is_overridden("validation_step", pl_module):
        return False
    # Lightning keeps the val dataloader's source on the fit loop (datamodule, module or loaders)
    source = getattr(trainer.fit_loop.epoch_loop.val_loop, "_data_source", None)
    return source.is_defined() if hasattr(source, "is_defined") else True
