"""Train-test overlap: HELM's test scenarios, a brute-force oracle, planted contamination."""

from __future__ import annotations

import json
import random
from collections import Counter

import lightning.pytorch as pl
import numpy as np
import pytest
import torch
from lightning.pytorch.loggers import Logger
from torch.utils.data import DataLoader

from lightning_info.lm.corpus import stdlib_docstrings
from lightning_info.methods.train_test_overlap.callback import TrainTestOverlap
from lightning_info.methods.train_test_overlap.cli import main as cli_main
from lightning_info.methods.train_test_overlap.files import read_test_instances
from lightning_info.methods.train_test_overlap.functional import (
    METRICS,
    OverlapOptions,
    TestInstance,
    compute_overlap,
    default_tokenize,
    janitor_tokenize,
    light_tokenize,
    ngram_metrics,
    token_overlap,
)
from lightning_info.methods.train_test_overlap.methodologies import (
    llama2_contamination,
    substring_overlap,
)
from lightning_info.methods.train_test_overlap.report import write_report

ENGINES = ("numpy", "compiled")

# --- HELM's fixtures (scripts/data_overlap/test/test_compute_data_overlap_metrics.py) -----------

HELM_DOCUMENT = (
    "The Center for Research on Foundation Models (CRFM) is "
    "an interdisciplinary initiative born out of the Stanford "
    "Institute for Human-Centered Artificial Intelligence (HAI) "
    "that aims to make fundamental advances in the study, development, "
    "and deployment of foundation models."
)
HELM_LIGHT_TOKENS = [
    "The",
    "Center",
    "for",
    "Research",
    "on",
    "Foundation",
    "Models",
    "(CRFM)",
    "is",
    "an",
    "interdisciplinary",
    "initiative",
    "born",
    "out",
    "of",
    "the",
    "Stanford",
    "Institute",
    "for",
    "Human-Centered",
    "Artificial",
    "Intelligence",
    "(HAI)",
    "that",
    "aims",
    "to",
    "make",
    "fundamental",
    "advances",
    "in",
    "the",
    "study,",
    "development,",
    "and",
    "deployment",
    "of",
    "foundation",
    "models.",
]
HELM_DEFAULT_TOKENS = [
    "the",
    "center",
    "for",
    "research",
    "on",
    "foundation",
    "models",
    "crfm",
    "is",
    "an",
    "interdisciplinary",
    "initiative",
    "born",
    "out",
    "of",
    "the",
    "stanford",
    "institute",
    "for",
    "human",
    "centered",
    "artificial",
    "intelligence",
    "hai",
    "that",
    "aims",
    "to",
    "make",
    "fundamental",
    "advances",
    "in",
    "the",
    "study",
    "development",
    "and",
    "deployment",
    "of",
    "foundation",
    "models",
] + [""]
HELM_SCENARIOS = [
    TestInstance("id1", "Center for Research on Foundation", ("bar", "baz"), "scenario1"),
    TestInstance("id2", "bar bar", ("foo", "baz"), "scenario1"),
    TestInstance("id1", HELM_DOCUMENT, (HELM_DOCUMENT, HELM_DOCUMENT), "scenario2"),
]


def test_helm_tokenizers():
    assert len(HELM_LIGHT_TOKENS) == 38 and len(HELM_DEFAULT_TOKENS) == 40
    assert light_tokenize(HELM_DOCUMENT) == HELM_LIGHT_TOKENS
    assert default_tokenize(HELM_DOCUMENT) == HELM_DEFAULT_TOKENS  # keeps the trailing ""
    case = "THis ,,iS a SiMPlE t-EsT cAsE"
    assert light_tokenize(case) == ["THis", ",,iS", "a", "SiMPlE", "t-EsT", "cAsE"]
    assert default_tokenize(case) == ["this", "is", "a", "simple", "t", "est", "case"]
    assert janitor_tokenize(case) == ["this", "is", "a", "simple", "test", "case"]


def _hits(report, n: int) -> dict[str, set[tuple[str, str]]]:
    out: dict[str, set[tuple[str, str]]] = {"input": set(), "references": set()}
    for row in report.rows:
        for part in out:
            if row[f"{part}_overlap@{n}"]:
                out[part].add((row["benchmark"], row["id"]))
    return out


