"""Inputs whose overlap cannot be seen are named, not reported clean; character n-grams see
them; training files with a byte-order mark read as without one. Oracles: n-grams listed by
brute force over Python lists and sets."""

from __future__ import annotations

import json
import random
import warnings
from collections import Counter

import lightning.pytorch as pl
import numpy as np
import pytest
from lightning.pytorch.demos.boring_classes import BoringModel
from lightning.pytorch.loggers import Logger

import lightning_info.methods.train_test_overlap.callback as callback_module
import lightning_info.methods.train_test_overlap.functional as functional
from lightning_info.methods.train_test_overlap.callback import TrainTestOverlap
from lightning_info.methods.train_test_overlap.cli import main as cli_main
from lightning_info.methods.train_test_overlap.encoding import character_tokenize
from lightning_info.methods.train_test_overlap.files import iter_training_texts
from lightning_info.methods.train_test_overlap.functional import (
    TOKENIZERS,
    OverlapIndex,
    OverlapOptions,
    TestInstance,
    compute_overlap,
    contaminated_documents,
)
from lightning_info.methods.train_test_overlap.methodologies import (
    llama2_contamination,
    substring_overlap,
)
from lightning_info.methods.train_test_overlap.report import (
    OverlapReport,
    UndetectableInstancesWarning,
)

CJK = "我们在河边看到了一只敏捷的棕色狐狸跳过了懒惰的狗然后它跑回了森林里"
LONG = "the quick brown fox jumps over the lazy dog near the river bank at dawn today"
SHORT = TestInstance("short", "Two Words", [], "toy")
CHINESE = TestInstance("cjk", CJK, [], "toy")
ENGLISH = TestInstance("long", LONG, [], "toy")
DOCUMENTS = [f"preface. {LONG} and more", f"前言。{CJK}。后记", "notes: two   words, seen"]


def _ngrams(tokens: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def _instance_ngrams(instance: TestInstance, n: int, tokenize) -> list[tuple[str, ...]]:
    """Every n-gram of the input, of each reference and across the input/reference boundary."""
    inp = tokenize(instance.input)
    refs = [tokenize(r) for r in instance.references]
    grams = _ngrams(inp, n) + [g for r in refs for g in _ngrams(r, n)]
    if n >= 2:
        grams += [g for r in refs for g in _ngrams(inp[-(n - 1) :] + r[: n - 1], n)]
    return grams


def _undetectable(instances, n, tokenize) -> list[dict]:
    return [
        {"benchmark": i.benchmark, "id": i.id}
        for i in instances
        if not _instance_ngrams(i, n, tokenize)
    ]


def _silent(call):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UndetectableInstancesWarning)
        return call()


def test_undetectable_instances_are_listed_counted_and_warned_about():
    instances = [ENGLISH, SHORT, CHINESE]
    with pytest.warns(UndetectableInstancesWarning) as caught:
        report = compute_overlap(instances, DOCUMENTS, OverlapOptions())
    message = str(caught[0].message)
    assert "2 of 3 test instances yield no 13-gram" in message
    assert "toy/short" in message and "toy/cjk" in message and 'tokenizer="character"' in message
    expected = _undetectable(instances, 13, TOKENIZERS["default"])
    assert expected == [{"benchmark": "toy", "id": "short"}, {"benchmark": "toy", "id": "cjk"}]
    assert report.undetectable == expected
    assert report.summary["toy"]["num_undetectable"] == 2
    assert [row["any_overlap"] for row in report.rows] == [1.0, 0.0, 0.0]  # HELM's counts
    markdown = report.to_markdown()
    assert "toy/short, toy/cjk" in markdown and "num_undetectable" in markdown
    assert OverlapReport.from_dict(json.loads(json.dumps(report.to_dict()))) == report
    # each row is what the instance gets alone: the listing changes no count
    alone = _silent(lambda: compute_overlap([ENGLISH], DOCUMENTS, OverlapOptions()))
    assert alone.rows == report.rows[:1] and alone.undetectable == []
    assert alone.summary["toy"]["num_undetectable"] == 0


def test_decontamination_warns_about_what_it_cannot_see():
    with pytest.warns(UndetectableInstancesWarning, match="toy/cjk"):
        flags = contaminated_documents([ENGLISH, CHINESE], DOCUMENTS, OverlapOptions())
    assert flags.tolist() == [True, False, False]  # the copied Chinese item stays in


@pytest.mark.parametrize("name", ["default", "light", "janitor", "character"])
@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_undetectable_equals_the_brute_force_listing(name, n):
    rng = random.Random(n)
    words = ["a", "b.", "(c)", "dé", "e-f", "", "  ", "中文字", "x,y"]
    instances = [
        TestInstance(
            str(k),
            " ".join(rng.choices(words, k=rng.randrange(0, 4))),
            [" ".join(rng.choices(words, k=rng.randrange(0, 3))) for _ in range(rng.randrange(3))],
        )
        for k in range(60)
    ]
    tokenize = character_tokenize if name == "character" else TOKENIZERS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndetectableInstancesWarning)
        index = OverlapIndex(instances, OverlapOptions(n=n, n_values=(), tokenizer=name))
    assert index.undetectable == _undetectable(instances, n, tokenize)


