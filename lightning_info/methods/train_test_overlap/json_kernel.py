"""One string field of every line of a JSON-lines block, compiled (numba; the ``overlap`` extra).

pyarrow's JSON reader parses about 500 MB/s on one core here, a third of the end-to-end scan's
time; this loop reads the lines of a block in one pass at about twice that (benchmark of the
card), copying the field's string, unescaped, straight into the bytes of a ``TextBatch``. It
validates each line as Python's ``json.loads`` does (objects, arrays, strings without raw
control characters, numbers, ``true``/``false``/``null``/``NaN``/``Infinity``, UTF-8) and
stops at the first line it does not read as Python would: a line that is not an object, lacks
the field, holds it as another type, escapes a key, nests deeper than 64, or is not valid
UTF-8 or JSON. The caller reads that line with Python's own reader (which names its file and
line if it is bad) and goes on. A repeated key counts its last value, as ``json.loads`` does; a
lone surrogate escape is written as its three bytes (``surrogatepass``), as ``TextBatch``
keeps a lone surrogate of a Python string.
"""

from __future__ import annotations

import numba
import numpy as np

from lightning_info.methods.train_test_overlap.kernels import put_utf8

_jit = numba.njit(cache=True, nogil=True, boundscheck=False)

_MAX_DEPTH = 64
_OBJECT, _ARRAY = 1, 2
_SPACE = np.zeros(256, dtype=np.bool_)  # JSON's whitespace but the line's end
_SPACE[[0x20, 0x09, 0x0D]] = True
_PLAIN = np.zeros(256, dtype=np.bool_)  # a string's bytes that stand for themselves (ASCII)
_PLAIN[0x20:0x80] = True
_PLAIN[[0x22, 0x5C]] = False
_HEX = np.full(256, -1, dtype=np.int64)
for _k, _c in enumerate(b"0123456789abcdef"):
    _HEX[_c] = _k
for _k, _c in enumerate(b"ABCDEF"):
    _HEX[_c] = 10 + _k
_ESCAPED = np.zeros(256, dtype=np.uint8)  # the byte of a one-letter escape (0: none)
for _c, _v in zip(b'"\\/bfnrt', b'"\\/\b\f\n\r\t'):
    _ESCAPED[_c] = _v


@_jit
def _space(data, i, end):
    while i < end and _SPACE[data[i]]:
        i += 1
    return i


@_jit
def _utf8(data, i, end):
    """The end of the UTF-8 character starting at ``i`` (a byte >= 0x80), or -1 where Python's
    strict decoding refuses it (overlong forms, encoded surrogates, past U+10FFFF)."""
    lead = data[i]
    if lead < 0xC2:
        return -1
    if lead < 0xE0:
        size, low, high = 2, 0x80, 0xBF
    elif lead < 0xF0:
        size = 3
        low = 0xA0 if lead == 0xE0 else 0x80
        high = 0x9F if lead == 0xED else 0xBF
    elif lead < 0xF5:
        size = 4
        low = 0x90 if lead == 0xF0 else 0x80
        high = 0x8F if lead == 0xF4 else 0xBF
    else:
        return -1
    if i + size > end or not low <= data[i + 1] <= high:
        return -1
    for k in range(2, size):
        if not 0x80 <= data[i + k] <= 0xBF:
            return -1
    return i + size


@_jit
def _hex4(data, i, end):
    """The value of the 4 hex digits at ``i``, or -1."""
    if i + 4 > end:
        return -1
    value = 0
    for k in range(4):
        digit = _HEX[data[i + k]]
        if digit < 0:
            return -1
        value = value * 16 + digit
    return value