@pytest.mark.parametrize("engine", ENGINES)
def test_helm_ngram_index(engine):
    """HELM's ``test_create_ngram_index``: which entries index a given 5-gram and 13-gram.

    The index is internal here, so a training document holding exactly that n-gram must hit
    exactly the entries HELM's index lists for it, and nothing else.
    """
    five = "Center for Research on Foundation"
    report = compute_overlap(
        HELM_SCENARIOS,
        [five],
        OverlapOptions(n=5, n_values=(5, 13), tokenizer="light", engine=engine),
    )
    assert _hits(report, 5) == {
        "input": {("scenario1", "id1"), ("scenario2", "id1")},
        "references": {("scenario2", "id1")},
    }
    assert _hits(report, 13) == {"input": set(), "references": set()}
    thirteen = " ".join(HELM_LIGHT_TOKENS[:13])
    report = compute_overlap(
        HELM_SCENARIOS,
        [thirteen],
        OverlapOptions(n=13, n_values=(5,), tokenizer="light", engine=engine),
    )
    assert _hits(report, 13) == {
        "input": {("scenario2", "id1")},
        "references": {("scenario2", "id1")},
    }


@pytest.mark.parametrize("engine", ENGINES)
def test_helm_document_overlap(engine):
    """HELM's ``test_compute_document_data_overlap`` and its fractions (0.5 / 0 / 1 / 1)."""
    report = compute_overlap(
        HELM_SCENARIOS,
        [HELM_DOCUMENT],
        OverlapOptions(n=13, n_values=(5,), tokenizer="light", engine=engine),
    )
    assert _hits(report, 5) == {
        "input": {("scenario1", "id1"), ("scenario2", "id1")},
        "references": {("scenario2", "id1")},
    }
    assert _hits(report, 13) == {
        "input": {("scenario2", "id1")},
        "references": {("scenario2", "id1")},
    }
    s1, s2 = report.summary["scenario1"], report.summary["scenario2"]
    assert s1["num_instances"] == 2 and s2["num_instances"] == 1
    assert (s1["input_overlap@5"], s1["references_overlap@5"]) == (0.5, 0.0)
    assert s2["input_overlap@5"] == s2["references_overlap@5"] == 1.0
    assert s2["input_overlap@13"] == s2["references_overlap@13"] == 1.0
    row = report.rows[2]
    # the input is the whole document: every 13-gram and token matched once
    for kind in ("jaccard", "jaccard_weighted", "token", "token_weighted"):
        assert row[f"input_{kind}"] == 1.0
    # references joined by a space: 64 13-grams, the 12 straddling the two copies unmatched
    assert row["references_jaccard"] == 52 / 64
    assert row["references_token"] == 1.0


def test_helm_metric_definitions_by_hand():
    # jaccard: matched / all n-grams (with repetition); weighted sums 1/count
    m = ngram_metrics([1, 2, 0, 4], n=2)
    assert m["binary"] == 1.0 and m["jaccard"] == 3 / 4
    assert m["jaccard_weighted"] == pytest.approx((1 + 1 / 2 + 1 / 4) / 4)
    f = ngram_metrics([1, 2, 0, 4], n=2, max_frequency=3)
    assert f["jaccard"] == 2 / 4 and f["jaccard_weighted"] == pytest.approx(1.5 / 4)
    assert ngram_metrics([11, 20], n=2, max_frequency=10)["binary"] == 0.0
    # token: 6 3-grams = 8 tokens; the 3-gram at 1 covers tokens 1..3
    assert token_overlap([0, 3, 0, 0, 0, 0], n=3) == (3 / 8, pytest.approx(1 / 8))
    # the last 3-gram covers the two trailing tokens too
    assert token_overlap([0, 0, 0, 0, 0, 2], n=3) == (3 / 8, pytest.approx(1.5 / 8))
    # filter: a frequent n-gram extends a run started by a rare one (weight = run minimum)...
    assert token_overlap([2, 50, 0, 0], n=3, max_frequency=10) == (4 / 6, pytest.approx(2 / 6))
    # ...but does not start one
    assert token_overlap([50, 2, 0, 0], n=3, max_frequency=10) == (3 / 6, pytest.approx(1.5 / 6))
    assert token_overlap([50, 2, 0, 0], n=3) == (4 / 6, pytest.approx((1 / 50 + 3 / 2) / 6))
    assert token_overlap([], n=13) == (0.0, 0.0)


