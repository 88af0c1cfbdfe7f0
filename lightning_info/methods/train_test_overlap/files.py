"""The overlap report's inputs on disk: training text streamed from files, folders, JSON-lines
files, Parquet files and saved data sets, and test instances from JSON lines.

Training text is read lazily, a line or a batch at a time, so a corpus larger than memory streams
through :func:`~lightning_info.methods.train_test_overlap.functional.compute_overlap` with memory
bounded by one chunk of documents; only ``lines=False`` plain files are read whole (one document
per file). Files are UTF-8 with or without a byte-order mark; a line that is not valid JSON is
reported with its file and line number. A folder is read with every file inside it; a symbolic
link that leads out of the folder is refused.

Which text of a record (a JSON line, a Parquet or data-set row) is its document is a
:class:`DocumentText`: one field, several fields joined with a newline, or a template with named
fields. :func:`iter_training_records` also says where each document came from (the file and its
line or row, and the record's id), which the decontamination outputs name.
"""

from __future__ import annotations

import codecs
import io
import json
import string
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from lightning_info.core.files import read_json_lines
from lightning_info.core.validation import require_bool, require_int, require_string_sequence
from lightning_info.methods.train_test_overlap.functional import TestInstance

JSON_LINES_SUFFIXES = (".jsonl", ".ndjson")
COMPRESSED_SUFFIXES = (".gz", ".zst")  # JSON lines read compressed: gzip, Zstandard
PARQUET_SUFFIXES = (".parquet", ".pq")
SAVED_DATASET_FILES = ("dataset_info.json", "dataset_dict.json")


@dataclass(frozen=True)
class DocumentText:
    """Which text of a training record is its document.

    At most one of the three is given; none reads the field ``"text"``.

    Args:
        field: the field that holds the text.
        fields: several fields, joined with a newline in the order given
            (``["prompt", "response"]``).
        template: a ``str.format`` template of named fields (``"{prompt}\\n{response}"``;
            ``{{`` and ``}}`` are literal braces).

    Every field named must hold a string in every record.
    """

    field: str | None = None
    fields: tuple[str, ...] | None = None
    template: str | None = None

    def __post_init__(self) -> None:
        given = [
            name for name in ("field", "fields", "template") if getattr(self, name) is not None
        ]
        if len(given) > 1:
            raise ValueError(
                f"pass one of `field`, `fields` and `template`, got {' and '.join(given)}; a "
                "template can join several fields in any layout."
            )
        if self.field is not None and (not isinstance(self.field, str) or not self.field):
            raise TypeError(f"`field` must be a field name (a non-empty str), got {self.field!r}.")
        if self.fields is not None:
            fields = require_string_sequence(self.fields, "fields")
            if not fields:
                raise ValueError(
                    "`fields` is empty: name at least one field, e.g. [prompt, response]."
                )
            object.__setattr__(self, "fields", tuple(fields))
        if self.template is not None:
            template_fields(self.template)

    @property
    def names(self) -> tuple[str, ...]:
        """The fields read, each once, in order of first use."""
        if self.fields is not None:
            return tuple(dict.fromkeys(self.fields))
        if self.template is not None:
            return template_fields(self.template)
        return (self.field or "text",)

    def describe(self) -> str:
        """How the text is made, for messages (``field 'text'``, ``the template '...'``)."""
        if self.fields is not None:
            return f"fields {list(self.fields)} joined with a newline"
        if self.template is not None:
            return f"the template {self.template!r}"
        return f"field {self.names[0]!r}"

    def text(self, record: Any, where: str) -> str:
        """The document of ``record`` (a mapping of fields); ``where`` (``"corpus.jsonl, line
        3"``) starts the message of a missing field or a field that is not a string."""
        if not isinstance(record, Mapping):
            raise ValueError(
                f"{where}: expected a record with named fields, got {type(record).__name__}; "
                "pass a callable that returns the text instead."
            )
        for name in self.names:
            if name not in record:
                named = (
                    "" if self.template is None else f", which the template {self.template!r} names"
                )
                raise ValueError(
                    f"{where}: no field {name!r}{named}; pass the field that holds the text "
                    f"(fields: {sorted(record)})."
                )
            if not isinstance(record[name], str):
                raise TypeError(
                    f"{where}: field {name!r} must hold a string, got {record[name]!r}; fix the "
                    "line or pass the field that holds the text."
                )
        if self.fields is not None:
            return "\n".join(record[name] for name in self.fields)
        if self.template is not None:
            return self.template.format_map(record)
        return record[self.names[0]]


