"""Compiled inner loops of the overlap scan (numba; the ``overlap`` extra, imported lazily).

Two loops, each with no Python object per token and no temporary array per stage:

- :func:`document_keys` reads the bytes of documents (``data[starts[d]:ends[d]]``) and writes
  every token's folded key, then the end-of-document key, in exactly the order and with exactly
  the keys of :func:`~.encoding.encode_keys` (its module docstring: a piece of at most 8 bytes
  is its bytes, a longer one a tagged hash verified word by word against the test token it
  claims). It reads 64 bytes at a time the way simdjson does: a byte's class (separator, or a
  byte the loop declines) is looked up into a 64-bit mask, the tokens' first and one-past-last
  bytes are the mask's rising and falling edges, and the loop visits the edges with a
  count-trailing-zeros, not a branch per byte. A token of at most 8 bytes is one unaligned
  8-byte load, lowered by SWAR arithmetic (``A``-``Z`` gain ``0x20``: ``str.lower`` on ASCII)
  and masked to its length. A document holding a declined byte (any byte of a non-ASCII
  character, ``0x00``, ``0x01``) is left out and reported, for the caller to normalise.
- :func:`count_windows` slides a window of ``n`` symbols and keeps its polynomial hash
  ``sum_j s[i + j] base^(n - 1 - j)`` (mod 2^64, ``NgramIndex``'s hash) by rolling it one
  symbol at a time. A bit map of the indexed hashes (16 bits per n-gram: it stays in the
  core's cache, unlike the table) picks the candidates without a branch; only those are looked
  up in the arrays of a :class:`~.encoding.HashTable` and verified symbol by symbol against the
  indexed n-gram before they count (and flag their document).

Every function releases the GIL, so a thread pool scans chunks in parallel. The pure-numpy path
(:mod:`~.encoding`, ``NgramIndex.lookup``) computes the same numbers; the tests hold each to the
other and both to a tuple-set oracle.
"""

from __future__ import annotations

import numba
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

_MIX = np.uint64(0x9E3779B97F4A7C15)
_BASE = np.uint64(0xC2B2AE3D27D4EB4F)
_LONG_TAG = np.uint64(1 << 63)
_NOT_LOW_BYTE = np.uint64(~0xFF & 0xFFFFFFFFFFFFFFFF)
_END_KEY = np.uint64(0xFF)
_REJECTED_KEY = np.uint64(1)
_FOLD = np.uint64(29)
_ZERO, _ONE, _TWO, _SIX, _EIGHT, _THIRTY_TWO = (np.uint64(k) for k in (0, 1, 2, 6, 8, 32))
_LOW_6 = np.uint64(63)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
_SEVEN_BITS = np.uint64(0x7F7F7F7F7F7F7F7F)
_HIGH_BITS = np.uint64(0x8080808080808080)
_FROM_A = np.uint64((0x80 - ord("A")) * 0x0101010101010101)  # high bit: byte >= "A"
_PAST_Z = np.uint64((0x80 - ord("Z") - 1) * 0x0101010101010101)  # high bit: byte > "Z"
_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(9)], dtype=np.uint64)
_CANDIDATES = 1024  # positions tested against the bit map before the table is looked up

_jit = numba.njit(cache=True, nogil=True, boundscheck=False)


@_jit
def _find(codes, keys, values, crowded_keys, crowded_values, shift, query):
    """The value of ``query`` in a ``HashTable``'s arrays, or -1."""
    code = codes[(query * _MIX) >> shift]
    if code == 0:
        return -1
    if code > 0:
        return values[code - 1] if keys[code - 1] == query else -1
    return _crowded(crowded_keys, crowded_values, query)


@_jit
def _crowded(crowded_keys, crowded_values, query):
    """The value of ``query`` among a ``HashTable``'s crowded keys, or -1."""
    where = np.searchsorted(crowded_keys, query)
    if where < crowded_keys.size and crowded_keys[where] == query:
        return crowded_values[where]
    return -1


@_jit
def _zeros(word):
    """The number of trailing zero bits of ``word`` (non-zero), as an ``int``."""
    return np.int64(trailing_zeros(word))


