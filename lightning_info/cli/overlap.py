"""``lightning-info overlap``: train-test overlap of a training corpus against test sets, and the
corpus without the documents that overlap."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from lightning_info.cli import BadInput


def overlap(
    train: list[str] | str,
    test: list[str] | str,
    output_dir: str,
    text_field: str = "text",
    fields: list[str] | str | None = None,
    template: str | None = None,
    lines: bool = False,
    id_field: str = "id",
    n: int = 13,
    n_values: Sequence[int] = (5, 9, 13),
    tokenizer: Literal["default", "light", "janitor", "character"] = "default",
    max_frequency: int = 10,
    chunk_size: int = 1000,
    processes: int = 1,
    threads: int = 1,
    dask: bool = False,
    scheduler: str | None = None,
    clean: bool = True,
    progress: bool = True,
) -> int:
    """Train-test n-gram overlap (HELM's metrics) and decontamination of a training corpus.

    Scans the training corpus once, exactly (no Bloom filter), then writes to ``output_dir``:
    ``overlap.json`` and ``overlap.md`` (the HELM-compatible report, per test item and per
    benchmark), ``flagged.jsonl`` (one line per training document that shares an ``n``-gram
    with a test item: its ``source`` file, ``line`` (JSON lines and text, from 1) or ``row``
    (Parquet and datasets, from 0), ``split``, its ``id`` when it has one, and the
    ``test_items`` it overlaps) and ``clean/``: a copy of the corpus without the flagged
    documents, each input in its own format (JSON lines: the other lines byte for byte;
    Parquet: the other rows, same schema; a saved dataset: the other rows of each split, saved
    with ``save_to_disk``; a text file of one document per line: the other documents, one per
    line; a folder: its files' copies, a flagged one-document text file left out). Every file
    is written atomically, and only once the whole corpus has been read: a bad file is refused
    (exit status 2, naming the file and line) before anything is written. The summary table is
    printed, with the test items no ``n``-gram can find (shorter than ``n`` tokens, or text
    without spaces) and their count.

    Args:
        train: a training file or folder, or a list of them (``[a.jsonl, b/]``): JSON lines
            (``*.jsonl``, ``*.ndjson``), Parquet (``*.parquet``, read by batches of rows), a
            dataset saved with ``save_to_disk`` (a folder holding ``dataset_info.json`` or
            ``dataset_dict.json``), plain text (one document per file, or per line with
            ``lines``), or folders of them.
        test: a JSON-lines test set, or a list of them; each line has ``input`` and
            ``references`` (a list of strings), optional ``id`` and ``benchmark`` (default: the
            file's name).
        output_dir: folder for the outputs (created if missing): ``overlap.json`` and
            ``overlap.md`` (the report), ``flagged.jsonl`` (the training documents that overlap
            and the test items they overlap), ``clean/`` (the corpus without them).
        text_field: the field holding a record's text (JSON lines, Parquet, datasets).
        fields: several fields joined with a newline instead, e.g. ``[prompt, response]`` (one
            field alone reads as ``text_field``).
        template: a template with named fields instead, e.g. ``"{prompt}\\n{response}"`` in a
            YAML config (in a shell: ``$'{prompt}\\n{response}'``).
        lines: read a plain text file as one document per non-blank line.
        id_field: the field holding a record's id, named in ``flagged.jsonl`` when present.
        n: the n-gram size of the full metrics and of the flagged documents.
        n_values: the sizes at which binary overlap is also reported (``n`` is always one).
        tokenizer: ``default`` (HELM's), ``light`` (whitespace), ``janitor`` (GPT-3's
            normalisation) or ``character`` (character n-grams, for text without spaces).
        max_frequency: the filtered metrics count n-grams seen more often as unmatched.
        chunk_size: training documents read and counted at a time.
        processes: worker processes counting chunks; with ``dask`` and no ``scheduler``, the
            local cluster's workers (one: a worker in this process).
        threads: threads counting chunks (not with ``processes``); with ``dask``, per worker.
        dask: count on a Dask cluster, one task per file or saved dataset (a local cluster
            unless ``scheduler`` is given; needs ``pip install 'lightning-info[audit]'``).
        scheduler: the address of an existing Dask scheduler (``tcp://host:8786``); its workers
            must see the training paths.
        clean: write the cleaned copy of the corpus (``clean/``).
        progress: show a progress bar of the bytes read, with the time left.
    """
    train, test = _paths(train), _paths(test)
    if isinstance(fields, str):
        fields = [fields]
    out = Path(output_dir)
    for folder in (out, *out.parents):
        if folder.exists() and not folder.is_dir():
            raise BadInput(
                f"{folder} is a file, not a folder: pass an --output_dir that is a folder or "
                "does not exist yet."
            )
    if fields is not None and template is not None:
        raise BadInput("pass --fields or --template, not both (a template can join fields).")
    if scheduler is not None and not dask:
        raise BadInput("--scheduler names a Dask scheduler: pass --dask too.")
    for name, paths in (("--train", train), ("--test", test)):
        if not paths:
            raise BadInput(f"{name} names no path; pass at least one file or folder.")
        for path in paths:
            if not Path(path).exists():
                raise BadInput(f"{path} does not exist ({name}); check the path.")
    # imported after the checks above: they load torch, which the checks do not need
    from lightning_info.methods.train_test_overlap.decontaminate import (
        scan_corpus,
        write_clean_copy,
        write_flagged,
    )
    from lightning_info.methods.train_test_overlap.files import DocumentText, read_test_instances
    from lightning_info.methods.train_test_overlap.functional import OverlapOptions
    from lightning_info.methods.train_test_overlap.report import (
        UndetectableInstancesWarning,
        write_report,
    )

    try:
        text = DocumentText(
            field=text_field if fields is None and template is None else None,
            fields=None if fields is None else tuple(fields),
            template=template,
        )
        options = OverlapOptions(
            n=n,
            n_values=tuple(n_values),
            tokenizer=tokenizer,
            max_frequency=max_frequency,
            chunk_size=chunk_size,
            processes=processes,
            threads=threads,
            progress=progress,
        )
        instances = [item for path in test for item in read_test_instances(path)]
        with warnings.catch_warnings():  # the printed report names the undetectable items
            warnings.simplefilter("ignore", UndetectableInstancesWarning)
            scan = scan_corpus(
                instances,
                train,
                options,
                text_field=text,
                lines=lines,
                id_field=id_field,
                dask=dask,
                scheduler=scheduler,
            )
    except (ValueError, TypeError, FileNotFoundError) as error:
        raise BadInput(str(error)) from None
    out.mkdir(parents=True, exist_ok=True)
    written = [
        *write_report(scan.report, out / "overlap"),
        write_flagged(scan, out / "flagged.jsonl"),
    ]
    if clean:
        written.append(write_clean_copy(scan, out / "clean", progress=progress))
    print(scan.report.to_markdown())
    print(
        f"{len(scan.flagged)} of {scan.report.num_documents} training documents share a "
        f"{scan.report.n}-gram with a test item."
    )
    for path in written:
        print(f"wrote {path}")
    return 0


def _paths(paths: list[str] | str) -> list[str]:
    return [paths] if isinstance(paths, str) else list(paths)
