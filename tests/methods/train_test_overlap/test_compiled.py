"""The compiled scan (numba) against the numpy path and a tuple-set oracle."""

from __future__ import annotations

import copy
import random
import sys
import warnings
from contextlib import contextmanager

import numpy as np
import pytest

from lightning_info.methods.train_test_overlap import kernels
from lightning_info.methods.train_test_overlap.batches import TextBatch
from lightning_info.methods.train_test_overlap.encoding import HashTable, encode_keys
from lightning_info.methods.train_test_overlap.engine import _bitmap, _overlaps, lower_code_points
from lightning_info.methods.train_test_overlap.functional import (
    TOKENIZERS,
    OverlapIndex,
    OverlapOptions,
    TestInstance,
    compute_overlap,
)
from lightning_info.methods.train_test_overlap.report import UndetectableInstancesWarning

WORDS = ["a", "B", "cat", "Dog", "ZEBRA", "abcdefgh", "abcdefghi", "x" * 17, "Informational"]
WORDS += ["informatiomal", "characteristically" * 3, "ok.", "(b)", "é", "ΣΑΣ", "naïve", "İx"]
SEPARATORS = [" ", "  ", ",", ". ", "\n", "\t", "--", "(", "\x1c", "\u00a0", "\u3000"]


def _document(rng: random.Random, ascii_only: bool) -> str:
    pieces = []
    for _ in range(rng.randint(0, 40)):
        pieces += [rng.choice(WORDS), rng.choice(SEPARATORS)]
    text = "".join(pieces)
    if rng.random() < 0.3:  # a document that starts with a separator, or ends without one
        text = rng.choice(SEPARATORS) + text.rstrip()
    return text.encode("ascii", "ignore").decode() if ascii_only else text


def _documents(seed: int, ascii_only: bool) -> list[str]:
    rng = random.Random(seed)
    documents = [_document(rng, ascii_only) for _ in range(150)]
    # lengths at the 64-byte blocks of the loop, a token on the boundary, a long one at the end
    documents += ["", ",", " ", "a", "a" * 64, "a" * 63 + " b", "x " * 32, "B" * 9, "y" * 129]
    documents += ["w" * 62 + " Informational", "the end Informational"]
    return documents


def _index(tokenizer: str, engine: str, n: int = 3, texts: list[str] | None = None):
    texts = texts or _documents(99, ascii_only=False)[:30]
    instances = [TestInstance(str(k), t, (texts[-k - 1],)) for k, t in enumerate(texts)]
    options = OverlapOptions(n=n, n_values=(1, 2, n), tokenizer=tokenizer, engine=engine)
    with _quiet():
        return OverlapIndex(instances, options)


