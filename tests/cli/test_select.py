"""``lightning-info select`` end to end through the installed entry point, against the library:
precomputed features select what ``fisher_greedy_select`` selects (two rounds: what
``store_two_round_select`` selects, serially and on Dask) with the fingerprint of
``selection_fingerprint``; a model folder selects what ``FisherSubsetDataModule`` and the
functional path (``response_features`` + the greedy) select, and the data module reloads the
command's selection file; each bad input exits with status 2 before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from lightning_info.core.blocks import TokenBlocks
from lightning_info.methods.fisher_sft.functional import (
    FeatureSketch,
    fisher_greedy_select,
    sketch_features,
)
from lightning_info.methods.fisher_sft.sampler import load_selection, selection_fingerprint
from tests.cli.entry_point import ok, refused, run, run_here, write_jsonl

POOL_SIZE = 24


def pool_records(size: int = POOL_SIZE) -> list[dict]:
    records = []
    for i in range(size):
        kind = "odd" if i % 2 else "even"
        prompt = f"Explain item {i}."
        response = (
            f"Item {i} is {kind} and {'small' if i < 12 else 'large'}; it weighs {i * 7 % 13}."
        )
        records.append({"id": i, "prompt": prompt, "response": response})
    return records


def save_tiny_lm(folder: Path, texts: list[str], seed: int = 0):
    """A tiny GPT-2 and its BPE tokenizer, built here and saved with save_pretrained."""
    from lightning_info.lm.tiny_lm import tiny_causal_lm, train_bpe_tokenizer

    tokenizer = train_bpe_tokenizer(texts, vocab_size=300)
    model = tiny_causal_lm(tokenizer, n_layer=1, n_embd=16, n_head=2, n_positions=64, seed=seed)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model, tokenizer


@pytest.fixture(scope="module")
def lm_pool(tmp_path_factory):
    """A pool file and a tiny causal LM folder, and the model loaded back from it."""
    from lightning_info.lm.tiny_lm import load_causal_lm

    root = tmp_path_factory.mktemp("select")
    records = pool_records()
    pool = write_jsonl(root / "pool.jsonl", records)
    texts = [r["prompt"] for r in records] + [r["response"] for r in records]
    save_tiny_lm(root / "model", texts)
    model, tokenizer = load_causal_lm(str(root / "model"))
    return {"root": root, "pool": pool, "records": records, "model": model, "tok": tokenizer}


@pytest.fixture(scope="module")
def features_pool(tmp_path_factory):
    root = tmp_path_factory.mktemp("features")
    records = pool_records(30)
    pool = write_jsonl(root / "pool.jsonl", records)
    rows = np.random.default_rng(0).normal(size=(30, 6))
    np.save(root / "rows.npy", rows)
    blocks = np.random.default_rng(1).normal(size=(30, 4, 12)).astype(np.float32)
    np.save(root / "blocks.npy", blocks)
    return {"root": root, "pool": pool, "records": records, "rows": rows, "blocks": blocks}


def one_row_blocks(rows: np.ndarray) -> TokenBlocks:
    values = torch.from_numpy(rows)
    return TokenBlocks(values, torch.arange(len(rows) + 1))


def written(folder: Path) -> tuple[list[dict], dict]:
    lines = (folder / "selected.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines], json.loads((folder / "selection.json").read_text())


def selection_fingerprint_of(blocks, budget, two_round=False, shards=None, **sketch):
    """The fingerprint the command documents for a selection from features."""
    return selection_fingerprint(
        blocks,
        budget=budget,
        strategy="fisher",
        seed=None,
        lam=1.0,
        pooling="none",
        token_weighting="none",
        **(sketch or {"sketch_dim": None}),
        two_round=two_round,
        store_shards=shards,
    )


# -- help --------------------------------------------------------------------------------------


def test_help_lists_every_option_with_its_description():
    result = ok(run("select", "--help"))
    for flag in ("--pool", "--budget", "--model", "--features", "--sketch_dim", "--dask"):
        assert flag in result.stdout
    assert "information gain" in result.stdout
    assert "a .npy file of precomputed features" in result.stdout


# -- precomputed features ----------------------------------------------------------------------


def test_features_select_what_the_greedy_selects_with_its_fingerprint(features_pool, tmp_path):
    out = tmp_path / "out"
    result = ok(
        run(
            "select",
            "--pool",
            features_pool["pool"],
            "--features",
            features_pool["root"] / "rows.npy",
            "--budget",
            7,
            "--output_dir",
            out,
        )
    )
    rows = features_pool["rows"]
    expected = fisher_greedy_select([torch.from_numpy(r)[None] for r in rows], 7, lam=1.0)
    records, selection = written(out)
    assert selection["indices"] == expected.indices
    assert selection["gains"] == pytest.approx(expected.gains, rel=1e-12)
    assert records == [features_pool["records"][i] for i in expected.indices]
    assert selection["metadata"]["lines"] == [i + 1 for i in expected.indices]
    fingerprint = selection_fingerprint_of(one_row_blocks(rows), 7)
    assert selection["fingerprint"] == fingerprint
    loaded = load_selection(out / "selection.json", fingerprint=fingerprint, budget=7)
    assert loaded.indices == expected.indices
    assert f"FisherSFT selected 7 of 30 records of {features_pool['pool']}" in result.stdout
    assert fingerprint in result.stdout


def test_token_blocks_sketched_select_what_the_greedy_selects_on_the_sketch(
    features_pool, tmp_path
):
    out = tmp_path / "out"
    ok(
        run(
            "select",
            "--pool",
            features_pool["pool"],
            "--features",
            features_pool["root"] / "blocks.npy",
            "--budget",
            5,
            "--sketch_dim",
            5,
            "--seed",
            3,
            "--output_dir",
            out,
        )
    )
    blocks = TokenBlocks.from_list(list(torch.from_numpy(features_pool["blocks"])))
    sketched = sketch_features(blocks, FeatureSketch(5, 3))
    expected = fisher_greedy_select(sketched, 5, lam=1.0)
    _, selection = written(out)
    assert selection["indices"] == expected.indices
    assert selection["fingerprint"] == selection_fingerprint_of(
        blocks, 5, sketch_dim=5, sketch_seed=3
    )
    assert selection["metadata"]["sketch_dim"] == 5


def _store_oracle(rows: np.ndarray, folder: Path, budget: int, shards: int):
    from lightning_info.methods.fisher_sft.dask_select import store_two_round_select
    from lightning_info.methods.fisher_sft.feature_store import FeatureStore

    store = FeatureStore.create(folder)
    store.append(one_row_blocks(rows))
    return store_two_round_select(store, budget, shards)


def test_dask_two_round_selects_what_the_serial_store_greedy_selects(features_pool, tmp_path):
    out = tmp_path / "out"
    result = ok(
        run(
            "select",
            "--pool",
            features_pool["pool"],
            "--features",
            features_pool["root"] / "rows.npy",
            "--budget",
            6,
            "--dask",
            "true",
            "--shards",
            3,
            "--output_dir",
            out,
        )
    )
    expected = _store_oracle(features_pool["rows"], tmp_path / "store", 6, 3)
    _, selection = written(out)
    assert selection["indices"] == expected.indices
    fingerprint = selection_fingerprint_of(
        one_row_blocks(features_pool["rows"]), 6, two_round=True, shards=3
    )
    assert selection["fingerprint"] == fingerprint
    assert sorted(p.name for p in out.iterdir()) == ["selected.jsonl", "selection.json"]
    assert "fingerprint" in result.stdout


# -- a model folder ----------------------------------------------------------------------------


def _data_module(lm_pool, budget, **options):
    from datasets import Dataset

    from lightning_info.methods.fisher_sft import FisherSubsetDataModule, SubsetSelectionOptions

    records = lm_pool["records"]
    pool = Dataset.from_dict(
        {"prompt": [r["prompt"] for r in records], "response": [r["response"] for r in records]}
    )
    return FisherSubsetDataModule(
        pool,
        lm_pool["tok"],
        budget,
        selection_options=SubsetSelectionOptions(embed_batch_size=16, **options),
        feature_model=lm_pool["model"],
        max_length=64,
        progress=False,
    )


def test_model_selects_what_the_data_module_selects_and_the_data_module_reuses_it(
    lm_pool, tmp_path
):
    out = tmp_path / "out"
    ok(
        run(
            "select",
            "--pool",
            lm_pool["pool"],
            "--model",
            lm_pool["root"] / "model",
            "--text_field",
            "response",
            "--prompt_template",
            "{prompt}",
            "--budget",
            6,
            "--progress",
            "false",
            "--output_dir",
            out,
        )
    )
    data = _data_module(lm_pool, 6)
    data.setup("fit")
    records, selection = written(out)
    assert selection["indices"] == data.selection.indices
    assert selection["gains"] == pytest.approx(data.selection.gains, rel=1e-6)
    assert selection["fingerprint"] == data.fingerprint
    assert records == [lm_pool["records"][i] for i in data.selection.indices]
    reusing = _data_module(lm_pool, 6, path=str(out / "selection.json"))
    reusing.setup("fit")
    assert reusing.embedded_rows == 0  # loaded, not embedded again
    assert reusing.selection.indices == data.selection.indices


def test_model_two_round_selects_what_the_data_module_selects_from_its_store(lm_pool, tmp_path):
    out = tmp_path / "out"
    ok(
        run(
            "select",
            "--pool",
            lm_pool["pool"],
            "--model",
            lm_pool["root"] / "model",
            "--text_field",
            "response",
            "--prompt_template",
            "{prompt}",
            "--budget",
            5,
            "--two_round",
            "true",
            "--shards",
            3,
            "--progress",
            "false",
            "--output_dir",
            out,
        )
    )
    options = {"two_round": True, "feature_dir": str(tmp_path / "features"), "store_shards": 3}
    data = _data_module(lm_pool, 5, **options)
    data.setup("fit")
    _, selection = written(out)
    assert selection["indices"] == data.selection.indices
    assert selection["fingerprint"] == data.fingerprint
    reusing = _data_module(lm_pool, 5, path=str(out / "selection.json"), **options)
    reusing.setup("fit")
    assert reusing.embedded_rows == 0
    assert sorted(p.name for p in out.iterdir()) == ["selected.jsonl", "selection.json"]


def test_config_yaml_with_a_template_and_curvature_weights_equals_the_functional_path(
    lm_pool, tmp_path
):
    from lightning_info.lm.features import response_features

    config = tmp_path / "select.yaml"
    config.write_text(
        f"pool: {lm_pool['pool']}\n"
        f"model: {lm_pool['root'] / 'model'}\n"
        'template: "{prompt}\\n{response}"\n'
        "token_weighting: p(1-p)\n"
        "pooling: mean\n"
        "budget: 4\n"
        "batch_size: 5\n"
        "progress: false\n"
        f"output_dir: {tmp_path / 'out'}\n"
    )
    ok(run("select", "--config", config))
    texts = [f"{r['prompt']}\n{r['response']}" for r in lm_pool["records"]]
    features, weights = response_features(
        lm_pool["model"],
        lm_pool["tok"],
        {"prompt": [""] * len(texts), "response": texts},
        batch_size=5,
        max_length=64,
        progress=False,
        curvature_weights=True,
    )
    expected = fisher_greedy_select(features, 4, lam=1.0, pooling="mean", token_weights=weights)
    _, selection = written(tmp_path / "out")
    assert selection["indices"] == expected.indices
    assert selection["metadata"]["token_weighting"] == "p(1-p)"


# -- bad input: exit status 2, the file (and line) named, nothing written ----------------------


def _select(pool, out, *extra, script=False):
    """``lightning-info select`` refused: in this process, or through the script (``script``)."""
    return (run if script else run_here)("select", "--pool", pool, "--output_dir", out, *extra)


@pytest.fixture
def rows_file(features_pool):
    return features_pool["root"] / "rows.npy"


def test_a_missing_pool_file_is_refused(tmp_path, rows_file):
    out = tmp_path / "out"
    result = _select(tmp_path / "absent.jsonl", out, "--budget", 2, "--features", rows_file)
    refused(result, "absent.jsonl", "does not exist")
    assert not out.exists()


def test_a_line_that_is_not_json_is_refused_with_its_file_and_line(tmp_path, rows_file):
    pool = tmp_path / "pool.jsonl"
    lines = [json.dumps(r) for r in pool_records(30)]
    lines[2] = '{"prompt": "x", "response": '
    pool.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    result = _select(pool, out, "--budget", 2, "--features", rows_file, script=True)
    refused(result, "pool.jsonl, line 3")
    assert not out.exists()


def test_a_record_without_the_text_field_is_refused_with_its_file_and_line(tmp_path):
    records = pool_records(5)
    del records[1]["response"]
    pool = write_jsonl(tmp_path / "pool.jsonl", records)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    out = tmp_path / "out"
    result = _select(pool, out, "--budget", 2, "--model", model, "--text_field", "response")
    refused(result, "pool.jsonl, line 2", "'response'", "['id', 'prompt']")
    assert not out.exists()


def test_an_empty_pool_file_is_refused(tmp_path, rows_file):
    pool = tmp_path / "pool.jsonl"
    pool.write_text("\n\n")
    out = tmp_path / "out"
    refused(_select(pool, out, "--budget", 1, "--features", rows_file), "pool.jsonl", "no records")
    assert not out.exists()


def test_a_budget_larger_than_the_pool_is_refused(features_pool, tmp_path, rows_file):
    out = tmp_path / "out"
    result = _select(features_pool["pool"], out, "--budget", 31, "--features", rows_file)
    refused(result, "budget=31", "30 records", "pool.jsonl")
    assert not out.exists()


def test_a_budget_below_one_is_refused(features_pool, tmp_path, rows_file):
    out = tmp_path / "out"
    result = _select(features_pool["pool"], out, "--budget", 0, "--features", rows_file)
    refused(result, "budget must be an integer >= 1")
    assert not out.exists()


def test_features_with_another_row_count_than_the_pool_are_refused(features_pool, tmp_path):
    features = tmp_path / "short.npy"
    np.save(features, features_pool["rows"][:29])
    out = tmp_path / "out"
    result = _select(features_pool["pool"], out, "--budget", 3, "--features", features)
    refused(result, "short.npy holds 29 rows", "pool.jsonl holds 30 records")
    assert not out.exists()


def test_a_model_folder_without_config_json_is_refused(features_pool, tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "tokenizer.json").write_text("{}")
    out = tmp_path / "out"
    result = _select(features_pool["pool"], out, "--budget", 3, "--model", model)
    refused(result, str(model), "no config.json")
    assert not out.exists()


def test_an_output_dir_that_is_a_file_is_refused(features_pool, tmp_path, rows_file):
    out = tmp_path / "out"
    out.write_text("keep me")
    result = _select(features_pool["pool"], out, "--budget", 3, "--features", rows_file)
    refused(result, str(out), "output_dir is a file")
    assert out.read_text() == "keep me"