def template_fields(template: str) -> tuple[str, ...]:
    """The field names ``template`` fills, each once; raise for a malformed template, a
    positional (``{}``, ``{0}``) or dotted/indexed field, or a template naming none."""
    if not isinstance(template, str):
        raise TypeError(
            f"`template` must be a str such as '{{prompt}}\\n{{response}}', got {template!r}."
        )
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as error:
        raise ValueError(
            f"`template` {template!r} is not a valid format string ({error}); write a literal "
            "brace as {{ or }}."
        ) from None
    names = []
    for _, name, spec, _ in parsed:
        if name is None:
            continue
        if not name or name.isdigit() or any(c in name for c in ".[]"):
            raise ValueError(
                f"`template` {template!r} holds {{{name}}}: name a field, as in {{prompt}} "
                "(positional, dotted and indexed fields are not read)."
            )
        if spec and ("{" in spec):
            raise ValueError(
                f"`template` {template!r}: a nested field in a format spec is not read."
            )
        names.append(name)
    if not names:
        raise ValueError(
            f"`template` {template!r} names no field; write the fields in braces, e.g. "
            "'{prompt}\\n{response}'."
        )
    return tuple(dict.fromkeys(names))


def document_text(text_field: str | DocumentText) -> DocumentText:
    """``text_field`` as a :class:`DocumentText` (a str is the one field)."""
    if isinstance(text_field, DocumentText):
        return text_field
    if not isinstance(text_field, str):
        raise TypeError(
            f"`text_field` must be a field name or a DocumentText, got {text_field!r}; use "
            "DocumentText(fields=[...]) or DocumentText(template=...) for several fields."
        )
    return DocumentText(field=text_field)


class TrainingRecord(NamedTuple):
    """One training document read from disk, and where it came from.

    ``where`` is ``"line"`` (a JSON-lines or text file's line, from 1), ``"row"`` (a Parquet
    file's or a data set's row, from 0; ``split`` names the split of a saved ``DatasetDict``) or
    ``"file"`` (a text file that is one document; ``position`` 0). ``id`` is the record's id
    field, ``None`` without one; ``size`` the bytes of the source it stands for (about: a
    progress bar's unit)."""

    text: str
    source: str
    where: str
    position: int
    id: Any = None
    split: str | None = None
    size: int = 0

    def location(self) -> dict[str, Any]:
        """``{"source", "split" (a split's), "line" / "row" (not for a whole file), "id" (when
        the record has one)}``."""
        where: dict[str, Any] = {"source": self.source}
        if self.split is not None:
            where["split"] = self.split
        if self.where != "file":
            where[self.where] = self.position
        if self.id is not None:
            where["id"] = self.id
        return where


class TrainingSource(NamedTuple):
    """One file or saved data set of a training corpus: its ``path``, its ``kind``
    (``"jsonl"``, ``"parquet"``, ``"dataset"``, ``"lines"``, ``"text"``) and the ``root``
    path it was found under (itself, or the folder it lies in)."""

    path: Path
    kind: str
    root: Path


def training_sources(
    paths: Sequence[str] | str | Path, lines: bool = False
) -> Iterator[TrainingSource]:
    """The files and saved data sets of ``paths``, in the order they are read (a folder's files
    sorted); raise for a missing path or a link out of a folder."""
    require_bool(lines, "lines")
    for path in _path_list(paths):
        if not path.exists():
            raise FileNotFoundError(f"training path {path} does not exist.")
        if path.is_dir() and any((path / name).exists() for name in SAVED_DATASET_FILES):
            yield TrainingSource(path, "dataset", path)
        elif path.is_dir():
            for file in _folder_files(path):
                yield TrainingSource(file, _file_kind(file, lines), path)
        else:
            yield TrainingSource(path, _file_kind(path, lines), path)


