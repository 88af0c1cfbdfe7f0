"""The overlap report's inputs on disk: training text streamed from files, folders and saved data
sets, and test instances from JSON lines."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

from lightning_info.methods.train_test_overlap.functional import TestInstance


def iter_training_texts(
    paths: Sequence[str], text_field: str = "text", lines: bool = False
) -> Iterator[str]:
    """Documents of text files, folders and saved ``datasets`` datasets, streamed in order."""
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise FileNotFoundError(f"training path {path} does not exist.")
        saved = ("dataset_info.json", "dataset_dict.json")
        if path.is_dir() and any((path / name).exists() for name in saved):
            yield from _dataset_texts(path, text_field)
        elif path.is_dir():
            for file in sorted(p for p in path.rglob("*") if p.is_file()):
                yield from _file_texts(file, lines)
        else:
            yield from _file_texts(path, lines)


def _file_texts(path: Path, lines: bool) -> Iterator[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    yield from (line for line in text.splitlines() if line.strip()) if lines else [text]


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