@contextmanager
def _quiet():
    """Silence the undetectable-instances warning of random test sets."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndetectableInstancesWarning)
        yield


@pytest.mark.parametrize("tokenizer", sorted(TOKENIZERS))
@pytest.mark.parametrize("seed", range(3))
def test_compiled_keys_equal_the_numpy_keys(tokenizer, seed):
    """Every token's key, in order, as ``encode_keys`` gives them (ASCII documents: the byte
    loop; janitor: every document normalised first)."""
    index = _index(tokenizer, "compiled")
    documents = _documents(seed, ascii_only=True)
    groups, left, _ = index.scanner.keyed_groups(documents)
    expected, tokens = encode_keys(documents, index.table)
    assert left == [] and len(groups) == 1 and groups[0].tokens == tokens
    np.testing.assert_array_equal(groups[0].symbols, expected)
    np.testing.assert_array_equal(groups[0].positions, np.arange(len(documents)))


@pytest.mark.parametrize("tokenizer", sorted(TOKENIZERS))
@pytest.mark.parametrize("n", [1, 2, 5])
def test_compiled_counts_and_flags_equal_the_numpy_path(tokenizer, n):
    """Counts at every indexed size, tokens and per-document flags on Unicode, ASCII and marked
    documents (the three groups of ``engine.py``), whole and in a ``TextBatch``."""
    documents = _documents(n, ascii_only=False) + ["marked\x00text Dog", "x\x01 cat Dog"]
    numpy_index, compiled = _index(tokenizer, "numpy", n), _index(tokenizer, "compiled", n)
    want = numpy_index.count_chunk(documents)
    for chunk in (documents, TextBatch.from_texts(documents)):
        got = compiled.count_chunk(chunk)
        assert got.tokens == want.tokens and got.documents == want.documents
        for a, b in zip(got.counts, want.counts):
            np.testing.assert_array_equal(a, b)
        for m in numpy_index.n_values:
            np.testing.assert_array_equal(
                compiled.flag_chunk(chunk, m), numpy_index.flag_chunk(documents, m)
            )
    assert sum(c.sum() for c in want.counts) > 0  # hits to compare, not only zeros


def _tuple_counts(instances, documents, n, tokenize):
    grams = {}
    for instance in instances:
        for part in (instance.input, *instance.references):
            tokens = tokenize(part)
            for gram in zip(*(tokens[i:] for i in range(n))):
                grams[gram] = 0
    for document in documents:
        tokens = tokenize(document)
        for gram in zip(*(tokens[i:] for i in range(n))):
            if gram in grams:
                grams[gram] += 1
    return grams


@pytest.mark.parametrize("tokenizer", sorted(TOKENIZERS))
def test_compiled_counts_equal_a_tuple_set_oracle(tokenizer):
    documents = _documents(7, ascii_only=False)
    rng = random.Random(1)
    instances = [
        TestInstance(str(k), " ".join(rng.choice(documents).split()[:12]), ()) for k in range(25)
    ]
    options = OverlapOptions(n=3, n_values=(), tokenizer=tokenizer, engine="compiled")
    with _quiet():
        index = OverlapIndex(instances, options)
    counts = index.count_chunk(documents).counts[0]
    tokenize = TOKENIZERS[tokenizer]
    oracle = _tuple_counts(instances, documents, 3, tokenize)
    vocab = index.vocab.ids
    key_of = dict(zip(vocab, index.table.key_of_id[list(vocab.values())].tolist()))
    grams = [tuple(key_of[t] for t in gram) for gram in oracle]
    slot = {tuple(g): k for k, g in enumerate(index.indexes[0].grams.tolist())}
    assert {gram: int(counts[slot[g]]) for gram, g in zip(oracle, grams)} == oracle
    assert sum(oracle.values()) > 0


def test_compiled_scan_rejects_windows_whose_hash_collides():
    """With the base 0 every window's hash is its last symbol: windows ending like a test
    n-gram are candidates, and only the symbol-by-symbol check keeps the true ones."""
    with _quiet():
        index = OverlapIndex(
            [TestInstance("a", "x y")], OverlapOptions(n=2, n_values=(), tokenizer="light")
        )
    ngrams = index.indexes[0]
    last = ngrams.grams[:, -1].copy()  # the hashes under base 0
    table = HashTable(last, np.arange(last.size))
    groups, _, _ = index.scanner.keyed_groups(["x y x y", "z z y", "y"])
    counts, flags = np.zeros(len(ngrams), np.int64), np.zeros(3, bool)
    documents, slots = np.zeros(20, np.int64), np.zeros(20, np.int64)
    found = kernels.count_windows(
        groups[0].symbols,
        2,
        np.uint64(0),
        np.uint64(0),
        table.arrays,
        *_bitmap(last),
        np.ascontiguousarray(ngrams.grams),
        *_overlaps(ngrams),
        last,  # the hashes under base 0
        counts,
        index.separator,
        flags,
        documents,
        slots,
    )
    assert counts.tolist() == [2] and flags.tolist() == [True, False, False]
    assert found == 2 and documents[:found].tolist() == [0, 0] and slots[:found].tolist() == [0, 0]


def test_runs_of_matches_are_verified_by_their_last_symbol_exactly():
    """In a run of matched windows each is checked by its last symbol when the n-gram before
    it ends as this one begins (numbered (n-1)-grams); the numbers equal the rows' equality,
    and with colliding hashes no number is shared, so the counts stay the oracle's."""
    rng = random.Random(5)
    words = [f"w{k}" for k in range(6)]
    tests = [" ".join(rng.choice(words) for _ in range(40)) for _ in range(5)]
    documents = [" ".join(rng.choice(words) for _ in range(200)) for _ in range(20)] + tests
    instances = [TestInstance(str(k), t, ()) for k, t in enumerate(tests)]
    options = OverlapOptions(n=4, n_values=(), tokenizer="light", engine="compiled")
    index = OverlapIndex(instances, options)
    ngrams = index.indexes[0]
    prefixes, suffixes, lasts, successors = _overlaps(ngrams)
    rows = ngrams.grams
    np.testing.assert_array_equal(lasts, rows[:, -1])
    has = successors >= 0  # a successor starts as its n-gram ends; none only where none does
    assert (rows[successors[has], :-1] == rows[has, 1:]).all() and has.sum() > 0
    same = (rows[:, None, :-1] == rows[None, :, 1:]).all(axis=2)
    np.testing.assert_array_equal(has, same.any(axis=0))
    np.testing.assert_array_equal(prefixes[:, None] == suffixes[None, :], same)
    oracle = _tuple_counts(instances, documents, 4, TOKENIZERS["light"])
    expected = sum(oracle.values())
    assert index.count_chunk(documents).counts[0].sum() == expected > 0
    colliding = copy.copy(ngrams)
    colliding.hashes = np.zeros_like(ngrams.hashes)  # every (n-1)-gram hash now collides
    prefixes, suffixes, lasts, successors = _overlaps(colliding)
    assert not np.isin(prefixes, suffixes).any() and (successors == -1).all()
    chain = (prefixes, suffixes, lasts, successors, ngrams.hashes)
    index.scanner.indexes[0] = index.scanner.indexes[0][:-5] + chain
    assert index.count_chunk(documents).counts[0].sum() == expected


