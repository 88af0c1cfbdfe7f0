"""Train-test overlap report without training.

Usage::

    python -m lightning_info.methods.train_test_overlap.cli --train FILE_OR_DIR... --test TEST.jsonl
        [--n 13] [--n-values 5 9 13] [--tokenizer default] [--max-frequency 10]
        [--text-field text] [--output DIR]

``--train`` takes text files (one document per file, or one per line with ``--lines``),
JSON-lines files (``*.jsonl``, also ``*.jsonl.gz`` and ``*.jsonl.zst``: the ``--text-field`` of
each line, parsed by pyarrow), Parquet files
(``*.parquet``: its ``--text-field`` column), folders (every file inside,
recursively) or a ``datasets`` dataset saved with ``save_to_disk`` (a folder holding
``dataset_info.json``; its ``--text-field`` column is read). The training text is streamed, so
memory stays bounded by ``--chunk-size`` documents whatever the corpus size; ``--processes``
counts chunks in worker processes, and ``--num-proc`` instead shards saved datasets with
``datasets.map`` (every ``--train`` path must then be one). ``--test`` takes JSON-lines files
whose lines have ``input`` and ``references`` fields (optional ``id`` and ``benchmark``). The
summary table is printed; ``--output`` also writes ``overlap.json`` and ``overlap.md``.
``lightning-info overlap`` scans the same inputs and also writes the flagged training documents
and a copy of the corpus without them.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from lightning_info.methods.train_test_overlap.files import read_test_instances, saved_datasets
from lightning_info.methods.train_test_overlap.functional import (
    TOKENIZERS,
    OverlapOptions,
    compute_overlap,
)
from lightning_info.methods.train_test_overlap.report import write_report
from lightning_info.methods.train_test_overlap.sharded import overlap_with_datasets
from lightning_info.methods.train_test_overlap.text_batches import read_text_batches


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", nargs="+", required=True, help="text files, folders, datasets")
    parser.add_argument("--test", nargs="+", required=True, help="JSON-lines test instances")
    parser.add_argument("--n", type=int, default=13)
    parser.add_argument("--n-values", type=int, nargs="*", default=[5, 9, 13])
    tokenizers = [*sorted(TOKENIZERS), "character"]  # "character": character n-grams
    parser.add_argument("--tokenizer", choices=tokenizers, default="default")
    parser.add_argument("--max-frequency", type=int, default=10)
    parser.add_argument("--text-field", default="text")
    parser.add_argument("--lines", action="store_true", help="one training document per line")
    parser.add_argument("--chunk-size", type=int, default=1000)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="threads counting chunks")
    parser.add_argument("--num-proc", type=int, default=None, help="datasets.map shards")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--output", default=None, help="folder for overlap.json and overlap.md")
    args = parser.parse_args(argv)
    options = OverlapOptions(
        n=args.n,
        n_values=tuple(args.n_values),
        tokenizer=args.tokenizer,
        max_frequency=args.max_frequency,
        chunk_size=args.chunk_size,
        processes=args.processes,
        threads=args.threads,
        progress=not args.no_progress,
    )
    instances = [i for path in args.test for i in read_test_instances(path)]
    if args.num_proc is not None:
        report = overlap_with_datasets(
            instances,
            saved_datasets(args.train),
            options,
            text_field=args.text_field,
            num_proc=args.num_proc,
        )
    else:
        batches = read_text_batches(args.train, args.text_field, args.lines, args.chunk_size)
        report = compute_overlap(instances, batches, options)
    print(report.to_markdown())
    if args.output is not None:
        for written in write_report(report, Path(args.output) / "overlap"):
            print(f"wrote {written}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
