"""Token ids of training documents without one Python object per token.

Scanning a corpus, almost all the time of the obvious implementation goes to tokenising each
document into Python strings and mapping each string to an id. For the built-in tokenizers of
:mod:`~lightning_info.methods.train_test_overlap.functional` this module does the same for a chunk
of documents with a few C-level string operations and numpy, and gives the same ids exactly:

1. the chunk is joined with ``"\\x00"`` after every document (``str.lower`` of the joined text
   equals the joined lowered documents: ``"\\x00"`` is neither cased nor case-ignorable, so no
   context, final sigma included, crosses it). An ASCII chunk (the common case) is lowered by a
   table lookup on its bytes, and its separators are found by a second lookup; the tables are
   built from Python's own ``str.lower`` and the tokenizer's pattern, one entry per ASCII
   character. Any other chunk is lowered once with ``str.lower``, has its punctuation deleted
   with ``str.translate`` (``janitor``) and every run of separators replaced by ``"\\x01"`` with
   one ``re.sub`` of the tokenizer's own pattern (HELM's ``[\\s<punctuation>]+``, or ``\\s+`` for
   the whitespace splits: CPython's ``\\s`` and ``str.split()`` share one whitespace test).
2. In the UTF-8 bytes (``0x00`` and ``0x01`` never occur inside a multi-byte character) the tokens
   are the maximal runs of non-separator bytes within a document; ``default`` adds the empty
   tokens HELM's ``re.split`` keeps at the edges of a document (one before a document that is
   empty or starts with a separator, one after a non-empty document that ends with one),
   ``light`` and ``janitor`` have none, as ``str.split()``.
3. Each token gets a 64-bit key: a token of at most 8 bytes *is* its key (its bytes read as one
   little-endian ``uint64`` from an unaligned view of the buffer, the bytes past its end masked to
   zero: exact, no collision possible); a longer token gets a polynomial hash of its 8-byte words,
   tagged (low byte 0, top bit 1) so it never equals a short token's key. Keys are looked up in a
   :class:`HashTable` of the test vocabulary, and every hit of a long token is **verified word by
   word** against the test token: a hash collision can never give a token a wrong id.

A chunk whose text contains ``"\\x00"`` or ``"\\x01"`` itself is encoded the plain way (those
characters are not separators, so they would be taken for markers).
"""

from __future__ import annotations

import re
import string
from itertools import compress
from operator import not_

import numpy as np

DOCUMENT_END, SEPARATOR = "\x00", "\x01"
_SEPARATOR_RUNS = {
    "default": re.compile(rf"[\s{re.escape(string.punctuation)}]+"),
    "light": re.compile(r"\s+"),
    "janitor": re.compile(r"\s+"),
}
_KEEPS_EMPTY = {"default": True, "light": False, "janitor": False}
_PUNCT_TABLE = str.maketrans("", "", string.punctuation)
VECTORISED_TOKENIZERS = tuple(_SEPARATOR_RUNS)

WORD = 8  # bytes in a key
_PADDING = DOCUMENT_END * WORD  # lets a word be read at every byte of the text
_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(WORD + 1)], dtype=np.uint64)
_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd: Fibonacci hashing's multiplier
_BASE = np.uint64(0xC2B2AE3D27D4EB4F)  # odd
_LONG_TAG = np.uint64(1 << 63)
_LOW_BYTE = np.uint64(0xFF)


