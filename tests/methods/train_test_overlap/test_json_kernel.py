"""The compiled JSON-lines reader against Python's ``json``, line by line."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from lightning_info.methods.train_test_overlap.files import DocumentText, iter_training_texts
from lightning_info.methods.train_test_overlap.json_kernel import json_field
from lightning_info.methods.train_test_overlap.text_batches import read_text_batches

FIELD = np.frombuffer(b"text", np.uint8)


def _kernel(lines: list[bytes]) -> tuple[list[str], bool]:
    """The kernel's documents of ``lines`` and whether it stopped at a line."""
    data = np.frombuffer(b"\n".join(lines) + b"\n", np.uint8)
    out, offsets = np.empty(data.size, np.uint8), np.empty(len(lines) + 2, np.int64)
    documents, _, _, left = json_field(data, 0, FIELD, out, offsets)
    texts = [
        out[offsets[d] : offsets[d + 1]].tobytes().decode("utf-8", "surrogatepass")
        for d in range(documents)
    ]
    return texts, left


def _python(line: bytes):
    """Python's reading of a line: the document, None (blank) or the exception type."""
    try:
        text = line.decode("utf-8")
        if not text.strip():
            return None
        record = json.loads(text)
        value = record["text"]
        return value if isinstance(value, str) else TypeError
    except (ValueError, KeyError, TypeError) as error:
        return type(error)


def _value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(7 if depth < 3 else 4)
    if kind == 0:
        return rng.choice([0, -1, 2.5, -0.0, 1e-7, 123456789012345678901234567890, float("nan")])
    if kind == 1:
        return rng.choice([True, False, None, float("inf"), -float("inf")])
    if kind in (2, 3):
        return "".join(rng.choice('ab "\\/\n\t\x01é€😀\u2028') for _ in range(rng.randint(0, 8)))
    if kind in (4, 5):
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {f"k{k}": _value(rng, depth + 1) for k in range(rng.randint(0, 3))}


def _valid_line(rng: random.Random) -> bytes:
    record = {f"f{k}": _value(rng) for k in range(rng.randint(0, 3))}
    record["text"] = _value(rng) if rng.random() < 0.1 else str(_value(rng))
    items = list(record.items())
    rng.shuffle(items)
    text = "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in items) + "}"
    if rng.random() < 0.3:
        text = text.replace(", ", rng.choice([",", " ,\t", ",\r "]))
    if rng.random() < 0.3:
        text = " \t" + text + " \r"
    return text.encode("utf-8", "surrogatepass")


MUTATIONS = [
    lambda b: b[:-1],  # truncated
    lambda b: b + b" x",  # trailing garbage
    lambda b: b.replace(b":", b"", 1),
    lambda b: b.replace(b'"', b"'", 1),
    lambda b: b.replace(b"{", b"[", 1),
    lambda b: b.replace(b"true", b"True"),
    lambda b: b.replace(b"0", b"01", 1),
    lambda b: b.replace(b"\\n", b"\\x", 1),
    lambda b: b.replace(b'"text"', b'"t\\u0065xt"'),  # an escaped key
    lambda b: b.replace(b'"text"', b'"other"'),  # the field missing
    lambda b: b.replace(b"a", b"\x07", 1),  # a raw control character
    lambda b: b.replace(b"b", b"\xff", 1),  # not UTF-8
    lambda b: b.replace(b"b", b"\xed\xa0\x80", 1),  # an encoded surrogate: not UTF-8
    lambda b: b"[" * 70 + b"]" * 70,
    lambda b: b'{"text": "x", "text": 5}',
    lambda b: b'{"text": "first", "text": "last"}',
    lambda b: b" \x0c ",  # blank to str.strip, not to JSON
    lambda b: b"\xc2\xa0",  # a no-break space alone: blank to Python
    lambda b: b'{"text": "\\ud83d\\ude00 \\ud800 \\udc00x"}',
]


@pytest.mark.parametrize("seed", range(4))
def test_each_line_is_read_as_python_reads_it_or_handed_to_python(seed):
    """On valid lines the kernel gives Python's document; on every other line it stops (so
    Python's reader takes it) unless Python reads it the same way."""
    rng = random.Random(seed)
    for _ in range(300):
        line = _valid_line(rng)
        if rng.random() < 0.35:
            line = rng.choice(MUTATIONS)(line)
        expected = _python(line)
        texts, left = _kernel([line])
        if left:
            continue  # Python's reader takes the line: the documents match by construction
        assert texts == ([] if expected is None else [expected]), line
    # the kernel reads the common lines itself (not everything handed to Python)
    lines = [_valid_line(rng) for _ in range(200)]
    readable = [line for line in lines if isinstance(_python(line), str)]
    texts, left = _kernel(readable)
    assert not left and texts == [_python(line) for line in readable]


def test_files_read_with_the_kernel_equal_the_python_reader(tmp_path):
    """Whole files, with blank and bad-for-the-kernel lines among valid ones and blocks that
    end exactly at a line's end (a block boundary on a newline must not end the file)."""
    rng = random.Random(7)
    lines = []
    for k in range(400):
        line = _valid_line(rng)
        if k % 17 == 0:
            line = b'{"text": "dup", "text": "last one"}'
        if k % 29 == 0:
            line = b"  "
        if isinstance(_python(line), str) or _python(line) is None:
            lines.append(line)
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b"\n".join(lines) + b"\n")
    expected = list(iter_training_texts([str(path)]))
    for block in (1 << 10, 1 << 12, 1 << 20):
        got = [t for b in read_text_batches([str(path)], block_bytes=block) for t in b.texts()]
        assert got == expected, block
    fixed = tmp_path / "fixed.jsonl"
    fixed.write_bytes(b"".join(b'{"text": "%06d"}\n' % k for k in range(1000)))  # 18-byte lines
    for engine in ("compiled", "numpy"):
        batches = read_text_batches([str(fixed)], block_bytes=18 * 64, engine=engine)
        assert [t for b in batches for t in b.texts()] == [f"{k:06d}" for k in range(1000)]


def test_a_bad_line_is_refused_naming_file_and_line(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(b'{"text": "a"}\n\n{"text": "b"}\n{"text": nope}\n')
    with pytest.raises(ValueError, match=r"corpus\.jsonl, line 4, column 10: not valid JSON"):
        list(read_text_batches([str(path)], engine="compiled"))
    path.write_bytes(b'{"text": "a"}\n{"body": "b"}\n')
    with pytest.raises(ValueError, match=r"corpus\.jsonl, line 2: no field 'text'"):
        list(read_text_batches([str(path)], DocumentText(field="text"), engine="compiled"))