# --- brute-force oracle -----------------------------------------------------------------------


def _grams(tokens, n):
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def _oracle_metrics(tokens, indexed, train, n, f):
    counts = [train[g] if g in indexed else 0 for g in _grams(tokens, n)]
    valid = [c > 0 and (f == 0 or c <= f) for c in counts]
    total = len(counts)
    covered = [False] * len(tokens)
    weight = [0.0] * len(tokens)
    run_min = None
    for i, c in enumerate(counts):  # spans, as an explicit union of covered positions
        in_run = i > 0 and covered[i - 1]
        if not in_run:
            run_min = None
        if c > 0 and (valid[i] or (f and in_run)):
            run_min = c if run_min is None else min(run_min, c)
            for j in range(i, i + n):
                covered[j] = True
        if covered[i]:
            weight[i] = 1 / run_min
    for j in range(total, len(tokens)):
        if covered[j]:
            weight[j] = 1 / run_min
    return {
        "binary": float(any(valid)),
        "jaccard": sum(valid) / total if total else 0.0,
        "jaccard_weighted": sum(1 / c for c, v in zip(counts, valid) if v) / total
        if total
        else 0.0,
        "token": sum(covered) / len(tokens) if total else 0.0,
        "token_weighted": sum(weight) / len(tokens) if total else 0.0,
    }


def _oracle(instances, documents, n, n_values, f):
    rows = []
    for inst in instances:
        inp = light_tokenize(inst.input)
        refs = [light_tokenize(r) for r in inst.references]
        joined = light_tokenize(" ".join(inst.references))
        row = {}
        for m in sorted(set(n_values) | {n}):
            train = Counter(g for d in documents for g in _grams(light_tokenize(d), m))
            inter = [inp[-(m - 1) :] + r[: m - 1] for r in refs] if m > 1 else []
            row[f"input_overlap@{m}"] = float(any(g in train for g in _grams(inp, m)))
            row[f"references_overlap@{m}"] = float(
                any(g in train for r in refs for g in _grams(r, m))
            )
            row[f"intersection_overlap@{m}"] = float(
                any(g in train for s in inter for g in _grams(s, m))
            )
            if m == n:
                own_refs = {g for r in refs for g in _grams(r, m)}
                for part, toks, idx in (
                    ("input", inp, set(_grams(inp, m))),
                    ("references", joined, own_refs),
                ):
                    for suffix, ff in (("", 0), ("_filtered", f)):
                        for kind, v in _oracle_metrics(toks, idx, train, m, ff).items():
                            row[f"{part}_{kind}{suffix}"] = v
        rows.append(row)
    return rows


def _random_case(seed):
    rng = random.Random(seed)
    vocab = [f"w{k}" for k in range(rng.randint(3, 12))]
    documents = [
        " ".join(rng.choice(vocab) for _ in range(rng.randint(0, 60)))
        for _ in range(rng.randint(1, 40))
    ]
    documents += [documents[0]] * rng.randint(0, 5)  # repeated text: counts above the filter
    instances = []
    for k in range(8):
        source = rng.choice(documents).split()
        start = rng.randint(0, max(len(source) - 1, 0))
        planted = source[start : start + rng.randint(0, 20)]
        noise = [rng.choice(vocab) for _ in range(rng.randint(0, 10))]
        refs = tuple(
            " ".join(rng.choice(vocab) for _ in range(rng.randint(0, 12)))
            for _ in range(rng.randint(0, 3))
        )
        instances.append(TestInstance(str(k), " ".join(noise + planted), refs, f"b{k % 2}"))
    return instances, documents


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("seed", range(6))
def test_fast_path_matches_brute_force(seed, engine):
    instances, documents = _random_case(seed)
    n = [2, 3, 4, 5, 3, 1][seed]
    n_values = (1, 2, 6)
    report = compute_overlap(
        instances,
        iter(documents),
        OverlapOptions(
            n=n,
            n_values=n_values,
            tokenizer="light",
            max_frequency=2,
            chunk_size=[1, 3, 7, 1000, 2, 5][seed],
            engine=engine,
        ),
    )
    expected = _oracle(instances, documents, n, n_values, 2)
    for row, want in zip(report.rows, expected):
        for key, value in want.items():
            assert row[key] == pytest.approx(value, abs=1e-12), (seed, row["id"], key)
    assert set(METRICS) <= set(report.rows[0])
    assert report.num_tokens == sum(len(d.split()) for d in documents)


