"""Bad input to the train-test overlap entry points: a clear error naming the argument (or the
file and line) and the fix. Rows are collected by ``tests/test_bad_input.py``; the tests below
check that the valid neighbours of these inputs still work."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from lightning_info.methods.train_test_overlap.batches import TextBatch
from lightning_info.methods.train_test_overlap.callback import TrainTestOverlap
from lightning_info.methods.train_test_overlap.files import (
    iter_training_texts,
    read_test_instances,
    saved_datasets,
)
from lightning_info.methods.train_test_overlap.functional import (
    ChunkCounts,
    NgramIndex,
    OverlapIndex,
    OverlapOptions,
    TestInstance,
    check_overlap_options,
    compute_overlap,
    contaminated_documents,
    default_tokenize,
    janitor_tokenize,
    light_tokenize,
    ngram_metrics,
    reject_bare_text,
    resolve_tokenizer,
    summarize,
    token_overlap,
)
from lightning_info.methods.train_test_overlap.methodologies import (
    llama2_contamination,
    substring_overlap,
)
from lightning_info.methods.train_test_overlap.report import write_report
from lightning_info.methods.train_test_overlap.sharded import (
    json_lines_texts,
    overlap_files_with_dask,
    overlap_with_dask,
    overlap_with_datasets,
)
from lightning_info.methods.train_test_overlap.text_batches import read_text_batches

INSTANCES = [TestInstance("a", "the quick brown fox jumps over the lazy dog", ["near the bank"])]
SMALL = OverlapOptions(n=3, n_values=(3,))


def _write(folder, name: str, data: bytes):
    path = folder / name
    path.write_bytes(data)
    return path


def _test_file(folder, data: bytes):
    return read_test_instances(_write(folder, "bench.jsonl", data))


def _train_file(folder, data: bytes):
    return list(iter_training_texts([str(_write(folder, "train.jsonl", data))]))


def _linked_folder(folder):
    outside = _write(folder, "outside.txt", b"a private file")
    corpus = folder / "corpus"
    corpus.mkdir()
    (corpus / "inside.txt").write_text("the quick brown fox")
    os.symlink(outside, corpus / "link.txt")
    return list(iter_training_texts([str(corpus)]))


def _mixed_counts():
    two = OverlapIndex(INSTANCES, OverlapOptions(n=3, n_values=(2, 3)))
    one = OverlapIndex(INSTANCES, SMALL)
    return two.report(one.count_chunk(["the quick brown fox"]))


def _added_counts():
    two = OverlapIndex(INSTANCES, OverlapOptions(n=3, n_values=(2, 3)))
    one = OverlapIndex(INSTANCES, SMALL)
    return two.count_chunk(["x"]) + one.count_chunk(["x"])


TRUNCATED = b'{"id": "1", "input": "a b", "references": []}\n{"id": "2", "inp'

BAD_INPUT = [
    # files: the message names the file and the line
    pytest.param(
        lambda tmp: _test_file(tmp, TRUNCATED),
        ValueError,
        r"bench\.jsonl, line 2, column \d+: not valid JSON",
        id="test-file-truncated",
    ),
    pytest.param(
        lambda tmp: _test_file(tmp, b"5\n"),
        ValueError,
        r"bench\.jsonl, line 1: expected a JSON object",
        id="test-file-line-not-an-object",
    ),
    pytest.param(
        lambda tmp: _test_file(tmp, b'{"input": "a", "references": "b"}\n'),
        TypeError,
        r"bench\.jsonl, line 1: .*`references` must be a sequence of strings",
        id="test-file-references-a-string",
    ),
    pytest.param(
        lambda tmp: _train_file(tmp, b'{"text": "a b"}\n{"text": "a'),
        ValueError,
        r"train\.jsonl, line 2, column \d+: not valid JSON",
        id="train-file-truncated",
    ),
    pytest.param(
        lambda tmp: _train_file(tmp, b'{"text": null}\n'),
        TypeError,
        r"train\.jsonl, line 1: field 'text' must hold a string",
        id="train-file-text-not-a-string",
    ),
    pytest.param(
        lambda tmp: _train_file(tmp, b"[1]\n"),
        ValueError,
        r"train\.jsonl, line 1: expected a JSON object",
        id="train-file-line-not-an-object",
    ),
    pytest.param(
        lambda tmp: _train_file(tmp, b'{"text": "a"}\n{"text": "\xff"}\n'),
        ValueError,
        r"train\.jsonl, line 2: not UTF-8",
        id="train-file-not-utf8",
    ),
    pytest.param(
        _linked_folder, ValueError, r"link\.txt links to .*outside the folder", id="symlink-out"
    ),
    pytest.param(
        lambda tmp: saved_datasets(str(tmp / "missing")),
        ValueError,
        r"missing is not a dataset saved",
        id="saved-datasets-one-path",
    ),
    pytest.param(
        lambda: json_lines_texts(['{"text": "a"}', '{"te']),
        ValueError,
        r"not valid JSON at column 2 .* of the line '\{\"te'",
        id="dask-lines-truncated",
    ),
    pytest.param(
        lambda: json_lines_texts(['{"text": "a"}', '{"body": "b"}']),
        ValueError,
        r"not an object with a 'text' field: '\{\"body\": \"b\"\}'",
        id="dask-lines-no-field",
    ),
    pytest.param(
        lambda: json_lines_texts(["[1]"]),
        ValueError,
        r"not an object with a 'text' field",
        id="dask-lines-not-an-object",
    ),
    # options
    pytest.param(
        lambda: OverlapOptions(n_values=5), TypeError, r"`n_values` must be a tuple", id="n-values"
    ),
    pytest.param(
        lambda: OverlapOptions(n_values="13"),
        TypeError,
        r"`n_values` must be a tuple",
        id="n-values-string",
    ),
    pytest.param(
        lambda: OverlapOptions(progress="no"), TypeError, r"`progress` must be True", id="progress"
    ),
    # instances
    pytest.param(
        lambda: compute_overlap(INSTANCES[0], ["x"], SMALL),
        TypeError,
        r"`instances` must be a sequence of TestInstance; wrap",
        id="one-instance-not-a-list",
    ),
    pytest.param(
        lambda: compute_overlap(INSTANCES * 2, ["x"], SMALL),
        ValueError,
        r"unique within a benchmark; repeated: default/a",
        id="duplicate-ids",
    ),
    pytest.param(
        lambda: contaminated_documents([*INSTANCES, INSTANCES[0]], ["x"], SMALL),
        ValueError,
        r"repeated: default/a",
        id="duplicate-ids-decontamination",
    ),
    pytest.param(lambda: TestInstance(None, "x"), TypeError, r"`id` must be a string", id="id"),
    pytest.param(
        lambda: TestInstance(True, "x"), TypeError, r"`id` must be a string", id="id-bool"
    ),
    pytest.param(
        lambda: TestInstance("a", "x", (), None),
        TypeError,
        r"`benchmark` must be a string",
        id="benchmark",
    ),
    # saved state of another configuration
    pytest.param(
        _mixed_counts, ValueError, r"do not come from this index", id="counts-of-another-index"
    ),
    pytest.param(
        _added_counts, ValueError, r"two different overlap indexes", id="add-counts-of-two-indexes"
    ),
    # numbers
    pytest.param(
        lambda: OverlapIndex(INSTANCES, OverlapOptions(n=3, n_values=(1,))).flag_chunk(
            ["the"], n=True
        ),
        TypeError,
        r"`n` must be an int",
        id="flag-chunk-n-bool",
    ),
    pytest.param(
        lambda: OverlapIndex(INSTANCES, SMALL).flag_chunk(["the"], n=3.0),
        TypeError,
        r"`n` must be an int",
        id="flag-chunk-n-float",
    ),
    pytest.param(lambda: ngram_metrics([1], 0), ValueError, r"`n` must be >= 1", id="metrics-n-0"),
    pytest.param(
        lambda: ngram_metrics([1, 0], True), TypeError, r"`n` must be an int", id="metrics-n-bool"
    ),
    pytest.param(
        lambda: ngram_metrics([1, 2], 2, -1),
        ValueError,
        r"`max_frequency` must be >= 0",
        id="metrics-max-frequency-negative",
    ),
    pytest.param(
        lambda: token_overlap([1, 2], 1.5), TypeError, r"`n` must be an int", id="token-n-float"
    ),
    # other methodologies
    pytest.param(
        lambda: substring_overlap(["a" * 60], ["a" * 60], seed=float("nan")),
        TypeError,
        r"`seed` must be an int",
        id="substring-seed-nan",
    ),
    pytest.param(
        lambda: substring_overlap(["text", None], ["text"]),
        TypeError,
        r"`texts\[1\]` must be a string",
        id="substring-text-none",
    ),
    pytest.param(
        lambda: llama2_contamination(["a b c"], ["a b c"], clean_below=0.9, dirty_above=0.1),
        ValueError,
        r"`clean_below` \(0.9\) must not exceed `dirty_above`",
        id="llama2-thresholds-crossed",
    ),
    pytest.param(
        lambda: llama2_contamination(["a b"], ["a b"], min_length=True),
        TypeError,
        r"`min_length` must be an int",
        id="llama2-min-length-bool",
    ),
    pytest.param(
        lambda: llama2_contamination([], ["a b"]),
        ValueError,
        r"`texts` is empty",
        id="llama2-empty",
    ),
    # the callback checks its arguments when built
    pytest.param(
        lambda: TrainTestOverlap(splits="val"), TypeError, r"pass \['val'\]", id="callback-splits"
    ),
    pytest.param(
        lambda: TrainTestOverlap(train_texts="one text", test_instances=INSTANCES),
        TypeError,
        r"`train_texts` must be an iterable of strings",
        id="callback-train-texts-string",
    ),
    pytest.param(
        lambda: TrainTestOverlap(train_texts=["x"], test_instances=INSTANCES * 2),
        ValueError,
        r"repeated: default/a",
        id="callback-duplicate-ids",
    ),
    pytest.param(
        lambda: TrainTestOverlap(lines="no", train_texts=["x"], test_instances=INSTANCES),
        TypeError,
        r"`lines` must be True or False",
        id="callback-lines-string",
    ),
]


def test_a_test_file_with_a_byte_order_mark_reads(tmp_path):
    record = {"id": "1", "input": "a b", "references": ["c"]}
    path = _write(tmp_path, "bench.jsonl", b"\xef\xbb\xbf" + json.dumps(record).encode() + b"\n")
    assert read_test_instances(path) == [TestInstance("1", "a b", ("c",), "bench")]


def test_a_training_file_with_a_byte_order_mark_reads(tmp_path):
    _write(tmp_path, "train.jsonl", b'\xef\xbb\xbf{"text": "a b"}\n{"text": "c"}\n')
    assert list(iter_training_texts([str(tmp_path / "train.jsonl")])) == ["a b", "c"]


def test_dask_json_lines_with_a_byte_order_mark_read():
    assert json_lines_texts(['\ufeff{"text": "a"}', "", '{"text": "b"}']) == ["a", "b"]


def test_a_symlink_inside_the_folder_is_read(tmp_path):
    corpus = tmp_path / "corpus"
    (corpus / "sub").mkdir(parents=True)
    (corpus / "sub" / "a.txt").write_text("inside")
    os.symlink(corpus / "sub" / "a.txt", corpus / "b.txt")
    assert list(iter_training_texts([str(corpus)])) == ["inside", "inside"]


def test_one_path_is_read_as_a_list_of_one(tmp_path):
    _write(tmp_path, "train.jsonl", b'{"text": "a b"}\n')
    path = tmp_path / "train.jsonl"
    assert list(iter_training_texts(str(path))) == list(iter_training_texts([str(path)]))
    assert list(iter_training_texts(path)) == ["a b"]


def test_crossed_llama2_thresholds_may_meet():
    result = llama2_contamination(
        ["a b c"], ["a b c"], min_length=2, clean_below=0.5, dirty_above=0.5
    )
    assert result == [{"contamination": 1.0, "label": "dirty", "detectable": True}]


def _report():
    return compute_overlap(INSTANCES, ["the quick brown fox"], SMALL)


def _file_as_parent(folder):
    _write(folder, "taken", b"a file")
    return write_report(_report(), folder / "taken" / "overlap")


def _edited_counts(change):
    index = OverlapIndex(INSTANCES, SMALL)
    counts = index.count_chunk(["the quick brown fox"])
    return index.report(change(counts))


def _negative(counts):
    counts.counts[0][0] = -1
    return counts


def _floats(counts):
    return ChunkCounts([c + 0.5 for c in counts.counts], counts.documents, counts.tokens)


BAD_INPUT += [
    pytest.param(
        lambda: overlap_with_datasets(INSTANCES, ["the quick brown fox"], SMALL),
        TypeError,
        r"`dataset` must be a datasets.Dataset, got list; .*compute_overlap",
        id="datasets-list-of-texts",
    ),
    pytest.param(
        lambda: overlap_with_datasets(INSTANCES, {"text": ["the quick brown fox"]}, SMALL),
        TypeError,
        r"`dataset` must be a datasets.Dataset, got dict",
        id="datasets-dict-of-columns",
    ),
    pytest.param(
        lambda: overlap_with_dask(INSTANCES, ["the quick brown fox"], SMALL),
        TypeError,
        r"`bag` must be a dask.bag.Bag, got list; .*from_sequence",
        id="dask-list-of-texts",
    ),
    pytest.param(
        lambda: write_report(_report().to_dict(), "overlap"),
        TypeError,
        r"`report` must be an OverlapReport .*got dict",
        id="write-report-dict",
    ),
    pytest.param(
        lambda: write_report(_report(), None),
        TypeError,
        r"`path` must be a non-empty file stem or folder .*got None",
        id="write-report-path-none",
    ),
    pytest.param(
        lambda: write_report(_report(), ""),
        TypeError,
        r"`path` must be a non-empty file stem or folder .*got ''",
        id="write-report-path-empty",
    ),
    pytest.param(
        _file_as_parent,
        ValueError,
        r"cannot write the report under .*taken: it is a file, not a folder",
        id="write-report-parent-is-a-file",
    ),
    pytest.param(
        lambda: OverlapIndex(INSTANCES, SMALL).empty_counts() + 5,
        TypeError,
        r"unsupported operand type\(s\) for \+: 'ChunkCounts' and 'int'",
        id="chunk-counts-plus-int",
    ),
    pytest.param(
        lambda: _edited_counts(_negative),
        ValueError,
        r"`total.counts\[0\]` holds a negative count \(-1\)",
        id="chunk-counts-negative",
    ),
    pytest.param(
        lambda: _edited_counts(_floats),
        TypeError,
        r"`total.counts\[0\]` must hold integer counts, got dtype float64",
        id="chunk-counts-float",
    ),
    pytest.param(
        lambda: _edited_counts(lambda c: ChunkCounts(c.counts, -1, c.tokens)),
        ValueError,
        r"`total.documents` must be >= 0, got -1",
        id="chunk-counts-negative-documents",
    ),
    pytest.param(
        lambda: OverlapIndex(INSTANCES, SMALL).report({"counts": []}),
        TypeError,
        r"`total` must be a ChunkCounts .*got dict",
        id="chunk-counts-dict",
    ),
]

BAD_INPUT += [
    pytest.param(
        lambda: check_overlap_options({"n": 5}),
        TypeError,
        r"`options` must be an OverlapOptions, got dict; pass e.g. OverlapOptions\(n=5",
        id="check-options-dict",
    ),
    pytest.param(
        lambda: reject_bare_text("a document", "documents"),
        TypeError,
        r"`documents` must be an iterable of strings, got a single str .*wrap it in a list",
        id="reject-bare-text-str",
    ),
    pytest.param(
        lambda: resolve_tokenizer(["default"]),
        ValueError,
        r"`tokenizer` must be one of \['character', 'default', 'janitor', 'light'\] or a "
        r"callable, got \['default'\]",
        id="resolve-tokenizer-list",
    ),
    pytest.param(
        lambda: resolve_tokenizer("Default"),
        ValueError,
        r"`tokenizer` must be one of .* got 'Default'",
        id="resolve-tokenizer-wrong-case",
    ),
    pytest.param(
        lambda: default_tokenize(None),
        AttributeError,
        r"'NoneType' object has no attribute 'lower'",
        id="default-tokenize-none",
    ),
    pytest.param(
        lambda: default_tokenize(b"a b"),
        TypeError,
        r"cannot use a string pattern on a bytes-like object",
        id="default-tokenize-bytes",
    ),
    pytest.param(
        lambda: light_tokenize(3),
        AttributeError,
        r"'int' object has no attribute 'split'",
        id="light-tokenize-int",
    ),
    pytest.param(
        lambda: janitor_tokenize(["a b"]),
        AttributeError,
        r"'list' object has no attribute 'lower'",
        id="janitor-tokenize-list",
    ),
    pytest.param(
        lambda: NgramIndex([np.array([1.5, 2.7, 3.2])], 2),
        TypeError,
        r"`sequences\[0\]` must be a 1-D array of integer ids, got shape \(3,\) and dtype "
        r"float64",
        id="ngram-index-float-ids",
    ),
    pytest.param(
        lambda: NgramIndex(np.array([1, 2, 3]), 2),
        TypeError,
        r"`sequences` must be a list of 1-D integer arrays .*wrap a single sequence in a list",
        id="ngram-index-one-bare-sequence",
    ),
    pytest.param(
        lambda: NgramIndex([["a", "b"]], 2),
        TypeError,
        r"`sequences\[0\]` must be a 1-D array of integer ids.*map tokens to ids first",
        id="ngram-index-token-strings",
    ),
    pytest.param(
        lambda: NgramIndex([np.array([1, 2, 3])], 2, seed=1.5),
        TypeError,
        r"`seed` must be an int, got 1.5",
        id="ngram-index-float-seed",
    ),
    pytest.param(
        lambda: NgramIndex([np.array([1, 2, 3])], True),
        TypeError,
        r"`n` must be an int, got True",
        id="ngram-index-bool-n",
    ),
    pytest.param(
        lambda: summarize({"benchmark": "a", "input_binary": 1.0}),
        TypeError,
        r"`rows` must be a list of per-instance dicts, got dict; wrap a single row",
        id="summarize-one-row-dict",
    ),
    pytest.param(
        lambda: summarize([{"input_binary": 1.0}]),
        ValueError,
        r"`rows\[0\]` must be a dict with a 'benchmark' key",
        id="summarize-row-without-benchmark",
    ),
    pytest.param(
        lambda: summarize(
            [{"benchmark": "a", "id": "q1", "x": 1.0}, {"benchmark": "a", "id": "q2"}]
        ),
        ValueError,
        r"benchmark 'a': rows \['q2'\] lack the metric 'x' of its first row",
        id="summarize-rows-with-other-metrics",
    ),
]

# the compiled scan, batches of bytes and reading them from files
BAD_INPUT += [
    pytest.param(
        lambda: OverlapOptions(engine="numba"),
        ValueError,
        r"`engine` must be one of \('auto', 'compiled', 'numpy'\), got 'numba'",
        id="options-engine-unknown",
    ),
    pytest.param(
        lambda: TextBatch.from_texts(["a b", None]),
        TypeError,
        r"training documents must be strings, got NoneType",
        id="text-batch-not-strings",
    ),
    pytest.param(
        lambda: TextBatch(np.frombuffer(b"ab", np.uint8), np.array([0, 3])),
        ValueError,
        r"`offsets` must rise from 0 to data.size .*got 0 \.\.\. 3 for 2 bytes",
        id="text-batch-offsets-past-the-data",
    ),
    pytest.param(
        lambda: TextBatch(np.frombuffer(b"ab", np.uint8), np.array([False, True])),
        TypeError,
        r"`offsets` must be a 1-D integer array of documents \+ 1 positions, got bool",
        id="text-batch-offsets-bool",
    ),
    pytest.param(
        lambda tmp: list(read_text_batches([str(_write(tmp, "train.jsonl", b'{"text": 5}\n'))])),
        TypeError,
        r"train\.jsonl, line 1: field 'text' must hold a string, got 5",
        id="text-batches-number-field",
    ),
    pytest.param(
        lambda tmp: list(read_text_batches([str(tmp)], engine="pyarrow")),
        ValueError,
        r"`engine` must be one of \('auto', 'compiled', 'numpy'\), got 'pyarrow'",
        id="text-batches-engine-unknown",
    ),
    pytest.param(
        lambda tmp: list(read_text_batches([str(tmp)], batch_size=0)),
        ValueError,
        r"`batch_size` must be >= 1, got 0",
        id="text-batches-batch-size-zero",
    ),
    pytest.param(
        lambda tmp: list(read_text_batches([str(_write(tmp, "train.txt.zst", b"x"))])),
        ValueError,
        r"only JSON lines are read .*decompress it",
        id="text-batches-compressed-text",
    ),
    pytest.param(
        lambda tmp: overlap_files_with_dask(INSTANCES, [str(tmp / "missing")], SMALL),
        FileNotFoundError,
        r"training path .*missing does not exist",
        id="dask-files-missing",
    ),
    pytest.param(
        lambda tmp: overlap_files_with_dask(
            INSTANCES, [str(_write(tmp, "t.jsonl", b'{"a": 1}\n'))], SMALL, text_field=3
        ),
        TypeError,
        r"`text_field` must be a field name",
        id="dask-files-text-field-int",
    ),
]
