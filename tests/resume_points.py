"""Resume points of the plugin table's resume tests, shared by one process and the DDP launch.

A row's uninterrupted run trains three epochs and is checkpointed in the middle of the second
(at a train batch's end, as ``ModelCheckpoint(every_n_train_steps=...)`` saves). It is compared
with a run resumed, under another seed, from:

- ``epoch-boundary``: ``trainer.save_checkpoint()`` after a first run of ``max_epochs=1``;
- ``mid-epoch-checkpoint``: the uninterrupted run's own mid-epoch checkpoint;
- ``max-steps-stop``: ``trainer.save_checkpoint()`` after a first run stopped by ``max_steps``
  in the middle of the first epoch.

The compared state: weights, optimizer and scheduler states, plugin states, the values logged
last, the step and the epoch.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from lightning.pytorch import Callback, Trainer

RESUME_POINTS = ("epoch-boundary", "mid-epoch-checkpoint", "max-steps-stop")


class CheckpointMidEpoch(Callback):
    """Saves at the end of train batch ``nb + max(1, nb // 2)`` (``nb`` batches an epoch)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def on_train_batch_end(self, trainer, *_) -> None:
        batches = trainer.num_training_batches
        if trainer.global_step == batches + max(1, batches // 2):
            trainer.save_checkpoint(self.path)


def run_state(trainer: Trainer, model, callbacks) -> dict:
    """What a resumed run must reproduce."""
    return {
        "weights": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "optimizers": [optimizer.state_dict() for optimizer in trainer.optimizers],
        "schedulers": [c.scheduler.state_dict() for c in trainer.lr_scheduler_configs],
        "plugins": [callback.state_dict() for callback in callbacks],
        "logged": {k: v.detach().clone() for k, v in trainer.callback_metrics.items()},
        "step": trainer.global_step,
        "epoch": trainer.current_epoch,
    }


Fit = Callable[..., tuple]
"""``fit(folder, seed=..., ckpt_path=..., extra_callbacks=..., **trainer_kwargs)`` of one row,
returning ``(trainer, model, callbacks)``."""


def straight_run(fit: Fit, folder: Path) -> tuple[dict, Path, int]:
    """The uninterrupted run's state, its mid-epoch checkpoint and its batches per epoch."""
    checkpoint = folder / "mid-epoch.ckpt"
    trainer, model, callbacks = fit(
        folder, max_epochs=3, extra_callbacks=[CheckpointMidEpoch(checkpoint)]
    )
    state = run_state(trainer, model, callbacks[:-1])
    return state, checkpoint, trainer.num_training_batches


def resumed_run(fit: Fit, folder: Path, point: str, mid_epoch: Path, batches: int) -> dict:
    """The state of the run resumed from ``point`` (a different seed: everything that matters
    must come from the checkpoint)."""
    checkpoint = mid_epoch
    if point != "mid-epoch-checkpoint":
        if point == "epoch-boundary":
            stop = {"max_epochs": 1}
        else:
            stop = {"max_steps": max(1, batches // 2)}
        first, _, _ = fit(folder / "first", **stop)
        checkpoint = folder / "first.ckpt"
        first.save_checkpoint(checkpoint)
    trainer, model, callbacks = fit(
        folder / "resumed", seed=123, max_epochs=3, ckpt_path=checkpoint
    )
    return run_state(trainer, model, callbacks)


def same_state(a, b) -> bool:
    """Equal states, tensors compared exactly (``==`` cannot compare them)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_state(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_state(x, y) for x, y in zip(a, b))
    return a == b


def differences(resumed: dict, straight: dict) -> list[str]:
    """The parts of ``resumed`` that differ from ``straight`` (empty when the resume is exact)."""
    return [part for part in straight if not same_state(resumed[part], straight[part])]
