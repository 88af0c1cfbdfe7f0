"""``Lookahead`` (Zhang, Lucas, Hinton & Ba, 2019) around whatever optimizer a module configures.

Every ``k`` optimizer steps the slow weights ``phi`` move ``alpha`` of the way to the fast weights
``theta`` and the fast weights restart from them:

    phi <- phi + alpha (theta - phi),    theta <- phi.

The inner optimizer (e.g. AdamW) takes the fast steps and keeps its own state. As a Callback it
wraps any optimizer without changing the module, counts optimizer steps (``trainer.global_step``)
so gradient accumulation is respected, saves the slow weights in the checkpoint (exact resume),
and under DDP every rank holds the same weights, so every rank makes the same update without any
communication.
"""

from __future__ import annotations

from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer

from lightning_info.core.validation import require_fraction, require_int

__all__ = ["Lookahead"]


class Lookahead(Callback):
    """Lookahead with ``k`` fast steps per slow step and slow step size ``alpha`` (module
    docstring); the trainable parameters of the module are the weights."""

    def __init__(self, k: int = 5, alpha: float = 0.5) -> None:
        self.k = require_int(k, "k", 1)
        self.alpha = require_fraction(alpha, "alpha", inclusive_zero=False)
        self.slow: list[torch.Tensor] | None = None
        self.last_step = 0

    @staticmethod
    def _weights(pl_module: LightningModule) -> list[torch.Tensor]:
        return [p for p in pl_module.parameters() if p.requires_grad]

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        weights = self._weights(pl_module)
        if self.slow is None:
            self.slow = [w.detach().clone() for w in weights]
            self.last_step = trainer.global_step
        elif len(self.slow) != len(weights):
            raise ValueError(
                f"the checkpoint's Lookahead holds {len(self.slow)} slow tensors for "
                f"{len(weights)} trainable parameters: resume the same model"
            )
        else:
            self.slow = [s.to(w.device, w.dtype) for s, w in zip(self.slow, weights)]

    @torch.no_grad()
    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, *args: Any) -> None:
        step = trainer.global_step
        if step == self.last_step:  # no optimizer step on this batch (gradient accumulation)
            return
        self.last_step = step
        if step % self.k:
            return
        for fast, slow in zip(self._weights(pl_module), self.slow):
            slow.add_(fast - slow, alpha=self.alpha)
            fast.copy_(slow)

    def state_dict(self) -> dict[str, Any]:
        slow = None if self.slow is None else [s.detach().cpu() for s in self.slow]
        return {"k": self.k, "alpha": self.alpha, "slow": slow, "last_step": self.last_step}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.k, self.alpha = int(state_dict["k"]), float(state_dict["alpha"])
        self.slow, self.last_step = state_dict["slow"], int(state_dict["last_step"])