def test_a_long_token_that_claims_a_test_token_it_is_not_is_rejected():
    """A long token whose hash is a test token's is compared word by word: a test row whose
    words differ (as a hash collision would) gives the rejected key, as in the numpy path."""
    with _quiet():
        index = OverlapIndex(
            [TestInstance("a", "abcdefghij abcdefghijklmnopqrs short")],
            OverlapOptions(n=1, n_values=(), tokenizer="light", engine="compiled"),
        )
    scanner = index.scanner
    documents = ["abcdefghij abcdefghijklmnopqrs short"]
    rejected_key = kernels._REJECTED_KEY ^ (kernels._REJECTED_KEY >> kernels._FOLD)

    def rejected() -> int:
        return int(np.sum(scanner.keyed_groups(documents)[0][0].symbols == rejected_key))

    assert rejected() == 0  # the true tokens keep their keys
    original = scanner.long_rows  # lengths, first words, last words, middle starts, middles
    # a first or last word differs for both long tokens; a middle word only for the 19-byte one
    for row, expected in ((1, 2), (2, 2), (4, 1), (0, 2)):
        tampered = list(original)
        tampered[row] = tampered[row] ^ (1 << 40) if row else tampered[row] + 1
        scanner.long_rows = tuple(tampered)
        assert rejected() == expected, row
    scanner.long_rows = original
    assert rejected() == 0


def test_threads_give_the_same_report_with_the_compiled_scan():
    documents = _documents(3, ascii_only=False) * 4
    instances = [TestInstance(str(k), d, ()) for k, d in enumerate(documents[:20])]
    reports = [
        compute_overlap(
            instances,
            documents,
            OverlapOptions(n=3, chunk_size=17, threads=threads, engine="compiled"),
        )
        for threads in (1, 2)
    ]
    assert reports[0].rows == reports[1].rows


def test_without_numba_auto_takes_the_numpy_path_and_compiled_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba", None)  # `import numba` now raises ImportError
    instances = [TestInstance("a", "the cat sat on the mat")]
    index = OverlapIndex(instances, OverlapOptions(n=2, n_values=(), engine="auto"))
    assert index.scanner is None
    report = compute_overlap(instances, ["a cat sat on"], OverlapOptions(n=2, n_values=()))
    assert report.rows[0]["input_binary"] == 1.0
    with pytest.raises(ImportError, match=r"lightning-info\[overlap\]"):
        OverlapIndex(instances, OverlapOptions(n=2, n_values=(), engine="compiled"))


@pytest.mark.parametrize("seed", range(4))
def test_text_batch_bytes_equal_each_text_encoded(seed):
    """Oracle: each text's UTF-8 bytes (surrogates kept), one after the other, whatever the
    runs of ASCII and non-ASCII texts (first, last, several in a row, none, all)."""
    rng = np.random.default_rng(seed)
    alphabet = ["a", "B c", "", "é", "☃ x", "\ud800", "𝔘", "z\n"]
    texts = [
        "".join(rng.choice(alphabet, size=rng.integers(0, 5))) for _ in range(rng.integers(0, 30))
    ]
    batch = TextBatch.from_texts(texts)
    encoded = [t.encode("utf-8", "surrogatepass") for t in texts]
    assert batch.data.tobytes() == b"".join(encoded)
    assert batch.offsets.tolist() == np.cumsum([0, *map(len, encoded)]).tolist()
    assert batch.texts() == texts


def test_text_batch_round_trip_and_bad_input():
    texts = ["", "abc", "naïve ☃", "\ud800 lone surrogate", "x"]
    batch = TextBatch.from_texts(texts)
    assert len(batch) == 5 and batch.texts() == texts and batch.texts([2]) == ["naïve ☃"]
    with pytest.raises(TypeError, match="must be strings, got int"):
        TextBatch.from_texts(["a", 3])
    data = np.frombuffer(b"abc", np.uint8)
    with pytest.raises(TypeError, match="uint8"):
        TextBatch(np.zeros(3, np.int64), np.array([0, 3]))
    with pytest.raises(TypeError, match="integer"):
        TextBatch(data, np.array([0.0, 3.0]))
    with pytest.raises(ValueError, match="rise from 0 to data.size"):
        TextBatch(data, np.array([0, 2]))
    with pytest.raises(ValueError, match="rise from 0 to data.size"):
        TextBatch(data, np.array([0, 2, 1, 3]))