def test_hash_collisions_are_verified(monkeypatch):
    """With a degenerate hash (every n-gram equal), exact verification still gives true counts
    (the numpy path; the compiled one: ``test_compiled.py``)."""
    from lightning_info.methods.train_test_overlap import functional as overlap

    monkeypatch.setattr(overlap, "_windows_hash", _constant_hash)
    with pytest.raises(RuntimeError, match="hash"):  # distinct test n-grams cannot share one
        compute_overlap(
            [TestInstance("a", "x y z")],
            ["x y"],
            OverlapOptions(n=2, n_values=(), tokenizer="light", engine="numpy"),
        )
    report = compute_overlap(
        [TestInstance("a", "x y")],
        ["x y x y", "z z y"],
        OverlapOptions(n=2, n_values=(), tokenizer="light", engine="numpy"),
    )
    assert (
        report.rows[0]["input_jaccard_weighted"] == 0.5
    )  # "x y" twice; "y x" shares the hash but is rejected


def _constant_hash(ids, n, base):
    return np.zeros(max(ids.size - n + 1, 0), dtype=np.uint64)


# --- planted contamination in real text ---------------------------------------------------------


@pytest.fixture(scope="module")
def docstrings():
    return [text for _, text in stdlib_docstrings()]


def test_planted_contamination_in_docstrings(docstrings):
    held_out, corpus = docstrings[::10][:40], [d for k, d in enumerate(docstrings) if k % 10]
    instances = []
    for k, text in enumerate(held_out):
        words = text.split()
        half = len(words) // 2
        instances.append(TestInstance(str(k), " ".join(words[:half]), (" ".join(words[half:]),)))
    clean = compute_overlap(instances, corpus)
    baseline = {r["id"] for r in clean.rows if r["input_binary"]}
    planted = {inst.id for inst in instances[::4] if len(default_tokenize(inst.input)) >= 14}
    dirty_corpus = list(corpus)
    for k, inst in enumerate(i for i in instances if i.id in planted):
        slot = 7 * k + 3
        dirty_corpus[slot] = f"{dirty_corpus[slot]}\n\n{inst.input}\n\n{dirty_corpus[slot + 1]}"
    report = compute_overlap(instances, dirty_corpus)
    found = {r["id"] for r in report.rows if r["input_binary"]}
    assert planted and found == baseline | planted
    light = compute_overlap(instances, dirty_corpus, OverlapOptions(tokenizer="light"))
    for row, light_row, inst in zip(report.rows, light.rows, instances):
        if row["id"] in planted:
            # HELM's tokenizer keeps "" at the text's edges, which the corpus copy lacks
            tokens = default_tokenize(inst.input)
            edges = (tokens[0] == "") + (tokens[-1] == "")
            assert row["input_token"] == pytest.approx((len(tokens) - edges) / len(tokens))
            assert light_row["input_token"] == light_row["input_jaccard"] == 1.0
    assert report.summary["default"]["input_binary"] == len(baseline | planted) / len(instances)
    assert [r["references_binary"] for r in report.rows] == [
        r["references_binary"] for r in clean.rows
    ]
    # Llama 2 and GPT-4 style checks find the same planted instances
    texts = [i.input for i in instances]
    labels = llama2_contamination(texts, dirty_corpus)
    assert all(labels[int(i)]["label"] == "dirty" for i in planted)
    hits = substring_overlap(texts, dirty_corpus, seed=1)
    assert all(hits[int(i)] for i in planted)
    assert not any(substring_overlap(texts[:5], ["nothing to see here"]))