@_jit
def _tail_word(data, start):
    """The bytes from ``start`` to the end of ``data`` (fewer than 8) as a little-endian
    ``uint64``."""
    word = _ZERO
    for k in range(data.size - start):
        word |= np.uint64(data[start + k]) << (_EIGHT * np.uint64(k))
    return word


@_jit
def _lower_ascii(word):
    """``word``'s bytes (ASCII) with ``A``-``Z`` lowered, all eight at once."""
    low = word & _SEVEN_BITS
    upper = (low + _FROM_A) & ~(low + _PAST_Z) & ~word & _HIGH_BITS
    return word | (upper >> np.uint64(2))


@_jit
def _long_keys(out, where, starts, lengths, count, words, lowers, long_table, long_rows):
    """``out[where[t]]`` = the folded key of the ``t``-th long token (``lengths[t] > 8`` bytes
    at ``starts[t]``, its words lowered when ``lowers``), for ``t < count``: the tagged hash of
    ``encoding._token_keys``, ``REJECTED_KEY`` when it claims a test token it is not. Apart
    from the byte loop, which they would slow for every token; every word read lies inside the
    token. One loop with no call per token (a call would pass every table again)."""
    codes, keys, values, crowded_keys, crowded_values, shift, bitmap, bitmap_shift = long_table
    test_lengths, firsts, lasts, middle_start, middle_words = long_rows
    for t in range(count):
        start, length = starts[t], lengths[t]
        first, last = words[start], words[start + length - 8]
        if lowers:
            first, last = _lower_ascii(first), _lower_ascii(last)
        middle = (length - 9) >> 3
        folded = first
        if middle:
            hashed, power = _ZERO, _BASE
            for k in range(1, middle + 1):
                power *= _BASE  # BASE^(k + 1), the weight of the k-th middle word
                word = words[start + 8 * k]
                hashed += (_lower_ascii(word) if lowers else word) * power
            folded = first ^ (hashed * _MIX)
        key = _tagged(folded, last, length)
        bit = (key * _MIX) >> bitmap_shift
        if (bitmap[bit >> _SIX] >> (bit & _LOW_6)) & _ONE:  # may be a test token's: verify
            row = _find(codes, keys, values, crowded_keys, crowded_values, shift, key)
            if row >= 0:
                same = test_lengths[row] == length and firsts[row] == first
                same = same and lasts[row] == last
                for k in range(1, middle + 1):
                    word = words[start + 8 * k]
                    word = _lower_ascii(word) if lowers else word
                    same = same and middle_words[middle_start[row] + k - 1] == word
                if not same:
                    key = _REJECTED_KEY
        out[where[t]] = key ^ (key >> _FOLD)


@_jit
def put_utf8(out, at, code):
    """Write the code point ``code`` as UTF-8 (a surrogate as its three bytes, as
    ``surrogatepass``) at ``out[at]``; return the new end."""
    if code < 0x80:
        out[at] = code
        return at + 1
    if code < 0x800:
        out[at], out[at + 1] = 0xC0 | (code >> 6), 0x80 | (code & 0x3F)
        return at + 2
    if code < 0x10000:
        out[at] = 0xE0 | (code >> 12)
        out[at + 1], out[at + 2] = 0x80 | ((code >> 6) & 0x3F), 0x80 | (code & 0x3F)
        return at + 3
    out[at], out[at + 1] = 0xF0 | (code >> 18), 0x80 | ((code >> 12) & 0x3F)
    out[at + 2], out[at + 3] = 0x80 | ((code >> 6) & 0x3F), 0x80 | (code & 0x3F)
    return at + 4


@_jit
def _unicode_space(code):
    """``str.isspace`` of a code point past ASCII (``tests``: every one checked)."""
    return (
        code == 0x85
        or code == 0xA0
        or code == 0x1680
        or 0x2000 <= code <= 0x200A
        or code == 0x2028
        or code == 0x2029
        or code == 0x202F
        or code == 0x205F
        or code == 0x3000
    )


@_jit
def _buffer_word(buffer, start):
    """The little-endian ``uint64`` of ``buffer[start:start + 8]``."""
    word = _ZERO
    for k in range(8):
        word |= np.uint64(buffer[start + k]) << (_EIGHT * np.uint64(k))
    return word


