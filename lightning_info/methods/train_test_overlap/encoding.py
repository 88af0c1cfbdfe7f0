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

An ASCII chunk (the common case) does steps 1 and 2 with table lookups on its bytes instead of
``str.lower`` and ``re.sub``; the tables are built from Python's own ``str.lower``, the
punctuation set and the tokenizer's pattern, one entry per ASCII character, so both give the same
bytes. A chunk whose text contains ``"\\x00"`` or ``"\\x01"`` itself is encoded the plain way
(those characters are not separators, so they would be taken for markers).
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


_POWERS: dict[int, np.ndarray] = {}


def _powers(base: np.uint64, count: int) -> np.ndarray:
    """``base^0 .. base^(count - 1)`` modulo ``2^64``, cached and grown as chunks need."""
    cached = _POWERS.get(int(base))
    if cached is None or cached.size < count:
        size = max(count, 2 * (0 if cached is None else cached.size), 1 << 16)
        powers = np.full(size, base, dtype=np.uint64)
        powers[0] = 1
        with np.errstate(over="ignore"):
            cached = _POWERS[int(base)] = np.cumprod(powers, dtype=np.uint64)
    return cached[:count]


def _span_hashes(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """``sum_k (data[s + k] + 1) * base^k mod 2^64`` for every span ``[s, e)`` of ``data``."""
    with np.errstate(over="ignore"):
        prefix = np.zeros(data.size + 1, dtype=np.uint64)
        np.cumsum((data.astype(np.uint64) + 1) * _powers(_BASE, data.size), out=prefix[1:])
        inverse = _powers(_BASE_INVERSE, data.size + 1)
        return (prefix[ends] - prefix[starts]) * inverse[starts]


def _ascii_tables(tokenizer: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per ASCII byte, from Python's own string methods and the tokenizer's pattern: its lower
    case, whether the tokenizer deletes it (``janitor``'s punctuation) and whether it separates
    tokens."""
    chars = [chr(c) for c in range(128)]
    lower = np.array(
        [ord(c.lower()) if tokenizer != "light" else ord(c) for c in chars], dtype=np.uint8
    )
    delete = np.array(
        [tokenizer == "janitor" and c in string.punctuation for c in chars], dtype=bool
    )
    pattern = _SEPARATOR_RUNS[tokenizer]
    separates = np.array([bool(pattern.fullmatch(c)) for c in chars], dtype=bool)
    return lower, delete, separates


_ASCII = {name: _ascii_tables(name) for name in _SEPARATOR_RUNS}


def _ascii_marked_bytes(text: str, tokenizer: str) -> np.ndarray:
    """The bytes of :func:`encode_chunk`'s step 2 for an ASCII chunk, by table lookups: lowered
    (and punctuation deleted) per the tokenizer, each run of separators one ``0x01``."""
    lower, delete, separates = _ASCII[tokenizer]
    data = lower[np.frombuffer(text.encode("ascii"), dtype=np.uint8)]
    if tokenizer == "janitor":
        data = data[~delete[data]]
    separator = separates[data]
    run_start = separator.copy()
    run_start[1:] &= ~separator[:-1]
    data = data[~separator | run_start]
    data[run_start[~separator | run_start]] = 1
    return data


class SortedHashes:
    """A sorted array of distinct 64-bit hashes and an O(1) lookup of many queries at once.

    ``np.searchsorted`` costs a cache miss per bisection step on a large table; here the top
    ``k`` bits of a hash (``2^k`` about sixteen times the table size) index the range of table
    entries that share them, so almost every query is a gather and one or two comparisons; the
    few queries whose bucket holds more than two entries are bisected within the table.
    """

    def __init__(self, hashes: np.ndarray) -> None:
        self.hashes = hashes
        bits = min(max(1, int(np.ceil(np.log2(max(hashes.size, 1)))) + 4), 26)
        self.shift = np.uint64(64 - bits)
        starts = np.arange(1 << bits, dtype=np.uint64) << self.shift
        self.offsets = np.append(np.searchsorted(hashes, starts), hashes.size)
        self.padded = np.append(hashes, np.zeros(2, np.uint64))  # ``low + 1`` is always a slot

    def find(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions of ``queries`` found in the table, and the table slot of each."""
        if self.hashes.size == 0 or queries.size == 0:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        bucket = (queries >> self.shift).astype(np.int64)
        low, high = self.offsets[bucket], self.offsets[bucket + 1]
        size = high - low
        first = (size >= 1) & (self.padded[low] == queries)
        second = (size == 2) & (self.padded[low + 1] == queries)
        slot = low + second
        found = first | second
        crowded = np.flatnonzero(size > 2)
        if crowded.size:
            more = np.searchsorted(self.hashes, queries[crowded])
            more[more == self.hashes.size] = 0
            hit = self.hashes[more] == queries[crowded]
            slot[crowded[hit]] = more[hit]
            found[crowded[hit]] = True
        positions = np.flatnonzero(found)
        return positions, slot[positions]


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
        self.index = SortedHashes(self.hashes)
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
        hit, slot = self.index.find(_span_hashes(data, starts, ends))
        lengths = (ends - starts)[hit]
        same_length = self.lengths[slot] == lengths
        hit, slot, lengths = hit[same_length], slot[same_length], lengths[same_length]
        # Byte-by-byte check of every hit, over the ragged spans at once.
        total = int(lengths.sum())
        exact = np.ones(hit.size, dtype=bool)
        if total:
            owner = np.repeat(np.arange(hit.size), lengths)
            offset = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
            same = data[starts[hit][owner] + offset] == self.data[self.starts[slot][owner] + offset]
            exact = np.bincount(owner[~same], minlength=hit.size) == 0
        out[hit[exact]] = self.ids[slot[exact]]
        return out


def encode_chunk(documents: list[str], table: TokenTable) -> tuple[np.ndarray, int] | None:
    """Ids of ``documents`` as ``_Vocabulary.encode_documents`` gives them for the table's
    tokenizer (every document's ids followed by a 0), and the number of tokens.

    The ASCII documents come first (in their order), then the others (in theirs): each group
    takes its own path, and since no n-gram crosses a document the counts do not depend on the
    order. Returns ``None`` when the chunk cannot take this path (a marker character in its
    text, or a test vocabulary with two tokens of one hash); the caller then encodes it the
    plain way.
    """
    if not table.unique:
        return None
    ascii_documents = [d for d in documents if d.isascii()]
    groups = [ascii_documents, [d for d in documents if not d.isascii()]]
    encoded = []
    for group in groups:
        if group:
            text = DOCUMENT_END.join(group) + DOCUMENT_END
            if text.count(DOCUMENT_END) != len(group) or SEPARATOR in text:
                return None
            encoded.append(_encode_text(text, len(group), table))
    ids = np.concatenate([ids for ids, _ in encoded]) if encoded else np.empty(0, np.uint64)
    return ids, sum(count for _, count in encoded)


def _encode_text(text: str, documents: int, table: TokenTable) -> tuple[np.ndarray, int]:
    """Steps 1-4 on the joined text of ``documents`` documents (all ASCII, or not)."""
    tokenizer = table.tokenizer
    if text.isascii():
        data = _ascii_marked_bytes(text, tokenizer)
    else:
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
    zeros = data == 0
    ended_before = (np.cumsum(zeros) - zeros)[starts]  # document ends strictly before a start
    out = np.zeros(ids.size + documents, dtype=np.uint64)
    out[np.arange(ids.size) + ended_before] = ids
    return out, int(ids.size)
