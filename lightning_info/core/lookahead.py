"""``Lookahead`` (Zhang, Lucas, Hinton & Ba, 2019) around whatever optimizer a module configures.

Every ``k`` optimizer steps the slow weights ``phi`` move ``alpha`` of the way to the fast weights
``theta`` and the fast weights restart from them:

    phi <- phi + alpha (theta - phi),    theta <- phi.

The inner optimizer (e.g. AdamW) takes the fast steps and keeps its own state. As a Callback it
wraps any optimizer without changing the module. Each optimizer's steps are counted on their own
(a step hook on the optimizer), and its ``k``-th step synchronises the parameters it updates,
right after that step, as the Lookahead optimizer wrapper would: with two optimizers, e.g. a
GAN's, each keeps its own period whatever the other does. A step is counted when the optimizer
steps: gradient accumulation is respected, and a step that AMP's scaler skips (inf gradients) is
not counted. The slow weights and the counts are saved in the checkpoint (exact resume), and
under DDP every rank holds the same weights, so every rank makes the same update without any
communication.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from torch.utils.hooks import RemovableHandle

from lightning_info.core.validation import require_fraction, require_int

__all__ = ["Lookahead"]


class Lookahead(Callback):
    """Lookahead with ``k`` fast steps per slow step and slow step size ``alpha`` (module
    docstring); the trainable parameters of the module are the weights, each synchronised on
    the step count of the optimizer that updates it."""

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
        elif len(self.slow) != len(weights):
            raise ValueError(
                f"the checkpoint's Lookahead holds {len(self.slow)} slow tensors for "
                f"{len(weights)} trainable parameters: resume the same model"
            )
        else:
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
        slow = None if self.slow is None else [s.detach().cpu() for s in self.slow]
        steps = None if self.steps is None else list(self.steps)
        return {"k": self.k, "alpha": self.alpha, "slow": slow, "steps": steps}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.k, self.alpha = int(state_dict["k"]), float(state_dict["alpha"])
        self.slow = state_dict["slow"]
        steps = state_dict.get("steps")
        if steps is None and "last_step" in state_dict:  # before per-optimizer counts
            steps = [int(state_dict["last_step"])]
        self.steps = None if steps is None else [int(s) for s in steps]
