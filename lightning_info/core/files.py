"""Files: atomic writes, and JSON readers whose errors name the file and line.

Each ``atomic_*`` writer fills a temporary file in the target's folder, flushes and fsyncs it,
then ``os.replace``s it onto the target (atomic on POSIX and Windows). On any failure the
temporary file is removed and the target is left as it was: a crash mid-write leaves the previous
file, never a half-written one.

:func:`read_json`, :func:`read_json_lines` and :func:`read_json_or_lines` read a user's file and
raise a ``ValueError`` naming the file, line and column of a syntax error.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

_O_BINARY = getattr(os, "O_BINARY", 0)


def atomic_write(path: str | Path, write: Callable[[IO[bytes]], Any]) -> Path:
    """Call ``write(handle)`` on a binary temporary file, then move it onto ``path``.

    A new file gets the usual permissions (``0o666`` less the umask); an existing file keeps its
    mode. Raises ``FileNotFoundError`` when ``path``'s folder does not exist.
    """
    path = Path(path)
    folder = path.parent
    if not folder.is_dir():
        raise FileNotFoundError(
            f"Cannot write {path}: the folder {folder} does not exist; create it first."
        )
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    temporary = folder / f".{path.name}.{secrets.token_hex(6)}.tmp"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_BINARY, 0o666)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _fsync_folder(folder)
    return path


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically."""
    return atomic_write(path, lambda handle: handle.write(data))


def atomic_write_text(path: str | Path, text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (encoded before the file is touched)."""
    return atomic_write_bytes(path, text.encode(encoding))


def atomic_torch_save(obj: Any, path: str | Path) -> Path:
    """``torch.save(obj, path)``, atomically."""
    import torch

    return atomic_write(path, lambda handle: torch.save(obj, handle))


def atomic_savefig(figure: Any, path: str | Path, **kwargs: Any) -> Path:
    """``figure.savefig(path, **kwargs)``, atomically; the format comes from ``path``'s suffix."""
    kwargs.setdefault("format", Path(path).suffix.lstrip(".") or None)
    return atomic_write(path, lambda handle: figure.savefig(handle, **kwargs))


def read_json(path: str | Path) -> Any:
    """The JSON value in ``path`` (UTF-8)."""
    text = _read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{path}, line {error.lineno}, column {error.colno}: not valid JSON ({error.msg}); "
            "fix the file (a JSON linter shows the spot)."
        ) from None


def read_json_lines(path: str | Path) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for each non-blank line of the JSON-lines file ``path``."""
    for number, line in enumerate(_read_text(path).splitlines(), start=1):
        if line.strip():
            yield number, _json_line(line, path, number)


def read_json_or_lines(path: str | Path) -> Any:
    """The value of a JSON file, or the list of values of a JSON-lines file (one on each
    non-blank line); a syntax error is reported in the format the file's first line shows."""
    text = _read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
        if not lines:
            return []
        try:
            json.loads(lines[0][1])
        except json.JSONDecodeError:
            raise ValueError(
                f"{path}, line {error.lineno}, column {error.colno}: not valid JSON "
                f"({error.msg}) nor JSON lines; fix the file (a JSON linter shows the spot)."
            ) from None
    return [_json_line(line, path, number) for number, line in lines]


def _read_text(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{path} is not UTF-8 text (byte {error.start}); save it as UTF-8 JSON."
        ) from None


def _json_line(line: str, path: str | Path, number: int) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{path}, line {number}, column {error.colno}: not valid JSON ({error.msg}); "
            "each line of a JSON-lines file holds one complete JSON value."
        ) from None


def _fsync_folder(folder: Path) -> None:
    if os.name != "posix":
        return
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(descriptor)
    finally:
        os.close(descriptor)


def read_csv_table(path: str | Path) -> Any:
    """A CSV file with a header row as a pandas DataFrame (a UTF-8 byte-order mark is accepted).

    Refuses a missing file, an empty file, a header that repeats a name (pandas would silently
    rename the second ``a`` to ``a.1``) and a row with more or fewer fields than the header (a
    truncated or shifted line; a missing value is an empty field, ``1,,3``), each naming the
    file and line.
    """
    import csv

    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"CSV file {path} does not exist.")
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if not header:
            raise ValueError(f"{path} has no header row: the first line must name the columns.")
        repeated = sorted({name for name in header if header.count(name) > 1})
        if repeated:
            raise ValueError(
                f"{path}: the header repeats the column name(s) {repeated}; give every column "
                "its own name."
            )
        for row in reader:
            if row and len(row) != len(header):
                raise ValueError(
                    f"{path}, line {reader.line_num}: {len(row)} field(s) for the header's "
                    f"{len(header)} columns (a truncated line?); fix or remove the line, and "
                    "leave a missing value's field empty (1,,3)."
                )
    return pd.read_csv(path, encoding="utf-8-sig")
