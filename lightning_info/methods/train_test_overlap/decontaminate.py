"""Decontamination of a training corpus on disk: the overlap report, which training documents
share an n-gram with which test instances, and a copy of the corpus without those documents.

One scan gives all three: each chunk of documents is tokenised once, its n-grams counted for the
report (:meth:`~lightning_info.methods.train_test_overlap.functional.OverlapIndex.count_chunk`'s
counts) and its hits at the report's ``n`` traced back to the documents and to the test
instances that hold them (:class:`DocumentMatcher`). The scan runs in this process (``threads``
or ``processes`` of :class:`OverlapOptions` count chunks in parallel) or on a Dask cluster, one
task per file or saved data set (:func:`scan_corpus`). Nothing is written until the whole corpus
has been read, so a bad line anywhere is refused before any output exists;
:func:`write_flagged` and :func:`write_clean_copy` then write atomically.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import shutil
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from lightning_info.core.dask_cluster import local_cluster
from lightning_info.core.files import atomic_write
from lightning_info.core.optional import require_extra
from lightning_info.methods.train_test_overlap.files import (
    DocumentText,
    TrainingRecord,
    TrainingSource,
    _parquet_file,
    _path_list,
    dataset_splits,
    document_text,
    json_lines,
    output_file,
    source_records,
    training_sources,
)
from lightning_info.methods.train_test_overlap.functional import (
    ChunkCounts,
    OverlapIndex,
    OverlapOptions,
    TestInstance,
    _chunks,
    _count_chunks,
    _intersections,
    check_overlap_options,
)
from lightning_info.methods.train_test_overlap.report import OverlapReport
from lightning_info.methods.train_test_overlap.sharded import _datasets_progress

__all__ = ["CorpusScan", "DocumentMatcher", "scan_corpus", "write_clean_copy", "write_flagged"]


class DocumentMatcher:
    """The counts of an :class:`OverlapIndex` and, per training document, the test instances it
    shares an n-gram of the index's ``n`` with (an n-gram of an instance's input, of one of its
    references, or straddling the two), from one tokenisation of each chunk.

    A document is matched exactly when
    :meth:`~lightning_info.methods.train_test_overlap.functional.OverlapIndex.flag_chunk` flags
    it, and the counts equal ``count_chunk``'s. Picklable: it travels to worker processes and
    Dask workers once.
    """

    def __init__(self, index: OverlapIndex) -> None:
        if not isinstance(index, OverlapIndex):
            raise TypeError(f"`index` must be an OverlapIndex, got {type(index).__name__}.")
        self.index = index
        self.main = index.n_values.index(index.n)
        main = index.indexes[self.main]
        slots, owners = [], []
        for k, (inp, refs, _) in enumerate(index.parts):
            for sequence in (inp, *refs, *_intersections(index.n, inp, refs)):
                _, found = main.lookup(np.asarray(sequence, dtype=np.uint64))
                slots.append(found)
                owners.append(np.full(found.size, k, dtype=np.int64))
        pairs = np.unique(
            np.stack([np.concatenate([[], *slots]), np.concatenate([[], *owners])]).astype(
                np.int64
            ),
            axis=1,
        )
        # instances holding slot s: owners[offsets[s]:offsets[s + 1]]
        self.owners = pairs[1]
        self.offsets = np.searchsorted(pairs[0], np.arange(len(main) + 1))

    def count_chunk(self, documents: list[str]) -> tuple[ChunkCounts, dict[int, list[int]]]:
        """The chunk's counts (those of ``index.count_chunk``) and, for each document that
        shares an n-gram with a test instance, the positions of those instances (sorted)."""
        index = self.index
        counts = [np.zeros(len(ix), np.int64) for ix in index.indexes]
        tokens, matches = 0, {}
        for group in index._symbol_groups(documents):  # each group in its own order
            tokens += group.tokens
            compiled = index.scanner is not None and group.ends is None
            for m, ngrams in enumerate(index.indexes):
                if compiled and m != self.main:
                    index.scanner.count(m, group.symbols, counts[m])
                    continue
                if compiled:
                    docs, slots = index.scanner.hits(m, group.symbols, counts[m])
                else:
                    positions, slots = ngrams.lookup(group.symbols)
                    counts[m] += np.bincount(slots, minlength=len(ngrams))
                    ends = group.ends
                    if ends is None:
                        ends = np.flatnonzero(group.symbols == index.separator)
                    docs = np.searchsorted(ends, positions)
                if m == self.main and slots.size:
                    matches.update(self._owners(group.positions[docs], slots))
        return ChunkCounts(counts, len(documents), tokens), matches

    def _owners(self, docs: np.ndarray, slots: np.ndarray) -> dict[int, list[int]]:
        """``{document: the sorted positions of the instances holding its hit slots}``."""
        docs, slots = np.unique(np.stack([docs, slots]), axis=1)
        starts, sizes = self.offsets[slots], self.offsets[slots + 1] - self.offsets[slots]
        first = np.cumsum(sizes) - sizes  # where each hit's owners start in the expansion
        at = np.repeat(starts - first, sizes) + np.arange(sizes.sum())
        docs, owners = np.unique(np.stack([np.repeat(docs, sizes), self.owners[at]]), axis=1)
        cuts = np.flatnonzero(np.diff(docs)) + 1
        return {
            int(group[0]): owned.tolist()
            for group, owned in zip(np.split(docs, cuts), np.split(owners, cuts))
        }

    def items(self, positions: Sequence[int]) -> list[dict[str, Any]]:
        """The test instances at ``positions`` as ``{"benchmark", "id"}``."""
        instances = self.index.instances
        return [{"benchmark": instances[k].benchmark, "id": instances[k].id} for k in positions]


Matched = tuple[int, int, TrainingRecord, list[int]]
"""A matched document: its source's position, its position in the source (and split), its
record (without the text) and the positions of the test instances it shares an n-gram with."""


@dataclass
class CorpusScan:
    """What :func:`scan_corpus` found: the overlap ``report``, the ``flagged`` training
    documents (each its :meth:`TrainingRecord.location` and ``test_items``, the test instances
    it shares an n-gram with, in reading order), the training paths (``roots``) and the
    ``sources`` read from them (``source_roots``: the position of each one's path)."""

    report: OverlapReport
    flagged: list[dict[str, Any]]
    roots: list[Path]
    sources: list[TrainingSource]
    source_roots: list[int]
    dropped: dict[tuple[int, str | None], set[int]] = field(default_factory=dict)
    """Per (source position, split): the flagged documents' positions among its documents."""


def _source_size(source: TrainingSource) -> int:
    if source.kind == "dataset":
        return sum(f.stat().st_size for f in source.path.rglob("*.arrow"))
    return source.path.stat().st_size


def _numbered(
    sources: Sequence[TrainingSource], text: DocumentText, id_field: str | None, batch_size: int
) -> Iterator[tuple[int, int, TrainingRecord]]:
    """``(source position, document position within its source and split, record)``."""
    for s, source in enumerate(sources):
        split, k = None, 0
        for record in source_records(source, text, id_field, batch_size):
            if record.split != split:
                split, k = record.split, 0
            yield s, k, record
            k += 1


def _scan_records(
    matcher: DocumentMatcher,
    numbered: Iterator[tuple[int, int, TrainingRecord]],
    chunk_size: int,
    workers: tuple[int, int],
    bar: Any,
) -> tuple[ChunkCounts, list[Matched]]:
    """The counts of the records and their matched ones, ``chunk_size`` at a time, in this
    thread or in ``workers = (processes, threads)`` worker processes or threads."""
    in_flight: deque[list[tuple[int, int, TrainingRecord]]] = deque()

    def texts() -> Iterator[list[str]]:
        for chunk in _chunks(numbered, chunk_size):
            in_flight.append(chunk)
            yield [record.text for _, _, record in chunk]

    total, matched = matcher.index.empty_counts(), []
    counted = _count_chunks(matcher, texts(), *workers)  # type: ignore[arg-type]
    for counts, matches in counted:  # in order: the chunks in flight, oldest first
        chunk = in_flight.popleft()
        total = total + counts
        for k in sorted(matches):
            s, position, record = chunk[k]
            matched.append((s, position, record._replace(text=""), matches[k]))
        bar.update(sum(record.size for _, _, record in chunk))
    return total, matched


def _scan_source(
    matcher: DocumentMatcher,
    position: int,
    source: TrainingSource,
    text: DocumentText,
    id_field: str | None,
    chunk_size: int,
) -> tuple[ChunkCounts, list[Matched]]:
    """One Dask task: the counts and matched documents of one file or saved data set."""
    numbered = ((position, k, r) for _, k, r in _numbered([source], text, id_field, chunk_size))
    return _scan_records(matcher, numbered, chunk_size, (1, 1), _NoBar())


class _NoBar:
    def update(self, _: int) -> None:
        pass


def _scan_with_dask(
    matcher: DocumentMatcher,
    sources: list[TrainingSource],
    text: DocumentText,
    id_field: str | None,
    options: OverlapOptions,
    scheduler: str | None,
    bar: Any,
) -> tuple[ChunkCounts, list[Matched]]:
    distributed = require_extra("distributed", "audit", "Overlap scans on Dask")
    if scheduler is None:
        cluster = local_cluster(
            n_workers=options.processes,
            threads_per_worker=options.threads,
            processes=options.processes > 1,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
        client = distributed.Client(cluster)
    else:
        cluster, client = None, distributed.Client(scheduler)
    try:
        shared = client.scatter(matcher, broadcast=True)
        futures = {
            client.submit(
                _scan_source, shared, s, source, text, id_field, options.chunk_size, pure=False
            ): s
            for s, source in enumerate(sources)
        }
        total, parts = matcher.index.empty_counts(), {}
        for future in distributed.as_completed(futures):
            counts, matched = future.result()
            total = total + counts
            parts[futures[future]] = matched
            bar.update(_source_size(sources[futures[future]]))
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    return total, [item for s in sorted(parts) for item in parts[s]]


def scan_corpus(
    instances: Sequence[TestInstance],
    paths: Sequence[str] | str | Path,
    options: OverlapOptions = OverlapOptions(),
    *,
    text_field: str | DocumentText = "text",
    lines: bool = False,
    id_field: str | None = "id",
    dask: bool = False,
    scheduler: str | None = None,
) -> CorpusScan:
    """The overlap report of ``instances`` against the training files at ``paths``, and the
    training documents that share an ``options.n``-gram with a test instance.

    ``paths``, ``text_field`` and ``lines`` are read as by
    :func:`~lightning_info.methods.train_test_overlap.files.iter_training_records`; a record's
    ``id_field`` (when it has one) is named with it. ``options.progress`` shows a bar of the
    bytes read, with its rate and the time left. With ``dask``, every file (and every saved data
    set) is one task on a Dask cluster, read where the task runs (on a cluster, the paths must
    be visible to every worker): on the scheduler at the address ``scheduler``, or else on a
    local cluster of ``options.processes`` workers (worker processes when more than one, else
    one worker in this process) with ``options.threads`` threads each. The report equals
    :func:`~.functional.compute_overlap` on the same documents, the flagged documents are those
    of :func:`~.functional.contaminated_documents`. Raises, having written nothing, for a
    missing path, a bad line or record (naming the file and its line or row) or a corpus
    without documents.
    """
    options = check_overlap_options(options)
    text = document_text(text_field)
    if id_field is not None and not isinstance(id_field, str):
        raise TypeError(f"`id_field` must be a field name or None, got {id_field!r}.")
    if scheduler is not None and not dask:
        raise ValueError("`scheduler` names a Dask scheduler: pass dask=True too.")
    roots = _path_list(paths)
    if not roots:
        raise ValueError("no training paths: pass at least one file or folder.")
    sources, source_roots = [], []
    for r, root in enumerate(roots):
        found = list(training_sources([root], lines))
        sources += found
        source_roots += [r] * len(found)
    matcher = DocumentMatcher(OverlapIndex(instances, options))
    total_size = sum(_source_size(source) for source in sources)
    bar = tqdm(
        total=total_size,
        desc="overlap scan",
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        disable=not options.progress,
    )
    try:
        if dask:
            total, matched = _scan_with_dask(
                matcher, sources, text, id_field, options, scheduler, bar
            )
        else:
            numbered = _numbered(sources, text, id_field, options.chunk_size)
            workers = (options.processes, options.threads)
            total, matched = _scan_records(matcher, numbered, options.chunk_size, workers, bar)
        bar.update(max(total_size - bar.n, 0))
    finally:
        bar.close()
    if total.documents == 0:
        raise ValueError(
            f"the training corpus {[str(p) for p in roots]} holds no documents; pass files "
            "with at least one non-blank document."
        )
    flagged, dropped = [], {}
    for s, position, record, owners in matched:
        flagged.append({**record.location(), "test_items": matcher.items(owners)})
        dropped.setdefault((s, record.split), set()).add(position)
    report = matcher.index.report(total)
    return CorpusScan(report, flagged, roots, sources, source_roots, dropped)


def write_flagged(scan: CorpusScan, path: str | Path) -> Path:
    """Write the flagged documents of ``scan`` to the JSON-lines file ``path``, atomically: one
    object per document, its ``source`` file, ``split`` (a saved ``DatasetDict``'s), ``line``
    (JSON-lines and text files, from 1) or ``row`` (Parquet files and data sets, from 0), ``id``
    (when the record has one) and ``test_items`` (``[{"benchmark", "id"}, ...]``)."""
    lines = "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in scan.flagged)
    return atomic_write(path, lambda handle: handle.write(lines.encode("utf-8")))


def _clean_names(roots: list[Path]) -> list[str]:
    """The name of each training path's copy; positions first when two paths share a name."""
    names = [root.resolve().name or "corpus" for root in roots]
    if len(set(names)) < len(names):
        names = [f"{k + 1}-{name}" for k, name in enumerate(names)]
    return names


def write_clean_copy(scan: CorpusScan, folder: str | Path, progress: bool = False) -> Path:
    """Write the training corpus of ``scan`` without its flagged documents into ``folder``.

    Each training path gets a copy of the same name in ``folder`` (prefixed by its position,
    ``1-``, ``2-``, ..., when two share a name), in its own format, without the flagged
    documents: a JSON-lines file keeps its other lines byte for byte, a Parquet file its other
    rows (same schema), a saved data set the other rows of each split (saved with
    ``save_to_disk``), a text file read one document per line its other documents, one per line,
    and a folder holds the copies of its files (a text file that is one flagged document is left
    out). The copy is written in a temporary folder beside ``folder`` and moved onto it when
    complete (a previous copy is replaced). ``progress`` shows ``datasets``' bars while saved
    data sets are written.
    """
    folder = Path(folder)
    names = _clean_names(scan.roots)
    temporary = folder.parent / f".{folder.name}.{secrets.token_hex(6)}.tmp"
    temporary.mkdir(parents=True)
    saved = any(source.kind == "dataset" for source in scan.sources)
    try:
        with _datasets_progress(progress) if saved else contextlib.nullcontext():
            for s, source in enumerate(scan.sources):
                base = temporary / names[scan.source_roots[s]]
                inside = source.path.relative_to(source.root)
                target = base if source.path == source.root else base / inside
                target.parent.mkdir(parents=True, exist_ok=True)
                drop = {split: kept for (t, split), kept in scan.dropped.items() if t == s}
                _clean_source(source, target, drop)
        _replace_folder(temporary, folder)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return folder


def _clean_source(source: TrainingSource, target: Path, drop: dict[str | None, set[int]]) -> None:
    dropped = drop.get(None, set())
    if source.kind == "jsonl":
        with output_file(target) as handle:
            k = 0
            for _, raw, line in json_lines(source.path):
                if line.strip():
                    k += 1
                    if k - 1 in dropped:
                        continue
                handle.write(raw)
    elif source.kind == "lines":
        with target.open("w", encoding="utf-8", newline="\n") as handle:
            for k, record in enumerate(source_records(source, DocumentText())):
                if k not in dropped:
                    handle.write(record.text + "\n")
    elif source.kind == "text":
        if 0 not in dropped:
            shutil.copyfile(source.path, target)
    elif source.kind == "parquet":
        _clean_parquet(source.path, target, dropped)
    else:
        _clean_dataset(source.path, target, drop)


def _clean_parquet(path: Path, target: Path, dropped: set[int]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    file = _parquet_file(path)
    row = 0
    with pq.ParquetWriter(target, file.schema_arrow) as writer:
        for batch in file.iter_batches():
            keep = [row + k not in dropped for k in range(batch.num_rows)]
            writer.write_batch(batch.filter(pa.array(keep, type=pa.bool_())))
            row += batch.num_rows


def _clean_dataset(path: Path, target: Path, drop: dict[str | None, set[int]]) -> None:
    from datasets import DatasetDict

    kept = {}
    for name, split in dataset_splits(path):
        dropped = drop.get(name, set())
        kept[name] = split.select([k for k in range(len(split)) if k not in dropped])
    data = kept[None] if None in kept else DatasetDict(kept)
    data.save_to_disk(str(target))


def _replace_folder(new: Path, target: Path) -> None:
    """Move the folder ``new`` onto ``target`` (a previous ``target`` is removed after)."""
    if not target.exists() and not target.is_symlink():
        os.replace(new, target)
        return
    old = target.parent / f".{target.name}.{secrets.token_hex(6)}.old"
    os.replace(target, old)
    os.replace(new, target)
    if old.is_dir() and not old.is_symlink():
        shutil.rmtree(old)
    else:
        old.unlink()