def test_the_check_runs_once_per_instance_when_the_index_is_built(monkeypatch):
    calls = []
    original = functional._has_ngram
    monkeypatch.setattr(functional, "_has_ngram", lambda *a: calls.append(1) or original(*a))
    with pytest.warns(UndetectableInstancesWarning):
        index = OverlapIndex([ENGLISH, SHORT, CHINESE], OverlapOptions(n=13, n_values=()))
    assert len(calls) == 3
    counts = _silent(lambda: index.count_chunk(DOCUMENTS) + index.count_chunk(DOCUMENTS * 5))
    report = _silent(lambda: index.report(counts))
    assert len(calls) == 3 and len(report.undetectable) == 2


def _normalise(text: str) -> str:
    return " ".join(text.lower().split())


def _character_oracle(instances, documents, n):
    """Per instance: is any of its character n-grams in a document; per document: does it hold
    any; and each test n-gram's count over the documents (Python sets and a Counter)."""
    grams = {i.id: set(_instance_ngrams(i, n, lambda t: list(_normalise(t)))) for i in instances}
    every = set().union(*grams.values())
    windows = [Counter(_ngrams(list(_normalise(d)), n)) for d in documents]
    seen = set().union(*(set(w) for w in windows))
    found = {ident: bool(g & seen) for ident, g in grams.items()}
    flags = [bool(every & set(w)) for w in windows]
    counts = sum(windows, Counter())
    return found, flags, {g: counts[g] for g in every}


def test_character_ngrams_find_a_copied_chinese_item_and_a_short_one():
    instances = [
        ENGLISH,
        SHORT,
        CHINESE,
        TestInstance("clean", "没有出现过的句子在这里", [], "toy"),
    ]
    options = OverlapOptions(n=9, n_values=(), tokenizer="character")
    report = _silent(lambda: compute_overlap(instances, DOCUMENTS, options))
    found, flags, _ = _character_oracle(instances, DOCUMENTS, 9)
    assert found == {"long": True, "short": True, "cjk": True, "clean": False}
    assert {row["id"]: bool(row["input_binary"]) for row in report.rows} == found
    assert report.undetectable == [] and report.tokenizer == "character"
    assert report.num_tokens == sum(len(_normalise(d)) for d in DOCUMENTS)
    flagged = _silent(lambda: contaminated_documents(instances, DOCUMENTS, options))
    assert flagged.tolist() == flags == [True, True, True]


def test_character_counts_equal_a_brute_force_count_on_random_text():
    rng = random.Random(0)
    alphabet = "ab 中文字\tÉé\n"
    texts = ["".join(rng.choices(alphabet, k=rng.randrange(0, 30))) for _ in range(200)]
    instances = [
        TestInstance(str(k), texts[k], [texts[k + 1]] if k % 3 else []) for k in range(0, 40, 2)
    ]
    documents = texts[40:] + [f"x {texts[4]}{texts[5]} y", texts[10].upper()]
    for n in (3, 6):
        options = OverlapOptions(n=n, n_values=(), tokenizer="character", chunk_size=17)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndetectableInstancesWarning)
            index = OverlapIndex(instances, options)
            flags = contaminated_documents(instances, documents, options)
        found, expected_flags, expected_counts = _character_oracle(instances, documents, n)
        assert flags.tolist() == expected_flags
        counts = index.count_chunk(documents).counts[0]
        grams = index.indexes[0].grams
        got = {tuple(chr(int(s) - 1) for s in gram): int(c) for gram, c in zip(grams, counts)}
        assert got == expected_counts
        report = index.report(index.count_chunk(documents))
        seen = set().union(*(set(_ngrams(list(_normalise(d)), n)) for d in documents))

        def hit(text, n=n, seen=seen):
            return float(bool(set(_ngrams(list(_normalise(text)), n)) & seen))

        for row, instance in zip(report.rows, instances):
            assert (
                row["input_binary"]
                == hit(instance.input)
                == float(found[instance.id] and hit(instance.input))
            )
            assert row["references_binary"] == max(map(hit, instance.references), default=0.0)


class _Capture(Logger):
    name, version = "capture", 0

    def __init__(self):
        super().__init__()
        self.metrics = {}

    def log_metrics(self, metrics, step=None):
        self.metrics.update(metrics)

    def log_hyperparams(self, params, *args, **kwargs):
        pass


