"""Token keys of training documents without one Python object per token.

Scanning a corpus, almost all the time of the obvious implementation goes to tokenising each
document into Python strings and mapping each string to an id. For the built-in tokenizers of
:mod:`~lightning_info.methods.train_test_overlap.functional` this module gives every token of a
chunk of documents an exact 64-bit *key* with a few C-level string operations and numpy, in the
order and with the edge tokens of the token-by-token path:

1. The documents are joined with a mark ``"\\x00\\x01\\x00"`` before the first and after every
   one (``str.lower`` of the joined text equals the joined lowered documents: neither mark
   character is cased or case-ignorable, so no context, final sigma included, crosses it). An
   ASCII chunk (the common case) is encoded and lowered, its separators turned into ``0x01`` and
   its ``0x01`` marks into ``0xFF``, by one ``bytes.translate`` whose table is built from
   Python's own ``str.lower`` and the tokenizer's pattern, one entry per ASCII character
   (``janitor``'s punctuation is deleted by the same call). Any other chunk is lowered once with
   ``str.lower``, has its punctuation deleted with ``str.translate`` (``janitor``) and every run
   of separators replaced by ``"\\x01"`` with one ``re.sub`` of the tokenizer's own pattern
   (HELM's ``[\\s<punctuation>]+``, or ``\\s+`` for the whitespace splits: CPython's ``\\s`` and
   ``str.split()`` share one whitespace test), then marked the same way.
2. In these bytes (``0x00``, ``0x01`` and ``0xFF`` never occur inside a UTF-8 character) the
   delimiters are the ``0x00`` bytes and the runs of ``0x01``. ``default`` keeps every piece
   between two delimiters, empty ones included: exactly HELM's ``re.split``, with its empty
   tokens at the edges of a document, and one ``0xFF`` piece after each document. ``light`` and
   ``janitor`` keep the non-empty pieces (the runs of other bytes), as ``str.split()``.
3. Each piece gets a 64-bit key: a piece of at most 8 bytes *is* its key (its bytes read as one
   little-endian ``uint64`` from an unaligned view of the buffer, the bytes past its end masked
   to zero: exact, no collision possible; ``""`` is 0 and the end-of-document piece ``0xFF``,
   which no token can be). A longer token gets a hash of its first and last 8-byte words (and of
   the words between them past 16 bytes) and its length, tagged (low byte 0, top bit 1) so that
   it never equals a short key. A long token whose key is the key of a test token is **verified
   word by word** against it; one that differs gets the key 1, which no token has. Two tokens
   with one key are then equal tokens, except two training tokens that are both no test token,
   which no n-gram of the test set can tell apart.

:func:`encode_keys` returns the keys (what the n-gram counting uses: no table lookup per token at
all); :func:`encode_chunk` maps them to the test vocabulary's ids with a :class:`HashTable`. A
chunk whose text contains ``"\\x00"`` or ``"\\x01"`` itself is declined (``None``) and encoded
the plain way by the caller (those characters are not separators, so they would be taken for
marks).
"""

from __future__ import annotations

import re
import string
from itertools import compress
from operator import not_

import numpy as np

DOCUMENT_END, SEPARATOR = "\x00", "\x01"
_MARK = DOCUMENT_END + SEPARATOR + DOCUMENT_END  # before the first document and after each one
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
END_KEY = np.uint64(0xFF)  # the key of the piece after each document: byte 0xFF is never UTF-8
REJECTED_KEY = np.uint64(1)  # a long token whose hash claims a test token it is not
_FOLD = np.uint64(29)


