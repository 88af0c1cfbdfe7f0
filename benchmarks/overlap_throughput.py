"""Throughput of exact train-test n-gram overlap counting on a multi-million-token corpus, on a CPU.

The corpus is built from the docstrings of Python's standard library
(:func:`~lightning_info.lm.corpus.stdlib_docstrings`), repeated with ``--perturb`` of the
words of each copy replaced by random words of the corpus (seeded), until it holds ``--tokens``
tokens of HELM's default tokenizer. The test set is ``--instances`` held-out docstrings split
into an input (first half) and a reference (second half), a quarter of them planted in the
corpus. Counting at ``n = --n``:

- ``compiled (end to end)``:
  :func:`~lightning_info.methods.train_test_overlap.functional.compute_overlap` with
  ``n_values=()`` and ``engine="compiled"`` in one thread: the compiled scan
  (:mod:`~lightning_info.methods.train_test_overlap.kernels`: one pass over each chunk's bytes
  into exact token keys, one over the keys: rolling hash, bit map, table, verification), the
  test side and the metrics;
- ``numpy (end to end)``: the same with ``engine="numpy"`` (the vectorised numpy path, the
  fallback without numba);
- ``compiled, k threads (end to end)``: the compiled scan with ``threads=--threads`` (the loops
  release the GIL; the naive version is single-threaded, so compare it with the first row);
- ``token by token (end to end)``: the same with HELM's tokenizer passed as a callable, so every
  document is tokenised into Python strings and mapped to ids one token at a time;
- ``fast (match only)``: the same counting on token ids prepared beforehand (one
  ``NgramIndex.count`` call per chunk): numpy ``uint64`` hash by doubling + ``HashTable`` +
  exact verification;
- ``naive tuples``: tokenise, slide a window of Python tuples over each document and look it up
  in a ``dict`` of the test n-grams (the obvious implementation, HELM's own approach);
- ``nltk ngrams``: the same with ``nltk.ngrams`` windows, when ``nltk`` is importable.

All methods must produce the same counts (checked); times are the median over ``--repeats``
runs of ``time.perf_counter``, corpus construction excluded. Throughput is tokens per second;
ratios are against ``naive tuples``.

Streaming (``--stream-mb``, one or more sizes): the corpus is written to a JSON-lines file of that
many MB, also compressed (``.jsonl.gz``, ``.jsonl.zst``), and each is scanned from disk in one
thread by ``compute_overlap`` over
:func:`~lightning_info.methods.train_test_overlap.text_batches.read_text_batches` (the compiled
JSON reader and scan; one more row: pyarrow's reader and the numpy path), ``--stream-repeats``
runs each, the median; MB/s counts the uncompressed JSON lines. The table gives the time, MB/s
and the peak resident memory of the scan beyond what the process held before it (``VmHWM``
after resetting it, Linux): the same at every size if memory is bounded by a block. With
``--num-proc`` the largest file is also saved as a ``datasets`` dataset and scanned by
``datasets.map`` in that many processes.

Dask (``--dask-gb``): a JSON-lines corpus of that many GB is written under ``--stream-dir``
(files of ``--dask-file-mb`` MB, each line from one of several blocks of the corpus shuffled with
their own seeds, written over and over: it can be larger than the machine's memory) and counted
by :func:`~lightning_info.methods.train_test_overlap.sharded.overlap_files_with_dask` on a
``distributed.LocalCluster`` of each of ``--dask-workers`` worker processes (one thread each):
each file cut into blocks of ``--dask-blocksize`` at line ends, read, parsed and counted by the
workers. The table gives the time, MB/s, tokens/s and the peak resident memory of each worker
process (its ``VmHWM``); every worker count must give the same report (checked). The corpus is
deleted afterwards.

Here ``--threads`` is the thread count of the threaded row (default 2), not torch's: no torch
kernel runs. ``--quick``: 200k tokens, one repeat. ``--json PATH`` also writes the results with
the header (``benchmarks/harness.py``).

Compiled peers: no exact n-gram scanner installs from PyPI and scans text as it comes. The
PyPI package named ``decon`` is an empty placeholder (0.0.1, 2019), not allenai/decon (Rust,
not on PyPI); ``infini-gram`` (2.6.0, a compiled engine) answers counts from a suffix-array
index that it must first build from token ids of a Hugging Face tokenizer, so it is not run
here.

Usage::

    python benchmarks/overlap_throughput.py [--quick] [--tokens 2500000] [--n 13]
        [--instances 500] [--perturb 0.05] [--repeats 7] [--seed 0] [--threads 2]
        [--stream-mb 300 1000] [--stream-repeats 3] [--num-proc 2] [--stream-dir DIR]
        [--json PATH] [--dask-gb 26] [--dask-workers 1 2] [--dask-blocksize 64MB]
        [--dask-file-mb 1000]
"""

