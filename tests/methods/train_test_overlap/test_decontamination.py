"""Per-document contamination flags against a brute-force n-gram set oracle."""

from __future__ import annotations

import random

import numpy as np
import pytest

from lightning_info.lm.corpus import stdlib_docstrings
from lightning_info.methods.train_test_overlap.functional import (
    OverlapIndex,
    OverlapOptions,
    TestInstance,
    contaminated_documents,
    default_tokenize,
)


def _test_ngrams(instances, n, tokenize):
    grams = set()
    for instance in instances:
        inp = tokenize(instance.input)
        parts = [inp, *(tokenize(r) for r in instance.references)]
        parts += [inp[-(n - 1) :] + tokenize(r)[: n - 1] for r in instance.references]
        for tokens in parts:
            grams |= set(zip(*(tokens[i:] for i in range(n))))
    return grams


def _brute_force(instances, documents, n, tokenize):
    grams = _test_ngrams(instances, n, tokenize)
    return np.array(
        [bool(grams & set(zip(*(tokenize(d)[i:] for i in range(n))))) for d in documents]
    )


@pytest.fixture(scope="module")
def data():
    texts = [doc for _, doc in stdlib_docstrings(min_chars=200, max_chars=1200)][:400]
    rng = random.Random(0)
    tests, pool = texts[:40], texts[40:]
    instances = []
    for k, text in enumerate(tests):
        words = text.split()
        half = len(words) // 2
        instances.append(TestInstance(str(k), " ".join(words[:half]), (" ".join(words[half:]),)))
    documents = []
    for k, text in enumerate(pool):
        if k % 5 == 0:  # a planted copy of part of a test text inside a training document
            planted = rng.choice(tests).split()
            start = rng.randrange(max(1, len(planted) - 20))
            text = text + " " + " ".join(planted[start : start + 20])
        if k % 7 == 0:
            text = "Ünïcödé — " + text  # non-ASCII documents take their own encoding group
        documents.append(text)
    return instances, documents


@pytest.mark.parametrize("engine", ["numpy", "compiled"])
@pytest.mark.parametrize("n", [5, 13])
def test_flags_equal_brute_force_with_helms_tokenizer(data, n, engine):
    instances, documents = data
    options = OverlapOptions(n=n, chunk_size=7, engine=engine)
    flags = contaminated_documents(instances, documents, options)
    expected = _brute_force(instances, documents, n, default_tokenize)
    assert flags.dtype == bool and flags.shape == (len(documents),)
    np.testing.assert_array_equal(flags, expected)
    assert 0 < flags.sum() < len(documents)  # both kinds present: the check is not vacuous


def test_flags_equal_brute_force_with_a_custom_tokenizer(data):
    # a callable tokenizer takes the token-by-token path, where unknown tokens share id 0
    instances, documents = data

    def words(text: str) -> list[str]:
        return text.lower().split()

    options = OverlapOptions(n=8, tokenizer=words, chunk_size=11)
    flags = contaminated_documents(instances, documents, options)
    np.testing.assert_array_equal(flags, _brute_force(instances, documents, 8, words))
    assert flags.any()


def test_flag_chunk_at_another_indexed_size_and_refusals(data):
    instances, documents = data
    index = OverlapIndex(instances, OverlapOptions(n=13, n_values=(6,)))
    np.testing.assert_array_equal(
        index.flag_chunk(documents[:50], n=6),
        _brute_force(instances, documents[:50], 6, default_tokenize),
    )
    with pytest.raises(ValueError, match="not indexed"):
        index.flag_chunk(documents[:5], n=7)
    with pytest.raises(TypeError, match="strings"):
        contaminated_documents(instances, ["text", 3], OverlapOptions(n=5))
    assert contaminated_documents(instances, [], OverlapOptions(n=5)).shape == (0,)