def test_engine_option_is_checked():
    with pytest.raises(ValueError, match="`engine` must be one of"):
        OverlapOptions(engine="fast")


@pytest.mark.parametrize("engine", ["numpy", "compiled"])
def test_a_lone_surrogate_in_training_or_test_text_is_a_character_like_any_other(engine):
    """Python's ``json`` reads ``"\\ud800"`` into a string; the scan must not fail on it (it
    did: UTF-8 refuses to encode it) and must count it as the tokenizer splits it."""
    instances = [TestInstance("a", "x \ud800y z w"), TestInstance("b", "p q r s")]
    documents = ["x \ud800y z w", "x \ud801y z w", "p q r s t"]
    report = compute_overlap(instances, documents, OverlapOptions(n=4, n_values=(), engine=engine))
    assert [row["input_jaccard"] for row in report.rows] == [1.0, 1.0]
    assert report.num_tokens == 13


UNICODE = list("abcAB .,;()!?'\"-_\t\n") + ["\u00a0", "\x1c", "\x85", "\u2028", "\u3000"]
UNICODE += ["σ", "ς", "é", "e\u0301", "ß", "😀", "Ⱥ", "ÉÉÉÉÉÉÉÉé", "informational", "Ω", "ǅ"]


@pytest.mark.parametrize("tokenizer", ["default", "light"])
def test_non_ascii_documents_are_keyed_code_point_by_code_point_as_numpy_keys_them(tokenizer):
    """Non-ASCII documents take the compiled loop's code-point path (not Python's): the
    keys equal ``encode_keys``'; only marks, ``İ`` and ``Σ`` are left to be normalised."""
    rng = random.Random(tokenizer)
    documents = ["".join(rng.choice(UNICODE) for _ in range(rng.randint(1, 60))) + "é"]
    documents += [
        "".join(rng.choice(UNICODE) for _ in range(rng.randint(0, 60))) + "ß" for _ in range(300)
    ]
    index = _index(tokenizer, "compiled", texts=documents[:20])
    groups, left, _ = index.scanner.keyed_groups(documents)
    assert left == [] and len(groups) == 1  # every document read by the compiled loop
    expected, tokens = encode_keys(documents, index.table)
    assert groups[0].tokens == tokens
    np.testing.assert_array_equal(groups[0].symbols, expected)
    groups, left, _ = index.scanner.keyed_groups(["plain", "Σίσυφος ΣΑΣ", "İstanbul"])
    lowered = [[0], [1, 2]]  # İ and Σ: normalised; "light" does not lower them
    assert [g.positions.tolist() for g in groups] == (
        lowered if tokenizer == "default" else [[0, 1, 2]]
    )
    marked = ["a\x00b é", "x \x01 y"]  # marks: the numpy path's token-by-token encoding
    groups, left, positions = index.scanner.keyed_groups(["plain", *marked])
    assert [g.positions.tolist() for g in groups] == [[0]]
    assert dict(zip(positions.tolist(), left)) == {1: marked[0], 2: marked[1]}


def test_the_code_point_tables_are_pythons():
    table = lower_code_points()
    for code in range(0x110000):
        lowered = chr(code).lower()
        if code in (0x130, 0x3A3):
            assert table[code] == -1
        else:
            assert len(lowered) == 1 and table[code] == ord(lowered), hex(code)
    spaces = [code for code in range(0x80, 0x110000) if chr(code).isspace()]
    assert [code for code in range(0x80, 0x3001) if kernels._unicode_space(code)] == spaces


@pytest.mark.parametrize("tokenizer", ["default", "janitor", TOKENIZERS["light"]])
def test_the_decontamination_matcher_is_the_same_on_both_engines(tokenizer):
    """``DocumentMatcher`` (the flagged and cleaned outputs of ``lightning-info overlap``):
    the compiled hits give the numpy path's counts and document -> test instances map."""
    from lightning_info.methods.train_test_overlap.decontaminate import DocumentMatcher

    documents = _documents(11, ascii_only=False) + ["marked\x00text Dog", "x\x01 cat Dog"]
    texts = _documents(12, ascii_only=False)[:40]
    instances = [TestInstance(str(k), t, (texts[-k - 1],)) for k, t in enumerate(texts)]
    results = []
    for engine in ("numpy", "compiled"):
        options = OverlapOptions(n=3, n_values=(2, 3), tokenizer=tokenizer, engine=engine)
        with _quiet():
            matcher = DocumentMatcher(OverlapIndex(instances, options))
        results.append(matcher.count_chunk(documents))
    (want, want_matches), (got, got_matches) = results
    for a, b in zip(got.counts, want.counts):
        np.testing.assert_array_equal(a, b)
    assert got.tokens == want.tokens and got_matches == want_matches and len(want_matches) > 10
