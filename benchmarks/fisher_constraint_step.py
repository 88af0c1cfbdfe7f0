"""Time per optimizer step of four ways to train the same InceptionTimeClassifier on a CPU.

1. ``plain``: cross-entropy, AdamW.
2. ``constraint``: plain + :class:`~lightning_info.FisherConstraint` (``max_fisher=2.0``), which
   rescales the gradient after backward; no extra pass.
3. ``penalty``: :class:`~lightning_info.FisherPenaltyMixin` with ``FisherPenalty(weight=0.1)``,
   a backward with ``create_graph=True`` followed by a backward through it (double backward).
4. ``sam``: sharpness-aware minimisation (Foret et al., ICLR 2021) with ``rho=0.05``, two
   forward/backward passes per step.

Every configuration starts from the same initialisation (same seed), reads the same batches in
the same order and runs through a ``lightning.pytorch.Trainer`` in fp32 on the CPU. A step is
timed from ``on_train_batch_start`` to ``on_train_batch_end`` (forward, backward, gradient
transform and ``optimizer.step``; not data loading). The first ``--warmup`` steps of each run are
discarded and the median of the rest is taken; each configuration runs ``--repeats`` times,
interleaved with the others, and the median of those medians is reported.

torch runs with ``--threads`` threads (default 0: torch's default). ``--quick``: 3 timed steps
after 1 warm-up, one repeat, ``num_filters=4, depth=3``. ``--json PATH`` also writes the results
with the header (``benchmarks/harness.py``).

Usage::

    python benchmarks/fisher_constraint_step.py [--quick] [--dataset BasicMotions] [--steps 30]
        [--warmup 5] [--batch-size 64] [--repeats 3] [--num-filters 32] [--depth 6]
        [--threads 0] [--json PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import statistics
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import lightning.pytorch as pl
import torch
from harness import benchmark_parser, header, print_header, write_json
from lightning.pytorch import Callback, LightningModule, Trainer
from torch import Tensor
from torch.nn import functional as F

from lightning_info import (
    FisherConstraint,
    FisherPenalty,
    FisherPenaltyMixin,
    InceptionTimeClassifier,
    UCRUEADataModule,
)
from lightning_info.core.logging import markdown_table
from lightning_info.core.threads import torch_threads

METHODS = ("plain", "constraint", "penalty", "sam")
PASSES = {
    "plain": "1 fwd + 1 bwd",
    "constraint": "1 fwd + 1 bwd",
    "penalty": "1 fwd + double bwd",
    "sam": "2 fwd + 2 bwd",
}
MAX_FISHER = 2.0
PENALTY_WEIGHT = 0.1
SAM_RHO = 0.05


class SAMMixin:
    """Sharpness-aware minimisation (Foret et al., 2021) for a LightningModule, put first in bases.

    One step on a batch with loss ``L``: ``g = grad L(w)``, ``e = rho * g / (||g||_2 + 1e-12)``
    (norm over all trainable parameters), ``g_sam = grad L(w + e)``; ``w`` is then restored from a
    copy (bit for bit) and the module's own optimizer steps with ``g_sam``.

    The first pass is the host's ``training_step`` (its logging, metrics and returned loss are
    those of plain training); the second pass is :meth:`sam_loss`, which logs nothing. BatchNorm
    layers normalise with the statistics of the batch in both passes; the running statistics are
    updated by the first pass only: all buffers are restored after the second.
    """

    sam_rho: float = SAM_RHO

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.automatic_optimization = False

    def sam_loss(self, batch: tuple[Tensor, Tensor]) -> Tensor:
        """Loss of the second pass: cross-entropy of ``self(x)`` against ``y``."""
        x, y = batch
        return F.cross_entropy(self(x), y)

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        optimizer = self.optimizers()
        optimizer.zero_grad()
        loss = super().training_step(batch, batch_idx)
        self.manual_backward(loss)
        params = [p for p in self.parameters() if p.requires_grad and p.grad is not None]
        with torch.no_grad():
            weights = [p.detach().clone() for p in params]
            buffers = [b.detach().clone() for b in self.buffers()]
            grad_norm = torch.nn.utils.get_total_norm([p.grad for p in params])
            scale = self.sam_rho / (grad_norm + 1e-12)
            for p in params:
                p.add_(p.grad * scale)
        optimizer.zero_grad()
        self.manual_backward(self.sam_loss(batch))
        with torch.no_grad():
            for p, w in zip(params, weights):
                p.copy_(w)
            for b, saved in zip(self.buffers(), buffers):
                b.copy_(saved)
        optimizer.step()
        return loss


class PenalisedInceptionTime(FisherPenaltyMixin, InceptionTimeClassifier):
    fisher_penalty = FisherPenalty(weight=PENALTY_WEIGHT)


class SAMInceptionTime(SAMMixin, InceptionTimeClassifier):
    pass


class StepTimer(Callback):
    """Seconds from ``on_train_batch_start`` to ``on_train_batch_end`` and the batch size, per step.

    Put it first in the callback list so that the other callbacks' hooks fall inside the window.
    """

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self.batch_sizes: list[int] = []
        self._start = 0.0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._start = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.seconds.append(time.perf_counter() - self._start)
        self.batch_sizes.append(int(batch[0].shape[0]))


def build(
    method: str, in_channels: int, num_classes: int, seed: int = 0, **model_kwargs: Any
) -> tuple[LightningModule, list[Callback]]:
    """The module and extra callbacks of ``method``, initialised from ``seed``."""
    if method not in METHODS:
        raise ValueError(f"Unknown method {method!r}; choose from {', '.join(METHODS)}.")
    cls = {"penalty": PenalisedInceptionTime, "sam": SAMInceptionTime}.get(
        method, InceptionTimeClassifier
    )
    pl.seed_everything(seed, verbose=False)
    model = cls(in_channels, num_classes, **model_kwargs)
    callbacks = [FisherConstraint(max_fisher=MAX_FISHER)] if method == "constraint" else []
    return model, callbacks


def fit(model: LightningModule, data: Any, max_steps: int, callbacks: Sequence[Callback]) -> None:
    """Train ``model`` for ``max_steps`` optimizer steps on the CPU in fp32, without validation.

    ``data`` is a LightningDataModule or a training DataLoader.
    """
    trainer = Trainer(
        accelerator="cpu",
        devices=1,
        precision="32-true",
        max_steps=max_steps,
        max_epochs=-1,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=list(callbacks),
    )
    if isinstance(data, pl.LightningDataModule):
        trainer.fit(model, datamodule=data)
    else:
        trainer.fit(model, train_dataloaders=data)


def train_loss(model: LightningModule, x: Tensor, y: Tensor) -> float:
    """Mean cross-entropy of ``model`` in eval mode on ``(x, y)``."""
    model.eval()
    with torch.no_grad():
        return float(F.cross_entropy(model(x), y))


@dataclass
class MethodResult:
    method: str
    passes: str
    run_ms: list[float] = field(default_factory=list)
    final_losses: list[float] = field(default_factory=list)
    batch_sizes: set[int] = field(default_factory=set)

    @property
    def ms_per_step(self) -> float:
        """Median over the repeats of the per-run median step time, in milliseconds."""
        return statistics.median(self.run_ms)

    @property
    def final_loss(self) -> float:
        return statistics.median(self.final_losses)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = benchmark_parser(
        __doc__.split("\n\n")[0],
        threads=0,
        quick_help="3 timed steps after 1 warm-up, 1 repeat, num_filters 4, depth 3",
    )
    parser.add_argument("--dataset", default="BasicMotions")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per run")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps at the start")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--num-filters", type=int, default=32)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.warmup, args.repeats, args.num_filters, args.depth = 3, 1, 1, 4, 3
    for name in ("steps", "repeats", "batch_size", "num_filters", "depth"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.warmup < 0:
        parser.error("--warmup must be >= 0")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, MethodResult]:
    """Run the benchmark, print the table and the final losses, return the results by method.

    torch runs with ``--threads`` threads (``0``: torch's default) and gets its former thread
    count back on return.
    """
    args = parse_args(argv)
    with torch_threads(args.threads):
        return _run(args)


def _run(args: argparse.Namespace) -> dict[str, MethodResult]:
    head = header(args)
    data = UCRUEADataModule(
        name=args.dataset, batch_size=args.batch_size, val_fraction=0.0, seed=args.seed
    )
    data.setup("fit")
    x_train, y_train = data.train_dataset.tensors
    model_kwargs = {"num_filters": args.num_filters, "depth": args.depth}
    initial, _ = build("plain", data.num_channels, data.num_classes, args.seed, **model_kwargs)
    initial_loss = train_loss(initial, x_train, y_train)

    results = {m: MethodResult(m, PASSES[m]) for m in METHODS}
    for _ in range(args.repeats):
        for method in METHODS:
            model, callbacks = build(
                method, data.num_channels, data.num_classes, args.seed, **model_kwargs
            )
            timer = StepTimer()
            fit(model, data, args.warmup + args.steps, [timer, *callbacks])
            result = results[method]
            result.run_ms.append(1e3 * statistics.median(timer.seconds[args.warmup :]))
            result.final_losses.append(train_loss(model, x_train, y_train))
            result.batch_sizes.update(timer.batch_sizes[args.warmup :])

    plain_ms = results["plain"].ms_per_step
    rows = [
        (r.method, f"{r.ms_per_step:.1f}", f"{r.ms_per_step / plain_ms:.2f}x", r.passes)
        for r in results.values()
    ]
    used = sorted(set().union(*(r.batch_sizes for r in results.values())))
    print_header(
        head,
        f"dataset {args.dataset} ({data.num_channels} channels x {data.series_length}, "
        f"{data.num_classes} classes, {data.num_train} training series)",
        f"batch size {'/'.join(map(str, used))} (requested {args.batch_size})",
        f"InceptionTime num_filters={args.num_filters} depth={args.depth}",
        f"{args.steps} timed steps after {args.warmup} warm-up, {args.repeats} repeats",
    )
    print()
    print(markdown_table(["method", "ms/step (median)", "ratio vs plain", "passes per step"], rows))
    print()
    steps = args.warmup + args.steps
    losses = ", ".join(f"{m} {r.final_loss:.4f}" for m, r in results.items())
    print(
        f"Training-set cross-entropy (eval mode) after {steps} steps, median over repeats: "
        f"{losses} (initialisation: {initial_loss:.4f})"
    )
    if args.json:
        write_json(
            args.json,
            head,
            {
                "batch_sizes": used,
                "initial_loss": initial_loss,
                "methods": {
                    m: {
                        **dataclasses.asdict(r),
                        "ms_per_step": r.ms_per_step,
                        "final_loss": r.final_loss,
                    }
                    for m, r in results.items()
                },
            },
        )
    return results


if __name__ == "__main__":
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", ".*does not have many workers.*")
    warnings.filterwarnings("ignore", ".*smaller than the logging interval.*")
    main()