@_jit
def _buffer_key(buffer, length, long_table, long_rows):
    """The folded key of the token ``buffer[:length]`` (already lowered): its bytes, or the
    verified hash of ``_long_keys`` past 8 bytes (one token at a time: non-ASCII documents)."""
    if length <= 8:
        key = _ZERO
        for k in range(length):
            key |= np.uint64(buffer[k]) << (_EIGHT * np.uint64(k))
        return key ^ (key >> _FOLD)
    for k in range(length, length + 8):
        buffer[k] = 0
    codes, keys, values, crowded_keys, crowded_values, shift, bitmap, bitmap_shift = long_table
    test_lengths, firsts, lasts, middle_start, middle_words = long_rows
    first, last = _buffer_word(buffer, 0), _buffer_word(buffer, length - 8)
    middle = (length - 9) >> 3
    folded = first
    if middle:
        hashed, power = _ZERO, _BASE
        for k in range(1, middle + 1):
            power *= _BASE
            hashed += _buffer_word(buffer, 8 * k) * power
        folded = first ^ (hashed * _MIX)
    key = _tagged(folded, last, length)
    row = _find(codes, keys, values, crowded_keys, crowded_values, shift, key)
    if row >= 0:
        same = test_lengths[row] == length and firsts[row] == first and lasts[row] == last
        for k in range(1, middle + 1):
            same = same and middle_words[middle_start[row] + k - 1] == _buffer_word(buffer, 8 * k)
        if not same:
            key = _REJECTED_KEY
    return key ^ (key >> _FOLD)


@_jit
def _unicode_document(
    data, first, stop, out, at, separator, lower_cp, lowers, keeps_empty, long_table, long_rows
):
    """The keys of the UTF-8 document ``data[first:stop]`` written from ``out[at]``, read code
    point by code point: a separator is an ASCII separator byte or Unicode whitespace (the
    tokenizers' ``\\s`` is ``str.isspace``), a token's characters are lowered one by one
    (``lower_cp``) and re-encoded. Returns the new end, or -1 for a document this loop declines:
    a mark (``\\x00``, ``\\x01``), a surrogate, or a character whose ``str.lower`` is not one
    code point of its own (``İ``, and ``Σ``, which lowers by its context)."""
    buffer = np.empty(2 * (stop - first) + 16, dtype=np.uint8)  # lowering grows UTF-8 <= 1.5x
    length, in_run, i = 0, False, first
    while i < stop:
        lead = data[i]
        if lead < 0x80:
            code, size = np.int64(lead), 1
        elif lead < 0xE0:
            code, size = np.int64(lead & 0x1F), 2
        elif lead < 0xF0:
            code, size = np.int64(lead & 0x0F), 3
        else:
            code, size = np.int64(lead & 0x07), 4
        if i + size > stop:
            return -1
        for k in range(1, size):
            code = (code << 6) | (data[i + k] & 0x3F)
        i += size
        if code < 2 or 0xD800 <= code < 0xE000:
            return -1
        space = separator[code] != 0 if code < 0x80 else _unicode_space(code)
        if space:
            if (keeps_empty and not in_run) or length:
                out[at] = _buffer_key(buffer, length, long_table, long_rows)
                at += 1
            length, in_run = 0, True
            continue
        low = lower_cp[code] if lowers else code
        if low < 0:
            return -1
        length = put_utf8(buffer, length, low)
        in_run = False
    if keeps_empty or length:
        out[at] = _buffer_key(buffer, length, long_table, long_rows)
        at += 1
    return at


@_jit
def _tagged(folded, last, length):
    """The key of a long token from its folded first word, last word and length (tagged: low
    byte 0, top bit 1, which no short key has)."""
    key = ((folded * _BASE + last) ^ np.uint64(length)) * _MIX
    key ^= key >> _THIRTY_TWO
    return (key & _NOT_LOW_BYTE) | _LONG_TAG


