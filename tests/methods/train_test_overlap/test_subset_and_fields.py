"""TrainTestOverlap on the examples a train loader draws (a FisherSFT subset, a ``Subset``, a
sampler's ``indices``), and prompt/response records read by fields or a template, in the
callback and from files (JSON lines, Parquet, saved datasets)."""

from __future__ import annotations

import json
import warnings

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml
from jsonargparse import ArgumentParser
from lightning.pytorch import Callback, LightningDataModule, Trainer
from lightning.pytorch.demos.boring_classes import BoringModel
from torch.utils.data import DataLoader, Subset, SubsetRandomSampler, WeightedRandomSampler

from lightning_info.configs import callback_config
from lightning_info.methods.train_test_overlap.callback import TrainTestOverlap
from lightning_info.methods.train_test_overlap.files import (
    DocumentText,
    iter_training_records,
    iter_training_texts,
)
from lightning_info.methods.train_test_overlap.functional import (
    OverlapOptions,
    TestInstance,
    compute_overlap,
)
from lightning_info.methods.train_test_overlap.report import UndetectableInstancesWarning
from tests import tiny_lm
from tests.tiny import QUIET

OPTIONS = OverlapOptions(n=5, n_values=(3, 5), progress=False)
ROWS = [
    {"prompt": prompt, "response": response}
    for prompt, response in [
        ("which river runs past the old stone mill", "the quiet river flows by it at dawn"),
        ("name a bird that sings before sunrise", "the blackbird starts long before light"),
        ("what keeps bread fresh for a week", "a cloth bag in a cool dry cupboard"),
        ("how many legs does a spider have", "eight legs and usually eight eyes too"),
        ("why do leaves turn red in autumn", "green chlorophyll fades and red pigments show"),
        ("where do penguins raise their chicks", "on rocky shores and sea ice far south"),
    ]
]
JOINED = [f"{row['prompt']}\n{row['response']}" for row in ROWS]
INSTANCES = [  # one per row: its prompt, its response as the reference
    TestInstance(str(k), row["prompt"], (row["response"],), "rows") for k, row in enumerate(ROWS)
]


class _Boring(BoringModel):
    """Trains on a fixed input: the batches here are text records."""

    def training_step(self, batch, batch_idx):
        return super().training_step(torch.ones(1, 32), batch_idx)


def _report(callback: TrainTestOverlap, data: LightningDataModule | None, model=None):
    trainer = Trainer(**{**QUIET, "max_steps": 1, "limit_val_batches": 0, "callbacks": [callback]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndetectableInstancesWarning)
        trainer.fit(model or _Boring(), datamodule=data)
    return callback.report


def _expected(texts):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndetectableInstancesWarning)
        return compute_overlap(INSTANCES, texts, OPTIONS)


# --- the examples trained on ---------------------------------------------------------------------


def test_a_fisher_subset_is_measured_not_its_pool():
    data = tiny_lm.subset_data(strategy="random", budget=8)  # 8 of a pool of 24
    pool = tiny_lm.pool()
    instances = [
        TestInstance(str(k), row["prompt"], (row["response"],), "pool")
        for k, row in enumerate(pool)
    ]
    callback = TrainTestOverlap(
        text_field=DocumentText(template="{prompt}\n{response}"),
        test_instances=instances,
        options=OPTIONS,
    )
    report = _report(callback, data, tiny_lm.finetuner())
    trained = [f"{pool[i]['prompt']}\n{pool[i]['response']}" for i in data.selection.indices]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndetectableInstancesWarning)
        expected = compute_overlap(instances, trained, OPTIONS)
    assert report.num_documents == len(trained) == 8 < len(pool)
    assert report.rows == expected.rows
    assert report.num_tokens == expected.num_tokens
    # the instances copied from the 8 trained rows overlap; the other 16 rows were not trained on
    overlapping = {row["id"] for row in report.rows if row["any_overlap"] > 0}
    assert {str(i) for i in data.selection.indices} <= overlapping
    assert len(overlapping) < len(pool)


