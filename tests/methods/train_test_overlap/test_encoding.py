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
    TestInstance,
    _Vocabulary,
    compute_overlap,
)

# Separators, cased letters whose lowering depends on context (final sigma) or grows (dotted I),
# combining marks, astral characters, and the Unicode whitespace that str.split() knows.
ALPHABET = list("abcAB .,;()!?'\"-_\t\n") + [
    "\u00a0", "\x1c", "\x1f", "\x85", "\u2028", "\u3000",
    "Σ", "σ", "ς", "İ", "é", "e\u0301", "ß", "😀",
]  # fmt: skip


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


def test_hash_hits_are_verified_byte_by_byte(monkeypatch):
    vocab = _Vocabulary()
    vocab.add(["abc"])
    table = TokenTable(vocab.ids, "light")
    # every span of the same length now shares one hash: only the bytes can tell them apart
    monkeypatch.setattr(
        encoding, "_span_hashes", lambda data, starts, ends: (ends - starts).astype(np.uint64)
    )
    table.hashes = np.array([3], dtype=np.uint64)
    table.index = encoding.SortedHashes(table.hashes)
    ids, _ = encode_chunk(["abd abc xyz abc"], table)
    assert ids.tolist() == [0, 1, 0, 1, 0]


def test_compute_overlap_is_the_same_through_both_encodings():
    texts = [t for _, t in stdlib_docstrings()][:400]
    instances = [
        TestInstance(str(k), " ".join(t.split()[:20]), (" ".join(t.split()[20:40]),))
        for k, t in enumerate(texts[::8])
    ]
    documents = texts[1::2] + texts[::16]  # a sixteenth of the instances' texts planted

    def plain_default(text):  # a callable: compute_overlap takes the token-by-token path
        return TOKENIZERS["default"](text)

    fast = compute_overlap(instances, documents, n=8, chunk_size=37)
    plain = compute_overlap(instances, documents, n=8, tokenizer=plain_default, chunk_size=37)
    assert fast.num_tokens == plain.num_tokens and fast.num_documents == plain.num_documents
    assert fast.rows == plain.rows
    assert 0 < fast.summary["default"]["input_binary"] < 1