@_jit
def document_keys(
    data, words, starts, ends, separator, byte_kinds, lowers, keeps_empty, long_table, long_rows,
    out, long_tokens, lower_cp,
):  # fmt: skip
    """Folded keys of every token of the documents, each document's followed by the
    end-of-document key (module docstring). ``separator[c]`` is 1 for a separator byte, 0 for
    another; ``byte_kinds[c]`` has bit 0 set for a separator, bit 1 for a declined byte;
    ``words`` is ``data`` as the unaligned ``uint64`` starting at each byte (``data.size - 7``
    of them); ``lowers``: whether tokens are lowered (``str.lower`` on
    ASCII). The keys are written to ``out`` (at least ``data.size + 2 * documents`` long: a
    document has at most one piece per byte and one more, then its end); ``long_tokens`` is
    scratch of shape ``(3, >= data.size // 9 + 1)``. Both are the caller's, to be reused: fresh
    pages cost a fault each. A document with a declined byte is read code point by code point
    (:func:`_unicode_document`, ``lower_cp``: ``str.lower`` of each code point). Returns the
    number of keys written, the number of tokens and a boolean per document: declined (left
    out, for the caller to normalise)."""
    documents, size = starts.size, data.size
    declined = np.zeros(documents, dtype=np.bool_)
    long_at, long_start, long_length = long_tokens[0], long_tokens[1], long_tokens[2]
    at, tokens, longs = 0, 0, 0
    for d in range(documents):
        first, stop = starts[d], ends[d]
        begin, begin_longs = at, longs
        if keeps_empty and (first == stop or separator[data[first]]):
            out[at] = 0  # re.split's empty first piece
            at += 1
        pending = -1  # the start of a token that runs on into the next block
        before = _ONE  # the byte before the block is a separator
        refused = False
        base = first
        while base < stop:
            block = min(64, stop - base)
            mask, bad = _ZERO, _ZERO
            for j in range(block):  # one lookup per byte: bit 0 separates, bit 1 declines
                kind = byte_kinds[data[base + j]]
                mask |= (kind & _ONE) << np.uint64(j)
                bad |= kind
            if bad & _TWO:
                refused = True
                break
            if block < 64:  # past the document: separators
                mask |= _ALL << np.uint64(block)
            previous = (mask << _ONE) | before
            rising = ~mask & previous  # first byte of a token
            falling = mask & ~previous  # first separator after a token
            before = mask >> _LOW_6
            while falling:
                end = base + _zeros(falling)
                falling &= falling - _ONE
                if pending < 0:
                    start = base + _zeros(rising)
                    rising &= rising - _ONE
                else:
                    start, pending = pending, -1
                length = end - start
                if length > 8:  # keyed after the loop, which it would slow for every token
                    long_at[longs], long_start[longs], long_length[longs] = at, start, length
                    longs += 1
                else:  # no whole word to load past the last 8 bytes of the buffer
                    word = words[start] if start + 8 <= size else _tail_word(data, start)
                    if lowers:
                        word = _lower_ascii(word)
                    word &= _MASKS[length]
                    out[at] = word ^ (word >> _FOLD)
                at += 1
            if rising:
                pending = base + _zeros(rising)
            base += 64
        if refused:  # a byte of a non-ASCII character, or a mark: code point by code point
            longs = begin_longs
            at = _unicode_document(
                data, first, stop, out, begin, separator, lower_cp, lowers, keeps_empty,
                long_table, long_rows,
            )  # fmt: skip
            if at < 0:
                declined[d] = True
                at = begin
                continue
            tokens += at - begin
            out[at] = _END_KEY
            at += 1
            continue
        if pending >= 0:  # a token that ends with the document's last byte
            length = stop - pending
            if length > 8:
                long_at[longs], long_start[longs], long_length[longs] = at, pending, length
                longs += 1
            else:
                word = words[pending] if pending + 8 <= size else _tail_word(data, pending)
                if lowers:
                    word = _lower_ascii(word)
                word &= _MASKS[length]
                out[at] = word ^ (word >> _FOLD)
            at += 1
        if keeps_empty and first < stop and separator[data[stop - 1]]:
            out[at] = 0  # re.split's empty last piece
            at += 1
        tokens += at - begin
        out[at] = _END_KEY
        at += 1
    _long_keys(out, long_at, long_start, long_length, longs, words, lowers, long_table, long_rows)
    return at, tokens, declined