def test_write_report_json_and_markdown(tmp_path):
    report = compute_overlap(HELM_SCENARIOS, [HELM_DOCUMENT], OverlapOptions(tokenizer="light"))
    json_path, md_path = write_report(report, tmp_path / "out" / "report.json")
    data = json.loads(json_path.read_text())
    assert data["summary"]["scenario2"]["input_binary"] == 1.0 and len(data["instances"]) == 3
    assert "| scenario1" in md_path.read_text()


# --- callback and CLI ---------------------------------------------------------------------------


class _CaptureLogger(Logger):
    def __init__(self):
        super().__init__()
        self.metrics = {}

    name = "capture"
    version = 0

    def log_metrics(self, metrics, step=None):
        self.metrics.update(metrics)

    def log_hyperparams(self, params, *args, **kwargs):
        pass


class _TextData(pl.LightningDataModule):
    def __init__(self, train, val):
        super().__init__()
        self.train, self.val = train, val

    def train_dataloader(self):
        return DataLoader(
            self.train, batch_size=2, collate_fn=lambda items: torch.ones(len(items), 1)
        )

    def val_dataloader(self):
        return DataLoader(
            self.val, batch_size=2, collate_fn=lambda items: torch.ones(len(items), 1)
        )


class _Tiny(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)

    def training_step(self, batch, batch_idx):
        return self.layer(batch).sum()

    def validation_step(self, batch, batch_idx):
        pass

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_callback_logs_summary_and_writes_report(tmp_path, docstrings, lightning_messages):
    train = [{"text": d} for d in docstrings[:30]]
    val = [
        {"input": docstrings[3], "references": ["no"]},
        {
            "input": "entirely new words that appear nowhere else at all in any docstring ok",
            "references": [],
        },
    ]
    logger = _CaptureLogger()
    callback = TrainTestOverlap(
        options=OverlapOptions(threads=2, chunk_size=7), output_dir=str(tmp_path)
    )
    trainer = pl.Trainer(
        max_steps=1,
        limit_val_batches=1,
        logger=logger,
        callbacks=[callback],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(_Tiny(), datamodule=_TextData(train, val))
    assert logger.metrics["overlap/val/input_binary"] == 0.5
    assert logger.metrics["overlap/val/num_instances"] == 2
    assert callback.report.rows[0]["input_token"] == 1.0
    assert any("| val" in message for message in lightning_messages)  # rank_zero_info
    assert (
        json.loads((tmp_path / "overlap.json").read_text())["summary"]["val"]["any_overlap"] == 0.5
    )


def test_callback_rejects_bad_arguments():
    with pytest.raises(ValueError, match="n"):
        TrainTestOverlap(options=OverlapOptions(n=0))
    with pytest.raises(ValueError, match="splits"):
        TrainTestOverlap(splits=("train",))
    with pytest.raises(ValueError, match="tokenizer"):
        TrainTestOverlap(options=OverlapOptions(tokenizer="bpe"))
    with pytest.raises(ValueError, match="not both"):
        TrainTestOverlap(options=OverlapOptions(processes=2, threads=2))
    with pytest.raises(TypeError, match="OverlapOptions"):
        TrainTestOverlap(options={"n": 5})


def test_cli_on_files_and_saved_dataset(tmp_path, capsys):
    from datasets import Dataset

    (tmp_path / "a.txt").write_text(HELM_DOCUMENT)
    (tmp_path / "b.txt").write_text("unrelated text")
    Dataset.from_dict({"text": [HELM_DOCUMENT, "x"]}).save_to_disk(str(tmp_path / "ds"))
    test = tmp_path / "test.jsonl"
    test.write_text(
        "\n".join(
            json.dumps(
                {
                    "id": i.id,
                    "input": i.input,
                    "references": list(i.references),
                    "benchmark": i.benchmark,
                }
            )
            for i in HELM_SCENARIOS
        )
    )
    (tmp_path / "c.jsonl").write_text(
        "\n".join(json.dumps({"text": t}) for t in (HELM_DOCUMENT, "unrelated text")) + "\n"
    )
    runs = [
        ([str(tmp_path / "a.txt"), str(tmp_path / "b.txt")], []),
        ([str(tmp_path / "ds")], []),
        ([str(tmp_path / "c.jsonl")], []),
        ([str(tmp_path / "ds")], ["--num-proc", "2", "--chunk-size", "1"]),  # datasets.map
        ([str(tmp_path / "c.jsonl")], ["--threads", "2", "--chunk-size", "1"]),
    ]
    for train, extra in runs:
        out = tmp_path / "out"
        argv = ["--train", *train, "--test", str(test), "--n", "13", "--n-values", "5", *extra]
        argv += ["--no-progress"]
        assert cli_main([*argv, "--tokenizer", "light", "--output", str(out)]) == 0
        data = json.loads((out / "overlap.json").read_text())
        assert data["summary"]["scenario1"]["input_overlap@5"] == 0.5
        assert data["summary"]["scenario2"]["references_binary"] == 1.0
    assert "scenario2" in capsys.readouterr().out
    with pytest.raises(ValueError, match="not a dataset saved"):
        cli_main(["--train", str(tmp_path / "a.txt"), "--test", str(test), "--num-proc", "2"])


# --- bad input ----------------------------------------------------------------------------------


def test_bad_input_errors(tmp_path):
    inst = [TestInstance("a", "some words here")]
    with pytest.raises(ValueError, match="empty"):
        compute_overlap(inst, [])
    with pytest.raises(ValueError, match="n"):
        compute_overlap(inst, ["x"], OverlapOptions(n=0))
    with pytest.raises(ValueError, match="no test instances"):
        compute_overlap([], ["x"])
    with pytest.raises(ValueError, match="unique"):
        compute_overlap(inst * 2, ["x"])
    with pytest.raises(TypeError, match="strings"):
        compute_overlap(inst, [b"bytes"])
    with pytest.raises(ValueError, match="tokenizer"):
        compute_overlap(inst, ["x"], OverlapOptions(tokenizer="bpe"))
    with pytest.raises(TypeError, match="input"):
        TestInstance("a", None)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"input": "x"}) + "\n")
    with pytest.raises(ValueError, match="references"):
        read_test_instances(bad)
    with pytest.raises(ValueError, match="empty"):
        substring_overlap(["x"], [])