class _Rows(LightningDataModule):
    def __init__(self, loader):
        super().__init__()
        self.loader = loader

    def train_dataloader(self):
        return self.loader


SUBSET = [4, 1, 3]


@pytest.mark.parametrize(
    "loader",
    [
        pytest.param(lambda: DataLoader(Subset(ROWS, SUBSET), collate_fn=list), id="Subset"),
        pytest.param(
            lambda: DataLoader(ROWS, sampler=SubsetRandomSampler(SUBSET), collate_fn=list),
            id="SubsetRandomSampler",
        ),
        pytest.param(
            lambda: DataLoader(
                Subset(ROWS, [0, *SUBSET]), sampler=SubsetRandomSampler([1, 2, 3]), collate_fn=list
            ),
            id="sampler-over-a-Subset",
        ),
    ],
)
def test_a_loader_over_a_subset_counts_exactly_its_items(loader):
    callback = TrainTestOverlap(
        text_field=DocumentText(fields=["prompt", "response"]),
        test_instances=INSTANCES,
        options=OPTIONS,
    )
    report = _report(callback, _Rows(loader()))
    expected = _expected([JOINED[i] for i in SUBSET])
    assert report.num_documents == 3
    assert report.rows == expected.rows
    assert [row["any_overlap"] for row in report.rows] == [0.0, 1.0, 0.0, 1.0, 1.0, 0.0]


def test_a_sampler_naming_no_indices_is_warned_about_and_every_item_read():
    sampler = WeightedRandomSampler([1.0] * len(ROWS), num_samples=2)
    callback = TrainTestOverlap(
        text_field=DocumentText(fields=["prompt", "response"]),
        test_instances=INSTANCES,
        options=OPTIONS,
    )
    with pytest.warns(UserWarning, match="WeightedRandomSampler.*names no `indices`"):
        report = _report(callback, _Rows(DataLoader(ROWS, sampler=sampler, collate_fn=list)))
    assert report.rows == _expected(JOINED).rows and report.num_documents == len(ROWS)


# --- fields and template ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        DocumentText(fields=["prompt", "response"]),
        DocumentText(template="{prompt}\n{response}"),
    ],
    ids=["fields", "template"],
)
def test_fields_and_template_give_the_report_of_the_text_joined_by_hand(text):
    callback = TrainTestOverlap(text_field=text, test_instances=INSTANCES, options=OPTIONS)
    report = _report(callback, _Rows(DataLoader(ROWS, collate_fn=list)))
    by_hand = TrainTestOverlap(train_texts=JOINED, test_instances=INSTANCES, options=OPTIONS)
    expected = _report(by_hand, None)
    assert report.to_dict() == expected.to_dict()
    assert report.summary["rows"]["any_overlap"] == 1.0


def test_a_template_lays_fields_out_in_any_order():
    text = DocumentText(template="Q: {prompt} | A: {response} ({prompt})")
    assert text.names == ("prompt", "response")
    row = ROWS[0]
    expected = f"Q: {row['prompt']} | A: {row['response']} ({row['prompt']})"
    assert text.text(row, "row 0") == expected
    assert DocumentText().text({"text": "a"}, "x") == "a"
    assert DocumentText("body").names == ("body",)


def _write_corpus(folder):
    records = [{"id": f"r{k}", **row, "source": "mills"} for k, row in enumerate(ROWS)]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    pq.write_table(pa.Table.from_pylist(records), folder / "corpus.parquet", row_group_size=2)
    from datasets import Dataset, DatasetDict

    dataset = DatasetDict(
        {"a": Dataset.from_list(records[:2]), "b": Dataset.from_list(records[2:])}
    )
    dataset.save_to_disk(str(folder / "saved"))
    return records


