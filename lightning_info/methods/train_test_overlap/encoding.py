"""Token ids of training documents without one Python object per token.

Scanning a corpus, almost all the time of the obvious implementation goes to tokenising each
document into Python strings and mapping each string to an id. For the built-in tokenizers of
:mod:`~lightning_info.methods.train_test_overlap.functional` this module does the same for a chunk
of documents with a few C-level string operations and numpy, and gives the same ids exactly:

1. the chunk is joined with ``"\\x00"`` after every document and lowered once (``str.lower`` of
   the joined text equals the joined lowered documents: ``"\\x00"`` is neither cased nor
   case-ignorable, so no context, final sigma included, crosses it); punctuation is deleted with
   ``str.translate`` for ``janitor``;
2. one ``re.sub`` turns every run of separators into ``"\\x01"`` with the tokenizer's own pattern
   (HELM's ``[\\s<punctuation>]+``, or ``\\s+`` for the whitespace splits: CPython's ``\\s`` and
   ``str.split()`` share the same Unicode whitespace test);
3. in the UTF-8 bytes of that text (``0x00`` and ``0x01`` never occur inside a multi-byte
   character) the tokens are the spans between markers; ``default`` keeps the empty spans at the
   edges of a document as HELM's ``re.split`` does, ``light`` and ``janitor`` drop them as
   ``str.split()`` does;
4. each span gets a 64-bit polynomial hash of its bytes from prefix sums (``uint64`` wrap-around;
   the base is odd, so its powers are invertible modulo ``2^64``), is looked up among the hashes of
   the test vocabulary with ``np.searchsorted``, and every hit is **verified byte by byte**: a hash
   collision can never give a token a wrong id.

A chunk whose text contains ``"\\x00"`` or ``"\\x01"`` itself is encoded the plain way (those
characters are not separators, so they would be taken for markers).
"""

from __future__ import annotations

import re
import string

import numpy as np

DOCUMENT_END, SEPARATOR = "\x00", "\x01"
_SEPARATOR_RUNS = {
    "default": re.compile(rf"[\s{re.escape(string.punctuation)}]+"),
    "light": re.compile(r"\s+"),
    "janitor": re.compile(r"\s+"),
}
_KEEPS_EMPTY = {"default": True, "light": False, "janitor": False}
_PUNCT_TABLE = str.maketrans("", "", string.punctuation)
_BASE = np.uint64(0x9E3779B97F4A7C15)  # odd
VECTORISED_TOKENIZERS = tuple(_SEPARATOR_RUNS)


def _inverse_mod_2_64(odd: int) -> int:
    inverse = 1
    for _ in range(6):  # Newton's iteration doubles the correct low bits: 1 -> 64
        inverse = inverse * (2 - odd * inverse) % (1 << 64)
    return inverse


_BASE_INVERSE = np.uint64(_inverse_mod_2_64(int(_BASE)))


def _powers(base: np.uint64, count: int) -> np.ndarray:
    powers = np.full(count, base, dtype=np.uint64)
    powers[0] = 1
    with np.errstate(over="ignore"):
        return np.cumprod(powers, dtype=np.uint64)


def _span_hashes(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """``sum_k (data[s + k] + 1) * base^k mod 2^64`` for every span ``[s, e)`` of ``data``."""
    with np.errstate(over="ignore"):
        prefix = np.zeros(data.size + 1, dtype=np.uint64)
        np.cumsum((data.astype(np.uint64) + 1) * _powers(_BASE, data.size), out=prefix[1:])
        inverse = _powers(_BASE_INVERSE, data.size + 1)
        return (prefix[ends] - prefix[starts]) * inverse[starts]


class TokenTable:
    """The test vocabulary (token -> id) of a built-in ``tokenizer`` as sorted byte hashes, for
    :func:`encode_chunk`."""

    def __init__(self, ids: dict[str, int], tokenizer: str) -> None:
        if tokenizer not in VECTORISED_TOKENIZERS:
            raise ValueError(f"`tokenizer` must be one of {VECTORISED_TOKENIZERS}.")
        self.tokenizer = tokenizer
        tokens = list(ids)
        encoded = [t.encode("utf-8") for t in tokens]
        lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
        data = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        ends = np.cumsum(lengths)
        hashes = _span_hashes(data, ends - lengths, ends)
        order = np.argsort(hashes, kind="stable")
        self.hashes = hashes[order]
        self.ids = np.fromiter(ids.values(), np.uint64, len(ids))[order]
        self.lengths, self.starts, self.data = lengths[order], (ends - lengths)[order], data
        # Equal hashes of different tokens are resolved by the byte check below only if the
        # table holds each hash once; with 64 bits a clash among a test vocabulary is ~1e-10.
        self.unique = bool(np.all(self.hashes[1:] != self.hashes[:-1])) if len(ids) else True

    def lookup(self, data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """The id of every span ``[s, e)`` of ``data`` (0 where it is not a test token)."""
        out = np.zeros(starts.size, dtype=np.uint64)
        if self.hashes.size == 0 or starts.size == 0:
            return out
        hashes = _span_hashes(data, starts, ends)
        slot = np.searchsorted(self.hashes, hashes)
        slot[slot == self.hashes.size] = 0
        lengths = ends - starts
        hit = np.flatnonzero((self.hashes[slot] == hashes) & (self.lengths[slot] == lengths))
        slot, lengths = slot[hit], lengths[hit]
        # Byte-by-byte check of every hit, over the ragged spans at once.
        total = int(lengths.sum())
        if total:
            owner = np.repeat(np.arange(hit.size), lengths)
            offset = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
            same = data[starts[hit][owner] + offset] == self.data[self.starts[slot][owner] + offset]
            exact = np.ones(hit.size, dtype=bool)
            np.logical_and.at(exact, owner, same)
        else:
            exact = np.ones(hit.size, dtype=bool)
        out[hit[exact]] = self.ids[slot[exact]]
        return out


def encode_chunk(documents: list[str], table: TokenTable) -> tuple[np.ndarray, int] | None:
    """Ids of ``documents`` as ``_Vocabulary.encode_documents`` gives them for the table's
    tokenizer (every document's ids followed by a 0), and the number of tokens.

    Returns ``None`` when the chunk cannot take this path (a marker character in its text, or a
    test vocabulary with two tokens of one hash); the caller then encodes it the plain way.
    """
    text = DOCUMENT_END.join(documents) + DOCUMENT_END
    if text.count(DOCUMENT_END) != len(documents) or SEPARATOR in text or not table.unique:
        return None
    tokenizer = table.tokenizer
    if tokenizer != "light":
        text = text.lower()
    if tokenizer == "janitor":
        text = text.translate(_PUNCT_TABLE)
    text = _SEPARATOR_RUNS[tokenizer].sub(SEPARATOR, text)
    data = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    markers = np.flatnonzero(data <= 1)
    starts = np.concatenate([[0], markers[:-1] + 1])
    ends = markers
    if not _KEEPS_EMPTY[tokenizer]:
        keep = ends > starts
        starts, ends = starts[keep], ends[keep]
    ids = table.lookup(data, starts, ends)
    # Every document's ids are followed by a 0: a token goes after the zeros of the documents
    # that ended before it (a document may have no token left once empty spans are dropped).
    ended_before = np.searchsorted(np.flatnonzero(data == 0), starts)
    out = np.zeros(ids.size + len(documents), dtype=np.uint64)
    out[np.arange(ids.size) + ended_before] = ids
    return out, int(ids.size)