class HashTable:
    """Distinct ``uint64`` keys -> ``int64`` values, looked up many at a time.

    A direct-mapped table of ``2^b >= 8 x`` the number of keys: a key's bucket is the top ``b``
    bits of ``key * _MIX`` (Fibonacci hashing, so keys with structure, such as short tokens'
    bytes, still spread). Each bucket holds one ``int32`` code: 0 when empty, ``1 + i`` when the
    ``i``-th key is alone in it, -1 when it is crowded; a query is one gather of that code, and
    only the few queries that land in an occupied bucket are compared with their key. The keys
    of crowded buckets (about 6% of them) are kept sorted apart and bisected.
    """

    def __init__(self, keys: np.ndarray, values: np.ndarray, distinct: bool = False) -> None:
        keys, values = np.asarray(keys, dtype=np.uint64), np.asarray(values, dtype=np.int64)
        if not distinct and np.unique(keys).size != keys.size:  # distinct: the caller knows
            raise ValueError("HashTable keys must be distinct.")
        bits = max(4, int(np.ceil(np.log2(max(keys.size, 1)))) + 3)
        self.shift = np.uint64(64 - bits)
        bucket = self._bucket(keys)
        population = np.bincount(bucket, minlength=1 << bits)
        alone = population[bucket] == 1
        self.codes = np.zeros(1 << bits, dtype=np.int32)
        self.codes[population > 1] = -1
        self.keys, self.values = keys[alone], values[alone]
        self.codes[bucket[alone]] = np.arange(1, self.keys.size + 1, dtype=np.int32)
        order = np.argsort(keys[~alone])
        self.crowded_keys, self.crowded_values = keys[~alone][order], values[~alone][order]

    def _bucket(self, keys: np.ndarray) -> np.ndarray:
        bucket = np.multiply(keys, _MIX)  # wraps modulo 2^64
        return np.right_shift(bucket, self.shift, out=bucket).view(np.int64)

    def find(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The positions of the queries that are keys (in no particular order) and their
        values."""
        bucket = self._bucket(queries)
        occupied = np.flatnonzero(self.codes[bucket])
        code = self.codes[bucket[occupied]]
        asked = queries[occupied]
        alone = code > 0
        slot = code[alone] - 1
        hit = self.keys[slot] == asked[alone]
        positions, values = occupied[alone][hit], self.values[slot[hit]]
        crowded = np.flatnonzero(~alone)
        if crowded.size:
            where = np.searchsorted(self.crowded_keys, asked[crowded])
            where[where == self.crowded_keys.size] = 0
            found = self.crowded_keys[where] == asked[crowded]
            positions = np.concatenate([positions, occupied[crowded[found]]])
            values = np.concatenate([values, self.crowded_values[where[found]]])
        return positions, values

    @property
    def arrays(
        self,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.uint64]:
        """The table as the compiled scan reads it: codes, keys, values, crowded keys and
        values, shift."""
        return (
            self.codes,
            self.keys,
            self.values,
            self.crowded_keys,
            self.crowded_values,
            self.shift,
        )

    def get(self, queries: np.ndarray, missing: int = 0) -> np.ndarray:
        """The value of every query (``missing`` where it is not a key)."""
        out = np.full(np.shape(queries), missing, dtype=np.int64)
        positions, values = self.find(queries)
        out[positions] = values
        return out


def _byte_words(data: np.ndarray) -> np.ndarray:
    """The little-endian ``uint64`` that starts at every byte of ``data`` (an unaligned view;
    the last ``WORD`` bytes of ``data`` are padding and start no word)."""
    return np.ndarray((data.size - WORD + 1,), dtype="<u8", buffer=data, strides=(1,))


def _middle_words(
    words: np.ndarray, starts: np.ndarray, lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The whole 8-byte words between the first and the last word of the tokens
    ``[s, s + length)``, ragged: ``(owner, k, word)``, the ``k``-th word (from 1) at byte
    ``s + 8 k``; the first, middle and last words cover the token."""
    count = np.maximum((lengths - WORD - 1) // WORD, 0)
    owner = np.repeat(np.arange(starts.size), count)
    k = 1 + np.arange(owner.size) - np.repeat(np.cumsum(count) - count, count)
    return owner, k, words[starts[owner] + WORD * k]


def _middle_hashes(owner: np.ndarray, k: np.ndarray, word: np.ndarray, size: int) -> np.ndarray:
    """Per token, ``sum_k word_k * _BASE^k`` over its middle words (0 without any)."""
    out = np.zeros(size, dtype=np.uint64)
    if owner.size:
        powers = np.cumprod(np.full(int(k.max()) + 1, _BASE, dtype=np.uint64), dtype=np.uint64)
        np.add.at(out, owner, word * powers[k])
    return out


def _long_hashes(first: np.ndarray, last: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Tagged keys of long tokens from their first and last words (the middle words already
    folded into ``first``) and their lengths: low byte cleared, top bit set."""
    with np.errstate(over="ignore"):
        hashes = (first * _BASE + last) ^ lengths.astype(np.uint64)
        hashes *= _MIX
    hashes ^= hashes >> np.uint64(32)
    return (hashes & ~_LOW_BYTE) | _LONG_TAG


def _token_keys(
    words: np.ndarray, starts: np.ndarray, lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, tuple]]:
    """Every token's key (step 3 of the module docstring, before the verification), the
    positions of the long tokens, and their first words, last words and middle words."""
    keys = words[starts]
    keys &= _MASKS[np.minimum(lengths, WORD)]
    long = np.flatnonzero(lengths > WORD)
    if long.size == 0:
        none = np.empty(0, np.int64)
        return keys, long, (keys[long], keys[long], (none, none, keys[long]))
    long_starts, long_lengths = starts[long], lengths[long]
    first = keys[long]
    last = words[long_starts + long_lengths - WORD]
    middle = _middle_words(words, long_starts, long_lengths)
    folded = first
    if middle[0].size:
        with np.errstate(over="ignore"):
            folded = first ^ (_middle_hashes(*middle, long.size) * _MIX)
    keys[long] = _long_hashes(folded, last, long_lengths)
    return keys, long, (first, last, middle)


def character_tokenize(text: str) -> list[str]:
    """The ``"character"`` tokenizer: lower case, every run of whitespace one space, none at the
    edges; each character is a token. Sees text without spaces (Chinese, Japanese, Thai) and
    items shorter than ``n`` words, which the word tokenizers turn into too few tokens."""
    return list(" ".join(text.lower().split()))


def character_symbols(documents: list[str]) -> tuple[np.ndarray, int, np.ndarray]:
    """The symbols of :func:`character_tokenize`'s tokens for a chunk of documents without a
    Python string per character: each character's code point plus one (exact: no two
    characters share a symbol), each document followed by the separator 0. Returns the
    symbols, the number of characters, and the position of each document's separator."""
    texts = [" ".join(d.lower().split()) for d in documents]
    lengths = np.fromiter(map(len, texts), np.int64, len(texts))
    data = "\x00".join([*texts, ""]).encode("utf-32-le", "surrogatepass")
    symbols = np.frombuffer(data, dtype="<u4").astype(np.uint64)
    symbols += np.uint64(1)
    ends = np.cumsum(lengths + 1) - 1
    symbols[ends] = 0
    return symbols, int(lengths.sum()), ends


def fold_keys(keys: np.ndarray) -> np.ndarray:
    """``key ^ (key >> 29)`` in place (a bijection, so equal results mean equal keys): brings
    the differences of two short tokens in their high bytes down to low bits, which the
    polynomial n-gram hash needs (it is blind to differences in high bits only). Keys below
    ``2^29`` (``""``, the end-of-document piece, the rejected key) are left as they are."""
    shifted = np.right_shift(keys, _FOLD)
    np.bitwise_xor(keys, shifted, out=keys)
    return keys


def _translation(tokenizer: str) -> tuple[bytes, bytes]:
    """The ``bytes.translate`` table and deleted bytes of an ASCII chunk, from Python's own
    string methods and the tokenizer's pattern: ``0x00`` stays (a delimiter), the ``0x01`` of
    the mark becomes ``0xFF``, a separator becomes ``0x01``, ``janitor`` deletes its
    punctuation, any other character becomes its lower case (``light``: itself)."""
    pattern = _SEPARATOR_RUNS[tokenizer]
    table, delete = bytearray(range(256)), bytearray()
    table[1] = 0xFF
    for code in range(2, 128):
        char = chr(code)
        if tokenizer == "janitor" and char in string.punctuation:
            delete.append(code)
        elif pattern.fullmatch(char):
            table[code] = 1
        else:
            table[code] = ord(char if tokenizer == "light" else char.lower())
    return bytes(table), bytes(delete)


_ASCII = {name: _translation(name) for name in _SEPARATOR_RUNS}

RAW_TOKENIZERS = ("default", "light")  # no byte is deleted: the compiled scan reads raw bytes


def byte_classes(tokenizer: str) -> tuple[np.ndarray, np.ndarray, bool]:
    """How the compiled scan (``kernels.document_keys``) reads the raw UTF-8 bytes of a
    document, from the same table as :func:`_ascii_bytes`: per byte value, 1 for a separator
    and 1 for a byte it declines (``0x00``, ``0x01`` and every byte of a non-ASCII character:
    such a document is normalised by :func:`normalised_batch`); whether tokens are lowered
    (``str.lower`` on ASCII lowers ``A``-``Z`` only, and no other byte changes: tested).
    ``janitor`` deletes bytes inside tokens, so its documents are all normalised first."""
    if tokenizer not in RAW_TOKENIZERS:
        raise ValueError(f"the compiled scan reads raw bytes for {RAW_TOKENIZERS} only.")
    table, _ = _ASCII[tokenizer]
    separator = (np.frombuffer(table, dtype=np.uint8) == 1).astype(np.uint64)
    declined = np.zeros(256, dtype=np.uint64)
    declined[[0, 1]] = 1
    declined[0x80:] = 1
    separator[[0, 1]] = 0
    return separator, declined, tokenizer != "light"


def normalised_classes() -> tuple[np.ndarray, np.ndarray, bool]:
    """:func:`byte_classes` for the output of :func:`normalised_batch`: ``0x01`` separates,
    every other byte is a token's byte as it is."""
    separator = np.zeros(256, dtype=np.uint64)
    separator[1] = 1
    return separator, np.zeros(256, dtype=np.uint64), False


def normalised_batch(
    documents: list[str], tokenizer: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Step 1 of the module docstring for any documents: lower case (``str.lower``),
    ``janitor``'s punctuation deleted, every run of separators one ``0x01`` (``re.sub`` of the
    tokenizer's pattern), as UTF-8 bytes joined by ``0x00``; returns the bytes and each
    document's start and end in them, or ``None`` when a document holds ``"\\x00"`` or
    ``"\\x01"`` itself."""
    text = DOCUMENT_END.join(documents)
    if text.count(DOCUMENT_END) != len(documents) - 1 or SEPARATOR in text:
        return None
    text = _normalised(text, tokenizer)
    data = np.frombuffer(text.encode("utf-8", "surrogatepass"), np.uint8)
    marks = np.flatnonzero(data == 0)
    starts = np.concatenate([[0], marks + 1])
    ends = np.concatenate([marks, [data.size]])
    return data, starts, ends


def _normalised(text: str, tokenizer: str) -> str:
    """``text`` lowered (not for ``light``), ``janitor``'s punctuation deleted, every run of
    the tokenizer's separators one ``0x01``."""
    if tokenizer != "light":
        text = text.lower()
    if tokenizer == "janitor":
        text = text.translate(_PUNCT_TABLE)
    return _SEPARATOR_RUNS[tokenizer].sub(SEPARATOR, text)


def _ascii_bytes(documents: list[str], tokenizer: str) -> np.ndarray | None:
    """Step 1 for ASCII documents: the marked bytes, ``WORD`` zero bytes of padding at the end;
    ``None`` when a document holds a mark character."""
    text = _MARK.join(["", *documents, _PADDING])
    count = len(documents) + 1
    if text.count(SEPARATOR) != count or text.count(DOCUMENT_END) != 2 * count + WORD:
        return None
    table, delete = _ASCII[tokenizer]
    return np.frombuffer(text.encode("ascii").translate(table, delete), dtype=np.uint8)


def _unicode_bytes(documents: list[str], tokenizer: str) -> np.ndarray | None:
    """Step 1 for any documents (``str.lower``, ``re.sub``): as :func:`_ascii_bytes`."""
    text = DOCUMENT_END.join(documents) + DOCUMENT_END
    if text.count(DOCUMENT_END) != len(documents) or SEPARATOR in text:
        return None
    text = _normalised(text, tokenizer)
    mark = b"\x00\xff\x00"
    data = mark + text.encode("utf-8", "surrogatepass").replace(b"\x00", mark) + _PADDING.encode()
    return np.frombuffer(data, dtype=np.uint8)


def _pieces(data: np.ndarray, keeps_empty: bool) -> tuple[np.ndarray, np.ndarray]:
    """Step 2: the start and length of every token and end-of-document piece of the marked
    bytes, in order (the end-of-document piece before the first document left out)."""
    marked = data[:-WORD]
    if keeps_empty:
        # A delimiter is a 0x00 byte or a run of 0x01; the pieces lie between two of them.
        first = marked <= 1
        run = marked == 1
        inside = run[1:] & run[:-1]  # a 0x01 followed by another: one run
        last = first.copy()
        first[1:] ^= inside  # first byte of each delimiter
        last[:-1] ^= inside  # last byte of each delimiter
        starts = np.flatnonzero(last)[1:-1]
        starts += 1
        ends = np.flatnonzero(first)[2:]
        ends -= starts
        return starts, ends
    # The runs of bytes other than 0x00 and 0x01 (the first is the leading 0xFF piece).
    boundary = marked <= 1
    changes = np.flatnonzero(boundary[1:] != boundary[:-1])
    starts = changes[2::2] + 1
    return starts, changes[3::2] - changes[2::2]


class TokenTable:
    """The test vocabulary (token -> id) of a built-in ``tokenizer``: the keys of its tokens
    (:attr:`key_of_id`, folded; id 0 gets the end-of-document key), their words for verifying
    long tokens, and a :class:`HashTable` from key to id for :func:`encode_chunk`."""

    def __init__(self, ids: dict[str, int], tokenizer: str) -> None:
        if tokenizer not in VECTORISED_TOKENIZERS:
            raise ValueError(f"`tokenizer` must be one of {VECTORISED_TOKENIZERS}.")
        self.tokenizer = tokenizer
        encoded = [t.encode("utf-8", "surrogatepass") for t in ids]
        lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
        data = np.frombuffer(b"".join(encoded) + bytes(WORD), dtype=np.uint8)
        starts = np.cumsum(lengths) - lengths
        keys, long, (first, last, (owner, k, word)) = _token_keys(
            _byte_words(data), starts, lengths
        )
        values = np.fromiter(ids.values(), np.int64, len(ids))
        # Two long tokens of one hash would make one of them unreachable; with 64 bits a clash
        # within a test vocabulary is ~1e-10, and such a table declines every chunk.
        self.unique = bool(np.unique(keys).size == keys.size)
        self.index = HashTable(keys, values) if self.unique else None
        size = int(values.max(initial=0)) + 1
        self.key_of_id = np.full(size, END_KEY, dtype=np.uint64)
        self.key_of_id[values] = keys
        fold_keys(self.key_of_id)
        # The long test tokens, row by row: key -> row, and each row's length and words.
        self.long = HashTable(keys[long], np.arange(long.size)) if self.unique else None
        self.long_lengths, self.long_first, self.long_last = lengths[long], first, last
        count = np.bincount(owner, minlength=long.size)
        self.middle_start = np.cumsum(count) - count  # rows' middle words, in row order
        self.middle_words = word
        self.empty_id = int(ids.get("", 0))

    def verified_keys(
        self, words: np.ndarray, starts: np.ndarray, lengths: np.ndarray
    ) -> np.ndarray:
        """Every token's key, a long token whose key claims a test token it is not given
        ``REJECTED_KEY`` (not folded)."""
        keys, long, (first, last, (owner, k, word)) = _token_keys(words, starts, lengths)
        if long.size == 0 or self.long_lengths.size == 0:
            return keys
        position, row = self.long.find(keys[long])  # the long tokens that claim a test token
        wrong = (
            (self.long_lengths[row] != lengths[long[position]])
            | (self.long_first[row] != first[position])
            | (self.long_last[row] != last[position])
        )
        if owner.size:  # past 16 bytes: the middle words too, over their ragged words at once
            claimed = np.full(long.size, -1, dtype=np.int64)
            claimed[position[~wrong]] = row[~wrong]
            checked = claimed[owner] >= 0
            expected = self.middle_words[
                self.middle_start[claimed[owner[checked]]] + k[checked] - 1
            ]
            differs = np.zeros(long.size, dtype=bool)
            differs[owner[checked][word[checked] != expected]] = True
            wrong |= differs[position]
        keys[long[position[wrong]]] = REJECTED_KEY
        return keys


def _groups(documents: list[str]) -> list[tuple[list[str], bool]]:
    """The documents as one group if all are ASCII, else the ASCII ones then the others (in
    their order), each with whether it is ASCII."""
    try:
        flags = list(map(str.isascii, documents))
    except TypeError:
        kinds = sorted({type(d).__name__ for d in documents if not isinstance(d, str)})
        raise TypeError(f"training documents must be strings, got {', '.join(kinds)}.") from None
    if all(flags):
        return [(documents, True)] if documents else []
    groups = []
    for group, is_ascii in (
        (list(compress(documents, flags)), True),
        (list(compress(documents, map(not_, flags))), False),
    ):
        if group:
            groups.append((group, is_ascii))
    return groups


def _raw_keys(documents: list[str], table: TokenTable) -> tuple[np.ndarray, int] | None:
    """:func:`encode_keys` before the fold."""
    if not table.unique:
        return None
    encoded, tokens = [], 0
    for group, is_ascii in _groups(documents):
        data = (_ascii_bytes if is_ascii else _unicode_bytes)(group, table.tokenizer)
        if data is None:
            return None
        starts, lengths = _pieces(data, _KEEPS_EMPTY[table.tokenizer])
        encoded.append(table.verified_keys(_byte_words(data), starts, lengths))
        tokens += starts.size - len(group)
    if not encoded:
        return np.empty(0, np.uint64), 0
    return (encoded[0] if len(encoded) == 1 else np.concatenate(encoded)), tokens


def encode_keys(documents: list[str], table: TokenTable) -> tuple[np.ndarray, int] | None:
    """The folded keys (:func:`fold_keys`) of every token of ``documents``, each document's
    followed by the end-of-document key, and the number of tokens.

    A chunk of ASCII documents is encoded in one piece; otherwise the ASCII documents come first
    (in their order), then the others (in theirs): each group takes its own path, and since no
    n-gram crosses a document the counts do not depend on the order. Returns ``None`` when the
    chunk cannot take this path (a mark character in its text, or a test vocabulary with two
    tokens of one hash); the caller then encodes it the plain way.
    """
    encoded = _raw_keys(documents, table)
    return None if encoded is None else (fold_keys(encoded[0]), encoded[1])


def encode_chunk(documents: list[str], table: TokenTable) -> tuple[np.ndarray, int] | None:
    """Ids of ``documents`` as ``_Vocabulary.encode_documents`` gives them for the table's
    tokenizer (every document's ids followed by a 0), and the number of tokens: the keys of
    :func:`encode_keys` looked up in the test vocabulary (``None`` where it declines)."""
    encoded = _raw_keys(documents, table)
    if encoded is None:
        return None
    keys, tokens = encoded
    return table.index.get(keys).view(np.uint64), tokens