from __future__ import annotations

import json
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from harness import (
    benchmark_parser,
    header,
    median_time,
    peak_memory,
    print_header,
    timed,
    write_json,
)

from lightning_info.core.logging import markdown_table
from lightning_info.lm.corpus import stdlib_docstrings
from lightning_info.methods.train_test_overlap.functional import (
    NgramIndex,
    OverlapOptions,
    TestInstance,
    _Vocabulary,
    compute_overlap,
    default_tokenize,
)


def build_corpus(texts: list[str], tokens: int, perturb: float, seed: int) -> list[str]:
    """Copies of ``texts`` with a fraction ``perturb`` of words replaced, up to ``tokens``."""
    rng = random.Random(seed)
    words = [w for t in texts for w in t.split()]
    corpus, total = [], 0
    while total < tokens:
        for text in texts:
            doc = [rng.choice(words) if rng.random() < perturb else w for w in text.split()]
            corpus.append(" ".join(doc))
            total += len(default_tokenize(corpus[-1]))
            if total >= tokens:
                break
    return corpus


def naive_counts(instances, corpus, n, windows: Callable) -> dict[tuple, int]:
    index: dict[tuple, int] = {}
    for inst in instances:
        for part in (inst.input, *inst.references):
            for gram in windows(default_tokenize(part), n):
                index[gram] = 0
    for doc in corpus:
        for gram in windows(default_tokenize(doc), n):
            if gram in index:
                index[gram] += 1
    return index


def tuple_windows(tokens: list[str], n: int):
    return zip(*(tokens[i:] for i in range(n)))


def token_by_token(text: str) -> list[str]:
    """HELM's tokenizer as a callable: ``compute_overlap`` then encodes one token at a time."""
    return default_tokenize(text)


def _peak_beyond_now(run: Callable[[], object]) -> tuple[float, object, float | None]:
    """Seconds, result, and GB of peak resident memory of ``run`` beyond the current RSS."""
    seconds, result, extra = peak_memory(run)
    return seconds, result, None if extra is None else extra / 1e9


def write_json_lines(path: Path, corpus: list[str], megabytes: float) -> int:
    """Repeat ``corpus`` as ``{"text": ...}`` lines until the file holds ``megabytes`` MB."""
    lines = [json.dumps({"text": text}) + "\n" for text in corpus]
    target, written, count = megabytes * 1e6, 0, 0
    with path.open("w") as handle:
        while written < target:
            for line in lines:
                handle.write(line)
                written += len(line)
                count += 1
                if written >= target:
                    break
    return count


