"""DocREDDataModule: its training rows and answers, what its prompts hold, truncation to the
model's context, whole-document evaluation batches, DocRED files and its refusals."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from lightning_info.methods.docks_rag.datamodule import (
    DocKGOptions,
    DocREDDataModule,
    DocREDSource,
    HybridPromptOptions,
)
from lightning_info.methods.docks_rag.functional import (
    entity_pairs,
    pair_relations,
    serialise_triples,
)
from lightning_info.methods.docks_rag.synthetic import RELATIONS, synthetic_docred
from tests.methods.docks_rag import tiny


@pytest.fixture(scope="module")
def data():
    module = tiny.data(negatives_per_positive=1.0)
    module.setup("fit")
    return module


def _decode(ids):
    return tiny.tokenizer().decode(ids)


def test_training_rows_answer_every_labelled_pair_and_as_many_unlabelled(data):
    answers = [_decode(answer) for _, answer in data.train_rows]
    eos = tiny.tokenizer().eos_token
    labelled = sum(len(rels) for d in data.train_documents for rels in pair_relations(d).values())
    expected = sorted(
        f" {RELATIONS[r]}{eos}"
        for d in data.train_documents
        for rels in pair_relations(d).values()
        for r in rels
    )
    assert sorted(a for a in answers if a != f" none{eos}") == expected
    assert answers.count(f" none{eos}") == labelled  # one negative per positive
    assert data.labels == ["none", *RELATIONS]


def test_labels_are_the_answer_tokens_only(data):
    batch = next(iter(data.train_dataloader()))
    for ids, mask, labels in zip(batch["input_ids"], batch["attention_mask"], batch["labels"]):
        kept = labels[labels != -100].tolist()
        real = ids[mask.bool()].tolist()
        assert kept == real[len(real) - len(kept) :]  # the labels are the row's last tokens
        assert _decode(kept).endswith(tiny.tokenizer().eos_token) and _decode(kept)[0] == " "


def test_no_prompt_holds_a_triple_of_its_own_pair(data):
    checked = 0
    for d, prompts in zip(data.dev_documents, data.eval_prompts):
        for (h, t), ids in zip(entity_pairs(d), prompts):
            text = _decode(ids)
            assert text.endswith("Relation:")
            for r in RELATIONS:
                for line in serialise_triples(d, [(h, r, t), (t, r, h)], RELATIONS):
                    assert line not in text
            checked += "Graph:" in text and "Related:" in text
    assert checked == sum(len(p) for p in data.eval_prompts)


def test_query_triples_shows_the_scorers_own_prediction_for_the_queried_pair(data):
    assert HybridPromptOptions().query_triples  # the paper's subgraph is the default
    # the tiny scorer keeps no triple; plant a predicted one for the first held-out pair
    index = len(data.train_documents)
    document = data.documents[index]
    h, t = entity_pairs(document)[0]
    planted = (h, next(iter(RELATIONS)), t)
    triples = [list(ts) for ts in data.knowledge.triples]
    triples[index] = [planted, *triples[index]]
    (line,) = serialise_triples(document, [planted], RELATIONS)
    prompts = {}
    for query_triples in (False, True):
        module = copy.copy(data)
        module.prompt = HybridPromptOptions(top_k=2, query_triples=query_triples)
        module.knowledge = dataclasses.replace(data.knowledge, triples=triples)
        prompts[query_triples] = _decode(module._prompt_ids(index, (h, t)))
    assert line in prompts[True].split("Related:")[0]  # in the DocKG part
    assert line not in prompts[False]


def test_evaluation_batches_are_whole_documents_left_padded(data):
    (batch,) = list(data.val_dataloader())  # eval_documents=2: both dev documents at once
    pairs = [(d["title"], h, t) for d in data.dev_documents for h, t in entity_pairs(d)]
    assert batch["queries"] == pairs and batch["documents"] == data.dev_documents
    assert bool(batch["attention_mask"][:, -1].all())
    lengths = batch["attention_mask"].sum(1).tolist()
    assert lengths == [len(p) for prompts in data.eval_prompts for p in prompts]


def test_a_short_context_cuts_document_text_with_a_warning_that_says_how_much():
    long = tiny.data(max_length=384)
    long.setup("fit")
    longest = max(len(p) for prompts in long.eval_prompts for p in prompts)
    short = tiny.data(max_length=longest - 10)
    with pytest.warns(UserWarning, match=r"prompts did not fit max_length=.*tokens in all, up to"):
        short.setup("fit")
    room = short.max_length - short._longest_answer
    assert max(len(p) for prompts in short.eval_prompts for p in prompts) <= room
    assert all(len(p) + len(a) <= short.max_length for p, a in short.train_rows)
    with pytest.raises(ValueError, match="without its document text"):
        tiny.data(max_length=40).setup("fit")


def test_reads_docred_files(tmp_path):
    train, dev = synthetic_docred(3, seed=0), synthetic_docred(2, seed=1)
    for name, documents in (("train.json", train), ("dev.json", dev)):
        (tmp_path / name).write_text(json.dumps(documents))
    (tmp_path / "rel_info.json").write_text(json.dumps(RELATIONS))
    files = {
        k: str(tmp_path / f)
        for k, f in (
            ("train_file", "train.json"),
            ("dev_file", "dev.json"),
            ("rel_info_file", "rel_info.json"),
        )
    }
    module = tiny.data(source=DocREDSource(**files), prompt=HybridPromptOptions(use_kg=False))
    module.setup("fit")
    assert module.dev_documents == dev and module.relations == RELATIONS
    assert all("Graph:" not in _decode(p) for p in module.eval_prompts[0])


def test_refusals():
    with pytest.raises(ValueError, match="both train_file and dev_file"):
        DocREDSource(train_file="a.json")
    with pytest.raises(ValueError, match="rel_info_file"):
        DocREDSource(train_file="a.json", dev_file="b.json")
    with pytest.raises(ValueError, match="at least one"):
        HybridPromptOptions(use_document=False, use_kg=False, use_set_rag=False)
    with pytest.raises(ValueError, match="top_k"):
        HybridPromptOptions(top_k=0)
    with pytest.raises(ValueError, match="encoder_dim"):
        DocKGOptions(encoder_dim=0)
    with pytest.raises(ValueError, match="negatives_per_positive"):
        tiny.data(negatives_per_positive=-1)
    with pytest.raises(TypeError, match="`knowledge` must be a DocKGOptions"):
        tiny.data(knowledge={"tau": 0.5})
    with pytest.raises(FileNotFoundError):
        DocREDDataModule(tiny.tokenizer(), DocREDSource("a.json", "b.json", "c.json")).setup("fit")
