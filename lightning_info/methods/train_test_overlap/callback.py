"""``TrainTestOverlap``: report train-test n-gram overlap when ``trainer.fit`` starts.

At fit start the callback reads the training text (files on disk, texts given up front, or the
items the train dataloader draws: the positions its sampler names in ``indices``, such as
FisherSFT's selection or a ``SubsetRandomSampler``'s, else every item of its dataset, a
``Subset``'s own) and the test instances (JSON-lines files, instances given up front, or the
data module's ``val``/``test`` datasets), computes
:func:`~lightning_info.methods.train_test_overlap.functional.compute_overlap`, prints a
per-benchmark summary table, logs its means as scalars
``metric_key("overlap", benchmark, statistic)`` to every logger
(``overlap/val/input_overlap_at_13`` for ``input_overlap@13``; the table to W&B when a
``WandbLogger`` is attached), and writes ``overlap.json`` / ``overlap.md`` to ``output_dir``
when given. The instances no n-gram of size ``n`` can find are counted per benchmark
(``overlap/<benchmark>/num_undetectable``), named in the printed report and, on W&B, in the
``overlap/undetectable`` table; computing the report warns about them.

Distributed: only global rank 0 reads the data and computes (the whole, unsharded datasets);
the report travels to the other ranks with ``trainer.strategy.broadcast`` (Lightning's own
collective, which every rank calls), so ``callback.report`` is the same object everywhere and
only rank 0 prints, logs and writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn
from torch.utils.data import DistributedSampler, RandomSampler, SequentialSampler

from lightning_info.core.logging import log_wandb_tables, metric_key
from lightning_info.core.validation import require_bool
from lightning_info.methods.train_test_overlap.files import (
    DocumentText,
    iter_training_texts,
    read_test_instances,
)
from lightning_info.methods.train_test_overlap.functional import (
    OverlapOptions,
    TestInstance,
    _check_instances,
    check_overlap_options,
    compute_overlap,
    reject_bare_text,
)
from lightning_info.methods.train_test_overlap.report import OverlapReport, write_report

Extractor = str | Callable[[Any], str]
TextExtractor = str | DocumentText | Callable[[Any], str]


def _extract(item: Any, field: Extractor | DocumentText, what: str) -> Any:
    if isinstance(field, DocumentText):
        return field.text(item, f"a train dataset item of type {type(item).__name__}")
    if callable(field):
        return field(item)
    try:
        if not hasattr(item, "keys"):
            raise TypeError(f"{type(item).__name__} items have no named fields")
        return item[field]
    except (KeyError, IndexError, TypeError) as err:
        raise ValueError(
            f"cannot read {what} field {field!r} from a dataset item of type "
            f"{type(item).__name__}; pass a field name the items have, a callable, or name "
            "files with `train_files` / `test_files`."
        ) from err


def _existing_paths(paths: Sequence[str] | None, name: str) -> list[str] | None:
    if paths is None:
        return None
    if isinstance(paths, (str, Path)):
        paths = [paths]
    paths = [str(path) for path in paths]
    missing = [path for path in paths if not Path(path).exists()]
    if not paths or missing:
        raise FileNotFoundError(
            f"`{name}`: {'no paths given' if not paths else f'{missing} do not exist'}; pass "
            "existing files or folders (relative paths are read from the working directory)."
        )
    return paths


_WHOLE_DATASET_SAMPLERS = (SequentialSampler, RandomSampler, DistributedSampler)


def trained_items(loader: Any) -> Iterator[Any]:
    """The dataset items a train loader draws, each once: the positions its sampler names in
    an ``indices`` attribute (``SubsetRandomSampler``, a subset-selecting sampler), in that
    order; without one, every item of its dataset (a ``Subset`` is its own items). A sampler
    with neither ``indices`` nor the whole dataset to draw from (not a sequential, random or
    distributed sampler) is warned about: every item is then read."""
    dataset = getattr(loader, "dataset", None)
    if dataset is None:
        raise ValueError("the train dataloader has no `dataset`; pass `train_texts=`.")
    batch_sampler = getattr(loader, "batch_sampler", None)
    sampler = getattr(batch_sampler, "sampler", None)
    if sampler is None:
        sampler = getattr(loader, "sampler", None)
    indices = getattr(sampler, "indices", None)
    if indices is None:
        unknown = sampler is not None and not isinstance(sampler, _WHOLE_DATASET_SAMPLERS)
        if unknown and hasattr(dataset, "__getitem__"):  # a map-style dataset, drawn from
            rank_zero_warn(
                f"TrainTestOverlap: the train loader's sampler ({type(sampler).__name__}) "
                "names no `indices`, so the overlap is measured on every item of its "
                "dataset; give the sampler an `indices` attribute (the dataset positions "
                "it draws from) to measure only those."
            )
        return iter(dataset)
    positions = indices.tolist() if hasattr(indices, "tolist") else list(indices)
    return (dataset[position] for position in dict.fromkeys(int(p) for p in positions))


class TrainTestOverlap(pl.Callback):
    """Compute and report exact train-test n-gram overlap (HELM metrics) at fit start.

    Args:
        text_field: which text of a training example is its document: a field name, a
            :class:`~lightning_info.methods.train_test_overlap.files.DocumentText` (several
            ``fields`` joined with a newline, or a ``template`` of named fields, e.g.
            ``"{prompt}\\n{response}"``: prompt/response records without a callable) or a
            callable on an item; also what is read from the records of ``train_files``
            (JSON lines, Parquet, saved ``datasets`` datasets), where it cannot be a callable.
        train_texts: training texts (any iterable of strings, e.g. a ``datasets`` column).
        train_files: training text on disk instead: text files (one document each, or one per
            line with ``lines=True``), folders (every file inside) or ``datasets`` datasets saved
            with ``save_to_disk``, Parquet files. With neither, ``text_field`` is read from the
            items the train dataloader draws: the positions its sampler names in an ``indices``
            attribute (FisherSFT's selected subset, a ``SubsetRandomSampler``), else every
            item of its dataset (a ``Subset``: its own items); each item once.
        test_instances: :class:`TestInstance` objects.
        test_files: JSON-lines files of test instances instead (``input``, ``references`` and
            optional ``id`` / ``benchmark`` fields; the benchmark defaults to the file's stem).
            With neither, ``input_field`` and ``references_field`` are read from each item of the
            data module's ``splits`` datasets, the split name being the benchmark.
        splits: data-module splits that hold test instances (``"val"``, ``"test"``).
        input_field, references_field, id_field: fields of a test item (``id_field`` missing:
            the item's position).
        options: ``n``, ``n_values``, ``tokenizer``, ``max_frequency`` and the scan's
            ``chunk_size``, ``processes``, ``threads``, ``progress``
            (:class:`~lightning_info.methods.train_test_overlap.functional.OverlapOptions`, as in
            :func:`compute_overlap`; by default with a progress bar, shown by global rank 0,
            which scans). The training text is streamed ``chunk_size`` documents at a time
            (files line by line), so a corpus larger than memory is fine.
        output_dir: folder for ``overlap.json`` and ``overlap.md``; ``None`` writes nothing.
    """

    def __init__(
        self,
        text_field: TextExtractor = "text",
        train_texts: Iterable[str] | None = None,
        test_instances: Sequence[TestInstance] | None = None,
        train_files: Sequence[str] | None = None,
        test_files: Sequence[str] | None = None,
        lines: bool = False,
        splits: Sequence[str] = ("val",),
        input_field: Extractor = "input",
        references_field: Extractor = "references",
        id_field: str = "id",
        options: OverlapOptions = OverlapOptions(progress=True),
        output_dir: str | None = None,
    ) -> None:
        self.options = check_overlap_options(options)
        if isinstance(splits, str):
            raise TypeError(
                f"`splits` must be a list of split names, got {splits!r}; pass [{splits!r}]."
            )
        require_bool(lines, "lines")
        if train_texts is not None:
            reject_bare_text(train_texts, "train_texts")
        for split in splits:
            if split not in ("val", "test"):
                raise ValueError(f"`splits` entries must be 'val' or 'test', got {split!r}.")
        if train_texts is not None and train_files is not None:
            raise ValueError("pass `train_texts` or `train_files`, not both.")
        if test_instances is not None and test_files is not None:
            raise ValueError("pass `test_instances` or `test_files`, not both.")
        train_files = _existing_paths(train_files, "train_files")
        if train_files is not None and not isinstance(text_field, (str, DocumentText)):
            raise ValueError(
                "with `train_files`, `text_field` must be a column name or a DocumentText."
            )
        test_files = _existing_paths(test_files, "test_files")
        if test_instances is None and test_files is None and not splits:
            raise ValueError(
                "pass `test_instances`, `test_files` or at least one split in `splits`."
            )
        if test_instances is not None:
            test_instances = _check_instances(test_instances)
        self.text_field = text_field
        self.train_texts = train_texts
        self.test_instances = test_instances
        self.train_files, self.test_files, self.lines = train_files, test_files, lines
        self.splits = tuple(splits)
        self.input_field, self.references_field, self.id_field = (
            input_field,
            references_field,
            id_field,
        )
        self.output_dir = output_dir
        self.report: OverlapReport | None = None

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        payload = None
        if trainer.is_global_zero:
            payload = self.compute(trainer, pl_module).to_dict()
        payload = trainer.strategy.broadcast(payload, src=0)
        self.report = OverlapReport.from_dict(payload)
        if trainer.is_global_zero:
            self._log(trainer)

    def compute(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> OverlapReport:
        """Read the texts and compute the report on this process (no collective)."""
        return compute_overlap(
            self._test_instances(trainer), self._train_texts(trainer, pl_module), self.options
        )

    def _train_texts(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> Iterable[str]:
        if self.train_texts is not None:
            return self.train_texts
        if self.train_files is not None:
            return iter_training_texts(self.train_files, self.text_field, self.lines)
        source = trainer.datamodule if trainer.datamodule is not None else pl_module
        items = trained_items(source.train_dataloader())
        return (_extract(item, self.text_field, "text") for item in items)

    def _test_instances(self, trainer: pl.Trainer) -> list[TestInstance]:
        if self.test_instances is not None:
            return self.test_instances
        if self.test_files is not None:
            return [i for path in self.test_files for i in read_test_instances(path)]
        data = trainer.datamodule
        if data is None:
            raise ValueError(
                "TrainTestOverlap reads test splits from a LightningDataModule; "
                "attach one or pass `test_instances=`."
            )
        instances = []
        for split in self.splits:
            loader = getattr(data, f"{split}_dataloader")()
            loaders = loader if isinstance(loader, (list, tuple)) else [loader]
            for k, lo in enumerate(loaders):
                benchmark = split if len(loaders) == 1 else f"{split}/{k}"
                for position, item in enumerate(lo.dataset):
                    ident = (
                        item.get(self.id_field, position) if isinstance(item, dict) else position
                    )
                    instances.append(
                        TestInstance(
                            id=str(ident),
                            input=_extract(item, self.input_field, "input"),
                            references=_extract(item, self.references_field, "references"),
                            benchmark=benchmark,
                        )
                    )
        return instances

    def _log(self, trainer: pl.Trainer) -> None:
        report = self.report
        rank_zero_info(f"\n{report.to_markdown()}")
        scalars = {
            metric_key("overlap", benchmark, key): float(value)
            for benchmark, stats in report.summary.items()
            for key, value in stats.items()
        }
        for logger in trainer.loggers:
            logger.log_metrics(scalars, step=trainer.global_step)
        tables = {"overlap/summary": report.summary_table()}
        if report.undetectable:  # the instances no n-gram of the report's size can find
            ids = [[item["benchmark"], item["id"]] for item in report.undetectable]
            tables["overlap/undetectable"] = (["benchmark", "id"], ids)
        log_wandb_tables(trainer.loggers, tables)
        if self.output_dir is not None:
            write_report(report, Path(self.output_dir) / "overlap")