def streaming_table(args, instances, corpus) -> list[dict]:
    """Scan JSON-lines files of ``--stream-mb`` MB from disk, plain and compressed: time, MB/s,
    peak memory; returns one dict per scan."""
    from lightning_info.methods.train_test_overlap.files import output_file
    from lightning_info.methods.train_test_overlap.text_batches import read_text_batches

    rows, scans = [], []
    with tempfile.TemporaryDirectory(dir=args.stream_dir) as folder:
        path = None
        for megabytes in args.stream_mb:
            path = Path(folder) / f"corpus_{megabytes:g}mb.jsonl"
            documents = write_json_lines(path, corpus, megabytes)
            size = path.stat().st_size / 1e6
            for suffix in (".gz", ".zst"):
                with output_file(Path(f"{path}{suffix}")) as handle, path.open("rb") as source:
                    shutil.copyfileobj(source, handle, 1 << 24)
            scanned = [(f"JSON lines{s or ''}, {e}", Path(f"{path}{s}"), e) for s, e in (
                ("", "compiled"), (".gz", "compiled"), (".zst", "compiled"), ("", "numpy"),
            )]  # fmt: skip
            for name, file, engine in scanned:
                options = OverlapOptions(
                    n=args.n, n_values=(), chunk_size=2000, progress=True, engine=engine
                )
                runs = [
                    _peak_beyond_now(
                        lambda f=file, o=options, e=engine: compute_overlap(
                            instances, read_text_batches([str(f)], engine=e), o
                        )
                    )
                    for _ in range(args.stream_repeats)
                ]
                seconds = statistics.median(r[0] for r in runs)
                report, extra = runs[-1][1], max((r[2] or 0) for r in runs)
                assert report.num_documents == documents
                stored = file.stat().st_size / 1e6
                scans.append(_scan(name, size, documents, seconds, extra))
                rows.append(
                    [
                        name,
                        f"{size:.0f} ({stored:.0f} stored)",
                        documents,
                        f"{seconds:.2f}",
                        f"{size / seconds:.1f}",
                        "n/a" if extra is None else f"{extra:.2f}",
                    ]
                )
        if args.num_proc and path is not None:
            from datasets import Dataset, load_from_disk

            from lightning_info.methods.train_test_overlap.sharded import overlap_with_datasets

            saved = Path(folder) / "saved"
            Dataset.from_json(str(path), keep_in_memory=False).save_to_disk(str(saved))
            dataset = load_from_disk(str(saved))
            seconds, report, extra = _peak_beyond_now(
                lambda: overlap_with_datasets(
                    instances,
                    dataset,
                    OverlapOptions(n=args.n, n_values=(), chunk_size=2000, progress=True),
                    num_proc=args.num_proc,
                )
            )
            size = path.stat().st_size / 1e6
            name = f"datasets.map, {args.num_proc} processes"
            scans.append(_scan(name, size, len(dataset), seconds, extra))
            rows.append(
                [
                    name,
                    f"{size:.0f}",
                    len(dataset),
                    f"{seconds:.2f}",
                    f"{size / seconds:.1f}",
                    "n/a" if extra is None else f"{extra:.2f}",
                ]
            )
    print(
        f"\nstreamed from disk in one thread (median of {args.stream_repeats}; MB: the JSON "
        "lines uncompressed; peak memory of this process beyond its size before the scan)\n"
    )
    columns = ["scan", "MB", "documents", "seconds", "MB/s", "peak GB beyond"]
    print(markdown_table(columns, rows))
    return scans


def _scan(name: str, megabytes: float, documents: int, seconds: float, extra) -> dict:
    return {
        "scan": name,
        "megabytes": megabytes,
        "documents": documents,
        "seconds": seconds,
        "megabytes_per_second": megabytes / seconds,
        "peak_gb_beyond": extra,
    }


def write_dask_corpus(folder: Path, corpus: list[str], gigabytes: float, file_mb: float, seed: int):
    """JSON-lines files of ``file_mb`` MB holding ``gigabytes`` GB in all: four blocks (the corpus
    shuffled with their own seeds) written one after the other, over and over. Returns the files
    and the number of documents."""
    blocks = []
    for k in range(4):
        order = list(corpus)
        random.Random(seed + k).shuffle(order)
        blocks.append("".join(json.dumps({"text": text}) + "\n" for text in order).encode())
    documents_per_block = len(corpus)
    target, written, documents, files = gigabytes * 1e9, 0, 0, []
    while written < target:
        path = folder / f"part-{len(files):05d}.jsonl"
        size, k = 0, 0
        with path.open("wb") as handle:
            while size < file_mb * 1e6 and written + size < target:
                block = blocks[(len(files) + k) % len(blocks)]
                handle.write(block)
                size += len(block)
                documents += documents_per_block
                k += 1
        written += size
        files.append(path)
    return files, documents


def _peak_gb(status: str) -> float | None:
    """The peak resident memory (``VmHWM``) in GB from a ``/proc/<pid>/status`` text."""
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024 / 1e9
    return None


