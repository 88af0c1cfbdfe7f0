"""Training text read as TextBatches (pyarrow's JSON reader) against the Python reader."""

from __future__ import annotations

import gzip
import json
import warnings

import numpy as np
import pytest

from lightning_info.lm.corpus import stdlib_docstrings
from lightning_info.methods.train_test_overlap.batches import TextBatch
from lightning_info.methods.train_test_overlap.files import (
    DocumentText,
    iter_training_texts,
    output_file,
)
from lightning_info.methods.train_test_overlap.functional import (
    OverlapOptions,
    TestInstance,
    compute_overlap,
    contaminated_documents,
)
from lightning_info.methods.train_test_overlap.report import UndetectableInstancesWarning
from lightning_info.methods.train_test_overlap.text_batches import read_text_batches

TEXTS = [t for _, t in stdlib_docstrings()][:400] + ["naïve — “quoted”", "", "ΣΑΣ final"]
INSTANCES = [
    TestInstance(str(k), " ".join(t.split()[:15]), (" ".join(t.split()[15:30]),))
    for k, t in enumerate(TEXTS[:300:10])
] + [TestInstance("short", "too short")]  # undetectable at n = 6
DOCUMENTS = TEXTS[1::2] + TEXTS[:300:20]
KWARGS = dict(n=6, n_values=(4, 6))


def _write(path, records) -> None:
    lines = "".join(json.dumps(record) + "\n" for record in records).encode()
    with output_file(path) as handle:
        handle.write(lines)


def _texts(batches) -> list[str]:
    return [text for batch in batches for text in batch.texts()]


@pytest.mark.parametrize("engine", ["compiled", "numpy"])
@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".jsonl.zst", ".ndjson.gz"])
def test_batches_hold_the_python_readers_documents_plain_and_compressed(tmp_path, suffix, engine):
    path = tmp_path / f"corpus{suffix}"
    _write(path, [{"id": k, "text": t, "n": [k]} for k, t in enumerate(DOCUMENTS)])
    if suffix.endswith(".gz"):  # a real gzip file, which Python's own module reads back
        with gzip.open(path) as handle:
            assert json.loads(handle.readline())["text"] == DOCUMENTS[0]
    batches = list(read_text_batches([str(path)], block_bytes=1 << 14, engine=engine))
    assert len(batches) > 1 and all(isinstance(b, TextBatch) for b in batches)
    assert _texts(batches) == DOCUMENTS == list(iter_training_texts([str(path)]))


def test_the_report_and_flags_from_batches_equal_those_from_strings(tmp_path):
    path = tmp_path / "corpus.jsonl.zst"
    _write(path, [{"text": t} for t in DOCUMENTS])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndetectableInstancesWarning)
        for engine in ("compiled", "numpy"):
            options = OverlapOptions(**KWARGS, engine=engine)
            expected = compute_overlap(INSTANCES, DOCUMENTS, options)
            report = compute_overlap(INSTANCES, read_text_batches([str(path)]), options)
            assert report.rows == expected.rows and report.num_tokens == expected.num_tokens
            assert report.undetectable == [{"benchmark": "default", "id": "short"}]
            flags = contaminated_documents(INSTANCES, read_text_batches(path), options)
            expected_flags = contaminated_documents(INSTANCES, DOCUMENTS, options)
            np.testing.assert_array_equal(flags, expected_flags)
            assert 0 < flags.sum() < len(DOCUMENTS)


@pytest.mark.parametrize(
    "case",
    ["repeated key", "lone surrogate", "line past the block", "missing field", "blank lines"],
)
@pytest.mark.parametrize("engine", ["compiled", "numpy"])
def test_what_pyarrow_does_not_read_goes_on_with_the_python_reader(tmp_path, case, engine):
    """The documents stay those of the Python reader, from the record where pyarrow stops."""
    lines = [json.dumps({"text": t}) for t in DOCUMENTS[:50]]
    if case == "repeated key":
        lines[30] = '{"text": "first", "text": "the last one counts"}'
    elif case == "lone surrogate":
        lines[30] = '{"text": "a \\ud800 b"}'
    elif case == "line past the block":
        lines[30] = json.dumps({"text": "word " * 5000})
    elif case == "blank lines":
        lines[30] = "  \t"
    path = tmp_path / "corpus.jsonl"
    path.write_text("\ufeff" + "\n".join(lines) + "\n")  # and a byte-order mark
    if case == "missing field":
        lines[30] = '{"body": "no text"}'
        path.write_text("\n".join(lines) + "\n")
        with pytest.raises(ValueError, match=r"corpus.jsonl, line 31"):
            list(read_text_batches([str(path)], block_bytes=1 << 12, engine=engine))
        return
    batches = list(read_text_batches([str(path)], block_bytes=1 << 12, engine=engine))
    assert _texts(batches) == list(iter_training_texts([str(path)]))


def test_a_bad_line_or_bad_utf8_is_refused_naming_file_and_line(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(b'{"text": "a"}\n{"text": nope}\n')
    with pytest.raises(ValueError, match=r"corpus.jsonl, line 2, column 10: not valid JSON"):
        list(read_text_batches([str(path)]))
    path.write_bytes(b'{"text": "a"}\n{"text": "caf\xe9"}\n')
    with pytest.raises(ValueError, match=r"corpus.jsonl, line 2: not UTF-8"):
        list(read_text_batches([str(path)]))


def test_other_formats_and_fields_are_batched_from_their_records(tmp_path):
    path = tmp_path / "corpus.jsonl.gz"
    _write(path, [{"q": t[:40], "a": t[40:]} for t in DOCUMENTS])
    text = DocumentText(template="{q}|{a}")
    batches = list(read_text_batches([str(path)], text, batch_size=64))
    assert [len(b) for b in batches[:-1]] == [64] * (len(batches) - 1)
    assert _texts(batches) == [t[:40] + "|" + t[40:] for t in DOCUMENTS]
    (tmp_path / "notes.txt").write_text("one\ntwo\n\nthree\n")
    assert _texts(read_text_batches(tmp_path / "notes.txt", lines=True)) == ["one", "two", "three"]


def test_a_compressed_file_that_is_not_json_lines_is_refused(tmp_path):
    (tmp_path / "notes.txt.gz").write_bytes(gzip.compress(b"text"))
    with pytest.raises(ValueError, match="only JSON lines are read"):
        list(read_text_batches([str(tmp_path / "notes.txt.gz")]))


def test_read_text_batches_refuses_bad_arguments(tmp_path):
    with pytest.raises(TypeError, match="batch_size"):
        list(read_text_batches([str(tmp_path)], batch_size=2.0))
    with pytest.raises(ValueError, match="block_bytes"):
        list(read_text_batches([str(tmp_path)], block_bytes=10))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        list(read_text_batches([str(tmp_path / "missing.jsonl")]))
