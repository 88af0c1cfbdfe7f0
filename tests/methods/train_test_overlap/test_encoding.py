"""The vectorised encoding of training documents against the plain token-by-token one."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from lightning_info.lm.corpus import stdlib_docstrings
from lightning_info.methods.train_test_overlap import encoding
from lightning_info.methods.train_test_overlap.encoding import TokenTable, encode_chunk
from lightning_info.methods.train_test_overlap.functional import (
    TOKENIZERS,
    OverlapOptions,
    TestInstance,
    _Vocabulary,
    compute_overlap,
)

# Separators, cased letters whose lowering depends on context (final sigma) or grows (dotted I),
# combining marks, astral characters, and the Unicode whitespace that str.split() knows.
ALPHABET = list("abcAB .,;()!?'\"-_\t\n") + [
    "\u00a0",
    "\x1c",
    "\x1f",
    "\x85",
    "\u2028",
    "\u3000",
    "Σ",
    "σ",
    "ς",
    "İ",
    "é",
    "e\u0301",
    "ß",
    "😀",
    # tokens past the 8 bytes of a short key, ASCII and not, of one length or one prefix
    "informational",
    "informatiomal",
    "characteristically",
    "ÉÉÉÉÉÉÉÉé",
    "abcdefgh",
]


def _random_text(rng: random.Random) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 30)))


def _plain(documents, tokenize, vocab):
    tokens = [tokenize(d) for d in documents]
    return vocab.encode_documents(tokens), sum(map(len, tokens))


@pytest.mark.parametrize("name", sorted(TOKENIZERS))
def test_vectorised_ids_equal_the_plain_tokenizers_on_random_unicode(name):
    rng = random.Random(name)
    tokenize = TOKENIZERS[name]
    for _ in range(200):
        vocab = _Vocabulary()
        test_texts = [_random_text(rng) for _ in range(5)]
        for text in test_texts:
            vocab.add(tokenize(text))
        documents = [_random_text(rng) for _ in range(rng.randint(1, 8))] + test_texts[:2]
        documents += ["plain ascii words, (edges).", ""]
        ids, count = encode_chunk(documents, TokenTable(vocab.ids, name))
        # ASCII documents first, then the others: counts do not depend on the order
        in_order = [d for d in documents if d.isascii()] + [d for d in documents if not d.isascii()]
        expected_ids, expected_count = _plain(in_order, tokenize, vocab)
        assert np.array_equal(ids, expected_ids), documents
        assert count == expected_count


def test_whitespace_pattern_is_str_isspace_for_every_code_point():
    # the whitespace tokenizers rely on re's \s and str.split() agreeing
    space = re.compile(r"\s")
    assert all(bool(space.fullmatch(chr(c))) == chr(c).isspace() for c in range(0x110000))


def test_a_marker_character_in_the_text_declines_the_chunk():
    vocab = _Vocabulary()
    vocab.add(["a", "b"])
    table = TokenTable(vocab.ids, "default")
    assert encode_chunk(["a\x00b"], table) is None
    assert encode_chunk(["a\x01b"], table) is None
    assert encode_chunk(["a b"], table) is not None


def test_long_token_hits_are_verified_word_by_word(monkeypatch):
    # every long token of one length now shares one key: only the words can tell them apart
    monkeypatch.setattr(
        encoding,
        "_long_hashes",
        lambda word, k, lengths: lengths.astype(np.uint64) | np.uint64(1 << 63),
    )
    vocab = _Vocabulary()
    vocab.add(["abcdefghij", "abcdefghijklmnopqrs", "short"])
    table = TokenTable(vocab.ids, "light")
    documents = ["abcdefghij abcdefghiX Xbcdefghij abcdefghijklmnopqrX short shorT"]
    ids, count = encode_chunk(documents + ["abcdefghijklmnopqrs"], table)
    assert ids.tolist() == [1, 0, 0, 0, 3, 0, 0, 2, 0] and count == 7


def test_short_keys_are_the_bytes_and_never_equal_long_keys():
    short, long = ["", "a", "ab", "abcdefgh", "é" * 4], ["abcdefghi", "é" * 5, "x" * 300]
    encoded = [t.encode() for t in short + long]
    lengths = np.array([len(e) for e in encoded])
    data = np.frombuffer(b"".join(encoded) + bytes(8), dtype=np.uint8)
    starts = np.cumsum(lengths) - lengths
    keys, positions, _ = encoding._token_keys(encoding._byte_words(data), starts, lengths)
    # at most 8 bytes: the key is the zero-padded bytes, so its low byte is the first byte
    assert keys[: len(short)].tolist() == [
        int.from_bytes(e.ljust(8, b"\0"), "little") for e in encoded[: len(short)]
    ]
    assert positions.tolist() == [5, 6, 7]
    # longer: low byte 0 and top bit set, which no short key has (only "" has a 0 low byte)
    assert all(k & 0xFF == 0 and k >> 63 == 1 for k in keys[len(short) :].tolist())
    assert len(set(keys.tolist())) == keys.size


@pytest.mark.parametrize("size", [0, 1, 5, 100, 5000])
def test_hash_table_equals_a_dict(size):
    rng = np.random.default_rng(size)
    # structured keys (small integers, shared high bits) crowd buckets; 0 and 1 are edge keys
    keys = np.unique(
        np.concatenate([rng.integers(0, 1 << 63, size, dtype=np.uint64), np.arange(size // 2)])
    ).astype(np.uint64)
    keys = np.unique(np.concatenate([keys, [0, 1]]).astype(np.uint64)) if size else keys
    values = rng.permutation(keys.size)
    table = encoding.HashTable(keys, values)
    queries = np.concatenate(
        [
            keys,
            rng.integers(0, 1 << 63, 1000, dtype=np.uint64),
            np.arange(3 * size + 3, dtype=np.uint64),
        ]
    )
    lookup = dict(zip(keys.tolist(), values.tolist()))
    expected = [lookup.get(q, -1) for q in queries.tolist()]
    positions, found = table.find(queries)
    got = np.full(queries.size, -1)
    got[positions] = found
    assert got.tolist() == expected and np.unique(positions).size == positions.size
    assert table.get(queries, missing=-1).tolist() == expected
    if size >= 100:
        assert table.crowded_keys.size > 0  # the bisected path was exercised
    with pytest.raises(ValueError, match="distinct"):
        encoding.HashTable(np.array([3, 3], dtype=np.uint64), np.array([0, 1]))


def test_compute_overlap_is_the_same_through_both_encodings():
    texts = [t for _, t in stdlib_docstrings()][:400]
    instances = [
        TestInstance(str(k), " ".join(t.split()[:20]), (" ".join(t.split()[20:40]),))
        for k, t in enumerate(texts[::8])
    ]
    documents = texts[1::2] + texts[::16]  # a sixteenth of the instances' texts planted

    def plain_default(text):  # a callable: compute_overlap takes the token-by-token path
        return TOKENIZERS["default"](text)

    fast = compute_overlap(instances, documents, OverlapOptions(n=8, chunk_size=37))
    plain = compute_overlap(
        instances, documents, OverlapOptions(n=8, tokenizer=plain_default, chunk_size=37)
    )
    assert fast.num_tokens == plain.num_tokens and fast.num_documents == plain.num_documents
    assert fast.rows == plain.rows
    assert 0 < fast.summary["default"]["input_binary"] < 1
