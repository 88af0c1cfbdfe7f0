"""``lightning-info overlap`` end to end through the installed entry point: on JSON lines,
Parquet, a saved dataset and plain text, the report is ``compute_overlap``'s on the same texts,
the flagged documents and the test items each overlaps are those ``contaminated_documents``
flags pair by pair, and the cleaned copy is the input without them (checked byte for byte or row
for row); ``--help``; ``--config``; Dask on a local cluster; each bad input exits with status 2,
naming the file (and line), before anything is written."""

from __future__ import annotations

import json
import subprocess
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lightning_info.methods.train_test_overlap.decontaminate import scan_corpus
from lightning_info.methods.train_test_overlap.files import DocumentText, read_test_instances
from lightning_info.methods.train_test_overlap.functional import (
    OverlapOptions,
    compute_overlap,
    contaminated_documents,
)
from lightning_info.methods.train_test_overlap.report import UndetectableInstancesWarning
from tests.cli import entry_point
from tests.cli.entry_point import ok, refused

OPTIONS = OverlapOptions(n=5, n_values=(3, 5))
FLAGS = ["--n", "5", "--n_values", "[3, 5]"]
ROWS = [
    {"id": f"doc{k}", "prompt": prompt, "response": response, "source": "notes"}
    for k, (prompt, response) in enumerate(
        [
            ("which river runs past the old stone mill", "the quiet river flows by it at dawn"),
            ("name a bird that sings before sunrise", "the blackbird starts long before light"),
            ("what keeps bread fresh for a week", "a cloth bag in a cool dry cupboard"),
            ("how many legs does a spider have", "eight legs and usually eight eyes too"),
            ("why do leaves turn red in autumn", "green chlorophyll fades and red pigments show"),
            ("where do penguins raise their chicks", "on rocky shores and sea ice far south"),
            (
                "recite",
                "which river runs past the old stone mill, how many legs does a spider have",
            ),
        ]
    )
]
TESTS = [
    {"id": "river", "input": ROWS[0]["prompt"], "references": [ROWS[0]["response"]]},
    {"id": "legs", "input": "tell me: how many legs does a spider have", "references": ["8"]},
    {"id": "chicks", "input": "penguins", "references": ["on rocky shores and sea ice"]},
    {"id": "unseen", "input": "a question nobody has asked in these notes", "references": []},
    {"id": "short", "input": "two words", "references": []},
]