@pytest.mark.parametrize("name", ["corpus.jsonl", "corpus.parquet", "saved"])
@pytest.mark.parametrize(
    "text",
    [
        DocumentText(fields=["prompt", "response"]),
        DocumentText(template="{prompt}\n{response}"),
    ],
    ids=["fields", "template"],
)
def test_files_read_by_fields_or_template_are_the_text_joined_by_hand(tmp_path, name, text):
    _write_corpus(tmp_path)
    path = str(tmp_path / name)
    assert list(iter_training_texts([path], text)) == JOINED
    records = list(iter_training_records([path], text, batch_size=4))
    assert [r.id for r in records] == [f"r{k}" for k in range(len(ROWS))]
    callback = TrainTestOverlap(
        text_field=text, train_files=[path], test_instances=INSTANCES, options=OPTIONS
    )
    assert _report(callback, None).rows == _expected(JOINED).rows


def test_parquet_is_read_by_batches_with_rows_numbered_across_them(tmp_path):
    _write_corpus(tmp_path)
    records = list(
        iter_training_records([str(tmp_path / "corpus.parquet")], "response", batch_size=4)
    )
    assert [(r.where, r.position, r.text) for r in records] == [
        ("row", k, row["response"]) for k, row in enumerate(ROWS)
    ]
    assert sum(r.size for r in records) == (tmp_path / "corpus.parquet").stat().st_size
    saved = list(iter_training_records([str(tmp_path / "saved")], "response", batch_size=4))
    assert [(r.split, r.position) for r in saved] == [
        ("a", 0),
        ("a", 1),
        ("b", 0),
        ("b", 1),
        ("b", 2),
        ("b", 3),
    ]


@pytest.mark.parametrize("name", ["corpus.jsonl", "corpus.parquet", "saved"])
def test_a_template_naming_an_absent_field_is_refused_naming_the_file(tmp_path, name):
    _write_corpus(tmp_path)
    text = DocumentText(template="{prompt}\n{answer}")
    where = r"corpus\.jsonl, line 1: no field 'answer'" if name == "corpus.jsonl" else "'answer'"
    with pytest.raises(ValueError, match=where) as error:
        list(iter_training_texts([str(tmp_path / name)], text))
    assert name in str(error.value) and "template" in str(error.value)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"fields": ["prompt"], "template": "{prompt}"}, "one of `field`, `fields` and `template`"),
        ({"fields": []}, "`fields` is empty"),
        ({"fields": "prompt"}, "a single str"),
        ({"template": "{}"}, "name a field"),
        ({"template": "{0}"}, "name a field"),
        ({"template": "{row.prompt}"}, "name a field"),
        ({"template": "no fields"}, "names no field"),
        ({"template": "{prompt"}, "not a valid format string"),
        ({"field": ""}, "non-empty str"),
    ],
)
def test_a_bad_document_text_is_refused(kwargs, message):
    with pytest.raises((TypeError, ValueError), match=message):
        DocumentText(**kwargs)


def test_an_item_without_the_field_is_refused_naming_the_fields_it_has():
    callback = TrainTestOverlap(
        text_field=DocumentText(fields=["prompt", "answer"]),
        test_instances=INSTANCES,
        options=OPTIONS,
    )
    with pytest.raises(ValueError, match=r"no field 'answer'.*\['prompt', 'response'\]"):
        _report(callback, _Rows(DataLoader(ROWS, collate_fn=list)))


def test_the_callback_yaml_takes_fields_and_a_template():
    parser = ArgumentParser()
    parser.add_argument("--callback", type=Callback)
    config = yaml.safe_load(callback_config("train_test_overlap").read_text())
    assert config["class_path"] == "lightning_info.TrainTestOverlap"
    for text, expected in [
        ({"fields": ["prompt", "response"]}, DocumentText(fields=("prompt", "response"))),
        ({"template": "{prompt}\n{response}"}, DocumentText(template="{prompt}\n{response}")),
        ("body", "body"),
    ]:
        init = {**config["init_args"], "text_field": text, "output_dir": None}
        parsed = parser.parse_object(
            {"callback": {"class_path": config["class_path"], "init_args": init}}
        )
        callback = parser.instantiate(parsed).callback
        assert callback.text_field == expected
