"""Which inner loops scan the training text: compiled (numba, the ``overlap`` extra) or numpy.

:class:`CompiledScanner` holds an :class:`~.functional.OverlapIndex`'s tables as the compiled
loops of :mod:`~.kernels` read them. With a built-in word tokenizer a chunk is encoded in up to
three groups, each counted on its own (no n-gram crosses a document, so the order of the
documents does not change a count):

1. the documents of plain ASCII, from their bytes by ``kernels.document_keys``;
2. the others, normalised in Python (``encoding.normalised_batch``: ``str.lower`` and the
   tokenizer's own pattern, as the numpy path does) and keyed by the same loop;
3. a document holding ``"\\x00"`` or ``"\\x01"`` (the marks of step 2) by the numpy path.

Each group's windows are counted by ``kernels.count_windows``. With ``"character"`` or a custom
tokenizer the symbols come from the numpy path and only the counting is compiled.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from lightning_info.core.optional import require_extra
from lightning_info.methods.train_test_overlap.batches import TextBatch
from lightning_info.methods.train_test_overlap.encoding import (
    RAW_TOKENIZERS,
    TokenTable,
    byte_classes,
    normalised_batch,
    normalised_classes,
)

ENGINES = ("auto", "compiled", "numpy")
_MIX = np.uint64(0x9E3779B97F4A7C15)  # the HashTable's multiplier


def compiled_available() -> bool:
    """Whether numba imports (the ``overlap`` extra)."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


class SymbolGroup(NamedTuple):
    """Some documents of a chunk as symbols, each document's followed by the separator.

    ``positions``: the documents' places in the chunk, in the order of their symbols;
    ``ends``: the position of each document's separator, or ``None`` when the separator occurs
    nowhere else (a compiled group: a window's document is then the number of separators
    before it; the numpy path maps an unknown token to the separator too).
    """

    symbols: np.ndarray
    tokens: int
    positions: np.ndarray
    ends: np.ndarray | None


