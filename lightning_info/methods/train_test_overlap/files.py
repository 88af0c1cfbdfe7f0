"""The overlap report's inputs on disk: training text streamed from files, folders, JSON-lines
files and saved data sets, and test instances from JSON lines.

Training text is read lazily, a line or a batch at a time, so a corpus larger than memory streams
through :func:`~lightning_info.methods.train_test_overlap.functional.compute_overlap` with memory
bounded by one chunk of documents; only ``lines=False`` plain files are read whole (one document
per file). Files are UTF-8 with or without a byte-order mark; a line that is not valid JSON is
reported with its file and line number. A folder is read with every file inside it; a symbolic
link that leads out of the folder is refused."""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from lightning_info.core.files import read_json_lines
from lightning_info.core.validation import require_bool
from lightning_info.methods.train_test_overlap.functional import TestInstance


def iter_training_texts(
    paths: Sequence[str] | str | Path, text_field: str = "text", lines: bool = False
) -> Iterator[str]:
    """Documents of text files, folders and saved ``datasets`` datasets, streamed in order.

    ``paths`` is a list of paths (one path alone is read as ``[path]``). A file named
    ``*.jsonl`` or ``*.ndjson`` holds one JSON object per line, its ``text_field`` the document
    (a string); with ``lines=True`` every non-blank line of a text file is a document;
    otherwise a text file is one document. A folder yields every file inside it, in sorted
    order, and refuses a symbolic link that leads outside it.
    """
    require_bool(lines, "lines")
    for raw in _path_list(paths):
        path = Path(raw)
        if not path.exists():
            raise FileNotFoundError(f"training path {path} does not exist.")
        saved = ("dataset_info.json", "dataset_dict.json")
        if path.is_dir() and any((path / name).exists() for name in saved):
            yield from _dataset_texts(path, text_field)
        elif path.is_dir():
            for file in _folder_files(path):
                yield from _file_texts(file, lines, text_field)
        else:
            yield from _file_texts(path, lines, text_field)


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


def _file_texts(path: Path, lines: bool, text_field: str = "text") -> Iterator[str]:
    if path.suffix in JSON_LINES_SUFFIXES:
        yield from _json_lines_texts(path, text_field)
    elif lines:
        # Universal newlines, then str.splitlines on each line: the lines of
        # ``text.splitlines()`` (which also breaks at \v, \f, \x1c-\x1e, \x85, \u2028, ...).
        with path.open(encoding="utf-8-sig", errors="replace", newline=None) as handle:
            for line in handle:
                yield from (piece for piece in line.splitlines() if piece.strip())
    else:
        yield path.read_text(encoding="utf-8-sig", errors="replace")


JSON_LINES_SUFFIXES = (".jsonl", ".ndjson")


def _json_lines_texts(path: Path, text_field: str) -> Iterator[str]:
    """The ``text_field`` of every line, streamed (the file is never read whole)."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            if number == 1:
                raw = raw.removeprefix(codecs.BOM_UTF8)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(
                    f"{path}, line {number}: not UTF-8 text (byte {error.start} of the line); "
                    "save the file as UTF-8."
                ) from None
            if not line.strip():
                continue
            record = _json_record(line, path, number)
            if text_field not in record:
                raise ValueError(
                    f"{path}, line {number}: no field {text_field!r}; pass the field that holds "
                    f"the text (fields: {sorted(record)})."
                )
            text = record[text_field]
            if not isinstance(text, str):
                raise TypeError(
                    f"{path}, line {number}: field {text_field!r} must hold a string, got "
                    f"{text!r}; fix the line or pass the field that holds the text."
                )
            yield text


def _json_record(line: str, path: Path, number: int) -> dict[str, Any]:
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


def saved_datasets(paths: Sequence[str]) -> Any:
    """The ``datasets`` datasets saved at ``paths`` (every split), as one memory-mapped
    ``Dataset``."""
    from datasets import DatasetDict, concatenate_datasets, load_from_disk

    parts = []
    for path in _path_list(paths):
        if not (path / "dataset_info.json").exists() and not (path / "dataset_dict.json").exists():
            raise ValueError(
                f"{path} is not a dataset saved with `save_to_disk`; sharding with `num_proc` "
                "needs saved datasets (stream other files without it)."
            )
        data = load_from_disk(str(path))
        parts += list(data.values()) if isinstance(data, DatasetDict) else [data]
    return parts[0] if len(parts) == 1 else concatenate_datasets(parts)


def _dataset_texts(path: Path, text_field: str) -> Iterator[str]:
    from datasets import DatasetDict, load_from_disk

    data = load_from_disk(str(path))
    splits = data.values() if isinstance(data, DatasetDict) else [data]
    for split in splits:
        if text_field not in split.column_names:
            raise ValueError(f"{path} has no column {text_field!r}; columns: {split.column_names}.")
        for batch in split.iter(batch_size=1000):
            yield from batch[text_field]


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
