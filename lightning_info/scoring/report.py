"""The end-of-fit post-hoc report shared by the confidence and OOD-shaping methods.

:class:`PosthocReport` is a Callback that, at the end of ``trainer.fit`` (or when :meth:`run` is
called), reads the classifier's penultimate features and logits through a forward hook on its
final linear layer (``head``) on the data module's ``fit_on`` and ``evaluate_on`` splits, asks the
subclass for its tables, prints them, logs their cells as scalars to every logger (named
``metric_key("posthoc", table, row, column)``: ``posthoc/failure/msp_temperature/auroc``; the
tables to W&B), and writes them to ``output_dir``. Every process computes the same numbers from
the full (unsharded) loaders; only global rank 0 prints, logs and writes. What a report needs
from the run (the head, a data module, non-empty and labelled splits, a writable ``output_dir``,
the ``plots`` extra where figures are made) is checked in ``setup``, before any training; a
figure that still cannot be made at the end is skipped with a warning.

Without ``head=``, ``setup`` runs the model once (eval mode, no gradients) on the first batch of
``fit_on`` and takes the ``nn.Linear`` whose output the model returns (:func:`find_head`); when
none or several fit, it asks for ``head=``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.loggers import WandbLogger
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn
from lightning.pytorch.utilities.exceptions import MisconfigurationException
from torch import Tensor, nn
from torch.utils.data import DataLoader

from lightning_info.core.files import atomic_savefig, atomic_write_text
from lightning_info.core.logging import log_wandb_tables, markdown_table, metric_key
from lightning_info.core.optional import require_extra

SPLITS = ("train", "val", "test")
Outputs = tuple[Tensor, Tensor, Tensor | None]
Table = tuple[list[str], list[list]]


@torch.no_grad()
def collect_outputs(model: nn.Module, head: nn.Module, loader: DataLoader) -> Outputs:
    """Penultimate features (the input of ``head``), logits (its output) and labels, on CPU.

    Batches are ``(x,)`` or ``(x, y, ...)``; the model runs in eval mode and is restored after.
    ``head`` must run exactly once per forward of ``model`` (a layer the model never calls, or
    calls twice, would give outputs that are not one row per input), and every batch must carry
    labels or none.
    """
    captured: list[tuple[Tensor, Tensor]] = []
    hook = head.register_forward_hook(
        lambda module, args, output: captured.append((args[0].detach(), output.detach()))
    )
    device = next(iter(model.parameters()), torch.empty(0)).device
    was_training = model.training
    model.eval()
    labels, batches, rows = [], 0, 0
    try:
        for batch in loader:
            x = batch[0] if isinstance(batch, (tuple, list)) else batch
            calls = len(captured)
            model(x.to(device))
            batches, rows = batches + 1, rows + len(x)
            if len(captured) != calls + 1:
                raise ValueError(
                    f"the head {type(head).__name__} ran {len(captured) - calls} times in one "
                    "forward of the model; pass `head=` the name of the model's final nn.Linear, "
                    "which runs once per forward."
                )
            if isinstance(batch, (tuple, list)) and len(batch) > 1:
                labels.append(batch[1])
    finally:
        hook.remove()
        model.train(was_training)
    if not batches:
        raise ValueError("the loader yielded no batches: nothing to score.")
    if labels and len(labels) != batches:
        raise ValueError(
            f"{len(labels)} of the loader's {batches} batches carry labels; yield (x, y) from "
            "every batch or from none."
        )
    features = torch.cat([f.flatten(1) for f, _ in captured]).cpu()
    logits = torch.cat([lg for _, lg in captured]).cpu()
    if len(features) != rows:
        raise ValueError(
            f"the head saw {len(features)} rows for {rows} inputs; pass `head=` the model's final "
            "nn.Linear, applied once to each input's penultimate features."
        )
    return features, logits, torch.cat(labels).cpu() if labels else None


@torch.no_grad()
def find_head(model: nn.Module, x: Tensor) -> str:
    """The name of the ``nn.Linear`` of ``model`` that produces its logits, from one forward on
    ``x`` (eval mode, restored after): the layer whose output the model returns (itself, or as
    an item of a returned tuple, list or dict), else the last layer to run whose width is the
    returned tensor's last dimension. Raises when none fits or when several layers' outputs are
    returned."""
    calls: list[tuple[str, Tensor]] = []
    names = {module: name for name, module in model.named_modules()}
    hooks = [
        module.register_forward_hook(
            lambda module, args, output: calls.append((names[module], output))
        )
        for module in names
        if isinstance(module, nn.Linear)
    ]
    if not hooks:
        raise ValueError("the model has no nn.Linear layer; pass `head=` its final layer.")
    device = next(iter(model.parameters()), torch.empty(0)).device
    was_training = model.training
    model.eval()
    try:
        output = model(x.to(device))
    finally:
        for hook in hooks:
            hook.remove()
        model.train(was_training)
    ask = "pass `head=` the name of the nn.Linear that produces the logits"
    returned = _returned_tensors(output)
    exact = list(dict.fromkeys(n for n, out in calls if any(out is r for r in returned)))
    if len(exact) == 1:
        return exact[0]
    if len(exact) > 1:
        raise ValueError(
            f"the model returns the outputs of several nn.Linear layers {exact}, so which one "
            f"gives the logits is ambiguous; {ask}."
        )
    if isinstance(output, Tensor) and output.dim():
        fitting = [n for n, out in calls if out.shape[-1:] == output.shape[-1:]]
        if fitting:
            return fitting[-1]
    ran = list(dict.fromkeys(n for n, _ in calls))
    shown = tuple(output.shape) if isinstance(output, Tensor) else type(output).__name__
    raise ValueError(
        f"no nn.Linear produces the model's output ({shown}; layers that ran, in order: {ran}); "
        f"{ask}."
    )


def _returned_tensors(output: Any) -> list[Tensor]:
    """The tensors a forward returned: the output itself, or the items of a tuple, list or dict."""
    if isinstance(output, Tensor):
        return [output]
    items = output.values() if isinstance(output, dict) else output
    if isinstance(items, (tuple, list)) or isinstance(output, dict):
        return [item for item in items if isinstance(item, Tensor)]
    return []


def split_loader(
    data: pl.LightningDataModule, split: str, reader: str, *, set_up_test: bool = True
) -> DataLoader:
    """The data module's loader of ``split``; unless ``set_up_test=False`` (already done), the test
    split is set up first, as ``trainer.test`` would (``fit`` sets up only train and val)."""
    if split == "test" and set_up_test:
        data.setup("test")
    try:
        loader = getattr(data, f"{split}_dataloader")()
    except (MisconfigurationException, NotImplementedError) as err:
        loader, error = None, err
    else:
        error = None
    if loader is None or (isinstance(loader, (list, tuple, dict)) and not loader):
        raise ValueError(
            f"{reader} reads the {split!r} split, but {type(data).__name__} has no "
            f"`{split}_dataloader`; implement it or choose other `fit_on` / `evaluate_on`."
        ) from error
    return loader


def first_batch(loader: DataLoader, split: str, reader: str) -> Any:
    """The first batch of ``loader``; raises when the split is empty."""
    batch = next(iter(loader), None)
    if batch is None:
        raise ValueError(
            f"{reader}: the {split!r} loader yields no batches (the split is empty); give the "
            "data module samples in it."
        )
    return batch


def require_labelled(loader: DataLoader, split: str, reader: str, batch: Any = None) -> None:
    """Raise unless the first batch of ``loader`` (or ``batch``) is ``(x, y, ...)`` with integer
    (or bool) labels ``y``."""
    if batch is None:
        batch = first_batch(loader, split, reader)
    if not (isinstance(batch, (tuple, list)) and len(batch) > 1):
        raise ValueError(
            f"{reader} needs labelled batches (x, y) from the {split!r} split, but its "
            f"loader yields {type(batch).__name__} batches without labels; return (x, y) from the "
            "data set, or drop the callback for unlabelled data."
        )
    labels = batch[1]
    if not (
        isinstance(labels, Tensor)
        and not (labels.is_floating_point() or labels.is_complex())
        and labels.ndim == 1
    ):
        shown = (
            f"{labels.dtype} {tuple(labels.shape)}"
            if isinstance(labels, Tensor)
            else type(labels).__name__
        )
        raise ValueError(
            f"{reader} needs integer class labels (N,) as the second item of each "
            f"{split!r} batch, got {shown}; floats such as scores are not labels."
        )


def _inputs(batch: Any) -> Any:
    return batch[0] if isinstance(batch, (tuple, list)) else batch


def same_inputs(a: Any, b: Any) -> bool:
    """Whether two first batches hold the same inputs (the two splits are one data set)."""
    x, y = _inputs(a), _inputs(b)
    return (
        isinstance(x, Tensor)
        and isinstance(y, Tensor)
        and x.shape == y.shape
        and x.dtype == y.dtype
        and bool(torch.equal(x, y))
    )


def table_scalars(tables: dict[str, Table]) -> dict[str, float]:
    """The cells of ``{name: (columns, rows)}`` as logged scalars, each named
    ``metric_key("posthoc", name, row name, column)`` (the row name is a row's first cell).
    Raises when two cells would be logged under one name."""
    scalars: dict[str, float] = {}
    cells: dict[str, tuple[str, str, str]] = {}
    for name, (columns, rows) in tables.items():
        for row in rows:
            for column, value in zip(columns[1:], row[1:]):
                key = metric_key("posthoc", name, row[0], column)
                if key in cells:
                    raise ValueError(
                        f"the cells {cells[key]} and {(name, row[0], column)} of the report would "
                        f"both be logged as {key!r}; give the rows (scorers, shapers) and columns "
                        "names that differ in more than case and punctuation."
                    )
                cells[key] = (name, str(row[0]), str(column))
                scalars[key] = float(value)
    return scalars


class PosthocReport(pl.Callback):
    """Base of the end-of-fit post-hoc reports; subclasses implement :meth:`build_tables`.

    Args:
        head: name of the classifier's final ``nn.Linear`` submodule; ``None``: the layer found
            by :func:`find_head` in ``setup`` (one forward on a ``fit_on`` batch).
        fit_on, evaluate_on: two different data-module splits (``"train"``, ``"val"``,
            ``"test"``). When the two loaders serve the same inputs (``DigitsDataModule`` with
            ``val_fraction=0`` validates on its test split) the report warns in ``setup`` and its
            title says that the scorers were fitted on the evaluated data.
        output_dir: folder for ``<kind>.md`` (and the subclass's figures); ``None`` writes nothing.
    """

    kind = "posthoc"
    """File name of the report (``<kind>.md``)."""
    needs_labels = True
    makes_figures = False
    """Whether :meth:`figures` draws (then ``setup`` requires the ``plots`` extra whenever the
    figures have somewhere to go: ``output_dir`` or a W&B logger)."""

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
        if fit_on == evaluate_on:
            raise ValueError(
                f"`fit_on` and `evaluate_on` are both {fit_on!r}: scorers fitted on the split "
                "they are evaluated on report optimistic numbers; fit on another split (e.g. "
                "fit_on='val', evaluate_on='test')."
            )
        if head is not None and not isinstance(head, str):
            raise TypeError(
                f"`head` must be the name of a submodule (a str) or None, got {head!r}."
            )
        if output_dir is not None and not isinstance(output_dir, (str, Path)):
            raise TypeError(f"`output_dir` must be a path or None, got {output_dir!r}.")
        self.head = head
        self.fit_on, self.evaluate_on = fit_on, evaluate_on
        self.output_dir = output_dir
        self.tables: dict[str, Table] = {}
        self.fit_description = fit_on
        """The split the scorers are fitted on, as the titles name it."""
        self._test_set_up_for: pl.LightningDataModule | None = None
        self._found_head: str | None = None

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
        reader = type(self).__name__
        if self.head is not None:
            self._head(pl_module)
        data = trainer.datamodule
        if data is None:
            raise ValueError(f"{reader} reads its splits from a LightningDataModule.")
        self._check_outputs(trainer)
        batches = {}
        for split in (self.fit_on, self.evaluate_on):
            batches[split] = first_batch(self._loader(data, split), split, reader)
            if self.needs_labels:
                require_labelled(None, split, reader, batches[split])
        if self.head is None:
            self._found_head = find_head(pl_module, _inputs(batches[self.fit_on]))
        self.fit_description = self.fit_on
        if same_inputs(batches[self.fit_on], batches[self.evaluate_on]):
            self.fit_description = f"{self.fit_on}, the same data as {self.evaluate_on}"
            rank_zero_warn(
                f"{reader}: the {self.fit_on!r} and {self.evaluate_on!r} loaders of "
                f"{type(data).__name__} serve the same inputs (DigitsDataModule with "
                "val_fraction=0 validates on its test split), so the scorers are fitted on the "
                "data they are evaluated on and the numbers are optimistic; give the data module "
                "a separate split (e.g. DigitsDataModule(val_fraction=0.3)) or set `fit_on`."
            )
        self.check_run(trainer, pl_module)

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.run(trainer, pl_module)

    def run(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> dict[str, Table]:
        """Build the report now; returns the tables ``{name: (columns, rows)}``."""
        data = trainer.datamodule
        loaders = {split: self._loader(data, split) for split in (self.fit_on, self.evaluate_on)}
        if self.head is None and self._found_head is None:
            batch = first_batch(loaders[self.fit_on], self.fit_on, type(self).__name__)
            self._found_head = find_head(pl_module, _inputs(batch))
        head = self._head(pl_module)
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

    def _check_outputs(self, trainer: pl.Trainer) -> None:
        """``output_dir`` must be a folder (or not exist yet); figures need the ``plots`` extra."""
        out = None if self.output_dir is None else Path(self.output_dir)
        if out is not None and out.exists() and not out.is_dir():
            raise ValueError(
                f"`output_dir` {str(out)!r} is a file, not a folder; pass a folder (it is "
                "created if missing)."
            )
        wandb = any(isinstance(logger, WandbLogger) for logger in trainer.loggers)
        if self.makes_figures and (self.output_dir is not None or wandb):
            require_extra("matplotlib", "plots", f"The figures of {type(self).__name__}")

    def _head(self, pl_module: pl.LightningModule) -> nn.Linear:
        name = self.head if self.head is not None else self._found_head
        if name is None:
            raise ValueError("the head is not known before `setup`; pass `head=` its name.")
        try:
            head = pl_module.get_submodule(name)
        except AttributeError as err:
            raise ValueError(
                f"the model has no submodule {name!r}; pass `head=` the name of its final "
                "nn.Linear layer."
            ) from err
        if not isinstance(head, nn.Linear):
            raise TypeError(f"`{name}` must be an nn.Linear, got {type(head).__name__}.")
        return head

    def _report(
        self, trainer: pl.Trainer, titled: dict[str, tuple[str, Table]], test: Outputs
    ) -> None:
        text = "\n\n".join(
            f"{title}\n\n{markdown_table(*table)}" for title, table in titled.values()
        )
        rank_zero_info(f"\n{text}\n")
        scalars = table_scalars(self.tables)
        for logger in trainer.loggers:
            logger.log_metrics(scalars, step=trainer.global_step)
        out = None if self.output_dir is None else Path(self.output_dir)
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            atomic_write_text(out / f"{self.kind}.md", text + "\n")
        wandb_loggers = [lg for lg in trainer.loggers if isinstance(lg, WandbLogger)]
        if out is not None or wandb_loggers:
            try:
                figures = self.figures(test)
            except Exception as err:  # an optional output never ends the run
                rank_zero_warn(
                    f"{type(self).__name__}: its figures could not be made ({type(err).__name__}: "
                    f"{err}); the tables are reported without them."
                )
                figures = {}
            for name, figure in figures.items():
                if out is not None:
                    atomic_savefig(figure, out / f"posthoc_{name}.png", dpi=120)
                for logger in wandb_loggers:
                    logger.log_image(key=metric_key("posthoc", name), images=[figure])
        tables = {metric_key("posthoc", k): t for k, t in self.tables.items()}
        log_wandb_tables(trainer.loggers, tables)