class CompiledScanner:
    """The tables of an index (its token table, when the tokenizer is a built-in word
    tokenizer, and its n-gram indexes) as the compiled loops read them."""

    def __init__(self, table: TokenTable | None, indexes: Sequence, separator: np.uint64) -> None:
        require_extra("numba", "overlap", "The compiled overlap scan")
        self.separator = np.uint64(separator)
        self.table = table
        if table is not None:
            raw = table.tokenizer in RAW_TOKENIZERS
            self.raw_classes = _with_kinds(*byte_classes(table.tokenizer)) if raw else None
            self.normalised = _with_kinds(*normalised_classes())
            self.keeps_empty = table.tokenizer == "default"
            self.long_table = (
                *table.long.arrays,
                *_bitmap(table.long.keys, table.long.crowded_keys),
            )
            self.long_rows = (
                np.ascontiguousarray(table.long_lengths, dtype=np.int64),
                np.ascontiguousarray(table.long_first, dtype=np.uint64),
                np.ascontiguousarray(table.long_last, dtype=np.uint64),
                np.ascontiguousarray(table.middle_start, dtype=np.int64),
                np.ascontiguousarray(table.middle_words, dtype=np.uint64),
            )
        self.indexes = [_compiled_index(index) for index in indexes]

    def __getstate__(self) -> dict:
        return {key: value for key, value in self.__dict__.items() if key != "_buffers"}

    def _buffers_for(self, use: str, data: np.ndarray, documents: int):
        """This thread's output and scratch arrays for ``use`` (``"raw"``, ``"normalised"``),
        grown to fit: reused from chunk to chunk, since fresh pages cost a fault each (13% of
        the byte loop's time, measured)."""
        if "_buffers" not in self.__dict__:
            self._buffers = threading.local()
        cache = self._buffers.__dict__
        size, scratch = data.size + 2 * documents, data.size // 9 + 1
        out, long_tokens = cache.get(use, (np.empty(0, np.uint64), np.empty((3, 0), np.int64)))
        if out.size < size:
            out = np.empty(max(size, 2 * out.size), dtype=np.uint64)
        if long_tokens.shape[1] < scratch:
            long_tokens = np.empty((3, max(scratch, 2 * long_tokens.shape[1])), dtype=np.int64)
        cache[use] = out, long_tokens
        return out, long_tokens

    def _keys(self, data, starts, ends, classes, use) -> tuple[np.ndarray, int, np.ndarray]:
        """The keys of ``kernels.document_keys`` (a view of this thread's buffer for ``use``:
        valid until its next call for ``use``), the number of tokens, the declined documents."""
        from lightning_info.methods.train_test_overlap.kernels import document_keys

        separator, kinds, lowers = classes
        out, long_tokens = self._buffers_for(use, data, starts.size)
        written, tokens, refused = document_keys(
            data,
            _words(data),
            starts,
            ends,
            separator,
            kinds,
            lowers,
            self.keeps_empty,
            self.long_table,
            self.long_rows,
            out,
            long_tokens,
            lower_code_points(),
        )
        return out[:written], int(tokens), refused

    def keyed_groups(
        self, documents: list[str] | TextBatch
    ) -> tuple[list[SymbolGroup], list[str], np.ndarray]:
        """Groups 1 and 2 of the module docstring; the documents left for the numpy path and
        their positions."""
        if self.raw_classes is None:  # janitor: every document is normalised
            texts = documents.texts() if isinstance(documents, TextBatch) else documents
            return self._normalised_groups(texts, np.arange(len(texts)))
        batch = documents if isinstance(documents, TextBatch) else TextBatch.from_texts(documents)
        offsets = batch.offsets
        keys, tokens, refused = self._keys(
            batch.data, offsets[:-1], offsets[1:], self.raw_classes, "raw"
        )
        groups = [SymbolGroup(keys, tokens, np.flatnonzero(~refused), None)]
        if not refused.any():
            return groups, [], np.empty(0, np.int64)
        left = np.flatnonzero(refused)
        more, texts, positions = self._normalised_groups(batch.texts(left), left)
        return groups + more, texts, positions

    def _normalised_groups(
        self, texts: list[str], positions: np.ndarray
    ) -> tuple[list[SymbolGroup], list[str], np.ndarray]:
        """Group 2 of the module docstring, or the texts left for the numpy path."""
        normalised = normalised_batch(texts, self.table.tokenizer)
        if normalised is None:
            return [], texts, positions
        keys, tokens, _ = self._keys(*normalised, self.normalised, "normalised")
        return [SymbolGroup(keys, tokens, positions, None)], [], np.empty(0, np.int64)

    def count(self, m: int, symbols: np.ndarray, counts: np.ndarray) -> None:
        """Add the occurrences of the ``m``-th index's n-grams in ``symbols`` to ``counts``."""
        self.flag(m, symbols, counts, np.zeros(0, dtype=np.bool_))

    def flag(self, m: int, symbols: np.ndarray, counts: np.ndarray, flags: np.ndarray) -> None:
        """:meth:`count`, and ``flags[d] = True`` for each document ``d`` of ``symbols`` (the
        ``d``-th run ended by the separator) holding one of the n-grams."""
        none = np.zeros(0, dtype=np.int64)
        self._windows(m, symbols, counts, flags, none, none)

    def hits(
        self, m: int, symbols: np.ndarray, counts: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`count`, and every match's document (as in :meth:`flag`) and n-gram."""
        documents = np.empty(max(symbols.size, 1), dtype=np.int64)
        slots = np.empty_like(documents)
        found = self._windows(m, symbols, counts, np.zeros(0, np.bool_), documents, slots)
        return documents[:found], slots[:found]

    def _windows(self, m, symbols, counts, flags, hit_documents, hit_slots) -> int:
        from lightning_info.methods.train_test_overlap.kernels import count_windows

        symbols = np.ascontiguousarray(symbols, dtype=np.uint64)
        return count_windows(
            symbols, *self.indexes[m], counts, self.separator, flags, hit_documents, hit_slots
        )


@functools.cache
def lower_code_points() -> np.ndarray:
    """``str.lower`` of every code point as one code point (``int32``, built once, from one
    ``str.lower`` of all of them), -1 where it is not one: ``İ`` (two) and ``Σ`` (``ς`` or
    ``σ`` by its context)."""
    codes = np.arange(0x110000, dtype="<u4")
    text = codes.tobytes().decode("utf-32-le", "surrogatepass").replace("\u0130", "\x00")
    lowered = np.frombuffer(text.lower().encode("utf-32-le", "surrogatepass"), "<u4")
    table = lowered.astype(np.int32)
    table[[0x130, 0x3A3]] = -1
    return table


def _with_kinds(separator: np.ndarray, declined: np.ndarray, lowers: bool) -> tuple:
    """A tokenizer's byte classes as ``kernels.document_keys`` reads them: the separators, and
    one table of both (bit 0: separator, bit 1: declined: one lookup per byte)."""
    return separator, separator | (declined << np.uint64(1)), lowers


def _words(data: np.ndarray) -> np.ndarray:
    """The little-endian ``uint64`` starting at each byte of ``data`` that has 8 bytes (an
    unaligned view: no copy)."""
    count = max(data.size - 7, 0)
    if count == 0:
        return np.zeros(0, dtype="<u8")
    return np.ndarray((count,), dtype="<u8", buffer=data, offset=0, strides=(1,))


def _compiled_index(index) -> tuple:
    """An ``NgramIndex`` as ``kernels.count_windows`` reads it: ``n``, the hash base, its
    ``n - 1``-th power, the table's arrays, the bit map of the hashes and its shift, and the
    n-grams."""
    return (
        index.n,
        index.base,
        np.uint64(pow(int(index.base), index.n - 1, 1 << 64)),
        index._lookup.arrays,
        *_bitmap(index.hashes),
        np.ascontiguousarray(index.grams, dtype=np.uint64),
        *_overlaps(index),
        index.hashes,
    )


def _overlaps(index) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Numbers of the first and of the last ``n - 1`` symbols of each indexed n-gram, equal
    exactly when the symbols are, its last symbol, and one n-gram that starts as it ends (-1:
    none; ``kernels.count_windows``). The
    numbers' hashes come from the n-gram's: ``h(g) = h(prefix) base + g[-1] = g[0] base^(n-1)
    + h(suffix)`` (mod 2^64, the base odd so invertible); rows of one hash are then compared,
    and if two differ (a 64-bit collision) no number is shared, which only turns the shortcut
    off."""
    grams, n, size = index.grams, index.n, len(index)
    lasts = np.ascontiguousarray(grams[:, -1], dtype=np.uint64)
    if size == 0 or n == 1:
        none = np.full(size, -1, np.int64)
        return np.zeros(size, np.int64), np.zeros(size, np.int64), lasts, none
    base = int(index.base)
    with np.errstate(over="ignore"):
        prefix = (index.hashes - grams[:, -1]) * np.uint64(pow(base, -1, 1 << 64))
        suffix = index.hashes - grams[:, 0] * np.uint64(pow(base, n - 1, 1 << 64))
    _, first, numbers = np.unique(
        np.concatenate([prefix, suffix]), return_index=True, return_inverse=True
    )
    rows = np.concatenate([grams[:, :-1], grams[:, 1:]])
    if not (rows[first[numbers]] == rows).all():
        unshared = np.arange(size, dtype=np.int64)
        return unshared, -1 - unshared, lasts, np.full(size, -1, np.int64)
    prefixes, suffixes = numbers[:size].astype(np.int64), numbers[size:].astype(np.int64)
    starting = np.full(numbers.max() + 1, -1, dtype=np.int64)  # an n-gram starting with each
    starting[prefixes] = np.arange(size)
    return prefixes, suffixes, lasts, starting[suffixes]


def _bitmap(*keys: np.ndarray) -> tuple[np.ndarray, np.uint64]:
    """A bit map of ``keys`` (at least 16 bits per key, so it stays in a core's cache while a
    hash table of the keys does not): bit ``(key * MIX) >> shift`` of every key is set.
    Returns the map (``uint64`` words) and the shift."""
    keys = np.concatenate(keys) if len(keys) > 1 else keys[0]
    bits = max(int(np.ceil(np.log2(max(keys.size, 1)))) + 4, 6)
    bitmap = np.zeros(1 << (bits - 6), dtype=np.uint64)
    shift = np.uint64(64 - bits)
    bit = (keys * _MIX) >> shift
    np.bitwise_or.at(bitmap, bit >> np.uint64(6), np.uint64(1) << (bit & np.uint64(63)))
    return bitmap, shift
