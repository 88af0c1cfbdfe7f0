"""Read an offline W&B run the way the W&B server would: W&B 0.31 keeps an offline run only in
its ``run-<id>.wandb`` log (LevelDB's log format: 32 KiB blocks of CRC-checked chunks, each record
a ``wandb.proto`` ``Record``), plus the media files beside it."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BLOCK = 32 * 1024
HEADER = 7  # masked CRC32-C (4 bytes), length (2), chunk type (1)
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def _records(path: Path) -> list[bytes]:
    data = path.read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path} is not a W&B run log (no ':W&B' magic).")
    pos, records, pending = 7, [], b""
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # the block's tail is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        chunk = data[pos + HEADER : pos + HEADER + length]
        pos += HEADER + length
        if kind == FULL:
            records.append(chunk)
        elif kind == FIRST:
            pending = chunk
        elif kind == MIDDLE:
            pending += chunk
        elif kind == LAST:
            records.append(pending + chunk)
    return records


@dataclass
class OfflineRun:
    """What one offline run holds: its identity, config, summary and history rows, media files."""

    folder: Path
    name: str = ""
    group: str = ""
    job_type: str = ""
    tags: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)

    def table(self, key: str) -> dict[str, Any]:
        """The logged ``wandb.Table`` ``key`` (``{"columns": [...], "data": [[...], ...]}``)."""
        entry = self.summary[key]
        return json.loads((self.folder / "files" / entry["path"]).read_text())

    def media(self, pattern: str) -> list[Path]:
        return sorted((self.folder / "files" / "media").glob(pattern))


def read_offline_run(folder: Path) -> OfflineRun:
    """The run in ``folder`` (an ``offline-run-*`` folder), read from its ``run-*.wandb`` log."""
    from wandb.proto import wandb_internal_pb2

    (log,) = folder.glob("run-*.wandb")
    run = OfflineRun(folder)
    for raw in _records(log):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(raw)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run.name, run.group = record.run.display_name, record.run.run_group
            run.job_type, run.tags = record.run.job_type, list(record.run.tags)
            updates = record.run.config.update
        elif kind == "config":
            updates = record.config.update
        elif kind == "history":
            row: dict[str, Any] = {}
            for item in record.history.item:
                _set(row, item, json.loads(item.value_json))
            run.history.append(row)
            continue
        elif kind == "summary":
            updates = record.summary.update
        else:
            continue
        target = run.config if kind in ("run", "config") else run.summary
        for item in updates:
            _set(target, item, json.loads(item.value_json))
    return run


def _set(values: dict, item: Any, value: Any) -> None:
    """``values[key][sub]... = value``: an item's ``key``, or its ``nested_key`` path (the logged
    name first, ``/`` kept, then the fields of a logged object such as a table's ``path``)."""
    path = [item.key] if item.key else list(item.nested_key)
    for name in path[:-1]:
        values = values.setdefault(name, {})
    values[path[-1]] = value


def offline_runs(root: Path) -> list[OfflineRun]:
    """Every offline run under ``root / "wandb"``, oldest first."""
    return [read_offline_run(f) for f in sorted((root / "wandb").glob("offline-run-*"))]