def dask_table(args, instances, corpus) -> list[dict]:
    """Count a JSON-lines corpus of ``--dask-gb`` GB with ``overlap_with_dask`` on a
    ``LocalCluster`` of each of ``--dask-workers`` worker processes; one dict per run."""
    from distributed import Client

    from lightning_info.core.dask_cluster import local_cluster
    from lightning_info.methods.train_test_overlap.sharded import overlap_files_with_dask

    folder = Path(tempfile.mkdtemp(prefix="overlap_dask_", dir=args.stream_dir))
    runs, rows, reports = [], [], []
    try:
        start = time.perf_counter()
        files, documents = write_dask_corpus(
            folder, corpus, args.dask_gb, args.dask_file_mb, args.seed
        )
        size = sum(f.stat().st_size for f in files) / 1e6
        print(
            f"\nDask corpus: {len(files)} JSON-lines files, {size / 1e3:.2f} GB, {documents} "
            f"documents, written in {time.perf_counter() - start:.1f} s"
        )
        options = OverlapOptions(n=args.n, n_values=(), chunk_size=2000)
        for workers in args.dask_workers:
            with (
                local_cluster(
                    n_workers=workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=":0",
                ) as cluster,
                Client(cluster) as client,
            ):
                seconds, report = timed(
                    lambda: overlap_files_with_dask(
                        instances, [str(folder)], options, blocksize=args.dask_blocksize
                    )
                )
                status = client.run(partial(Path.read_text, Path("/proc/self/status")))
                peaks = [p for p in map(_peak_gb, status.values()) if p is not None]
                partitions = sum(-(-f.stat().st_size // _bytes(args.dask_blocksize)) for f in files)
            assert report.num_documents == documents, "the Dask scan missed documents"
            reports.append(report)
            peak = max(peaks) if peaks else None
            runs.append(
                {
                    "workers": workers,
                    "megabytes": size,
                    "documents": documents,
                    "tokens": report.num_tokens,
                    "partitions": partitions,
                    "seconds": seconds,
                    "megabytes_per_second": size / seconds,
                    "tokens_per_second": report.num_tokens / seconds,
                    "peak_gb_per_worker": peak,
                }
            )
            rows.append(
                [
                    workers,
                    f"{size / 1e3:.2f}",
                    partitions,
                    f"{seconds:.1f}",
                    f"{size / seconds:.1f}",
                    f"{report.num_tokens / seconds / 1e6:.2f}",
                    "n/a" if peak is None else f"{peak:.2f}",
                ]
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert all(r.rows == reports[0].rows for r in reports), "worker counts change the report"
    print(
        f"\noverlap_files_with_dask on a LocalCluster (one thread per worker process), "
        f"blocksize {args.dask_blocksize}, {documents} documents, {reports[0].num_tokens} "
        "tokens; peak resident memory of the largest worker\n"
    )
    columns = ["workers", "GB", "partitions", "seconds", "MB/s", "M tokens/s", "peak GB/worker"]
    print(markdown_table(columns, rows))
    return runs


def _bytes(size: str) -> int:
    """``"64MB"`` as bytes (Dask's own parser)."""
    from dask.utils import parse_bytes

    return parse_bytes(size)


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Run the measurements and print their tables; returns the throughput of each method."""
    parser = benchmark_parser(
        __doc__.split("\n\n")[0],
        threads=2,
        threads_help="threads of the threaded row (default 2); torch's are left alone",
        quick_help="200k tokens, one repeat",
    )
    parser.add_argument("--tokens", type=int, default=2_500_000)
    parser.add_argument("--n", type=int, default=13)
    parser.add_argument("--instances", type=int, default=500)
    parser.add_argument("--perturb", type=float, default=0.05)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stream-mb", type=float, nargs="*", default=[], help="file sizes")
    parser.add_argument("--stream-repeats", type=int, default=3, help="runs per streamed file")
    parser.add_argument("--num-proc", type=int, default=0, help="datasets.map processes")
    parser.add_argument("--stream-dir", default=None, help="folder for the streamed files")
    parser.add_argument("--dask-gb", type=float, default=0, help="Dask corpus size (GB)")
    parser.add_argument("--dask-workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--dask-blocksize", default="64MB", help="dask.bag.read_text blocksize")
    parser.add_argument("--dask-file-mb", type=float, default=1000, help="Dask corpus file size")
    args = parser.parse_args(argv)
    if args.quick:
        args.tokens, args.repeats, args.stream_repeats = 200_000, 1, 1
    head = header(args)
    print_header(
        head,
        f"n {args.n}",
        f"{args.instances} instances",
        f"perturb {args.perturb:g}",
        f"threaded row {args.threads} threads",
        f"median of {args.repeats}",
        f"seed {args.seed}",
    )

    texts = [t for _, t in stdlib_docstrings()]
    held_out = texts[::2][: args.instances]
    train_texts = [t for k, t in enumerate(texts) if k % 2 or k // 2 >= args.instances]
    instances = []
    for k, text in enumerate(held_out):
        words = text.split()
        half = len(words) // 2
        instances.append(TestInstance(str(k), " ".join(words[:half]), (" ".join(words[half:]),)))
    corpus = build_corpus(train_texts + held_out[::4], args.tokens, args.perturb, args.seed)
    num_tokens = sum(len(default_tokenize(d)) for d in corpus)
    print(f"corpus: {len(corpus)} documents, {num_tokens} tokens; {len(instances)} instances")

    n = args.n
    compute_overlap(instances, corpus[:100], OverlapOptions(n=n, engine="compiled"))  # compile
    t_fast, report = median_time(
        lambda: compute_overlap(
            instances, corpus, OverlapOptions(n=n, n_values=(), chunk_size=2000, engine="compiled")
        ),
        args.repeats,
    )
    t_numpy, numpy_report = median_time(
        lambda: compute_overlap(
            instances, corpus, OverlapOptions(n=n, n_values=(), chunk_size=2000, engine="numpy")
        ),
        args.repeats,
    )
    assert numpy_report.rows == report.rows, "the two engines give different reports"

    t_threads, threads_report = median_time(
        lambda: compute_overlap(
            instances,
            corpus,
            OverlapOptions(
                n=n, n_values=(), chunk_size=2000, threads=args.threads, engine="compiled"
            ),
        ),
        args.repeats,
    )
    assert threads_report.rows == report.rows, "threads change the report"

    t_plain, plain_report = median_time(
        lambda: compute_overlap(
            instances,
            corpus,
            OverlapOptions(n=n, n_values=(), chunk_size=2000, tokenizer=token_by_token),
        ),
        args.repeats,
    )
    assert plain_report.rows == report.rows, "the two encodings give different reports"

    vocab = _Vocabulary()
    seqs = [vocab.add(default_tokenize(p)) for i in instances for p in (i.input, *i.references)]
    index = NgramIndex(seqs, n)
    chunks = [
        vocab.encode_documents([default_tokenize(d) for d in corpus[i : i + 2000]])
        for i in range(0, len(corpus), 2000)
    ]
    t_match, fast_counts = median_time(lambda: sum(index.count(c) for c in chunks), args.repeats)

    t_naive, naive = median_time(
        lambda: naive_counts(instances, corpus, n, tuple_windows), args.repeats
    )
    id_to_token = {i: t for t, i in vocab.ids.items()}
    exact = {
        tuple(id_to_token[int(i)] for i in gram): int(c)
        for gram, c in zip(index.grams, fast_counts)
    }
    assert exact == naive, "fast and naive counts differ"

    rows = [
        ["compiled (end to end)", t_fast, num_tokens / t_fast],
        ["numpy (end to end)", t_numpy, num_tokens / t_numpy],
        [f"compiled, {args.threads} threads (end to end)", t_threads, num_tokens / t_threads],
        ["token by token (end to end)", t_plain, num_tokens / t_plain],
        ["numpy (match only)", t_match, num_tokens / t_match],
        ["naive tuples", t_naive, num_tokens / t_naive],
    ]
    try:
        from nltk import ngrams
    except ImportError:
        print("nltk not importable: its row is skipped")
    else:
        t_nltk, nltk_counts = median_time(
            lambda: naive_counts(instances, corpus, n, ngrams), args.repeats
        )
        assert nltk_counts == naive
        rows.append(["nltk ngrams", t_nltk, num_tokens / t_nltk])
    megabytes = sum(len(d.encode()) for d in corpus) / 1e6
    table = [
        [name, f"{t:.3f}", f"{rate / 1e6:.2f}", f"{megabytes / t:.1f}", f"{t_naive / t:.2f}x"]
        for name, t, rate in rows
    ]
    print(
        f"\nn = {n}, median of {args.repeats}; counts identical across methods; "
        f"{megabytes:.1f} MB of text\n"
    )
    columns = ["method", "seconds", "M tokens/s", "MB/s", "speed-up vs naive"]
    print(markdown_table(columns, table))
    dirty = report.summary["default"]["input_binary"]
    print(
        f"\ninstances with input overlap: {dirty:.3f} (a quarter planted, each copy with "
        f"{args.perturb:.0%} of words replaced; inputs shorter than n tokens cannot match)"
    )
    scans = streaming_table(args, instances, corpus) if args.stream_mb else []
    dask_runs = dask_table(args, instances, corpus) if args.dask_gb else []
    rates = {name: rate for name, _, rate in rows}
    if args.json:
        write_json(
            args.json,
            head,
            {
                "documents": len(corpus),
                "tokens": num_tokens,
                "instances": len(instances),
                "methods": [
                    {
                        "method": name,
                        "seconds": t,
                        "tokens_per_second": rate,
                        "speedup_vs_naive": t_naive / t,
                    }
                    for name, t, rate in rows
                ],
                "input_overlap": dirty,
                "streaming": scans,
                "dask": dask_runs,
            },
        )
    return rates


if __name__ == "__main__":
    main()