@_jit
def _string(data, i, end, out, at, copying):
    """Read the string whose opening quote is at ``i``; with ``copying``, write its unescaped
    UTF-8 to ``out`` from ``at``. Returns the index past the closing quote and the new ``at``,
    or (-1, at) where Python would not read it (a raw control character, a bad escape, bad
    UTF-8)."""
    i += 1
    while i < end:
        if copying:  # the plain run, one test per byte
            while i < end and _PLAIN[data[i]]:
                out[at] = data[i]
                at += 1
                i += 1
        else:
            while i < end and _PLAIN[data[i]]:
                i += 1
        if i >= end:
            break
        byte = data[i]
        if byte == 0x22:  # "
            return i + 1, at
        if byte == 0x5C:  # backslash
            if i + 1 >= end:
                return -1, at
            letter = data[i + 1]
            if letter == 0x75:  # u
                code = _hex4(data, i + 2, end)
                if code < 0:
                    return -1, at
                i += 6
                pair = 0xD800 <= code < 0xDC00 and i + 1 < end
                if pair and data[i] == 0x5C and data[i + 1] == 0x75:
                    low = _hex4(data, i + 2, end)
                    if 0xDC00 <= low < 0xE000:  # a surrogate pair: one character
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        i += 6
                if copying:
                    at = put_utf8(out, at, code)
                continue
            value = _ESCAPED[letter]
            if value == 0:
                return -1, at
            if copying:
                out[at] = value
                at += 1
            i += 2
            continue
        if byte < 0x20:
            return -1, at
        if byte < 0x80:
            if copying:
                out[at] = byte
                at += 1
            i += 1
            continue
        after = _utf8(data, i, end)
        if after < 0:
            return -1, at
        if copying:
            for k in range(i, after):
                out[at] = data[k]
                at += 1
        i = after
    return -1, at


@_jit
def _literal(data, i, end, word):
    """The index past ``word`` if it starts at ``i``, else -1."""
    if i + word.size > end:
        return -1
    for k in range(word.size):
        if data[i + k] != word[k]:
            return -1
    return i + word.size


@_jit
def _digits(data, i, end):
    start = i
    while i < end and 0x30 <= data[i] <= 0x39:
        i += 1
    return i, i - start


@_jit
def _number(data, i, end):
    """The index past the number at ``i`` (Python's grammar, ``-Infinity`` included), or -1."""
    if data[i] == 0x2D:  # -
        i += 1
        if i < end and data[i] == 0x49:  # -Infinity
            return _literal(data, i, end, _INFINITY)
    if i >= end:
        return -1
    if data[i] == 0x30:
        i += 1
    else:
        i, count = _digits(data, i, end)
        if count == 0:
            return -1
    if i < end and data[i] == 0x2E:  # .
        i, count = _digits(data, i + 1, end)
        if count == 0:
            return -1
    if i < end and (data[i] == 0x65 or data[i] == 0x45):  # e E
        i += 1
        if i < end and (data[i] == 0x2B or data[i] == 0x2D):
            i += 1
        i, count = _digits(data, i, end)
        if count == 0:
            return -1
    return i


_TRUE, _FALSE, _NULL = (np.frombuffer(w, np.uint8) for w in (b"true", b"false", b"null"))
_NAN, _INFINITY = (np.frombuffer(w, np.uint8) for w in (b"NaN", b"Infinity"))


@_jit
def _scalar(data, i, end, out):
    """The index past the string, number or literal at ``i``, or -1 (``out``: unused)."""
    byte = data[i]
    if byte == 0x22:
        return _string(data, i, end, out, 0, False)[0]
    if byte == 0x2D or 0x30 <= byte <= 0x39:
        return _number(data, i, end)
    if byte == 0x74:
        return _literal(data, i, end, _TRUE)
    if byte == 0x66:
        return _literal(data, i, end, _FALSE)
    if byte == 0x6E:
        return _literal(data, i, end, _NULL)
    if byte == 0x4E:
        return _literal(data, i, end, _NAN)
    if byte == 0x49:
        return _literal(data, i, end, _INFINITY)
    return -1


@_jit
def _member_key(data, i, end, out):
    """The index past ``"key":`` at ``i`` (whitespace before the colon allowed), or -1."""
    if i >= end or data[i] != 0x22:
        return -1
    i = _string(data, i, end, out, 0, False)[0]
    if i < 0:
        return -1
    i = _space(data, i, end)
    if i >= end or data[i] != 0x3A:
        return -1
    return i + 1