def _file_kind(path: Path, lines: bool) -> str:
    if path.suffix in COMPRESSED_SUFFIXES:
        if path.with_suffix("").suffix in JSON_LINES_SUFFIXES:
            return "jsonl"
        raise ValueError(
            f"{path}: of compressed files only JSON lines are read (*.jsonl.gz, *.jsonl.zst, "
            "*.ndjson.gz, ...); decompress it, or write its documents as JSON lines."
        )
    if path.suffix in JSON_LINES_SUFFIXES:
        return "jsonl"
    if path.suffix in PARQUET_SUFFIXES:
        return "parquet"
    return "lines" if lines else "text"


def iter_training_records(
    paths: Sequence[str] | str | Path,
    text_field: str | DocumentText = "text",
    lines: bool = False,
    id_field: str | None = "id",
    batch_size: int = 1000,
) -> Iterator[TrainingRecord]:
    """The documents of :func:`iter_training_texts`, each with where it came from
    (:class:`TrainingRecord`): the file, its line or row, and the record's ``id_field``
    (``None``: no ids). Parquet files and saved data sets are read ``batch_size`` rows at a
    time, only the columns needed."""
    text = document_text(text_field)
    require_int(batch_size, "batch_size", 1)
    for source in training_sources(paths, lines):
        yield from source_records(source, text, id_field, batch_size)


def source_records(
    source: TrainingSource,
    text: DocumentText,
    id_field: str | None = "id",
    batch_size: int = 1000,
) -> Iterator[TrainingRecord]:
    """The documents of one :class:`TrainingSource`, in order."""
    path, kind = source.path, source.kind
    if kind == "jsonl":
        yield from _json_lines_records(path, text, id_field)
    elif kind == "parquet":
        yield from _parquet_records(path, text, id_field, batch_size)
    elif kind == "dataset":
        yield from _dataset_records(path, text, id_field, batch_size)
    elif kind == "lines":
        # Universal newlines, then str.splitlines on each line: the lines of
        # ``text.splitlines()`` (which also breaks at \v, \f, \x1c-\x1e, \x85, \u2028, ...).
        with path.open(encoding="utf-8-sig", errors="replace", newline=None) as handle:
            for number, line in enumerate(handle, 1):
                pieces = [piece for piece in line.splitlines() if piece.strip()]
                for k, piece in enumerate(pieces):
                    size = len(line) if k == 0 else 0
                    yield TrainingRecord(piece, str(path), "line", number, size=size)
    else:
        data = path.read_text(encoding="utf-8-sig", errors="replace")
        yield TrainingRecord(data, str(path), "file", 0, size=path.stat().st_size)


def iter_training_texts(
    paths: Sequence[str] | str | Path,
    text_field: str | DocumentText = "text",
    lines: bool = False,
) -> Iterator[str]:
    """Documents of text files, folders, Parquet files and saved ``datasets`` datasets,
    streamed in order.

    ``paths`` is a list of paths (one path alone is read as ``[path]``). A file named
    ``*.jsonl`` or ``*.ndjson`` holds one JSON object per line, a ``*.parquet`` file one record
    per row (read a batch of rows at a time), a saved data set one per row of every split;
    ``text_field`` says which text of a record is the document: a field name, or a
    :class:`DocumentText` (several fields joined with a newline, or a template). With
    ``lines=True`` every non-blank line of a text file is a document; otherwise a text file is
    one document. A folder yields every file inside it, in sorted order, and refuses a symbolic
    link that leads outside it.
    """
    for record in iter_training_records(paths, text_field, lines, id_field=None):
        yield record.text


def _path_list(paths: Sequence[str] | str | Path) -> list[Path]:
    """``paths`` as a list of ``Path``s; one ``str`` or ``Path`` is one path (not its
    characters)."""
    if isinstance(paths, (str, Path)):
        return [Path(paths)]
    return [Path(path) for path in paths]


def _folder_files(folder: Path) -> list[Path]:
    """The files inside ``folder`` (recursively, sorted); raise for a symbolic link whose
    target lies outside it."""
    root = folder.resolve()
    files = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if not path.resolve().is_relative_to(root):
            raise ValueError(
                f"{path} links to {path.resolve()}, outside the folder {folder}; remove the "
                "link or pass its target as a path of its own."
            )
        files.append(path)
    return files


