"""Streaming a corpus from disk with bounded memory, and sharded scans (datasets.map, Dask)."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from lightning_info.core.dask_cluster import local_cluster
from lightning_info.lm.corpus import stdlib_docstrings
from lightning_info.methods.train_test_overlap.files import iter_training_texts, output_file
from lightning_info.methods.train_test_overlap.functional import (
    OverlapOptions,
    TestInstance,
    compute_overlap,
)
from lightning_info.methods.train_test_overlap.sharded import (
    overlap_files_with_dask,
    overlap_with_dask,
    overlap_with_datasets,
)

TEXTS = [t for _, t in stdlib_docstrings()][:600]
INSTANCES = [
    TestInstance(str(k), " ".join(t.split()[:15]), (" ".join(t.split()[15:30]),))
    for k, t in enumerate(TEXTS[::10])
]
DOCUMENTS = TEXTS[1::2] + TEXTS[::20]  # half of the instances' texts planted
KWARGS = dict(n=6, n_values=(4, 6))


@pytest.fixture(scope="module")
def expected():
    return compute_overlap(INSTANCES, DOCUMENTS, OverlapOptions(**KWARGS))


def _write_json_lines(path, documents, repeats=1):
    with path.open("w") as handle:
        for _ in range(repeats):
            for text in documents:
                handle.write(json.dumps({"text": text, "source": "stdlib"}) + "\n")


def test_json_lines_and_line_files_stream_the_same_documents(tmp_path, expected):
    _write_json_lines(tmp_path / "corpus.jsonl", DOCUMENTS)
    texts = list(iter_training_texts([str(tmp_path / "corpus.jsonl")]))
    assert texts == DOCUMENTS
    report = compute_overlap(
        INSTANCES, iter_training_texts([str(tmp_path / "corpus.jsonl")]), OverlapOptions(**KWARGS)
    )
    assert report.rows == expected.rows
    lined = "a\r\nb\x0cc\u2028d\n\n e \n"
    (tmp_path / "lines.txt").write_text(lined, newline="")
    streamed = list(iter_training_texts([str(tmp_path / "lines.txt")], lines=True))
    assert streamed == [line for line in lined.splitlines() if line.strip()]
    with pytest.raises(ValueError, match="no field 'body'"):
        list(iter_training_texts([str(tmp_path / "corpus.jsonl")], text_field="body"))


def _scan_peak(path) -> tuple[int, int]:
    tracemalloc.start()
    try:
        documents = iter_training_texts([str(path)])
        report = compute_overlap(INSTANCES, documents, OverlapOptions(chunk_size=200, **KWARGS))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return report.num_documents, peak


def test_a_streamed_scan_holds_one_chunk_not_the_corpus(tmp_path):
    sizes, peaks = [], []
    for repeats in (20, 100):
        path = tmp_path / f"corpus{repeats}.jsonl"
        _write_json_lines(path, DOCUMENTS, repeats=repeats)  # about 1.8 and 9 MB
        documents, peak = _scan_peak(path)
        assert documents == repeats * len(DOCUMENTS)
        sizes.append(path.stat().st_size)
        peaks.append(peak)
    # five times the corpus, the same peak: a chunk's text and arrays, and the index
    assert peaks[1] < 1.2 * peaks[0] and peaks[1] < sizes[1] / 3, (peaks, sizes)


def test_datasets_map_shards_give_the_serial_report(tmp_path, expected):
    from datasets import Dataset, load_from_disk

    Dataset.from_dict({"text": DOCUMENTS}).save_to_disk(str(tmp_path / "corpus"))
    on_disk = load_from_disk(str(tmp_path / "corpus"))  # memory-mapped Arrow
    report = overlap_with_datasets(
        INSTANCES, on_disk, OverlapOptions(chunk_size=50, progress=False, **KWARGS), num_proc=2
    )
    assert report.rows == expected.rows
    assert (report.num_documents, report.num_tokens) == (
        expected.num_documents,
        expected.num_tokens,
    )
    with pytest.raises(ValueError, match="no column 'body'"):
        overlap_with_datasets(INSTANCES, on_disk, OverlapOptions(**KWARGS), text_field="body")


def test_dask_workers_give_the_serial_report(tmp_path, expected):
    bag_module = pytest.importorskip("dask.bag")
    distributed = pytest.importorskip("distributed")
    for part in range(3):
        _write_json_lines(tmp_path / f"part{part}.jsonl", DOCUMENTS[part::3])
    bag = bag_module.read_text(str(tmp_path / "part*.jsonl")).map(json.loads).pluck("text")
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster),
    ):
        report = overlap_with_dask(INSTANCES, bag, OverlapOptions(**KWARGS))
    assert report.rows == expected.rows
    assert report.num_documents == expected.num_documents


def test_dask_file_blocks_give_the_serial_report(tmp_path, expected):
    """Byte blocks of plain JSON lines (several per file, one with a record pyarrow refuses),
    a compressed file streamed whole, on two worker processes = one process's report."""
    distributed = pytest.importorskip("distributed")
    _write_json_lines(tmp_path / "part0.jsonl", DOCUMENTS[0::3])
    lines = [json.dumps({"text": text}) for text in DOCUMENTS[1::3]]
    lines[5] = '{"text": "ignored", ' + json.dumps({"text": DOCUMENTS[1::3][5]})[1:]
    (tmp_path / "part1.jsonl").write_text("\n".join(lines) + "\n")  # a repeated key: the last
    with output_file(tmp_path / "part2.jsonl.zst") as handle:
        handle.write("".join(json.dumps({"text": t}) + "\n" for t in DOCUMENTS[2::3]).encode())
    options = OverlapOptions(**KWARGS)
    serial = overlap_files_with_dask(INSTANCES, [str(tmp_path)], options, blocksize=20_000)
    assert serial.rows == expected.rows and serial.num_documents == expected.num_documents
    with (
        local_cluster(n_workers=2, threads_per_worker=1, processes=True) as cluster,
        distributed.Client(cluster),
    ):
        report = overlap_files_with_dask(INSTANCES, [str(tmp_path)], options, blocksize=20_000)
    assert report.rows == expected.rows
    assert report.num_tokens == expected.num_tokens


def test_a_bad_line_in_a_dask_block_is_refused_naming_the_block(tmp_path):
    pytest.importorskip("dask")
    (tmp_path / "bad.jsonl").write_text('{"text": "a b c"}\n{"text": nope}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl, block 0 of 1, line 2.*not valid JSON"):
        overlap_files_with_dask(INSTANCES, [str(tmp_path / "bad.jsonl")], OverlapOptions(**KWARGS))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no training files"):
        overlap_files_with_dask(INSTANCES, [str(tmp_path / "empty")], OverlapOptions(**KWARGS))
