"""The end-of-fit post-hoc report shared by the confidence and OOD-shaping methods.

:class:`PosthocReport` is a Callback that, at the end of ``trainer.fit`` (or when :meth:`run` is
called), reads the classifier's penultimate features and logits through a forward hook on its
final linear layer (``head``) on the data module's ``fit_on`` and ``evaluate_on`` splits, asks the
subclass for its tables, prints them, logs their cells as scalars to every logger (and the tables
to W&B), and writes them to ``output_dir``. Every process computes the same numbers from the full
(unsharded) loaders; only global rank 0 prints, logs and writes. What a report needs from the run
(the head, a data module, labelled splits) is checked in ``setup``, before any training.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.loggers import WandbLogger
from lightning.pytorch.utilities import rank_zero_info
from lightning.pytorch.utilities.exceptions import MisconfigurationException
from torch import Tensor, nn
from torch.utils.data import DataLoader

from lightning_info.core.files import atomic_savefig, atomic_write_text
from lightning_info.core.logging import log_wandb_tables, markdown_table

SPLITS = ("train", "val", "test")
Outputs = tuple[Tensor, Tensor, Tensor | None]
Table = tuple[list[str], list[list]]


@torch.no_grad()
def collect_outputs(model: nn.Module, head: nn.Module, loader: DataLoader) -> Outputs:
    """Penultimate features (the input of ``head``), logits (its output) and labels, on CPU.

    Batches are ``(x,)`` or ``(x, y, ...)``; the model runs in eval mode and is restored after.
    """
    captured: list[tuple[Tensor, Tensor]] = []
    hook = head.register_forward_hook(
        lambda module, args, output: captured.append((args[0].detach(), output.detach()))
    )
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    labels = []
    try:
        for batch in loader:
            x = batch[0] if isinstance(batch, (tuple, list)) else batch
            model(x.to(device))
            if isinstance(batch, (tuple, list)) and len(batch) > 1:
                labels.append(batch[1])
    finally:
        hook.remove()
        model.train(was_training)
    if not captured:
        raise ValueError("the loader yielded no batches: nothing to score.")
    features = torch.cat([f.flatten(1) for f, _ in captured]).cpu()
    logits = torch.cat([lg for _, lg in captured]).cpu()
    return features, logits, torch.cat(labels).cpu() if labels else None


def split_loader(
    data: pl.LightningDataModule, split: str, reader: str, *, set_up_test: bool = True
) -> DataLoader:
    """The data module's loader of ``split``; unless ``set_up_test=False`` (already done), the test
    split is set up first, as ``trainer.test`` would (``fit`` sets up only train and val)."""
    if split == "test" and set_up_test:
        data.setup("test")
    try:
        return getattr(data, f"{split}_dataloader")()
    except (MisconfigurationException, NotImplementedError) as err:
        raise ValueError(
            f"{reader} reads the {split!r} split, but {type(data).__name__} has no "
            f"`{split}_dataloader`; implement it or choose other `fit_on` / `evaluate_on`."
        ) from err


def require_labelled(loader: DataLoader, split: str, reader: str) -> None:
    """Raise unless the first batch of ``loader`` is ``(x, y, ...)`` with integer labels ``y``."""
    batch = next(iter(loader), None)
    if batch is None:
        raise ValueError(f"{reader}: the {split!r} loader yields no batches.")
    if not (isinstance(batch, (tuple, list)) and len(batch) > 1):
        raise ValueError(
            f"{reader} needs labelled batches (x, y) from the {split!r} split, but its "
            f"loader yields {type(batch).__name__} batches without labels; return (x, y) from the "
            "data set, or drop the callback for unlabelled data."
        )
    labels = batch[1]
    if not (isinstance(labels, Tensor) and not labels.is_floating_point() and labels.ndim == 1):
        shown = (
            f"{labels.dtype} {tuple(labels.shape)}"
            if isinstance(labels, Tensor)
            else type(labels).__name__
        )
        raise ValueError(
            f"{reader} needs integer class labels (N,) as the second item of each "
            f"{split!r} batch, got {shown}."
        )


class PosthocReport(pl.Callback):
    """Base of the end-of-fit post-hoc reports; subclasses implement :meth:`build_tables`.

    Args:
        head: name of the classifier's final ``nn.Linear`` submodule; ``None``: the last
            ``nn.Linear`` registered in the model.
        fit_on, evaluate_on: data-module splits (``"train"``, ``"val"``, ``"test"``).
        output_dir: folder for ``<kind>.md`` (and the subclass's figures); ``None`` writes nothing.
    """

    kind = "posthoc"
    """File name and logging prefix of the report."""
    needs_labels = True

    def __init__(
        self,
        head: str | None = None,
        fit_on: str = "val",
        evaluate_on: str = "test",
        output_dir: str | None = None,
    ) -> None:
        for name, split in (("fit_on", fit_on), ("evaluate_on", evaluate_on)):
            if split not in SPLITS:
                raise ValueError(f"`{name}` must be one of {SPLITS}, got {split!r}.")
        self.head = head
        self.fit_on, self.evaluate_on = fit_on, evaluate_on
        self.output_dir = output_dir
        self.tables: dict[str, Table] = {}
        self._test_set_up_for: pl.LightningDataModule | None = None

    # -- to implement -----------------------------------------------------------------------

    def build_tables(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        head: nn.Linear,
        fit: Outputs,
        test: Outputs,
    ) -> dict[str, tuple[str, Table]]:
        """``{name: (title, (columns, rows))}`` of the report."""
        raise NotImplementedError

    def check_run(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Further checks of the run in ``setup`` (before training)."""

    def figures(self, test: Outputs) -> dict[str, Any]:
        """``{name: matplotlib figure}``, saved as ``posthoc_<name>.png`` and logged to W&B as
        ``posthoc/<name>``; none by default."""
        return {}

    # -- hooks ------------------------------------------------------------------------------

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage != "fit":
            return
        self._head(pl_module)
        data = trainer.datamodule
        if data is None:
            raise ValueError(f"{type(self).__name__} reads its splits from a LightningDataModule.")
        if self.needs_labels:
            for split in dict.fromkeys((self.fit_on, self.evaluate_on)):
                require_labelled(self._loader(data, split), split, type(self).__name__)
        self.check_run(trainer, pl_module)

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.run(trainer, pl_module)

    def run(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> dict[str, Table]:
        """Build the report now; returns the tables ``{name: (columns, rows)}``."""
        data = trainer.datamodule
        head = self._head(pl_module)
        loaders = {split: self._loader(data, split) for split in (self.fit_on, self.evaluate_on)}
        fit = collect_outputs(pl_module, head, loaders[self.fit_on])
        test = collect_outputs(pl_module, head, loaders[self.evaluate_on])
        if self.needs_labels and (fit[2] is None or test[2] is None):
            raise ValueError("the fit_on and evaluate_on loaders must yield labels (x, y).")
        with torch.inference_mode(False), torch.enable_grad():
            titled = self.build_tables(trainer, pl_module, head, fit, test)
        self.tables = {name: table for name, (_, table) in titled.items()}
        if trainer.is_global_zero:
            self._report(trainer, titled, test)
        return self.tables

    # -- helpers ----------------------------------------------------------------------------

    def _loader(self, data: pl.LightningDataModule, split: str) -> DataLoader:
        """``split_loader``, setting the test split up once per data module (``setup`` checks the
        labels and ``run`` reads the batches: one ``setup("test")`` serves both)."""
        loader = split_loader(
            data, split, type(self).__name__, set_up_test=self._test_set_up_for is not data
        )
        if split == "test":
            self._test_set_up_for = data
        return loader

    def _head(self, pl_module: pl.LightningModule) -> nn.Linear:
        if self.head is None:
            linears = [m for m in pl_module.modules() if isinstance(m, nn.Linear)]
            if not linears:
                raise ValueError("the model has no nn.Linear layer; pass `head=` its final layer.")
            return linears[-1]
        try:
            head = pl_module.get_submodule(self.head)
        except AttributeError as err:
            raise ValueError(
                f"the model has no submodule {self.head!r}; pass `head=` the name of its final "
                "nn.Linear layer."
            ) from err
        if not isinstance(head, nn.Linear):
            raise TypeError(f"`{self.head}` must be an nn.Linear, got {type(head).__name__}.")
        return head

    def _report(
        self, trainer: pl.Trainer, titled: dict[str, tuple[str, Table]], test: Outputs
    ) -> None:
        text = "\n\n".join(
            f"{title}\n\n{markdown_table(*table)}" for title, table in titled.values()
        )
        rank_zero_info(f"\n{text}\n")
        scalars = {}
        for name, (columns, rows) in self.tables.items():
            for row in rows:
                for column, value in zip(columns[1:], row[1:]):
                    scalars[f"posthoc/{name}/{row[0]}/{column}"] = float(value)
        for logger in trainer.loggers:
            logger.log_metrics(scalars, step=trainer.global_step)
        out = None if self.output_dir is None else Path(self.output_dir)
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            atomic_write_text(out / f"{self.kind}.md", text + "\n")
        wandb_loggers = [lg for lg in trainer.loggers if isinstance(lg, WandbLogger)]
        if out is not None or wandb_loggers:
            for name, figure in self.figures(test).items():
                if out is not None:
                    atomic_savefig(figure, out / f"posthoc_{name}.png", dpi=120)
                for logger in wandb_loggers:
                    logger.log_image(key=f"posthoc/{name}", images=[figure])
        log_wandb_tables(trainer.loggers, {f"posthoc/{k}": t for k, t in self.tables.items()})