def json_lines(path: Path) -> Iterator[tuple[int, bytes, str]]:
    """``(line number, raw bytes, decoded line)`` of every line of a JSON-lines file, streamed
    (a first line's byte-order mark is left out of the decoded line, not of the raw bytes)."""
    with binary_file(path) as handle:
        for number, raw in enumerate(handle, 1):
            yield number, raw, _decoded(raw, path, number)


def _decoded(raw: bytes, path: Path | str, number: int) -> str:
    """Line ``number`` of a JSON-lines file as text (the first without a byte-order mark)."""
    data = raw.removeprefix(codecs.BOM_UTF8) if number == 1 else raw
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{path}, line {number}: not UTF-8 text (byte {error.start} of the line); "
            "save the file as UTF-8."
        ) from None


def line_document(raw: bytes, path: Path | str, number: int, text: DocumentText) -> str | None:
    """The document of line ``number`` of a JSON-lines file, as the streamed reader reads it
    (``None`` for a blank line); raise naming the file and line for a bad one."""
    line = _decoded(raw, path, number)
    if not line.strip():
        return None
    return text.text(json_record(line, path, number), f"{path}, line {number}")


def binary_file(path: Path) -> BinaryIO:
    """``path`` opened for reading bytes, decompressed when its name ends in ``.gz`` or
    ``.zst`` (pyarrow's codecs: Zstandard is not in Python's standard library)."""
    if path.suffix not in COMPRESSED_SUFFIXES:
        return path.open("rb")
    import pyarrow as pa

    return io.BufferedReader(_ArrowRaw(pa.input_stream(str(path), compression="detect")))


class _ArrowRaw(io.RawIOBase):
    """A pyarrow input stream as a raw binary file (``io.BufferedReader`` then reads lines)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self.stream.close()
        super().close()


def output_file(path: Path) -> BinaryIO:
    """``path`` opened for writing bytes, compressed as its name says (``.gz``, ``.zst``)."""
    if path.suffix not in COMPRESSED_SUFFIXES:
        return path.open("wb")
    import pyarrow as pa

    return pa.output_stream(str(path), compression="detect")


def _json_lines_records(
    path: Path, text: DocumentText, id_field: str | None
) -> Iterator[TrainingRecord]:
    """The document of every line, streamed (the file is never read whole)."""
    pending = 0  # the bytes of blank lines, counted with the next document
    for number, raw, line in json_lines(path):
        pending += len(raw)
        if not line.strip():
            continue
        record = json_record(line, path, number)
        document = text.text(record, f"{path}, line {number}")
        ident = record.get(id_field) if id_field is not None else None
        yield TrainingRecord(document, str(path), "line", number, ident, size=pending)
        pending = 0


def json_record(line: str, path: Path | str, number: int) -> dict[str, Any]:
    """The JSON object on line ``number`` of ``path``; raise naming the file and line."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{path}, line {number}, column {error.colno}: not valid JSON ({error.msg}); each "
            "line of a JSON-lines file holds one complete JSON object."
        ) from None
    if not isinstance(record, dict):
        raise ValueError(
            f"{path}, line {number}: expected a JSON object ({{...}}), got "
            f"{type(record).__name__}; each line holds one object with named fields."
        )
    return record


def _require_columns(where: str, columns: list[str], text: DocumentText) -> None:
    for name in text.names:
        if name not in columns:
            named = "" if text.template is None else f" (named by the template {text.template!r})"
            raise ValueError(f"{where} has no column {name!r}{named}; columns: {columns}.")


def _shares(size: int, rows: int) -> Iterator[int]:
    """``size`` bytes spread over ``rows`` rows in whole bytes (they sum to ``size``)."""
    for row in range(rows):
        yield size * (row + 1) // rows - size * row // rows


def _rows(
    batches: Iterator[dict[str, list]],
    text: DocumentText,
    id_field: str | None,
    where: str,
    source: str,
    split: str | None,
    sizes: Iterator[int],
) -> Iterator[TrainingRecord]:
    """The documents of column batches (``{column: values}``), rows numbered from 0."""
    row = 0
    for batch in batches:
        names = list(batch)
        for values in zip(*batch.values()):
            record = dict(zip(names, values))
            document = text.text(record, f"{where}, row {row}")
            ident = record.get(id_field) if id_field is not None else None
            yield TrainingRecord(document, source, "row", row, ident, split, next(sizes, 0))
            row += 1