def run(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``lightning-info overlap *args``."""
    return entry_point.run("overlap", *args, cwd=cwd)


def run_here(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``lightning-info overlap *args`` in this process."""
    return entry_point.run_here("overlap", *args, cwd=cwd)


def joined(row: dict) -> str:
    return f"{row['prompt']}\n{row['response']}"


def write_tests(folder: Path) -> Path:
    path = folder / "bench.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in TESTS))
    return path


def quiet(function, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndetectableInstancesWarning)
        return function(*args)


def oracle(test_file: Path, texts: list[str]):
    """The report of ``compute_overlap`` and, per text, the test items it shares a 5-gram with
    (``contaminated_documents`` on each pair)."""
    instances = read_test_instances(test_file)
    report = quiet(compute_overlap, instances, texts, OPTIONS)
    items = [
        [
            {"benchmark": i.benchmark, "id": i.id}
            for i in instances
            if quiet(contaminated_documents, [i], [text], OPTIONS)[0]
        ]
        for text in texts
    ]
    return report, items


def check_report(out: Path, report) -> None:
    assert json.loads((out / "overlap.json").read_text()) == json.loads(
        json.dumps(report.to_dict())
    )
    assert (out / "overlap.md").read_text() == report.to_markdown()


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# --- end to end, one test per input format -------------------------------------------------------


def test_json_lines_by_fields(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    lines = [json.dumps(row) + "\n" for row in ROWS]
    lines.insert(3, "\n")  # a blank line: not a document, kept in the copy
    corpus.write_bytes("".join(lines).encode())
    bench, out = write_tests(tmp_path), tmp_path / "out"
    result = ok(run("--train", corpus, "--test", bench, "--output_dir", out, *FLAGS,
                    "--fields", "[prompt, response]"))  # fmt: skip
    report, items = oracle(bench, [joined(row) for row in ROWS])
    check_report(out, report)
    line_of = [1, 2, 3, 5, 6, 7, 8]  # the blank line is line 4
    expected = [
        {"source": str(corpus), "line": line_of[k], "id": row["id"], "test_items": items[k]}
        for k, row in enumerate(ROWS)
        if items[k]
    ]
    assert [e["id"] for e in expected] == ["doc0", "doc3", "doc5", "doc6"]  # doc6: two items
    assert [len(e["test_items"]) for e in expected] == [1, 1, 1, 2]
    assert read_lines(out / "flagged.jsonl") == expected
    flagged = {e["line"] for e in expected}
    kept = [line for number, line in enumerate(lines, 1) if number not in flagged]
    assert (out / "clean" / "corpus.jsonl").read_bytes() == "".join(kept).encode()
    assert "4 of 7 training documents share a 5-gram with a test item" in result.stdout
    assert (
        "1 of 5 test instances yield no 5-gram" in result.stdout and "bench/short" in result.stdout
    )
    assert "overlap scan" in result.stderr and "100%" in result.stderr  # the progress bar
    assert sorted(p.name for p in out.iterdir()) == [
        "clean",
        "flagged.jsonl",
        "overlap.json",
        "overlap.md",
    ]


def test_parquet_by_template(tmp_path):
    corpus = tmp_path / "corpus.parquet"
    table = pa.Table.from_pylist(ROWS)
    pq.write_table(table, corpus, row_group_size=3)
    bench, out = write_tests(tmp_path), tmp_path / "out"
    template = "Q: {prompt}\nA: {response}"
    ok(run("--train", corpus, "--test", bench, "--output_dir", out, *FLAGS,
           "--template", template, "--chunk_size", "2", "--progress", "false"))  # fmt: skip
    texts = [template.format(**row) for row in ROWS]
    report, items = oracle(bench, texts)
    check_report(out, report)
    expected = [
        {"source": str(corpus), "row": k, "id": row["id"], "test_items": items[k]}
        for k, row in enumerate(ROWS)
        if items[k]
    ]
    assert read_lines(out / "flagged.jsonl") == expected and len(expected) == 4
    clean = pq.read_table(out / "clean" / "corpus.parquet")
    rows = {e["row"] for e in expected}
    assert clean.schema == table.schema
    assert clean.to_pylist() == [row for k, row in enumerate(ROWS) if k not in rows]


def test_saved_dataset_by_one_field(tmp_path):
    from datasets import Dataset, DatasetDict, load_from_disk

    records = [{**row, "text": joined(row)} for row in ROWS]
    saved = tmp_path / "saved"
    DatasetDict(
        {"train": Dataset.from_list(records[:4]), "extra": Dataset.from_list(records[4:])}
    ).save_to_disk(str(saved))
    bench, out = write_tests(tmp_path), tmp_path / "out"
    ok(run("--train", saved, "--test", bench, "--output_dir", out, *FLAGS,
           "--progress", "false"))  # fmt: skip
    report, items = oracle(bench, [r["text"] for r in records])
    check_report(out, report)
    where = [("train", k) for k in range(4)] + [("extra", k) for k in range(3)]
    expected = [
        {"source": str(saved), "split": where[k][0], "row": where[k][1], "id": r["id"],
         "test_items": items[k]}
        for k, r in enumerate(records)
        if items[k]
    ]  # fmt: skip
    assert read_lines(out / "flagged.jsonl") == expected and len(expected) == 4
    clean = load_from_disk(str(out / "clean" / "saved"))
    assert set(clean) == {"train", "extra"}
    for split, part in (("train", records[:4]), ("extra", records[4:])):
        dropped = {e["row"] for e in expected if e["split"] == split}
        assert clean[split].to_list() == [r for k, r in enumerate(part) if k not in dropped]


def test_plain_text_one_document_per_file(tmp_path):
    folder = tmp_path / "notes"
    (folder / "more").mkdir(parents=True)
    paths = [folder / f"{k}.txt" if k < 4 else folder / "more" / f"{k}.txt" for k in range(7)]
    for path, row in zip(paths, ROWS):
        path.write_text(joined(row))
    bench, out = write_tests(tmp_path), tmp_path / "out"
    ok(run("--train", folder, "--test", bench, "--output_dir", out, *FLAGS,
           "--progress", "false"))  # fmt: skip
    order = sorted(range(7), key=lambda k: paths[k])  # a folder is read in sorted order
    report, items = oracle(bench, [joined(ROWS[k]) for k in order])
    check_report(out, report)
    expected = [
        {"source": str(paths[k]), "test_items": items[j]} for j, k in enumerate(order) if items[j]
    ]
    assert read_lines(out / "flagged.jsonl") == expected and len(expected) == 4
    flagged = {e["source"] for e in expected}
    copies = sorted(p.relative_to(out / "clean" / "notes") for p in (out / "clean").rglob("*.txt"))
    assert copies == sorted(p.relative_to(folder) for p in paths if str(p) not in flagged)
    for copy in copies:
        assert (out / "clean" / "notes" / copy).read_bytes() == (folder / copy).read_bytes()


def test_plain_text_one_document_per_line(tmp_path):
    corpus = tmp_path / "notes.txt"
    texts = [f"{row['prompt']} {row['response']}" for row in ROWS]
    corpus.write_text("\n".join(texts[:2]) + "\n\n" + "\n".join(texts[2:]) + "\n")
    bench, out = write_tests(tmp_path), tmp_path / "out"
    ok(run("--train", corpus, "--test", bench, "--output_dir", out, *FLAGS, "--lines", "true",
           "--progress", "false"))  # fmt: skip
    report, items = oracle(bench, texts)
    check_report(out, report)
    line_of = [1, 2, 4, 5, 6, 7, 8]
    expected = [
        {"source": str(corpus), "line": line_of[k], "test_items": items[k]}
        for k in range(len(texts))
        if items[k]
    ]
    assert read_lines(out / "flagged.jsonl") == expected and len(expected) == 4
    kept = [text for k, text in enumerate(texts) if not items[k]]
    assert (out / "clean" / "notes.txt").read_text() == "".join(t + "\n" for t in kept)


# --- help, config, Dask -----------------------------------------------------------------------


def test_help_names_the_inputs_outputs_and_switches():
    result = ok(run("--help"))
    names = ["--train", "--test", "--output_dir", "--fields", "--template", "--text_field"]
    names += ["--dask", "--scheduler", "--progress", "--config", "flagged.jsonl", "clean/"]
    for name in names:
        assert name in result.stdout, name
    assert "Parquet" in result.stdout and "save_to_disk" in result.stdout


def test_a_yaml_config_runs_the_command(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    bench = write_tests(tmp_path)
    config = tmp_path / "overlap.yaml"
    config.write_text(
        "train: [corpus.jsonl]\n"
        "test: bench.jsonl\n"
        "output_dir: out\n"
        'template: "{prompt}\\n{response}"\n'
        "n: 5\n"
        "n_values: [3, 5]\n"
        "progress: false\n"
    )
    ok(run("--config", config, cwd=tmp_path))
    report, items = oracle(bench, [joined(row) for row in ROWS])
    check_report(tmp_path / "out", report)
    flagged = read_lines(tmp_path / "out" / "flagged.jsonl")
    assert [f["test_items"] for f in flagged] == [i for i in items if i]
    assert flagged[0]["source"] == "corpus.jsonl"  # as named, relative to the working folder


def test_dask_on_a_local_cluster_equals_the_serial_scan(tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.parquet"
    first.write_text("".join(json.dumps(row) + "\n" for row in ROWS[:4]))
    pq.write_table(pa.Table.from_pylist(ROWS[4:]), second)
    bench, out = write_tests(tmp_path), tmp_path / "out"
    ok(run("--train", f"[{first}, {second}]", "--test", bench, "--output_dir", out, *FLAGS,
           "--fields", "[prompt, response]", "--dask", "true", "--processes", "1",
           "--progress", "false"))  # fmt: skip
    instances = read_test_instances(bench)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndetectableInstancesWarning)
        serial = scan_corpus(
            instances,
            [str(first), str(second)],
            OPTIONS,
            text_field=DocumentText(fields=("prompt", "response")),
        )
    check_report(out, serial.report)
    assert read_lines(out / "flagged.jsonl") == serial.flagged and len(serial.flagged) == 4
    report, _ = oracle(bench, [joined(row) for row in ROWS])
    assert serial.report.rows == report.rows


# --- bad input: exit status 2, the file (and line) named, nothing written ------------------------


def bad_corpus(
    tmp_path: Path, content: str, *args: str, script: bool = False
) -> subprocess.CompletedProcess:
    """``lightning-info overlap`` on a bad corpus: in this process, or through the script."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(content)
    bench = write_tests(tmp_path)
    command = run if script else run_here
    result = command("--train", corpus, "--test", bench, "--output_dir", tmp_path / "out", *FLAGS,
                     "--progress", "false", *args)  # fmt: skip
    assert not (tmp_path / "out").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench.jsonl", "corpus.jsonl"]
    return result


def test_a_missing_training_file_is_refused(tmp_path):
    bench = write_tests(tmp_path)
    result = run_here("--train", tmp_path / "absent.jsonl", "--test", bench,
                 "--output_dir", tmp_path / "out")  # fmt: skip
    refused(result, "absent.jsonl", "does not exist")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench.jsonl"]


def test_a_bad_json_line_is_refused_with_its_file_and_line(tmp_path):
    rows = [json.dumps(row) for row in ROWS[:2]] + ['{"prompt": "cut short', json.dumps(ROWS[3])]
    result = bad_corpus(
        tmp_path, "\n".join(rows) + "\n", "--fields", "[prompt, response]", script=True
    )
    refused(result, "corpus.jsonl, line 3, column", "not valid JSON")


def test_a_missing_field_is_refused_with_its_file_line_and_the_fields_present(tmp_path):
    rows = [json.dumps(row) for row in ROWS[:2]] + [json.dumps({"prompt": "no answer here"})]
    result = bad_corpus(tmp_path, "\n".join(rows) + "\n", "--fields", "[prompt, response]")
    refused(result, "corpus.jsonl, line 3: no field 'response'", "(fields: ['prompt'])")


def test_a_template_naming_an_absent_field_is_refused(tmp_path):
    content = "".join(json.dumps(row) + "\n" for row in ROWS)
    result = bad_corpus(tmp_path, content, "--template", "{prompt}\n{answer}")
    refused(result, "corpus.jsonl, line 1: no field 'answer'", "template", "'response'")


def test_an_empty_corpus_is_refused(tmp_path):
    result = bad_corpus(tmp_path, "\n\n  \n")
    refused(result, "corpus.jsonl", "holds no documents")


def test_an_output_dir_that_is_a_file_is_refused(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    bench = write_tests(tmp_path)
    target = tmp_path / "out"
    target.write_text("keep me")
    result = run_here("--train", corpus, "--test", bench, "--output_dir", target, "--fields",
                 "[prompt, response]")  # fmt: skip
    refused(result, f"{target} is a file")
    assert target.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench.jsonl", "corpus.jsonl", "out"]
