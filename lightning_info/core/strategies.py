"""Checks of the run's distributed strategy, shared by plugins that touch gradients."""

from __future__ import annotations

from lightning.pytorch import Trainer
from lightning.pytorch.strategies import (
    DDPStrategy,
    DeepSpeedStrategy,
    FSDPStrategy,
    ModelParallelStrategy,
    SingleDeviceStrategy,
)


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


def gradient_norm_source(trainer: Trainer, plugin: str) -> str:
    """How a plugin gets the global gradient norm under the run's strategy.

    ``"gradients"``: from the stored gradients themselves, whole on every rank (single device,
    DDP) or DTensor shards that ``torch.nn.utils.get_total_norm`` reduces
    (``ModelParallelStrategy``: FSDP2 ``fully_shard``, tensor parallelism). ``"fsdp"``: from
    FSDP's own ``clip_grad_norm_`` (``FSDPStrategy``, whose flat-parameter shards are plain
    tensors). DeepSpeed and other strategies are refused: they keep gradients where a callback
    cannot reduce them.
    """
    strategy = trainer.strategy
    if isinstance(strategy, DeepSpeedStrategy):
        raise RuntimeError(
            f"{plugin} cannot measure the gradient under DeepSpeed, which partitions and reduces "
            "gradients inside its engine; use FSDP (strategy='fsdp' or ModelParallelStrategy), "
            "DDP or a single device."
        )
    if isinstance(strategy, FSDPStrategy):
        return "fsdp"
    if isinstance(strategy, (SingleDeviceStrategy, DDPStrategy, ModelParallelStrategy)):
        return "gradients"
    raise RuntimeError(
        f"{plugin} does not support the {type(strategy).__name__} strategy; use a single device, "
        "DDP, FSDPStrategy or ModelParallelStrategy."
    )
