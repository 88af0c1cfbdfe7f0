"""``FisherReselection``: select the FisherSFT subset again during fit, from the model as it is."""

from __future__ import annotations

import math
from typing import Any, Literal

from lightning.pytorch import Callback, LightningModule, Trainer

from lightning_info.core.validation import require_bool, require_choice, require_int
from lightning_info.methods.fisher_sft.datamodule import FisherSubsetDataModule

__all__ = ["FisherReselection"]


class FisherReselection(Callback):
    """Re-embed the pool with the model being trained and select its subset again, every
    ``every_n_epochs`` epochs or when ``monitor`` stops improving.

    FisherSFT's information gain (FSFT-1) is computed from the model's features; selecting once
    uses the features before fine-tuning. With this callback the data module selects again
    where Lightning requests the next epoch's train loader
    (``Trainer(reload_dataloaders_every_n_epochs=1)``, checked at setup;
    :meth:`FisherSubsetDataModule.train_dataloader`): the pool is embedded with the current
    weights (in strided shards under DDP, the picks broadcast from rank 0, so every rank serves
    the same subset; two-round GreeDi when the data module's options say so), the greedy
    reruns, and the epoch trains on the new subset. Epoch ``e >= 1`` re-selects when
    ``e % every_n_epochs == 0``, or, with ``monitor``, when the metric had not improved by
    ``min_delta`` for ``patience`` epochs at the end of epoch ``e - 1`` (after its validation;
    the count then restarts).

    Logged at every epoch's end: ``reselection/new_fraction`` (of the latest subset, the share
    its predecessor did not hold), and the cost: ``reselection/rounds`` (re-selections so far),
    ``reselection/embedded_examples`` (pool examples embedded by all ranks, one forward pass
    each, the first selection included) and ``reselection/trained_examples`` (examples trained
    on, a forward and a backward pass each), so that runs can be compared at equal compute.
    The data module's ``selection_history`` (every subset and the epoch it started) and this
    callback's plateau counts are in the checkpoint, so a resume continues the same schedule,
    mid-epoch included. (A checkpoint saved at an epoch's last batch resumes, as in Lightning,
    without that epoch's end: a plateau decision due there is not made.)

    Args:
        every_n_epochs: re-select at every ``every_n_epochs``-th epoch; ``None`` with
            ``monitor``.
        monitor: a logged metric (e.g. ``"val/loss"``) to re-select on a plateau of.
        mode: ``"min"`` or ``"max"``: which way ``monitor`` improves.
        patience: epochs without improvement before a re-selection (>= 1).
        min_delta: the improvement that counts (>= 0).
        exclude_served: choose each new subset among the examples no earlier subset served
            (``False``: the whole pool, so an example may be chosen again). The pool must hold
            a new ``budget`` for every re-selection the run can make (checked at setup).
    """

    def __init__(
        self,
        every_n_epochs: int | None = 1,
        monitor: str | None = None,
        mode: Literal["min", "max"] = "min",
        patience: int = 1,
        min_delta: float = 0.0,
        exclude_served: bool = False,
    ) -> None:
        if (every_n_epochs is None) == (monitor is None):
            raise ValueError(
                "pass `every_n_epochs` (a schedule) or `monitor` (on a plateau), exactly one: "
                "FisherReselection(every_n_epochs=None, monitor='val/loss') for the second."
            )
        if every_n_epochs is not None:
            every_n_epochs = require_int(every_n_epochs, "every_n_epochs", 1)
        self.every_n_epochs = every_n_epochs
        if monitor is not None and (not isinstance(monitor, str) or not monitor):
            raise TypeError(f"`monitor` must be a metric name (str), got {monitor!r}.")
        self.monitor = monitor
        self.mode = require_choice(mode, "mode", ("min", "max"))
        self.patience = require_int(patience, "patience", 1)
        if isinstance(min_delta, bool) or not isinstance(min_delta, (int, float)):
            raise TypeError(f"`min_delta` must be a number >= 0, got {min_delta!r}.")
        if not (math.isfinite(min_delta) and min_delta >= 0):
            raise ValueError(f"`min_delta` must be a number >= 0, got {min_delta!r}.")
        self.min_delta = float(min_delta)
        self.exclude_served = require_bool(exclude_served, "exclude_served")
        self.best: float | None = None
        self.waited = 0
        self.pending: int | None = None  # the epoch a plateau asked to re-select at
        self._data: FisherSubsetDataModule | None = None

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if stage != "fit":
            return
        data = trainer.datamodule
        if not isinstance(data, FisherSubsetDataModule):
            raise TypeError(
                "FisherReselection selects through a FisherSubsetDataModule; fit with one "
                f"(trainer.fit(model, datamodule=...)), got {type(data).__name__}."
            )
        if trainer.reload_dataloaders_every_n_epochs != 1:
            raise ValueError(
                "FisherReselection serves each new subset through the next train loader: set "
                "Trainer(reload_dataloaders_every_n_epochs=1), got "
                f"{trainer.reload_dataloaders_every_n_epochs}."
            )
        if self.exclude_served:
            self._check_pool(data, trainer.max_epochs)
        data.reselection = self
        self._data = data

    def _check_pool(self, data: FisherSubsetDataModule, epochs: int | None) -> None:
        if epochs is None or epochs < 0:
            raise ValueError(
                "exclude_served=True needs Trainer(max_epochs=...) to check that the pool holds "
                "a new subset for every re-selection; set it."
            )
        most = (epochs - 1) // (self.every_n_epochs or 1)  # epochs 1 .. epochs - 1
        needed = data.budget * (1 + most)
        if needed > len(data.pool):
            raise ValueError(
                f"exclude_served=True may need {needed} examples ({1 + most} subsets of "
                f"{data.budget} over {epochs} epochs) but the pool holds {len(data.pool)}: "
                "re-select less often, lower the budget or set exclude_served=False."
            )

    def wants(self, epoch: int) -> bool:
        """Whether epoch ``epoch`` (>= 1) trains on a new selection."""
        if self.every_n_epochs is not None:
            return epoch % self.every_n_epochs == 0
        return self.pending == epoch

    @property
    def rounds(self) -> int:
        """Re-selections so far (the data module's history, resumes included)."""
        return max(len(self._data.selection_history) - 1, 0) if self._data else 0

    @property
    def embedded_examples(self) -> int:
        """Pool examples embedded so far, by all ranks (every selection embeds the pool once;
        none for random subsets without token weights)."""
        data = self._data
        if data is None or not data._needs_features():
            return 0
        return len(data.selection_history) * len(data.pool)

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        epoch = trainer.current_epoch  # the epoch that just ended, validated
        if self.monitor is not None and self._plateau(trainer, epoch):
            self.pending = epoch + 1
        history = self._data.selection_history
        previous, latest = history[-2:] if len(history) > 1 else history * 2
        new = len(set(latest["indices"]) - set(previous["indices"])) / len(latest["indices"])
        pl_module.log_dict(
            {
                "reselection/new_fraction": float(new),
                "reselection/rounds": float(self.rounds),
                "reselection/embedded_examples": float(self.embedded_examples),
                "reselection/trained_examples": float(self._data.budget * (epoch + 1)),
            },
            on_step=False,
            on_epoch=True,
            rank_zero_only=True,
        )

    def _plateau(self, trainer: Trainer, epoch: int) -> bool:
        if self.monitor not in trainer.callback_metrics:
            raise KeyError(
                f"FisherReselection monitors {self.monitor!r}, which was not logged by the end "
                f"of epoch {epoch}; logged: {sorted(trainer.callback_metrics)}. Log it every "
                "epoch (a validation metric needs check_val_every_n_epoch=1)."
            )
        value = float(trainer.callback_metrics[self.monitor])  # once per epoch
        sign = 1.0 if self.mode == "min" else -1.0
        if self.best is None or sign * (self.best - value) > self.min_delta:
            self.best, self.waited = value, 0
            return False
        self.waited += 1
        if self.waited < self.patience:
            return False
        self.waited = 0
        return True

    def teardown(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if self._data is not None and self._data.reselection is self:
            self._data.reselection = None

    def state_dict(self) -> dict[str, Any]:
        return {
            "best": self.best,
            "waited": self.waited,
            "pending": self.pending,
            "schedule": [self.every_n_epochs, self.monitor, self.mode, self.exclude_served],
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the plateau counts; refuses a state saved under another schedule."""
        schedule = [self.every_n_epochs, self.monitor, self.mode, self.exclude_served]
        if list(state_dict["schedule"]) != schedule:
            raise ValueError(
                f"the checkpoint's FisherReselection ran the schedule {state_dict['schedule']} "
                f"(every_n_epochs, monitor, mode, exclude_served), this one is {schedule}; "
                "construct it with the saved settings to resume that run."
            )
        best = state_dict["best"]
        if best is not None and (isinstance(best, bool) or not isinstance(best, (int, float))):
            raise TypeError(
                f"the checkpoint's FisherReselection `best` must be a number, got {best!r}."
            )
        self.best = None if best is None else float(best)
        self.waited = require_int(state_dict["waited"], "waited", 0)
        pending = state_dict["pending"]
        self.pending = None if pending is None else require_int(pending, "pending", 1)
