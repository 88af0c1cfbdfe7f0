"""Training documents as one buffer of UTF-8 bytes and their offsets (:class:`TextBatch`).

A batch is what a columnar reader hands over (an Arrow string column's data and offsets), so a
corpus read with pyarrow reaches the compiled scan without a Python object per document; a list
of strings becomes one with :meth:`TextBatch.from_texts`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat

import numpy as np


@dataclass(frozen=True, eq=False)
class TextBatch:
    """Documents as bytes: the ``d``-th is ``data[offsets[d]:offsets[d + 1]]`` (UTF-8).

    Args:
        data: ``uint8`` array of the documents' bytes, one after the other.
        offsets: ``int64`` array of ``documents + 1`` increasing positions in ``data``, from 0
            to ``data.size``.
    """

    data: np.ndarray
    offsets: np.ndarray

    def __post_init__(self) -> None:
        data, offsets = np.asarray(self.data), np.asarray(self.offsets)
        if data.ndim != 1 or data.dtype != np.uint8:
            raise TypeError(f"`data` must be a 1-D uint8 array, got {data.dtype} {data.shape}.")
        if offsets.ndim != 1 or offsets.size == 0 or offsets.dtype.kind not in "iu":
            raise TypeError(
                "`offsets` must be a 1-D integer array of documents + 1 positions, got "
                f"{offsets.dtype} {offsets.shape}."
            )
        offsets = offsets.astype(np.int64, copy=False)
        if offsets[0] != 0 or offsets[-1] != data.size or (np.diff(offsets) < 0).any():
            raise ValueError(
                "`offsets` must rise from 0 to data.size (each document's start, then the end); "
                f"got {offsets[0]} ... {offsets[-1]} for {data.size} bytes."
            )
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "offsets", offsets)

    @classmethod
    def from_texts(cls, texts: Sequence[str]) -> TextBatch:
        """The batch of ``texts`` (strings; a lone surrogate is kept as its three bytes)."""
        if not all(map(isinstance, texts, repeat(str))):
            kinds = sorted({type(t).__name__ for t in texts if not isinstance(t, str)})
            raise TypeError(f"training documents must be strings, got {', '.join(kinds)}.")
        lengths = np.fromiter(map(len, texts), np.int64, len(texts))
        wide = np.flatnonzero(~np.fromiter(map(str.isascii, texts), bool, len(texts))).tolist()
        # Runs of ASCII texts are joined and encoded as ASCII, each other text on its own: one
        # non-ASCII text would make a joined string 4 bytes per character and its encoding
        # ~2x slower (measured).
        pieces, at = [], 0
        for k in wide:  # a non-ASCII text's length in bytes is not its length in characters
            pieces.append("".join(texts[at:k]).encode("ascii"))
            pieces.append(texts[k].encode("utf-8", "surrogatepass"))
            lengths[k] = len(pieces[-1])
            at = k + 1
        data = "".join(texts[at:]).encode("ascii")
        if pieces:
            data = b"".join([*pieces, data])
        offsets = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return cls(np.frombuffer(data, dtype=np.uint8), offsets)

    def __len__(self) -> int:
        return self.offsets.size - 1

    def texts(self, positions: Sequence[int] | np.ndarray | None = None) -> list[str]:
        """The documents at ``positions`` (all by default) as strings."""
        data, offsets = self.data, self.offsets
        if positions is None:
            positions = range(len(self))
        return [
            data[offsets[d] : offsets[d + 1]].tobytes().decode("utf-8", "surrogatepass")
            for d in positions
        ]
