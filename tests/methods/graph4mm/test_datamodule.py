"""MultimodalGraphDataModule: batches hold each graph exactly, prompts end in the last column,
targets end with the end-of-sequence token, test graphs show unseen images."""

from __future__ import annotations

import json

import pytest
import torch

from lightning_info.methods.graph4mm.datamodule import (
    DigitGraphOptions,
    MultimodalGraphDataModule,
)
from tests.methods.graph4mm import tiny


def test_a_batch_holds_each_graph_exactly():
    dm = tiny.data(max_text_tokens=64)
    graphs = dm.train_graphs[:5]
    batch = dm.collate(graphs)
    tok = dm.tokenizer
    n = max(len(g.texts) for g in graphs)
    assert batch["images"].shape == (5, n, 1, 8, 8) and batch["adjacency"].shape == (5, n, n)
    assert batch["prompt_mask"][:, -1].all()  # left-padded: every prompt ends in the last column
    for i, g in enumerate(graphs):
        k = len(g.texts)
        assert batch["node_mask"][i].tolist() == [True] * k + [False] * (n - k)
        assert torch.equal(batch["adjacency"][i, :k, :k], g.adjacency())
        assert not batch["adjacency"][i, k:].any() and not batch["adjacency"][i, :, k:].any()
        assert torch.equal(batch["images"][i, :k], g.images)
        assert torch.equal(batch["has_image"][i, :k], g.has_image)
        for v in range(k):
            ids = batch["node_text_ids"][i, v][batch["node_text_mask"][i, v]]
            assert tok.decode(ids) == g.texts[v]
        assert not batch["node_text_mask"][i, k:].any()
        prompt = batch["prompt_ids"][i][batch["prompt_mask"][i].bool()].tolist()
        ids, slot = dm.encode_prompt(g)
        assert prompt == ids and ids[:slot] == tok("linked:")["input_ids"]
        assert int(batch["query_position"][i]) == batch["prompt_ids"].shape[1] - len(ids) + slot
        assert tok.decode(ids[:slot] + ids[slot + 1 :]) == dm.prompt_text(g)
        target = batch["target_ids"][i][batch["target_mask"][i].bool()].tolist()
        assert target[-1] == tok.eos_token_id and tok.decode(target[:-1]) == " " + g.target
        assert int(batch["label"][i]) == g.label
    neighbours = "; ".join(graphs[0].texts[v] for v in graphs[0].neighbours())
    assert dm.prompt_text(graphs[0]) == f"linked: {neighbours}. digits of the linked nodes:"
    assert (batch["prompt_ids"][torch.arange(5), batch["query_position"]] == tok.pad_token_id).all()
    assert batch["prompt_mask"][torch.arange(5), batch["query_position"]].all()


def test_node_texts_are_cut_to_max_text_tokens():
    dm = tiny.data(max_text_tokens=3)
    batch = dm.collate(dm.train_graphs[:4])
    assert batch["node_text_ids"].shape[-1] == 3
    for v, text in enumerate(dm.train_graphs[0].texts):
        kept = batch["node_text_ids"][0, v][batch["node_text_mask"][0, v]].tolist()
        assert kept == dm.tokenizer(text)["input_ids"][:3]


def test_test_graphs_show_images_unseen_in_training():
    dm = tiny.data()
    seen = torch.cat([g.images[g.has_image] for g in dm.train_graphs]).flatten(1)
    shown = torch.cat([g.images[g.has_image] for g in dm.test_graphs]).flatten(1)
    from lightning_info.data.digits import load_digits_images

    images, _ = load_digits_images()
    flat = images.flatten(1)
    for image in shown:
        if bool((seen == image).all(1).any()):  # only a digit that occurs twice in the set
            assert int((flat == image).all(1).sum()) > 1


def test_splits_and_shuffling_are_seeded():
    a, b, c = tiny.data(seed=1), tiny.data(seed=1), tiny.data(seed=2)
    assert [g.target for g in a.train_graphs] == [g.target for g in b.train_graphs]
    assert [g.texts for g in a.test_graphs] != [g.texts for g in c.test_graphs]
    loader = a.train_dataloader()
    loader.sampler.set_epoch(3)
    first = list(loader.sampler)
    loader.sampler.set_epoch(3)
    assert list(loader.sampler) == first
    assert sorted(first) == list(range(len(a.train_graphs)))


def test_a_json_source_splits_by_a_seeded_permutation(tmp_path):
    graphs = [
        {
            "nodes": [
                {"text": f"node {i}", "label": "a" if i % 2 else "b"},
                {"text": "neighbour", "image": [[0.5]]},
            ],
            "edges": [[0, 1]],
            "target": f"t{i}",
        }
        for i in range(10)
    ]
    path = tmp_path / "graphs.json"
    path.write_text(json.dumps(graphs))
    dm = MultimodalGraphDataModule(tiny.tokenizer(), source=str(path), num_val=2, num_test=3)
    assert (len(dm.train_graphs), len(dm.val_graphs), len(dm.test_graphs)) == (5, 2, 3)
    assert dm.class_names == ["a", "b"] and dm.num_classes == 2
    targets = sorted(g.target for g in dm.train_graphs + dm.val_graphs + dm.test_graphs)
    assert targets == sorted(f"t{i}" for i in range(10))
    batch = next(iter(dm.val_dataloader()))
    assert batch["images"].shape[-3:] == (1, 1, 1) and batch["has_image"][:, 1].all()


def test_without_a_tokenizer_one_is_trained_on_the_training_texts():
    dm = MultimodalGraphDataModule(num_train=12, num_val=4, num_test=4, vocab_size=280)
    text = dm.prompt_text(dm.train_graphs[0])
    assert dm.tokenizer.decode(dm.tokenizer(text)["input_ids"]) == text
    assert len(dm.tokenizer) <= 280


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(ValueError, match="source must be"):
        MultimodalGraphDataModule(tiny.tokenizer(), source="nowhere.json")
    with pytest.raises(ValueError, match="context"):
        MultimodalGraphDataModule(tiny.tokenizer(), prompt="no slot", **tiny.SIZES)
    path = tmp_path / "g.json"
    path.write_text(json.dumps([{"nodes": [{"text": "a"}]}] * 3))
    with pytest.raises(ValueError, match="leaves no training graph"):
        MultimodalGraphDataModule(tiny.tokenizer(), source=str(path), num_val=2, num_test=1)
    with pytest.raises(ValueError, match="no test graphs"):
        tiny.data(num_test=0).test_dataloader()
    with pytest.raises(ValueError, match=r"`digits.homophily` is a probability"):
        DigitGraphOptions(homophily=1.5)
    with pytest.raises(ValueError, match=r"`digits.max_neighbours` must be >= 1"):
        DigitGraphOptions(max_neighbours=0)
    with pytest.raises(TypeError, match="DigitGraphOptions"):
        tiny.data(digits={"homophily": 0.5})


def test_the_digit_options_shape_the_graphs():
    options = DigitGraphOptions(max_neighbours=1, max_distractors=0, text_node_rate=1.0)
    dm = tiny.data(digits=options)
    assert dm.digits == options
    for graph in dm.train_graphs:
        assert len(graph.texts) == 2 and not bool(graph.has_image.any())
