"""The overlap scan as map/reduce: ``datasets.map`` shards on one machine, Dask on a cluster.

Counting is a pure function of a chunk of documents
(:meth:`~lightning_info.methods.train_test_overlap.functional.OverlapIndex.count_chunk`) and the
counts of disjoint chunks add up, so the scan of a corpus too large for one process is a map
(count each chunk where it lives) followed by a sum. The index of the test n-grams is small (a few
MB for thousands of instances) and travels to every worker once.

- :func:`overlap_with_datasets`: a ``datasets.Dataset`` (memory-mapped Arrow on disk, so the
  corpus never has to fit in memory) counted by ``Dataset.map(batched=True, num_proc=k)``; each
  batch returns its counts sparsely (the slots it hit and how often), and the sum is taken here.
- :func:`overlap_with_dask`: any ``dask.bag.Bag`` of documents (``dask.bag.read_text`` over
  JSON-lines or text files on shared storage, ``from_sequence``, ...) counted partition by
  partition by the workers of the current Dask client (a ``distributed.LocalCluster`` on one
  machine, a scheduler address on a cluster) and summed with ``Bag.fold``.
- :func:`overlap_files_with_dask`: training files on shared storage, each JSON-lines file cut
  into byte blocks that the workers read, parse with pyarrow and count where they run: no
  Python object per document (the fast path; ``overlap_with_dask`` on ``read_text`` parses
  each line in Python).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from lightning_info.core.optional import require_extra
from lightning_info.core.validation import require_int
from lightning_info.methods.train_test_overlap.files import (
    COMPRESSED_SUFFIXES,
    DocumentText,
    TrainingSource,
    document_text,
    training_sources,
)
from lightning_info.methods.train_test_overlap.functional import (
    ChunkCounts,
    OverlapIndex,
    OverlapOptions,
    TestInstance,
    _chunks,
    check_overlap_options,
)
from lightning_info.methods.train_test_overlap.report import OverlapReport
from lightning_info.methods.train_test_overlap.text_batches import (
    json_block_batches,
    read_text_batches,
)


def _sparse(counts: ChunkCounts) -> dict[str, list]:
    """One row of ``Dataset.map`` output: per index the slots with a count and the counts."""
    nonzero = [np.flatnonzero(c) for c in counts.counts]
    return {
        "slots": [[s.tolist() for s in nonzero]],
        "hits": [[c[s].tolist() for c, s in zip(counts.counts, nonzero)]],
        "documents": [counts.documents],
        "tokens": [counts.tokens],
    }


class _BatchCounter:
    """``Dataset.map`` function: the sparse counts of one batch of documents (picklable)."""

    def __init__(self, index: OverlapIndex, text_field: str) -> None:
        self.index, self.text_field = index, text_field

    def __call__(self, batch: dict[str, list]) -> dict[str, list]:
        return _sparse(self.index.count_chunk(list(batch[self.text_field])))


def overlap_with_datasets(
    instances: Sequence[TestInstance],
    dataset: Any,
    options: OverlapOptions = OverlapOptions(),
    text_field: str = "text",
    num_proc: int | None = None,
) -> OverlapReport:
    """:func:`compute_overlap` over a ``datasets.Dataset``, sharded with ``Dataset.map``.

    ``num_proc`` processes each count a contiguous shard of the data set,
    ``options.chunk_size`` rows at a time (memory per process is bounded by a batch);
    ``options.progress`` shows ``datasets``' progress bar; ``n``, ``n_values``, ``tokenizer`` and
    ``max_frequency`` are the index's. ``num_proc`` takes the place of ``options.processes`` and
    ``options.threads``, which are not used here. The result equals :func:`compute_overlap` on the
    same documents in any order.
    """
    if not hasattr(dataset, "column_names") or not hasattr(dataset, "map"):
        raise TypeError(
            f"`dataset` must be a datasets.Dataset, got {type(dataset).__name__}; for texts in "
            "memory use compute_overlap(instances, texts) or datasets.Dataset.from_dict(...)."
        )
    options = check_overlap_options(options)
    if num_proc is not None:
        require_int(num_proc, "num_proc", 1)
    if text_field not in dataset.column_names:
        raise ValueError(
            f"the data set has no column {text_field!r}; columns: {dataset.column_names}."
        )
    index = OverlapIndex(instances, options)
    with _datasets_progress(options.progress):
        sparse = dataset.map(
            _BatchCounter(index, text_field),
            batched=True,
            batch_size=options.chunk_size,
            num_proc=num_proc,
            remove_columns=dataset.column_names,
            keep_in_memory=True,
            desc="overlap scan",
        )
    total = index.empty_counts()
    for row in sparse:
        for counts, slots, hits in zip(total.counts, row["slots"], row["hits"]):
            np.add.at(counts, np.asarray(slots, dtype=np.int64), np.asarray(hits, np.int64))
        total.documents += row["documents"]
        total.tokens += row["tokens"]
    return index.report(total)


def overlap_with_dask(
    instances: Sequence[TestInstance],
    bag: Any,
    options: OverlapOptions = OverlapOptions(),
) -> OverlapReport:
    """:func:`compute_overlap` over a ``dask.bag.Bag`` of documents, on the current Dask client
    (or Dask's default scheduler without one): each partition is counted where it lives,
    ``options.chunk_size`` documents at a time (a partition of ``dask.bag.read_text(...,
    blocksize=...)`` holds a block of text, and memory grows with the chunk, not the block), and
    the partial counts are summed with ``Bag.fold``. Of ``options`` the index's ``n``,
    ``n_values``, ``tokenizer`` and ``max_frequency`` are used, and ``chunk_size``."""
    require_extra("dask.bag", "audit", "Counting overlap with Dask")
    if not hasattr(bag, "map_partitions"):
        raise TypeError(
            f"`bag` must be a dask.bag.Bag, got {type(bag).__name__}; wrap texts in memory with "
            "dask.bag.from_sequence(texts) or use compute_overlap(instances, texts)."
        )
    options = check_overlap_options(options)
    index = OverlapIndex(instances, options)
    partial_counts = bag.map_partitions(_PartitionCounter(index, options.chunk_size))
    return index.report(partial_counts.fold(_add, initial=index.empty_counts()).compute())


def overlap_files_with_dask(
    instances: Sequence[TestInstance],
    paths: Sequence[str] | str | Path,
    options: OverlapOptions = OverlapOptions(),
    text_field: str | DocumentText = "text",
    blocksize: int | str = "64MB",
) -> OverlapReport:
    """:func:`compute_overlap` over training files (those of
    :func:`~.text_batches.read_text_batches`) on the current Dask client (or Dask's default
    scheduler without one). An uncompressed JSON-lines file whose document is one field is cut
    at line ends into blocks of ``blocksize`` bytes (``dask.bytes.read_bytes``): each task reads
    its block where it runs, parses it with pyarrow (``text_batches.json_block_batches``) and
    counts it; any other file (compressed, Parquet, a template, ...) is one task that streams
    it. The index travels once to each worker (one key of the graph); the partial counts are
    summed with ``Bag.fold``. Of ``options`` the index's fields are used, and ``chunk_size`` for
    files read record by record."""
    require_extra("dask.bag", "audit", "Counting overlap with Dask")
    import dask
    import dask.bag
    from dask.bytes import read_bytes

    options = check_overlap_options(options)
    text = document_text(text_field)
    sources = list(training_sources(paths))
    index = OverlapIndex(instances, options)
    shared = dask.delayed(index, pure=True, traverse=False)
    tasks = []
    for source in sources:
        plain = source.kind == "jsonl" and source.path.suffix not in COMPRESSED_SUFFIXES
        if plain and text.fields is None and text.template is None:
            _, blocks = read_bytes(str(source.path), delimiter=b"\n", blocksize=blocksize)
            for k, block in enumerate(blocks[0]):
                where = f"{source.path}, block {k} of {len(blocks[0])}"
                tasks.append(dask.delayed(_count_block)(shared, block, text, where))
        else:
            tasks.append(dask.delayed(_count_source)(shared, source, text, options.chunk_size))
    if not tasks:
        raise ValueError(f"no training files under {paths}: pass files or folders holding some.")
    total = dask.bag.from_delayed(tasks).fold(_add, initial=index.empty_counts())
    return index.report(total.compute())


def _count_block(index: OverlapIndex, block: bytes, text: DocumentText, where: str) -> list:
    total = index.empty_counts()
    for batch in json_block_batches(block, text, where):
        total = total + index.count_chunk(batch)
    return [total]


def _count_source(
    index: OverlapIndex, source: TrainingSource, text: DocumentText, batch_size: int
) -> list:
    total = index.empty_counts()
    for batch in read_text_batches(source.path, text, source.kind == "lines", batch_size):
        total = total + index.count_chunk(batch)
    return [total]


def json_lines_texts(lines: Any, text_field: str = "text") -> list[str]:
    """The ``text_field`` of every JSON line of ``lines`` (blank lines skipped), parsed as one
    JSON array: ``dask.bag.read_text(paths, blocksize=...).map_partitions(json_lines_texts)``
    is a bag of the documents of JSON-lines files, one C-level parse per partition instead of
    one ``json.loads`` per line. A line with a UTF-8 byte-order mark (a file's first) is read
    without it; a line that is not a JSON object with ``text_field`` is refused, quoted."""
    import json

    lines = [line for line in lines if line and not line.isspace()]
    try:
        records = json.loads("[" + ",".join(lines) + "]")
    except json.JSONDecodeError:  # find the line, or take the byte-order marks off
        records = [_json_line(line) for line in lines]
    try:
        return [record[text_field] for record in records]
    except (KeyError, TypeError, IndexError):
        line = next(
            line
            for line, record in zip(lines, records)
            if not isinstance(record, dict) or text_field not in record
        )
        raise ValueError(
            f"a JSON line is not an object with a {text_field!r} field: {line[:80]!r}; pass "
            "the field that holds the text."
        ) from None


def _json_line(line: str) -> Any:
    import json

    try:
        return json.loads(line.removeprefix("\ufeff"))
    except json.JSONDecodeError as error:
        raise ValueError(
            f"not valid JSON at column {error.colno} ({error.msg}) of the line {line[:80]!r}; "
            "each line of a JSON-lines file holds one complete JSON object."
        ) from None


class _PartitionCounter:
    """``Bag.map_partitions`` function: one :class:`ChunkCounts` per partition, counted
    ``chunk_size`` documents at a time (picklable)."""

    def __init__(self, index: OverlapIndex, chunk_size: int = 1000) -> None:
        self.index, self.chunk_size = index, chunk_size

    def __call__(self, documents: Any) -> list[ChunkCounts]:
        total = self.index.empty_counts()
        for chunk in _chunks(documents, self.chunk_size):
            total = total + self.index.count_chunk(chunk)
        return [total]


def _add(a: ChunkCounts, b: ChunkCounts) -> ChunkCounts:
    return a + b


@contextmanager
def _datasets_progress(enabled: bool) -> Iterator[None]:
    """``datasets``' progress bars on or off for the block (they are a global switch)."""
    import datasets

    was_enabled = datasets.is_progress_bar_enabled()
    (datasets.enable_progress_bars if enabled else datasets.disable_progress_bars)()
    try:
        yield
    finally:
        (datasets.enable_progress_bars if was_enabled else datasets.disable_progress_bars)()