class HashTable:
    """Distinct ``uint64`` keys -> ``int64`` values, looked up many at a time.

    A direct-mapped table of ``2^b >= 8 x`` the number of keys: a key's bucket is the top ``b``
    bits of ``key * _MIX`` (Fibonacci hashing, so keys with structure, such as short tokens'
    bytes, still spread). A key alone in its bucket is found with one gather and one comparison;
    the keys of crowded buckets (about 6% of them) are kept sorted apart and bisected. An empty
    bucket holds a key that maps elsewhere, so it never matches a query.
    """

    def __init__(self, keys: np.ndarray, values: np.ndarray) -> None:
        keys, values = np.asarray(keys, dtype=np.uint64), np.asarray(values, dtype=np.int64)
        if np.unique(keys).size != keys.size:
            raise ValueError("HashTable keys must be distinct.")
        bits = max(4, int(np.ceil(np.log2(max(keys.size, 1)))) + 3)
        self.shift = np.uint64(64 - bits)
        bucket = self._bucket(keys)
        population = np.bincount(bucket, minlength=1 << bits)
        # bucket(0) == 0 and bucket(1) != 0 (``_MIX`` has its top bit set): neither can match a
        # query in another bucket.
        self.keys = np.zeros(1 << bits, dtype=np.uint64)
        self.keys[0] = 1
        self.values = np.zeros(1 << bits, dtype=np.int64)
        alone = population[bucket] == 1
        self.keys[bucket[alone]] = keys[alone]
        self.values[bucket[alone]] = values[alone]
        self.crowded = population > 1
        order = np.argsort(keys[~alone])
        self.crowded_keys, self.crowded_values = keys[~alone][order], values[~alone][order]

    def _bucket(self, keys: np.ndarray) -> np.ndarray:
        bucket = np.multiply(keys, _MIX)  # wraps modulo 2^64
        return np.right_shift(bucket, self.shift, out=bucket).view(np.int64)

    def find(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The positions of the queries that are keys (in no particular order) and their
        values: for queries that mostly miss (n-gram windows)."""
        bucket = self._bucket(queries)
        hit = self.keys[bucket] == queries
        positions = np.flatnonzero(hit)
        values = self.values[bucket[positions]]
        crowded, found = self._crowded(queries, bucket, hit)
        if crowded.size:
            positions = np.concatenate([positions, crowded])
            values = np.concatenate([values, found])
        return positions, values

    def get(self, queries: np.ndarray, missing: int = 0) -> np.ndarray:
        """The value of every query (``missing`` where it is not a key): for queries that
        mostly hit (tokens)."""
        bucket = self._bucket(queries)
        hit = self.keys[bucket] == queries
        out = np.where(hit, self.values[bucket], np.int64(missing))
        crowded, found = self._crowded(queries, bucket, hit)
        out[crowded] = found
        return out

    def _crowded(
        self, queries: np.ndarray, bucket: np.ndarray, hit: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The positions of the queries found among the keys of crowded buckets, and their
        values."""
        crowded = np.flatnonzero(self.crowded[bucket] & ~hit)
        if crowded.size == 0:
            return crowded, crowded
        where = np.searchsorted(self.crowded_keys, queries[crowded])
        where[where == self.crowded_keys.size] = 0
        found = self.crowded_keys[where] == queries[crowded]
        return crowded[found], self.crowded_values[where[found]]


def _byte_words(data: np.ndarray) -> np.ndarray:
    """The little-endian ``uint64`` that starts at every byte of ``data`` (an unaligned view;
    the last ``WORD`` bytes of ``data`` are padding and start no word)."""
    return np.ndarray((data.size - WORD + 1,), dtype="<u8", buffer=data, strides=(1,))


def _long_words(
    words: np.ndarray, starts: np.ndarray, lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The 8-byte words of the tokens ``[s, s + length)``, ragged: ``(owner, k, word)`` with
    the bytes past each token's end masked to zero."""
    count = (lengths + WORD - 1) // WORD
    owner = np.repeat(np.arange(starts.size), count)
    k = np.arange(owner.size) - np.repeat(np.cumsum(count) - count, count)
    remaining = np.minimum(lengths[owner] - WORD * k, WORD)
    return owner, k, words[starts[owner] + WORD * k] & _MASKS[remaining]


def _long_hashes(word: np.ndarray, k: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Tagged keys of long tokens from their words: ``(sum_k word_k * base^k xor length) * _MIX``
    modulo ``2^64``, low byte cleared and top bit set."""
    powers = np.cumprod(np.full(int(k.max()) + 1, _BASE, dtype=np.uint64), dtype=np.uint64)
    with np.errstate(over="ignore"):
        hashes = np.add.reduceat(word * powers[k], np.flatnonzero(k == 0), dtype=np.uint64)
        hashes = (hashes ^ lengths.astype(np.uint64)) * _MIX
    return (hashes & ~_LOW_BYTE) | _LONG_TAG


def _token_keys(
    words: np.ndarray, starts: np.ndarray, lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Every token's key (step 3 of the module docstring), the positions of the long tokens and
    their words (for the verification)."""
    keys = words[starts] & _MASKS[np.minimum(lengths, WORD)]
    long = np.flatnonzero(lengths > WORD)
    owner, k, word = _long_words(words, starts[long], lengths[long])
    if long.size:
        keys[long] = _long_hashes(word, k, lengths[long])
    return keys, long, (owner, k, word)


def _ascii_table(tokenizer: str) -> np.ndarray:
    """Per ASCII byte, from Python's own string methods and the tokenizer's pattern, what step 1
    makes of it: ``0x01`` for a separator, ``0xFF`` for a character ``janitor`` deletes (its
    punctuation), else its lower case (the document end ``0x00`` stays ``0x00``)."""
    pattern = _SEPARATOR_RUNS[tokenizer]
    table = np.zeros(128, dtype=np.uint8)
    for code in range(1, 128):
        char = chr(code)
        if tokenizer == "janitor" and char in string.punctuation:
            table[code] = 0xFF
        elif pattern.fullmatch(char) or char == SEPARATOR:
            table[code] = 1
        else:
            table[code] = ord(char if tokenizer == "light" else char.lower())
    return table


_ASCII = {name: _ascii_table(name) for name in _SEPARATOR_RUNS}


def _chunk_bytes(text: str, tokenizer: str) -> np.ndarray:
    """Step 1: the chunk's bytes after a leading ``0x01``, lowered, ``janitor``'s punctuation
    deleted, separators ``0x01`` (one per run at least), ``WORD`` zero bytes of padding at the
    end."""
    if text.isascii():
        data = _ASCII[tokenizer][np.frombuffer((SEPARATOR + text + _PADDING).encode(), np.uint8)]
        return data[data != 0xFF] if tokenizer == "janitor" else data
    if tokenizer != "light":
        text = text.lower()
    if tokenizer == "janitor":
        text = text.translate(_PUNCT_TABLE)
    text = _SEPARATOR_RUNS[tokenizer].sub(SEPARATOR, text)
    return np.frombuffer((SEPARATOR + text + _PADDING).encode("utf-8"), dtype=np.uint8)


class TokenTable:
    """The test vocabulary (token -> id) of a built-in ``tokenizer`` as a :class:`HashTable` of
    token keys, for :func:`encode_chunk`."""

    def __init__(self, ids: dict[str, int], tokenizer: str) -> None:
        if tokenizer not in VECTORISED_TOKENIZERS:
            raise ValueError(f"`tokenizer` must be one of {VECTORISED_TOKENIZERS}.")
        self.tokenizer = tokenizer
        encoded = [t.encode("utf-8") for t in ids]
        lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
        data = np.frombuffer(b"".join(encoded) + bytes(WORD), dtype=np.uint8)
        starts = np.cumsum(lengths) - lengths
        keys, long, (_, k, word) = _token_keys(_byte_words(data), starts, lengths)
        values = np.fromiter(ids.values(), np.int64, len(ids))
        # Two long tokens of one hash would make one of them unreachable; with 64 bits a clash
        # within a test vocabulary is ~1e-10, and such a table declines every chunk.
        self.unique = bool(np.unique(keys).size == keys.size)
        self.index = HashTable(keys, values) if self.unique else None
        # Per id: the length and first word of each long test token, for the verification.
        size = int(values.max(initial=0)) + 1
        self.lengths = np.zeros(size, dtype=np.int64)
        self.lengths[values] = lengths
        self.word_start = np.zeros(size, dtype=np.int64)
        self.word_start[values[long]] = np.flatnonzero(k == 0)
        self.words = word
        self.empty_id = int(ids.get("", 0))

    def lookup(self, words: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """The id of every token ``[s, s + length)`` (0 where it is not a test token)."""
        if self.lengths.size == 1 or starts.size == 0:
            return np.zeros(starts.size, dtype=np.uint64)
        keys, long, (owner, k, word) = _token_keys(words, starts, lengths)
        out = self.index.get(keys).view(np.uint64)  # ids are >= 1, 0 for a miss
        if long.size:
            # Word-by-word check of the long tokens that hit, over their ragged words at once.
            claimed = out[long].astype(np.int64)
            hit = (claimed > 0) & (self.lengths[claimed] == lengths[long])
            checked = hit[owner]
            expected = self.words[self.word_start[claimed[owner[checked]]] + k[checked]]
            wrong = np.bincount(owner[checked][word[checked] != expected], minlength=long.size)
            out[long[~hit | (wrong > 0)]] = 0
        return out


def encode_chunk(documents: list[str], table: TokenTable) -> tuple[np.ndarray, int] | None:
    """Ids of ``documents`` as ``_Vocabulary.encode_documents`` gives them for the table's
    tokenizer (every document's ids followed by a 0), and the number of tokens.

    A chunk of ASCII documents is encoded in one piece; otherwise the ASCII documents come first
    (in their order), then the others (in theirs): each group takes its own path, and since no
    n-gram crosses a document the counts do not depend on the order. Returns ``None`` when the
    chunk cannot take this path (a marker character in its text, or a test vocabulary with two
    tokens of one hash); the caller then encodes it the plain way.
    """
    if not table.unique:
        return None
    text = DOCUMENT_END.join(documents) + DOCUMENT_END
    if text.isascii():
        groups = [(text, len(documents))]
    else:
        flags = list(map(str.isascii, documents))
        groups = []
        for group in (compress(documents, flags), compress(documents, map(not_, flags))):
            group = list(group)
            if group:
                groups.append((DOCUMENT_END.join(group) + DOCUMENT_END, len(group)))
    encoded = []
    for group_text, count in groups:
        if group_text.count(DOCUMENT_END) != count or SEPARATOR in group_text:
            return None
        encoded.append(_encode_text(group_text, count, table))
    ids = np.concatenate([ids for ids, _ in encoded]) if encoded else np.empty(0, np.uint64)
    return ids, sum(count for _, count in encoded)


def _encode_text(text: str, documents: int, table: TokenTable) -> tuple[np.ndarray, int]:
    """Steps 1-3 on the joined text of ``documents`` documents (all ASCII, or not)."""
    data = _chunk_bytes(text, table.tokenizer)
    # A token starts after each change from boundary (0x00, 0x01) to token bytes and ends at the
    # next change back; the leading 0x01 and the padding make the changes alternate.
    boundary = data <= 1
    changes = np.flatnonzero(boundary[1:] != boundary[:-1]) + 1
    starts, ends = changes[0::2], changes[1::2]
    ids = table.lookup(_byte_words(data), starts, ends - starts)

    doc_ends = np.flatnonzero(data[:-WORD] == 0)
    doc_starts = np.concatenate([[1], doc_ends[:-1] + 1])
    per_document = np.diff(np.searchsorted(starts, doc_ends), prepend=0)
    if _KEEPS_EMPTY[table.tokenizer]:
        before = boundary[doc_starts].astype(np.int64)
        after = ((doc_ends > doc_starts) & boundary[doc_ends - 1]).astype(np.int64)
    else:
        before = after = np.zeros(documents, dtype=np.int64)
    # Layout of each document: [empty edge token] its tokens [empty edge token] 0.
    length = before + per_document + after + 1
    offset = np.cumsum(length) - length
    out = np.zeros(int(length.sum()), dtype=np.uint64)
    first = np.cumsum(per_document) - per_document
    out[np.arange(ids.size) + np.repeat(offset + before - first, per_document)] = ids
    out[offset[before > 0]] = table.empty_id
    out[(offset + before + per_document)[after > 0]] = table.empty_id
    return out, int(ids.size + before.sum() + after.sum())
