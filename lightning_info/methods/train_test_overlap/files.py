"""Training text for the overlap report, streamed from files, folders and saved data sets."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path


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