def _parquet_file(path: Path) -> Any:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as error:
        raise ValueError(f"{path} is not a readable Parquet file ({error}).") from None


def _parquet_records(
    path: Path, text: DocumentText, id_field: str | None, batch_size: int
) -> Iterator[TrainingRecord]:
    """The document of every row, a batch of rows at a time (only the columns needed)."""
    file = _parquet_file(path)
    columns = list(file.schema_arrow.names)
    _require_columns(str(path), columns, text)
    read = list(text.names)
    if id_field is not None and id_field in columns and id_field not in read:
        read.append(id_field)
    sizes = _shares(path.stat().st_size, file.metadata.num_rows)
    batches = (b.to_pydict() for b in file.iter_batches(batch_size=batch_size, columns=read))
    yield from _rows(batches, text, id_field, str(path), str(path), None, sizes)


def dataset_splits(path: Path) -> list[tuple[str | None, Any]]:
    """``(split name, Dataset)`` of a data set saved with ``save_to_disk`` (name ``None`` for a
    single ``Dataset``)."""
    from datasets import DatasetDict, load_from_disk

    data = load_from_disk(str(path))
    if isinstance(data, DatasetDict):
        return list(data.items())
    return [(None, data)]


def _dataset_records(
    path: Path, text: DocumentText, id_field: str | None, batch_size: int
) -> Iterator[TrainingRecord]:
    for name, split in dataset_splits(path):
        _require_columns(str(path), split.column_names, text)
        read = list(text.names)
        if id_field is not None and id_field in split.column_names and id_field not in read:
            read.append(id_field)
        size = sum(Path(f["filename"]).stat().st_size for f in split.cache_files)
        where = str(path) if name is None else f"{path} (split {name})"
        batches = split.select_columns(read).iter(batch_size=batch_size)
        sizes = _shares(size, len(split))
        yield from _rows(batches, text, id_field, where, str(path), name, sizes)


def saved_datasets(paths: Sequence[str]) -> Any:
    """The ``datasets`` datasets saved at ``paths`` (every split), as one memory-mapped
    ``Dataset``."""
    from datasets import DatasetDict, concatenate_datasets, load_from_disk

    parts = []
    for path in _path_list(paths):
        if not any((path / name).exists() for name in SAVED_DATASET_FILES):
            raise ValueError(
                f"{path} is not a dataset saved with `save_to_disk`; sharding with `num_proc` "
                "needs saved datasets (stream other files without it)."
            )
        data = load_from_disk(str(path))
        parts += list(data.values()) if isinstance(data, DatasetDict) else [data]
    return parts[0] if len(parts) == 1 else concatenate_datasets(parts)


def read_test_instances(
    path: str | Path,
    input_field: str = "input",
    references_field: str = "references",
    id_field: str = "id",
    benchmark: str | None = None,
) -> list[TestInstance]:
    """Test instances from a JSON-lines file with ``input`` and ``references`` fields.

    A missing id is the line number; the benchmark is the ``benchmark`` field, else
    ``benchmark``, else the file's stem. The file is UTF-8 (a byte-order mark is fine); an
    invalid line is reported with the file and line number.
    """
    path = Path(path)
    instances = []
    for number, record in read_json_lines(path):
        if not isinstance(record, dict):
            raise ValueError(
                f"{path}, line {number}: expected a JSON object with {input_field!r} and "
                f"{references_field!r} fields, got {type(record).__name__}."
            )
        for required in (input_field, references_field):
            if required not in record:
                raise ValueError(
                    f"{path}, line {number}: missing field {required!r}; each line needs "
                    f"{input_field!r} and {references_field!r}."
                )
        try:
            instance = TestInstance(
                id=str(record.get(id_field, number)),
                input=record[input_field],
                references=record[references_field],
                benchmark=str(record.get("benchmark", benchmark or path.stem)),
            )
        except TypeError as error:
            raise TypeError(f"{path}, line {number}: {error}") from None
        instances.append(instance)
    if not instances:
        raise ValueError(f"{path} holds no test instances.")
    return instances
