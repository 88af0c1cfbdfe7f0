"""The overlap report's inputs on disk: training text streamed from files, folders, JSON-lines
files and saved data sets, and test instances from JSON lines.

Training text is read lazily, a line or a batch at a time, so a corpus larger than memory streams
through :func:`~lightning_info.methods.train_test_overlap.functional.compute_overlap` with memory
bounded by one chunk of documents; only ``lines=False`` plain files are read whole (one document
per file)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from lightning_info.methods.train_test_overlap.functional import TestInstance


def iter_training_texts(
    paths: Sequence[str], text_field: str = "text", lines: bool = False
) -> Iterator[str]:
    """Documents of text files, folders and saved ``datasets`` datasets, streamed in order.

    A file named ``*.jsonl`` or ``*.ndjson`` holds one JSON object per line, its ``text_field``
    the document; with ``lines=True`` every non-blank line of a text file is a document;
    otherwise a text file is one document.
    """
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise FileNotFoundError(f"training path {path} does not exist.")
        saved = ("dataset_info.json", "dataset_dict.json")
        if path.is_dir() and any((path / name).exists() for name in saved):
            yield from _dataset_texts(path, text_field)
        elif path.is_dir():
            for file in sorted(p for p in path.rglob("*") if p.is_file()):
                yield from _file_texts(file, lines, text_field)
        else:
            yield from _file_texts(path, lines, text_field)


def _file_texts(path: Path, lines: bool, text_field: str = "text") -> Iterator[str]:
    if path.suffix in JSON_LINES_SUFFIXES:
        yield from _json_lines_texts(path, text_field)
    elif lines:
        # Universal newlines, then str.splitlines on each line: the lines of
        # ``text.splitlines()`` (which also breaks at \v, \f, \x1c-\x1e, \x85, \u2028, ...).
        with path.open(encoding="utf-8", errors="replace", newline=None) as handle:
            for line in handle:
                yield from (piece for piece in line.splitlines() if piece.strip())
    else:
        yield path.read_text(encoding="utf-8", errors="replace")


JSON_LINES_SUFFIXES = (".jsonl", ".ndjson")


def _json_lines_texts(path: Path, text_field: str) -> Iterator[str]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            record = json.loads(line)
            if text_field not in record:
                raise ValueError(
                    f"{path}:{number}: no field {text_field!r}; pass the field that holds the "
                    f"text (fields: {sorted(record)})."
                )
            yield record[text_field]


def saved_datasets(paths: Sequence[str]) -> Any:
    """The ``datasets`` datasets saved at ``paths`` (every split), as one memory-mapped
    ``Dataset``."""
    from datasets import DatasetDict, concatenate_datasets, load_from_disk

    parts = []
    for raw in paths:
        path = Path(raw)
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
    ``benchmark``, else the file's stem.
    """
    path = Path(path)
    instances = []
    with path.open() as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            record = json.loads(line)
            for required in (input_field, references_field):
                if required not in record:
                    raise ValueError(
                        f"{path}:{number}: missing field {required!r}; each line needs "
                        f"{input_field!r} and {references_field!r}."
                    )
            instances.append(
                TestInstance(
                    id=str(record.get(id_field, number)),
                    input=record[input_field],
                    references=record[references_field],
                    benchmark=str(record.get("benchmark", benchmark or path.stem)),
                )
            )
    if not instances:
        raise ValueError(f"{path} holds no test instances.")
    return instances
