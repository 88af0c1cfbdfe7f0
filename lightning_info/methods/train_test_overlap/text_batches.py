"""Training text from files as :class:`~.batches.TextBatch` es: the compiled scan's input with no
Python object per document where the format allows it.

A JSON-lines file (plain, ``.gz`` or ``.zst``) whose document is one field is read a block of
``block_bytes`` (whole lines) at a time and, with numba installed, parsed by
:func:`~.json_kernel.json_field` (one pass; the field's string unescaped straight into the
batch's bytes); without it by pyarrow's JSON reader (C++, one thread; only that field is
converted, and each block's string column hands its bytes and offsets over as they are).
Everything else (several fields or a template, Parquet, saved data sets, text files) is read by
:func:`~.files.source_records` and joined into batches of ``batch_size`` documents. The
documents, and their order, are those of :func:`~.files.iter_training_texts` (tested).

Neither parser guesses where Python's ``json`` would read otherwise. The compiled one hands
each line it does not read as Python would to Python's reader (``files.line_document``, which
names the file and line of a bad one) and goes on. pyarrow refuses what Python reads (a
repeated key, a lone surrogate escape), reads a record without the field as a null, does not
check a string's UTF-8, and cannot parse a line longer than its block; at any of these the
file goes on with the Python reader from the first record not yet read.
"""

from __future__ import annotations

import codecs
import io
from collections.abc import Generator, Iterable, Iterator, Sequence
from itertools import islice
from pathlib import Path

import numpy as np

from lightning_info.core.optional import require_extra
from lightning_info.core.validation import require_int
from lightning_info.methods.train_test_overlap.batches import TextBatch
from lightning_info.methods.train_test_overlap.engine import ENGINES, compiled_available
from lightning_info.methods.train_test_overlap.files import (
    DocumentText,
    TrainingSource,
    binary_file,
    document_text,
    json_record,
    line_document,
    source_records,
    training_sources,
)

BLOCK_BYTES = 2 << 20  # 1-4 MB parse alike; at 2 MB the scan ran fastest (measured)


def read_text_batches(
    paths: Sequence[str] | str | Path,
    text_field: str | DocumentText = "text",
    lines: bool = False,
    batch_size: int = 2000,
    block_bytes: int = BLOCK_BYTES,
    engine: str = "auto",
) -> Iterator[TextBatch]:
    """The documents of :func:`~.files.iter_training_texts` (same arguments) as
    :class:`~.batches.TextBatch` es, for :func:`~.functional.compute_overlap` and
    :func:`~.functional.contaminated_documents`: a batch is a chunk. ``batch_size`` documents
    per batch where documents are read one by one; a JSON-lines block of ``block_bytes``
    otherwise. ``engine`` as in ``OverlapOptions``: ``"compiled"`` parses JSON lines with
    numba, ``"numpy"`` with pyarrow, ``"auto"`` with numba when it imports (module
    docstring)."""
    text = document_text(text_field)
    require_int(batch_size, "batch_size", 1)
    require_int(block_bytes, "block_bytes", 1 << 10)
    compiled = _compiled(engine)
    for source in training_sources(paths, lines):
        if source.kind == "jsonl" and text.fields is None and text.template is None:
            if compiled:
                yield from _compiled_json_batches(source.path, text, block_bytes)
            else:
                yield from _json_lines_batches(source.path, text, batch_size, block_bytes)
        else:
            records = source_records(source, text, None, batch_size)
            yield from _batches((record.text for record in records), batch_size)


def _compiled(engine: str) -> bool:
    if engine not in ENGINES:
        raise ValueError(f"`engine` must be one of {ENGINES}, got {engine!r}.")
    if engine == "compiled":
        require_extra("numba", "overlap", "The compiled JSON reader")
    return engine == "compiled" or (engine == "auto" and compiled_available())


def _compiled_json_batches(path: Path, text: DocumentText, block_bytes: int) -> Iterator[TextBatch]:
    number = 1  # the line number of the block's first line
    with binary_file(path) as handle:
        for buffer, start, end in _line_blocks(handle, block_bytes):
            number = yield from _kernel_batches(buffer, start, end, text, str(path), number)


def _line_blocks(handle, block_bytes: int) -> Iterator[tuple[bytearray, int, int]]:
    """The file's bytes in blocks of whole lines, read into one reused buffer:
    ``buffer[start:end]`` until the next block is asked for (a line longer than a block makes
    the buffer longer); the first block without a UTF-8 byte-order mark."""
    buffer = bytearray(2 * block_bytes)
    filled = handle.readinto(memoryview(buffer)[:block_bytes])
    start = 3 if buffer.startswith(codecs.BOM_UTF8) else 0
    while True:
        if len(buffer) - filled < block_bytes:
            buffer.extend(bytes(len(buffer)))
        got = handle.readinto(memoryview(buffer)[filled : filled + block_bytes])
        filled += got
        cut = filled if not got else buffer.rfind(b"\n", start, filled) + 1
        if cut > start:
            yield buffer, start, cut
        if not got:
            return
        if cut:  # the unfinished line moves to the front
            buffer[: filled - cut] = buffer[cut:filled]
            filled, start = filled - cut, 0


