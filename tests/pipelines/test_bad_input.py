"""The SFT pipeline's files and arguments: a column of mixed types, a truncated or non-object
JSON-lines file, a missing tokenizer folder and flags of the wrong type fail naming the file,
the column or the argument; a BOM and a JSON array file load as the JSON-lines file does."""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path

import pytest

from lab.sft_corpus import write_planted_sft_corpus
from lightning_info.pipelines import SFTPipelineReport
from lightning_info.pipelines.sft import SFTPipelineDataModule, load_examples
from tests.pipelines import toy


@functools.cache
def _corpus() -> dict[str, Path]:
    folder = Path(tempfile.mkdtemp(prefix="sft-bad-input-"))
    toy.base_model(folder / "base")
    return {**toy.corpus(folder / "corpus"), "base": folder / "base"}


def _rows() -> list[dict]:
    return [json.loads(line) for line in _corpus()["pool"].read_text().splitlines()]


def _written(tmp_path, text: str, name: str = "pool.jsonl") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _with_value(tmp_path, column: str, value) -> Path:
    rows = _rows()
    rows[3][column] = value
    return _written(tmp_path, "".join(json.dumps(row) + "\n" for row in rows))


def _pipeline(tmp_path=None, pool=None, tokenizer=None, **kwargs) -> SFTPipelineDataModule:
    files = _corpus()
    return SFTPipelineDataModule(
        str(tokenizer or files["base"]),
        str(pool or files["pool"]),
        str(files["test_set"]),
        kwargs.pop("budget", 4),
        **kwargs,
    )


BAD_INPUT = [
    pytest.param(
        lambda tmp: load_examples(_with_value(tmp, "source", 5)),
        ValueError,
        r"pool\.jsonl: column 'source' mixes value types: string \(first at example 1\), "
        r"number \(first at example 4\)\. A column holds one type",
        id="load-mixed-type-column",
    ),
    pytest.param(
        lambda tmp: load_examples(_with_value(tmp, "response", ["a", "b"])),
        ValueError,
        r"column 'response' mixes value types: string .*, list \(first at example 4\)",
        id="load-list-among-strings",
    ),
    pytest.param(
        lambda tmp: _pipeline(pool=_with_value(tmp, "response", 7)),
        ValueError,
        r"column 'response' mixes value types",
        id="pipeline-number-response",
    ),
    pytest.param(
        lambda tmp: load_examples(_written(tmp, _corpus()["pool"].read_text()[:1000])),
        ValueError,
        r"pool\.jsonl, line \d+, column \d+: not valid JSON",
        id="load-truncated-jsonl",
    ),
    pytest.param(
        lambda tmp: load_examples(_written(tmp, "1\n2\n")),
        ValueError,
        r"pool\.jsonl, example 1: expected a JSON object",
        id="load-lines-that-are-not-objects",
    ),
    pytest.param(
        lambda tmp: _pipeline(tokenizer=tmp / "no-base"),
        FileNotFoundError,
        r"no-base': no such local folder; pass a folder holding config\.json",
        id="pipeline-missing-tokenizer-folder",
    ),
    pytest.param(
        lambda: _pipeline(decontaminate="no"),
        TypeError,
        r"`decontaminate` must be True or False, got 'no'",
        id="pipeline-string-decontaminate",
    ),
    pytest.param(
        lambda: SFTPipelineReport(attacks="loss"),
        TypeError,
        r"`attacks` must be a sequence of strings, got a single str",
        id="report-attacks-bare-string",
    ),
    pytest.param(
        lambda tmp: write_planted_sft_corpus(tmp, pool_size=10, test_size=4, canaries=2, seed=1.5),
        TypeError,
        r"`seed` must be an int, got 1.5",
        id="corpus-float-seed",
    ),
    pytest.param(
        lambda tmp: write_planted_sft_corpus(tmp, pool_size=10, test_size=4, split_seed=True),
        TypeError,
        r"`split_seed` must be an int, got True",
        id="corpus-bool-split-seed",
    ),
]


def test_a_bom_and_a_json_array_load_as_the_json_lines_file(tmp_path):
    text = _corpus()["pool"].read_text()
    expected = load_examples(_corpus()["pool"]).to_list()
    with_bom = tmp_path / "bom.jsonl"
    with_bom.write_bytes(b"\xef\xbb\xbf" + text.encode())
    as_array = _written(tmp_path, json.dumps(_rows()), "pool.json")
    assert load_examples(with_bom).to_list() == expected
    assert load_examples(as_array).to_list() == expected
    assert expected == _rows()


def test_resuming_the_pipeline_checks_the_served_rows(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    files = _corpus()
    data = _pipeline(strategy="random", always_train=str(files["always_train"]))
    data.setup("fit")
    assert data.served_count() == 4 + 8 == len(data.selection.indices)
    state = data.state_dict()
    again = _pipeline(strategy="random", always_train=str(files["always_train"]))
    again.setup("fit")
    again.load_state_dict(state)
    assert again.sampler.indices == data.sampler.indices
    state["sampler"]["indices"] = state["sampler"]["indices"][:4]
    with pytest.raises(ValueError, match="The checkpoint serves 4 pool rows but this data module"):
        again.load_state_dict(state)
