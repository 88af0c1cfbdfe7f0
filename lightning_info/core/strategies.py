"""Checks of the run's distributed strategy, shared by plugins that touch gradients."""

from __future__ import annotations

from lightning.pytorch import Trainer
from lightning.pytorch.strategies import DDPStrategy, DeepSpeedStrategy, SingleDeviceStrategy


def require_replicated_gradients(trainer: Trainer, plugin: str) -> None:
    """Raise unless every rank holds the full, already averaged gradient before the optimizer step.

    That holds for a single device and for DDP in all its launch modes (``ddp``, ``ddp_spawn``,
    ``ddp_fork``, ...), where gradients are all-reduced during backward. Sharded strategies (FSDP,
    DeepSpeed, model parallel) keep only a shard per rank, so a statistic of the local gradient
    would silently be wrong there.
    """
    strategy = trainer.strategy
    supported = isinstance(strategy, (SingleDeviceStrategy, DDPStrategy))
    if isinstance(strategy, DeepSpeedStrategy) or not supported:
        raise RuntimeError(
            f"{plugin} needs the full gradient on every rank, which the "
            f"{type(strategy).__name__} strategy does not provide. Use a single device or "
            "DDP (strategy='ddp', 'ddp_spawn' or 'ddp_fork')."
        )