def test_multiprocessing_agrees_with_single_process():
    instances, documents = _random_case(3)
    kwargs = dict(n=3, n_values=(2,), tokenizer="light", max_frequency=2, chunk_size=5)
    one = compute_overlap(instances, documents, OverlapOptions(**kwargs))
    two = compute_overlap(instances, documents, OverlapOptions(processes=2, **kwargs))
    assert one.rows == two.rows


def test_threads_agree_with_one_thread_and_exclude_processes():
    instances, documents = _random_case(4)
    kwargs = dict(n=3, n_values=(2,), max_frequency=2, chunk_size=5)
    one = compute_overlap(instances, documents, OverlapOptions(**kwargs))
    assert (
        compute_overlap(instances, documents, OverlapOptions(threads=2, **kwargs)).rows == one.rows
    )
    with pytest.raises(ValueError, match="not both"):
        compute_overlap(instances, documents, OverlapOptions(threads=2, processes=2, **kwargs))


@pytest.mark.parametrize("workers", [dict(threads=2), dict(processes=2)])
def test_workers_read_at_most_two_chunks_each_ahead(workers):
    from itertools import count, islice

    from lightning_info.methods.train_test_overlap.functional import OverlapIndex, _count_chunks

    instances, _ = _random_case(5)
    index = OverlapIndex(instances, OverlapOptions(n=2, n_values=(), tokenizer="light"))
    read = []

    def endless_chunks():  # a corpus that never ends: a pool's map would never return
        for k in count():
            read.append(k)
            yield ["a b c"] * 3

    scan = _count_chunks(
        index, endless_chunks(), workers.get("processes", 1), workers.get("threads", 1)
    )
    first = list(islice(scan, 3))
    assert [c.documents for c in first] == [3, 3, 3]
    assert len(read) <= 3 + 2 * 2
    scan.close()
