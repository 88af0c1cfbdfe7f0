"""A FisherSFT candidate pool on disk: token rows appended as they are embedded, read back
memory-mapped.

A :class:`FeatureStore` is a folder of four files:

- ``values.f32``: the token rows, float32, row-major, ``dim`` columns, example after example;
- ``offsets.i64``: int64 ``[0, m_0, m_0 + m_1, ...]``, one entry more than the examples;
- ``weights.f32``: one float32 token weight per row (e.g. ``p (1 - p)``), when the store has them;
- ``store.json``: the record: format, ``dim``, the example and row counts, whether there are
  weights, and the :class:`~lightning_info.methods.fisher_sft.functional.FeatureSketch` the rows
  were made with (``null``: the model's full width).

An append writes the rows, offsets and weights first and the record last, so the record only
ever counts complete examples; reopening for appending drops what an interrupted append left
beyond it. Read back, :meth:`FeatureStore.blocks` is a
:class:`~lightning_info.core.blocks.TokenBlocks` whose ``values`` is a tensor over a
copy-on-write memory map of ``values.f32``: nothing is copied, pages are read when used, and a
write to the tensor changes this process's pages, never the file. :meth:`FeatureStore.read`,
:meth:`FeatureStore.shard` and :meth:`FeatureStore.take` read only the rows they return.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor

from lightning_info.core.blocks import TokenBlocks
from lightning_info.core.files import read_json
from lightning_info.core.validation import (
    require_bool,
    require_choice,
    require_index,
    require_indices,
    require_int,
    require_real_tensor,
)
from lightning_info.methods.fisher_sft.functional import FeatureSketch, as_token_blocks

__all__ = ["FeatureStore", "shard_range"]

FORMAT = "lightning-info/fisher-sft-feature-store"
VERSION = 1
RECORD = "store.json"
VALUES = "values.f32"
OFFSETS = "offsets.i64"
WEIGHTS = "weights.f32"


def shard_range(count: int, rank: int, num_shards: int) -> tuple[int, int]:
    """Examples ``[start, stop)`` of contiguous shard ``rank`` of ``num_shards`` over ``count``
    examples: balanced (sizes differ by at most one), in order, covering every example once."""
    require_int(count, "count", 0)
    require_int(num_shards, "num_shards", 1)
    rank = require_index(rank, "rank")
    if not 0 <= rank < num_shards:
        raise ValueError(f"`rank` must be in [0, {num_shards}), got {rank}.")
    return rank * count // num_shards, (rank + 1) * count // num_shards


def _folder(path: object) -> Path:
    """``path`` as a :class:`Path`, or raise unless it is a str or path-like naming a folder."""
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise TypeError(
            f"`path` must be the folder of a feature store (a non-empty str or Path), got {path!r}."
        )
    return Path(path)


_RECORD_KEYS = ("count", "rows", "dim", "weighted", "sketch")


def _check_record(record: dict[str, Any], record_path: Path) -> None:
    """Raise, naming the file, unless the record's counts are ints >= 0, ``dim`` an int >= 1 or
    null, ``weighted`` a bool and ``sketch`` null or a sketch record (an edited record would be
    read as some other store)."""
    missing = [key for key in _RECORD_KEYS if key not in record]
    counts_ok = all(
        isinstance(record.get(key), int)
        and not isinstance(record.get(key), bool)
        and record.get(key) >= 0
        for key in ("count", "rows")
    )
    dim = record.get("dim")
    dim_ok = dim is None or (isinstance(dim, int) and not isinstance(dim, bool) and dim >= 1)
    sketch = record.get("sketch")
    sketch_ok = sketch is None or (
        isinstance(sketch, dict) and {"sketch_dim", "sketch_seed"} <= sketch.keys()
    )
    if missing or not counts_ok or not dim_ok or not sketch_ok:
        problem = (
            f"lacks {missing}" if missing else "holds a count, width or sketch of the wrong type"
        )
        raise ValueError(
            f"{record_path} {problem}: the record was edited or written by something else; "
            "re-create the store."
        )
    if not isinstance(record["weighted"], bool):
        raise ValueError(f"{record_path}: `weighted` must be true or false; re-create the store.")


def _sketch_record(sketch: FeatureSketch | None) -> dict[str, int] | None:
    if sketch is None:
        return None
    if not isinstance(sketch, FeatureSketch):
        raise TypeError(f"`sketch` must be a FeatureSketch or None, got {type(sketch).__name__}.")
    return {"sketch_dim": sketch.sketch_dim, "sketch_seed": sketch.seed}


class FeatureStore:
    """A pool of token blocks in a folder (see the module's docstring for the files).

    Make one with :meth:`create`, fill it with :meth:`append`, read it with :meth:`open` (or keep
    using the store that wrote it). ``len(store)`` is the number of examples, ``store.rows`` the
    number of token rows, ``store.dim`` their width (``None`` until the first append of a store
    created without it).
    """

    def __init__(self, path: Path, record: dict[str, Any], writable: bool) -> None:
        self.path = path
        self._record = record
        self.writable = writable
        self._maps: dict[str, tuple[int, np.ndarray]] = {}

    # -- making and opening ---------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        path: str | os.PathLike,
        *,
        dim: int | None = None,
        sketch: FeatureSketch | None = None,
        weighted: bool = False,
        overwrite: bool = False,
    ) -> FeatureStore:
        """An empty store in the folder ``path`` (created), open for :meth:`append`.

        ``dim``: the row width (``None``: taken from the first append; a sketched store's is
        ``sketch.sketch_dim``). ``sketch``: the sketch the rows will have been made with
        (recorded, checked by :meth:`open`; the store does not apply it). ``weighted``: every
        append brings one token weight per row. An existing store is refused unless
        ``overwrite``; a folder holding other files is always refused.
        """
        path = _folder(path)
        weighted = require_bool(weighted, "weighted")
        overwrite = require_bool(overwrite, "overwrite")
        sketch_record = _sketch_record(sketch)
        if sketch is not None:
            dim = sketch.sketch_dim if dim is None else dim
            if dim != sketch.sketch_dim:
                raise ValueError(
                    f"`dim` = {dim} but the rows of a store sketched by {sketch} have "
                    f"{sketch.sketch_dim} columns."
                )
        if dim is not None:
            require_int(dim, "dim", 1)
        if path.exists():
            if not path.is_dir():
                raise FileExistsError(f"{path} is a file; give a folder for the feature store.")
            present = {p.name for p in path.iterdir()}
            if RECORD in present and not overwrite:
                raise FileExistsError(
                    f"{path} already holds a feature store; pass `overwrite=True` to replace it "
                    "or open it with `FeatureStore.open(path, mode='a')` to add to it."
                )
            others = present - {RECORD, VALUES, OFFSETS, WEIGHTS}
            if others:
                raise FileExistsError(
                    f"{path} holds files that are not a feature store's ({sorted(others)[:5]}); "
                    "give an empty or new folder."
                )
        path.mkdir(parents=True, exist_ok=True)
        for name in (RECORD, VALUES, OFFSETS, WEIGHTS):
            (path / name).unlink(missing_ok=True)
        (path / VALUES).write_bytes(b"")
        (path / OFFSETS).write_bytes(np.zeros(1, dtype=np.int64).tobytes())
        if weighted:
            (path / WEIGHTS).write_bytes(b"")
        record = {
            "format": FORMAT,
            "version": VERSION,
            "dim": dim,
            "count": 0,
            "rows": 0,
            "weighted": bool(weighted),
            "sketch": sketch_record,
        }
        store = cls(path, record, writable=True)
        store._write_record()
        return store

    @classmethod
    def open(
        cls,
        path: str | os.PathLike,
        *,
        mode: Literal["r", "a"] = "r",
        sketch: FeatureSketch | None | Literal["any"] = "any",
        dim: int | None = None,
    ) -> FeatureStore:
        """The store in ``path``, checked: ``mode="r"`` to read, ``"a"`` to read and append.

        ``sketch`` (a :class:`FeatureSketch`, or ``None`` for rows at the model's full width) and
        ``dim`` are checked against the record when given. A file shorter than the record says
        (truncated) is an error; one longer (an append interrupted before its record was
        written) is an error in ``"r"`` mode and cut back to the record in ``"a"`` mode.
        """
        require_choice(mode, "mode", ("r", "a"))
        path = _folder(path)
        if dim is not None:
            require_int(dim, "dim", 1)
        record_path = path / RECORD
        if not record_path.is_file():
            raise FileNotFoundError(
                f"{path} holds no feature store (no {RECORD}); make one with `FeatureStore.create`."
            )
        record = read_json(record_path)
        if not isinstance(record, dict) or record.get("format") != FORMAT:
            raise ValueError(f"{record_path} is not a FisherSFT feature store record.")
        if record.get("version") != VERSION:
            raise ValueError(
                f"{path} is a feature store of version {record.get('version')}; this version "
                f"reads version {VERSION}: re-create it."
            )
        _check_record(record, record_path)
        store = cls(path, record, writable=mode == "a")
        if sketch != "any" and record["sketch"] != (expected := _sketch_record(sketch)):
            raise ValueError(
                f"{path} holds rows made with sketch {record['sketch']}, not {expected} (None: "
                "the model's full width); re-create the store, or open it with the sketch it "
                "was made with."
            )
        if dim is not None and record["dim"] != dim:
            raise ValueError(f"{path} holds rows of width {record['dim']}, not {dim}.")
        store._check_files(truncate=mode == "a")
        return store

    def _expected_sizes(self) -> dict[str, int]:
        rows, dim = self.rows, self.dim or 0
        sizes = {VALUES: 4 * rows * dim, OFFSETS: 8 * (len(self) + 1)}
        if self.weighted:
            sizes[WEIGHTS] = 4 * rows
        return sizes

    def _check_files(self, truncate: bool) -> None:
        for name, expected in self._expected_sizes().items():
            file = self.path / name
            if not file.is_file():
                raise FileNotFoundError(f"The feature store {self.path} lacks its file {name}.")
            size = file.stat().st_size
            if size < expected:
                raise ValueError(
                    f"{file} is truncated: {size} bytes, but the store's record ({len(self)} "
                    f"examples, {self.rows} rows of width {self.dim}) needs {expected}; the "
                    "file was cut short (an interrupted copy?): re-create the store."
                )
            if size > expected:
                if not truncate:
                    raise ValueError(
                        f"{file} holds {size - expected} bytes beyond the store's record (an "
                        "append was interrupted); `FeatureStore.open(path, mode='a')` drops them."
                    )
                os.truncate(file, expected)
        offsets = self._offsets_map()
        if int(offsets[0]) != 0 or int(offsets[-1]) != self.rows:
            raise ValueError(
                f"{self.path / OFFSETS} runs from {int(offsets[0])} to {int(offsets[-1])}, not "
                f"from 0 to the record's {self.rows} rows: the store is corrupt; re-create it."
            )
        if len(offsets) > 1 and bool((np.diff(offsets) < 0).any()):
            raise ValueError(f"{self.path / OFFSETS} decreases: the store is corrupt.")

    def _write_record(self) -> None:
        # Written after the data it counts, replacing the old record in one rename.
        temporary = self.path / f".{RECORD}.tmp"
        temporary.write_text(json.dumps(self._record, indent=1) + "\n")
        os.replace(temporary, self.path / RECORD)

    # -- what it holds --------------------------------------------------------------------------

    def __len__(self) -> int:
        return int(self._record["count"])

    @property
    def rows(self) -> int:
        """Token rows over all examples."""
        return int(self._record["rows"])

    @property
    def dim(self) -> int | None:
        return self._record["dim"]

    @property
    def weighted(self) -> bool:
        return bool(self._record["weighted"])

    @property
    def sketch(self) -> FeatureSketch | None:
        """The sketch the rows were made with, ``None`` for the model's full width."""
        record = self._record["sketch"]
        if record is None:
            return None
        return FeatureSketch(record["sketch_dim"], record["sketch_seed"])

    @property
    def nbytes(self) -> int:
        """Bytes of the three data files."""
        return sum(self._expected_sizes().values())

    def __repr__(self) -> str:
        return (
            f"FeatureStore({str(self.path)!r}, examples={len(self)}, rows={self.rows}, "
            f"dim={self.dim}, weighted={self.weighted}, sketch={self._record['sketch']})"
        )

    # -- appending ------------------------------------------------------------------------------

    def append(
        self,
        features: TokenBlocks | Sequence[Tensor],
        token_weights: Tensor | None = None,
    ) -> None:
        """Add examples at the end: a :class:`TokenBlocks` or a list of ``(m_i, dim)`` tensors
        (any float dtype and device; stored as float32), with one token weight per row when the
        store is weighted."""
        if not self.writable:
            raise PermissionError(
                f"{self.path} was opened to read; open it with mode='a' to append."
            )
        blocks = as_token_blocks(features)
        if self.dim is None:
            self._record["dim"] = require_int(blocks.dim, "features' width", 1)
        if blocks.dim != self.dim:
            raise ValueError(
                f"The features have width {blocks.dim} but the store {self.path} holds rows of "
                f"width {self.dim}; append features of the same layer (and sketch)."
            )
        rows = blocks.values.shape[0]
        weights = None
        if self.weighted:
            if token_weights is None:
                raise ValueError(
                    f"The store {self.path} keeps token weights: pass one per row ({rows})."
                )
            require_real_tensor(token_weights, "token_weights")
            if token_weights.shape != (rows,):
                raise ValueError(
                    f"`token_weights` must have one entry per token row ({rows}), got shape "
                    f"{tuple(token_weights.shape)}."
                )
            weights = token_weights.detach().to("cpu", torch.float32).numpy()
            if not np.isfinite(weights).all():
                raise ValueError("`token_weights` holds NaN or inf; every weight must be finite.")
        elif token_weights is not None:
            raise ValueError(
                f"The store {self.path} was created without token weights; create it with "
                "`weighted=True` to keep them."
            )
        values = blocks.values.detach().to("cpu", torch.float32).contiguous().numpy()
        if not np.isfinite(values).all():
            raise ValueError(
                "`features` hold NaN or inf (or values beyond float32); the store keeps finite "
                "rows only: find the example that overflowed before appending."
            )
        offsets = blocks.offsets[1:].cpu().numpy().astype(np.int64) + self.rows
        with open(self.path / VALUES, "ab") as handle:
            handle.write(values.tobytes())
        with open(self.path / OFFSETS, "ab") as handle:
            handle.write(offsets.tobytes())
        if weights is not None:
            with open(self.path / WEIGHTS, "ab") as handle:
                handle.write(weights.tobytes())
        self._record["count"] = len(self) + len(blocks)
        self._record["rows"] = self.rows + rows
        self._write_record()

    # -- reading --------------------------------------------------------------------------------

    def _map(self, name: str, dtype: type, size: int) -> np.ndarray:
        """A copy-on-write memory map of the first ``size`` entries of a file (re-made when the
        store has grown since)."""
        cached = self._maps.get(name)
        if cached is not None and cached[0] == size:
            return cached[1]
        if size == 0:
            mapped = np.zeros(0, dtype=dtype)
        else:
            mapped = np.memmap(self.path / name, dtype=dtype, mode="c", shape=(size,))
        self._maps[name] = (size, mapped)
        return mapped

    def _offsets_map(self) -> np.ndarray:
        return self._map(OFFSETS, np.int64, len(self) + 1)

    def _range(self, start: int, stop: int | None) -> tuple[int, int]:
        start = require_index(start, "start")
        stop = len(self) if stop is None else require_index(stop, "stop")
        if not 0 <= start <= stop <= len(self):
            raise IndexError(
                f"Examples [{start}, {stop}) are outside the store's {len(self)} examples."
            )
        if self.dim is None:
            raise ValueError(f"The store {self.path} is empty: append features first.")
        return start, stop

    def blocks(self, start: int = 0, stop: int | None = None) -> TokenBlocks:
        """Examples ``[start, stop)`` (default: all) as a :class:`TokenBlocks` over the memory
        map: no row is read until used, none is copied."""
        start, stop = self._range(start, stop)
        offsets = np.array(self._offsets_map()[start : stop + 1])
        values = self._map(VALUES, np.float32, self.rows * self.dim).reshape(-1, self.dim)
        values = values[int(offsets[0]) : int(offsets[-1])]
        return TokenBlocks(torch.from_numpy(values), torch.from_numpy(offsets - offsets[0]))

    def token_weights(self, start: int = 0, stop: int | None = None) -> Tensor | None:
        """The token weights of examples ``[start, stop)`` over the memory map (``None`` for a
        store without weights)."""
        start, stop = self._range(start, stop)
        if not self.weighted:
            return None
        offsets = self._offsets_map()
        weights = self._map(WEIGHTS, np.float32, self.rows)
        return torch.from_numpy(weights[int(offsets[start]) : int(offsets[stop])])

    def shard(self, rank: int, num_shards: int) -> tuple[TokenBlocks, Tensor | None]:
        """Contiguous shard ``rank`` of ``num_shards`` (:func:`shard_range`) as memory-mapped
        blocks and token weights: only its rows are read, when used."""
        start, stop = shard_range(len(self), rank, num_shards)
        return self.blocks(start, stop), self.token_weights(start, stop)

    def read(self, start: int = 0, stop: int | None = None) -> tuple[TokenBlocks, Tensor | None]:
        """Examples ``[start, stop)`` read into memory (their rows only) and their token weights
        (``None`` without): what a shard of a selection holds while it is selected from."""
        start, stop = self._range(start, stop)
        offsets = np.array(self._offsets_map()[start : stop + 1])
        first, last = int(offsets[0]), int(offsets[-1])
        values = np.fromfile(
            self.path / VALUES, np.float32, (last - first) * self.dim, offset=4 * first * self.dim
        ).reshape(-1, self.dim)
        weights = None
        if self.weighted:
            weights = torch.from_numpy(
                np.fromfile(self.path / WEIGHTS, np.float32, last - first, offset=4 * first)
            )
        return TokenBlocks(torch.from_numpy(values), torch.from_numpy(offsets - first)), weights

    def take(self, indices: Sequence[int]) -> tuple[TokenBlocks, Tensor | None]:
        """The examples ``indices`` (in that order) read into memory as a pool of their own, and
        their token weights (``None`` without)."""
        if isinstance(indices, (list, tuple)) and not indices:
            raise ValueError("`indices` is empty: take at least one example.")
        index = require_indices(indices, "indices").numpy()
        if index.size == 0:
            raise ValueError("`indices` is empty: take at least one example.")
        if index.min() < 0 or index.max() >= len(self):
            raise IndexError(f"`indices` must lie in [0, {len(self)}).")
        self._range(0, None)
        offsets = self._offsets_map()
        starts, ends = offsets[index], offsets[index + 1]
        lengths = ends - starts
        rows = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
        values = self._map(VALUES, np.float32, self.rows * self.dim).reshape(-1, self.dim)
        new_offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        blocks = TokenBlocks(torch.from_numpy(values[rows]), torch.from_numpy(new_offsets))
        if not self.weighted:
            return blocks, None
        weights = self._map(WEIGHTS, np.float32, self.rows)
        return blocks, torch.from_numpy(weights[rows])