@_jit
def count_windows(symbols, n, base, top, table, bitmap, bitmap_shift, grams, prefixes, suffixes,
                  lasts, successors, indexed, counts, separator, flags, hit_documents,
                  hit_slots):  # fmt: skip
    """Add the occurrences of every indexed n-gram in ``symbols`` to ``counts`` (module
    docstring); with ``flags.size > 0`` also set ``flags[d]`` for each document ``d`` (the
    ``d``-th run of symbols ended by ``separator``) holding one. ``top`` is ``base^(n - 1)``;
    ``bitmap`` has bit ``(h * MIX) >> bitmap_shift`` set for every indexed hash ``h``;
    ``prefixes[g]`` and ``suffixes[g]`` number the first and the last ``n - 1`` symbols of the
    n-gram ``g`` (equal numbers: equal symbols) and ``lasts[g]`` is its last symbol, so that in
    a run of matches each window after the first is verified by its last symbol;
    ``successors[g]`` is an n-gram that starts as ``g`` ends (-1: none) and ``indexed[s]`` the
    hash of the n-gram ``s`` (distinct), so that a window whose hash is the successor's is that
    n-gram without a table lookup. With ``hit_documents.size > 0`` (as long as ``symbols``)
    every match's document and n-gram are recorded in ``hit_documents`` and ``hit_slots``;
    returns their number."""
    codes, keys, values, crowded_keys, crowded_values, shift = table
    size = symbols.size
    hits = 0
    if size < n:
        return hits
    flagging, recording = flags.size > 0, hit_documents.size > 0
    positions = np.empty(_CANDIDATES, dtype=np.int64)
    hashes = np.empty(_CANDIDATES, dtype=np.uint64)
    h = _ZERO
    for j in range(n):
        h = h * base + symbols[j]
    document, counted_to = 0, 0  # separators in symbols[:counted_to]
    matched, matched_end = 0, -2  # the last window counted: its n-gram and last symbol
    i = n - 1  # the window that ends at symbol i
    while i < size:
        stop = min(size, i + _CANDIDATES)
        found, first = 0, i
        if i == n - 1:  # the first window, already hashed: no symbol leaves it
            bit = (h * _MIX) >> bitmap_shift
            positions[0], hashes[0] = i, h
            found, first = np.int64((bitmap[bit >> _SIX] >> (bit & _LOW_6)) & _ONE), i + 1
        for k in range(first, stop):  # no branch: every position is written, the hits kept
            h = (h - symbols[k - n] * top) * base + symbols[k]
            bit = (h * _MIX) >> bitmap_shift
            positions[found] = k
            hashes[found] = h
            found += np.int64((bitmap[bit >> _SIX] >> (bit & _LOW_6)) & _ONE)
        for c in range(found):
            query, end = hashes[c], positions[c]
            start = end - n + 1
            chained = end == matched_end + 1
            following = successors[matched] if chained else -1
            if following >= 0 and indexed[following] == query:
                slot = following  # the n-gram that follows the last match: no table lookup
            else:
                code = codes[(query * _MIX) >> shift]  # HashTable.find, written out (_find)
                if code == 0:
                    continue
                if code > 0:
                    if keys[code - 1] != query:
                        continue
                    slot = values[code - 1]
                else:
                    slot = _crowded(crowded_keys, crowded_values, query)
                    if slot < 0:
                        continue
            if chained and prefixes[slot] == suffixes[matched]:
                # the window before this one is the n-gram `matched`: this one's first n - 1
                # symbols are its last n - 1, which are this n-gram's first: one left to check
                if lasts[slot] != symbols[end]:
                    continue
            else:
                exact = True
                for j in range(n):
                    if grams[slot, j] != symbols[start + j]:
                        exact = False
                        break
                if not exact:
                    continue
            matched, matched_end = slot, end
            counts[slot] += 1
            if flagging or recording:
                for k in range(counted_to, start):
                    document += symbols[k] == separator
                counted_to = start
                if flagging:
                    flags[document] = True
                if recording:
                    hit_documents[hits], hit_slots[hits] = document, slot
                    hits += 1
        i = stop
    return hits