def _kernel_batches(
    buffer: bytes | bytearray, start: int, end: int, text: DocumentText, where: str, number: int
) -> Generator[TextBatch, None, int]:
    """The documents of ``buffer[start:end]`` (whole lines, the first numbered ``number``) by
    ``json_kernel.json_field``, and by Python's reader for each line it leaves; returns the
    number of the line after them."""
    from lightning_info.methods.train_test_overlap.json_kernel import json_field

    data = np.frombuffer(buffer, dtype=np.uint8, count=end - start, offset=start)
    field = np.frombuffer(text.names[0].encode("utf-8"), dtype=np.uint8)
    at = 0
    while at < data.size:
        out = np.empty(data.size - at, dtype=np.uint8)
        offsets = np.empty((data.size - at) // 2 + 2, dtype=np.int64)  # a record >= 2 bytes
        documents, stop, lines, left = json_field(data, at, field, out, offsets)
        if documents:
            yield TextBatch(out[: offsets[documents]], offsets[: documents + 1])
        number += lines
        if not left:
            break
        line_end = buffer.find(b"\n", start + stop, end)
        at = data.size if line_end < 0 else line_end + 1 - start
        document = line_document(bytes(buffer[start + stop : start + at]), where, number, text)
        if document is not None:
            yield TextBatch.from_texts([document])
        number += 1
    del data  # the buffer grows only when nothing holds it
    return number


def _json_lines_batches(
    path: Path, text: DocumentText, batch_size: int, block_bytes: int
) -> Iterator[TextBatch]:
    import pyarrow as pa

    with pa.input_stream(str(path), compression="detect") as stream:
        read = yield from _arrow_json(stream, text.names[0], block_bytes)
    if read is None:
        return
    # The Python reader from the first record not read (module docstring).
    records = source_records(TrainingSource(path, "jsonl", path), text, None)
    yield from _batches((record.text for record in islice(records, read, None)), batch_size)


def json_block_batches(
    block: bytes,
    text: DocumentText,
    where: str,
    batch_size: int = 2000,
    block_bytes: int = BLOCK_BYTES,
    engine: str = "auto",
) -> Iterator[TextBatch]:
    """The documents of ``block``, whole lines of a JSON-lines file (a Dask block of
    ``dask.bytes.read_bytes``), as :func:`read_text_batches` reads a file; ``where`` names the
    block in errors (the Python reader's line numbers count from the block's first line)."""
    import pyarrow as pa

    if _compiled(engine):
        number = 1
        for buffer, start, end in _line_blocks(io.BytesIO(block), block_bytes):  # cache-sized
            number = yield from _kernel_batches(buffer, start, end, text, where, number)
        return

    read = yield from _arrow_json(pa.BufferReader(block), text.names[0], block_bytes)
    if read is None:
        return
    try:
        lines = block.decode("utf-8").removeprefix("\ufeff").splitlines()
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{where}: not UTF-8 text (byte {error.start} of the block); save the file as UTF-8."
        ) from None
    numbered = ((k, line) for k, line in enumerate(lines, 1) if line.strip())
    records = (text.text(json_record(line, where, k), f"{where}, line {k}") for k, line in numbered)
    yield from _batches(islice(records, read, None), batch_size)


def _arrow_json(stream, field: str, block_bytes: int) -> Generator[TextBatch, None, int | None]:
    """pyarrow's JSON reader over ``stream``: a batch per block of the string ``field``.
    Returns ``None`` when it read the whole stream, else the number of records it handed over
    before a block it cannot read (module docstring)."""
    import pyarrow as pa
    import pyarrow.json as pj

    read = 0
    schema = pa.schema([(field, pa.string())])
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    try:
        reader = pj.open_json(
            stream, pj.ReadOptions(use_threads=False, block_size=block_bytes), options
        )
        for block in reader:
            column = block.column(0)
            if column.null_count:  # a record without the field, or null there
                return read
            column.validate(full=True)  # the strings' UTF-8
            yield _column_batch(column)
            read += block.num_rows
    except pa.ArrowInvalid:
        return read
    return None


def _column_batch(column) -> TextBatch:
    """An Arrow string column (no nulls) as a batch, without copying its bytes."""
    _, offsets, data = column.buffers()
    width = np.int64 if column.type == "large_string" else np.int32
    offsets = np.frombuffer(offsets, dtype=width)[column.offset : column.offset + len(column) + 1]
    offsets = offsets.astype(np.int64)
    data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    first = offsets[0]
    return TextBatch(data[first : offsets[-1]], offsets - first)


def _batches(texts: Iterable[str], size: int) -> Iterator[TextBatch]:
    iterator = iter(texts)
    while chunk := list(islice(iterator, size)):
        yield TextBatch.from_texts(chunk)