def test_the_callback_logs_the_undetectable_count_table_and_ids(monkeypatch, lightning_messages):
    tables = {}
    monkeypatch.setattr(callback_module, "log_wandb_tables", lambda _, t: tables.update(t))
    logger = _Capture()
    overlap = TrainTestOverlap(
        train_texts=DOCUMENTS,
        test_instances=[ENGLISH, CHINESE],
        options=OverlapOptions(n=13, n_values=()),
    )
    trainer = pl.Trainer(
        max_steps=1,
        limit_val_batches=0,
        logger=logger,
        callbacks=[overlap],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    with pytest.warns(UndetectableInstancesWarning, match="toy/cjk"):
        trainer.fit(BoringModel())
    assert logger.metrics["overlap/toy/num_undetectable"] == 1
    assert logger.metrics["overlap/toy/num_instances"] == 2
    assert tables["overlap/undetectable"] == (["benchmark", "id"], [["toy", "cjk"]])
    columns, rows = tables["overlap/summary"]
    assert rows[0][columns.index("num_undetectable")] == 1
    assert any("toy/cjk" in message for message in lightning_messages)
    assert overlap.report.undetectable == [{"benchmark": "toy", "id": "cjk"}]


def test_the_command_line_names_undetectable_items(tmp_path, capsys):
    (tmp_path / "train.txt").write_text("\n".join(DOCUMENTS))
    test = tmp_path / "bench.jsonl"
    rows = [{"id": i.id, "input": i.input, "references": []} for i in (ENGLISH, CHINESE)]
    test.write_text("\n".join(json.dumps(row, ensure_ascii=False) for row in rows))
    argv = ["--train", str(tmp_path / "train.txt"), "--test", str(test), "--no-progress"]
    with pytest.warns(UndetectableInstancesWarning):
        assert cli_main([*argv, "--output", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "1 of 2 test instances yield no 13-gram" in out and "bench/cjk" in out
    data = json.loads((tmp_path / "out" / "overlap.json").read_text())
    assert data["undetectable"] == [{"benchmark": "bench", "id": "cjk"}]
    assert _silent(lambda: cli_main([*argv, "--tokenizer", "character"])) == 0
    assert "yield no" not in capsys.readouterr().out


def test_a_report_saved_without_the_listing_still_reads():
    report = _silent(lambda: compute_overlap([ENGLISH], DOCUMENTS, OverlapOptions()))
    data = report.to_dict()
    del data["undetectable"]
    for stats in data["summary"].values():
        del stats["num_undetectable"]
    old = OverlapReport.from_dict(data)
    assert old.undetectable == []
    columns, rows = old.summary_table()
    assert rows[0][columns.index("num_undetectable")] == "-"


@pytest.mark.parametrize("lines", [False, True])
def test_a_text_file_with_a_byte_order_mark_counts_like_one_without(tmp_path, lines):
    text = "the quick brown fox jumps"
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbf" + text.encode())
    (tmp_path / "plain.txt").write_text(text)
    instance = [TestInstance("a", "the quick brown", [])]
    options = OverlapOptions(n=3, n_values=())
    bom, plain = (
        compute_overlap(instance, iter_training_texts([str(tmp_path / name)], lines=lines), options)
        for name in ("bom.txt", "plain.txt")
    )
    assert bom.rows == plain.rows and bom.rows[0]["input_binary"] == 1.0


def test_substring_overlap_warns_about_texts_without_a_letter():
    with pytest.warns(UndetectableInstancesWarning, match=r"positions \[1\]"):
        found = substring_overlap(["abc def", "!!! ???"], ["abc def !!! ???"])
    assert found == [True, False]


def test_llama2_marks_texts_too_short_to_match():
    with pytest.warns(UndetectableInstancesWarning, match="default/1"):
        result = llama2_contamination([LONG, "two words"], [LONG, "two words"], min_length=10)
    assert [r["detectable"] for r in result] == [True, False]
    assert [r["label"] for r in result] == ["dirty", "clean"]  # Llama 2's rule, kept
    chars = _silent(
        lambda: llama2_contamination(
            ["two words"], ["two words"], min_length=5, tokenizer="character"
        )
    )
    assert chars == [{"contamination": 1.0, "label": "dirty", "detectable": True}]


def test_ngram_index_counts_match_a_brute_force_count():
    rng = np.random.default_rng(0)
    sequences = [rng.integers(0, 4, size=size) for size in (1, 3, 6, 9)]
    training = rng.integers(0, 4, size=200).astype(np.uint64)
    for n in (1, 2, 3):
        index = functional.NgramIndex(sequences, n, seed=3)
        windows = [tuple(training[i : i + n]) for i in range(training.size - n + 1)]
        expected = [windows.count(tuple(np.asarray(g, np.uint64))) for g in index.grams]
        assert index.count(training).tolist() == expected


def test_summarize_averages_every_float_metric_per_benchmark():
    rows = [
        {"benchmark": "a", "id": 1, "x": 1.0, "num_tokens": 5},
        {"benchmark": "a", "id": 2, "x": 0.0, "num_tokens": 7},
        {"benchmark": "b", "id": 3, "x": 0.25, "num_tokens": 2},
    ]
    assert functional.summarize(iter(rows)) == {
        "a": {"num_instances": 2, "x": 0.5},
        "b": {"num_instances": 1, "x": 0.25},
    }
    assert functional.default_tokenize("(A b)") == ["", "a", "b", ""]
    assert functional.light_tokenize("A,b  c") == ["A,b", "c"]
    assert functional.janitor_tokenize("A,b  c") == ["ab", "c"]
