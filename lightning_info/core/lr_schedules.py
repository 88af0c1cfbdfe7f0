"""A warmup-cosine learning-rate scheduler that keeps its length across a resume.

Kept instead of ``transformers.get_cosine_schedule_with_warmup``: that one has no floor, rises
again after ``num_training_steps`` (its cosine is not held at the end) and, being a ``LambdaLR``
over a closure, checkpoints neither its length nor its warmup, so a run resumed with another
``estimated_stepping_batches`` would silently change its rates.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from lightning.pytorch.utilities import rank_zero_warn


class WarmupCosineLR(torch.optim.lr_scheduler.LambdaLR):
    """Linear warmup from ``floor`` to 1 over ``warmup_steps``, then cosine decay to ``floor`` at
    ``total_steps`` (see :func:`~lightning_info.core.schedules.warmup_cosine`).

    ``total_steps`` and ``warmup_steps`` are part of :meth:`state_dict`. A length that was
    estimated from the trainer (``estimated=True``) is replaced on :meth:`load_state_dict` by the
    checkpoint's, so a resumed run keeps the rates it was trained under even when its own
    estimate differs (a run continued to a larger ``max_epochs`` than it started with); a length
    given explicitly is kept.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        total_steps: int,
        warmup_steps: int,
        floor: float = 0.0,
        estimated: bool = False,
    ) -> None:
        self.total_steps = max(int(total_steps), 1)
        self.warmup_steps = max(int(warmup_steps), 0)
        self.floor = float(floor)
        self.estimated = estimated
        super().__init__(optimizer, self.factor)

    def factor(self, step: int) -> float:
        """``floor + (1 - floor) t / W`` for ``t < W``, else ``floor + (1 - floor)
        (1 + cos(pi min((t - W) / (N - W), 1))) / 2``."""
        floor, warmup, total = self.floor, self.warmup_steps, self.total_steps
        if step < warmup:
            return floor + (1 - floor) * step / warmup
        progress = min((step - warmup) / max(total - warmup, 1), 1.0)
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))

    def state_dict(self) -> dict[str, Any]:
        return {k: v for k, v in super().state_dict().items() if k != "lr_lambdas"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        saved = {k: state_dict[k] for k in ("total_steps", "warmup_steps") if k in state_dict}
        mine = {"total_steps": self.total_steps, "warmup_steps": self.warmup_steps}
        config = ("lr_lambdas", "floor", "estimated", *mine)
        state = {k: v for k, v in state_dict.items() if k not in config}
        self.__dict__.update(state)
        if self.estimated and saved and saved != mine:
            rank_zero_warn(
                f"Resuming with the checkpoint's learning-rate schedule ({saved['total_steps']} "
                f"steps) instead of this trainer's estimate ({mine['total_steps']}); pass "
                "`schedule_steps` to the module to choose the length."
            )
            self.__dict__.update(saved)
