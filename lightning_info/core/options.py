"""Option bundles shared by the LightningModules' constructors.

A module takes a bundle as one argument (``optimizer=AdamWOptions(lr=2e-4)``) instead of
re-declaring its fields; LightningCLI reads a dataclass argument as a nested group
(``--model.optimizer.lr 2e-4``, or ``optimizer: {lr: 2e-4}`` in a YAML).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from lightning_info.core.schedules import warmup_cosine_config
from lightning_info.core.validation import (
    require_finite,
    require_fraction,
    require_int,
    require_non_negative,
    require_positive,
)

__all__ = ["AdamWOptions", "as_options"]


@dataclass(frozen=True)
class AdamWOptions:
    """AdamW and, when ``warmup_fraction`` is given, its warmup-cosine schedule stepped every
    optimizer step (:func:`~lightning_info.core.schedules.warmup_cosine_config`).

    Args:
        lr, weight_decay, betas: AdamW's.
        warmup_fraction: the share of the schedule spent warming up; ``None``: a constant
            ``lr`` and no scheduler.
        schedule_steps: the schedule's length (``None``: the trainer's estimated steps).
        min_lr: the floor the cosine decays to, at most ``lr``.

    Every number is checked in ``__post_init__``: bools are not numbers, NaN and infinities are
    refused, and so is a ``min_lr`` above ``lr`` (the cosine would rise instead of decay).
    """

    lr: float = 1e-3
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    warmup_fraction: float | None = None
    schedule_steps: int | None = None
    min_lr: float = 0.0

    def __post_init__(self) -> None:
        lr = require_positive(self.lr, "optimizer.lr")
        require_non_negative(self.weight_decay, "optimizer.weight_decay")
        min_lr = require_non_negative(self.min_lr, "optimizer.min_lr")
        if min_lr > lr:
            raise ValueError(
                f"`optimizer.min_lr` ({min_lr!r}) must not exceed `optimizer.lr` ({lr!r}): it is "
                "the floor the schedule decays to; pass a min_lr <= lr."
            )
        betas = self.betas
        if isinstance(betas, (str, bytes)) or not hasattr(betas, "__len__"):
            raise TypeError(
                f"`optimizer.betas` must be a pair of numbers in [0, 1), got {betas!r}."
            )
        if len(betas) != 2:
            raise ValueError(
                f"`optimizer.betas` must be a pair of numbers in [0, 1), got {betas!r}."
            )
        for index, beta in enumerate(betas):
            if require_finite(beta, f"optimizer.betas[{index}]") >= 1.0 or beta < 0.0:
                raise ValueError(
                    f"`optimizer.betas` must be two numbers in [0, 1), got {tuple(betas)}."
                )
        if self.warmup_fraction is not None:
            require_fraction(self.warmup_fraction, "optimizer.warmup_fraction")
        if self.schedule_steps is not None:
            require_int(self.schedule_steps, "optimizer.schedule_steps", 1)
        object.__setattr__(self, "betas", tuple(float(b) for b in self.betas))

    def configure(self, parameters: Iterable[torch.nn.Parameter], trainer: Any) -> Any:
        """What ``configure_optimizers`` returns: the optimizer, with its schedule if any."""
        optimizer = torch.optim.AdamW(
            parameters, lr=self.lr, betas=self.betas, weight_decay=self.weight_decay
        )
        if self.warmup_fraction is None:
            return optimizer
        return warmup_cosine_config(
            optimizer,
            trainer,
            self.warmup_fraction,
            self.schedule_steps,
            floor=self.min_lr / self.lr,
        )


torch.serialization.add_safe_globals([AdamWOptions])  # checkpoints load under weights_only


def as_options(value: Any, name: str, kind: type) -> Any:
    """``value`` as a ``kind`` (an options dataclass): one already, or a mapping of its fields
    (a plain config dict, as a study's ``init_args`` give it)."""
    if isinstance(value, Mapping):
        return kind(**value)
    if not isinstance(value, kind):
        raise TypeError(f"`{name}` must be a {kind.__name__}, got {type(value).__name__}.")
    return value