@_jit
def _value(data, i, end, stack, out):
    """The index past the JSON value at ``i`` (nested objects and arrays validated with an
    explicit stack), or -1 (``out``: unused)."""
    depth = 0
    while True:
        i = _space(data, i, end)
        if i >= end:
            return -1
        byte = data[i]
        if byte == 0x7B or byte == 0x5B:  # { [
            if depth == _MAX_DEPTH:
                return -1
            stack[depth] = _OBJECT if byte == 0x7B else _ARRAY
            depth += 1
            i = _space(data, i + 1, end)
            if i < end and data[i] == (0x7D if byte == 0x7B else 0x5D):  # empty
                depth -= 1
                i += 1
            elif byte == 0x7B:  # the first key, then its value
                i = _member_key(data, i, end, out)
                if i < 0:
                    return -1
                continue
            else:
                continue
        else:
            i = _scalar(data, i, end, out)
            if i < 0:
                return -1
        # after a value: close containers, or go on to the next member
        while depth:
            i = _space(data, i, end)
            if i >= end:
                return -1
            byte = data[i]
            kind = stack[depth - 1]
            if byte == 0x2C:  # ,
                i = _space(data, i + 1, end)
                if kind == _OBJECT:
                    i = _member_key(data, i, end, out)
                    if i < 0:
                        return -1
                break
            if byte == (0x7D if kind == _OBJECT else 0x5D):
                depth -= 1
                i += 1
                continue
            return -1
        if depth == 0:
            return i


@_jit
def _key_is(data, start, stop, field):
    if stop - start != field.size:
        return False
    for k in range(field.size):  # noqa: SIM110 (numba compiles the loop, not a generator)
        if data[start + k] != field[k]:
            return False
    return True


@_jit
def _line(data, i, size, field, out, at, stack):
    """Read the object of the line from ``i`` (to its ``\\n`` or ``size``); return the end of
    its field's string in ``out`` (written from ``at``) and the line's end, or -1 where
    Python's reader must take the line."""
    i = _space(data, i, size)
    if i >= size or data[i] != 0x7B:
        return -1, i
    i = _space(data, i + 1, size)
    if i < size and data[i] == 0x7D:
        return -1, i  # an empty object: no field
    written = -1
    while True:
        if i >= size or data[i] != 0x22:
            return -1, i
        key = i + 1
        i, _ = _string(data, i, size, out, at, False)
        if i < 0:
            return -1, i
        for k in range(key, i - 1):
            if data[k] == 0x5C:  # an escaped key: Python compares its value
                return -1, i
        is_field = _key_is(data, key, i - 1, field)
        i = _space(data, i, size)
        if i >= size or data[i] != 0x3A:
            return -1, i
        i = _space(data, i + 1, size)
        if is_field:
            if i >= size or data[i] != 0x22:
                return -1, i  # not a string: Python's reader says so
            i, written = _string(data, i, size, out, at, True)  # a repeated key: the last
        else:
            i = _value(data, i, size, stack, out)
        if i < 0:
            return -1, i
        i = _space(data, i, size)
        if i < size and data[i] == 0x2C:
            i = _space(data, i + 1, size)
            continue
        if i < size and data[i] == 0x7D:
            break
        return -1, i
    i = _space(data, i + 1, size)
    if i < size and data[i] != 0x0A:
        return -1, i
    return written, i


@_jit
def json_field(data, start, field, out, offsets):
    """Read the lines of ``data`` (whole lines, each ended by ``\\n`` but perhaps the last)
    from ``start``: each line's ``field`` (UTF-8 bytes) string goes to ``out`` (at least as
    long as ``data``), the ``d``-th document at ``out[offsets[d]:offsets[d + 1]]``; lines of
    JSON whitespace are skipped. Stops before the first line Python's reader must take (module
    docstring). Returns the number of documents, where it stopped (``data.size`` at the end),
    the lines it passed, and whether it stopped at such a line."""
    stack = np.empty(_MAX_DEPTH, dtype=np.int8)
    size, documents, lines, i = data.size, 0, 0, start
    offsets[0] = 0
    while i < size:
        first = _space(data, i, size)
        if first < size and data[first] != 0x0A:
            written, end = _line(data, i, size, field, out, offsets[documents], stack)
            if written < 0:
                return documents, i, lines, True
            documents += 1
            offsets[documents] = written
        else:
            end = first
        lines += 1
        i = end + 1
    return documents, size, lines, False
