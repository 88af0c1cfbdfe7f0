"""The entity sources: digits' region questions against a pixel-by-pixel count, a user's JSON
lines (missing answers, answer names, refused lines), and the data module's splits by entity
and by question."""

from __future__ import annotations

import json

import pytest
import torch

from lightning_info.methods.adaptive_elicitation.entities import (
    EntityTable,
    digits_table,
    read_entities_jsonl,
)
from tests.methods.adaptive_elicitation import tiny


def test_digits_regions_match_a_pixel_count():
    from sklearn.datasets import load_digits

    table = digits_table(region=2, threshold=0.25)
    images, labels = load_digits(return_X_y=True)
    assert table.answers.shape == (1797, 26) and table.answer_names == ["No", "Yes"]
    assert table.questions[5] == "Region 5 dark?" and table.questions[19] == "Is it a 3?"
    assert torch.equal(table.labels, torch.as_tensor(labels))
    assert torch.equal(table.answers[:, 16:].argmax(1), table.labels)
    assert table.answers[:, 16:].sum(1).eq(1).all()
    for n in (0, 17, 1796):
        image = images[n].reshape(8, 8) / 16.0
        for r in range(16):
            row, col = divmod(r, 4)
            ink = sum(image[2 * row + i, 2 * col + j] for i in (0, 1) for j in (0, 1)) / 4
            assert int(table.answers[n, r]) == int(ink >= 0.25)
    assert 0.2 < float(table.answers[:, :16].double().mean()) < 0.8  # neither answer dominates
    assert digits_table(class_questions=False).answers.shape == (1797, 16)
    with pytest.raises(ValueError, match="divide"):
        digits_table(region=3)


def test_json_lines_with_missing_answers_and_answer_names(tmp_path):
    path = tmp_path / "people.jsonl"
    lines = [
        {"id": "a", "answers": {"Likes tea?": "Yes", "Owns a dog?": "No"}},
        {"id": "b", "answers": {"Owns a dog?": "Yes", "Reads poetry?": "Sometimes"}},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    table = read_entities_jsonl(path)
    assert table.questions == ["Likes tea?", "Owns a dog?", "Reads poetry?"]
    assert table.answer_names == ["Yes", "No", "Sometimes"]
    assert table.answers.tolist() == [[0, 1, -1], [-1, 0, 2]]
    assert table.blocks(1) == [(1, 0), (2, 2)] and table.blocks(0, [1, 0]) == [(1, 1), (0, 0)]
    named = read_entities_jsonl(path, answer_names=["No", "Sometimes", "Yes"])
    assert named.answers.tolist() == [[2, 0, -1], [-1, 2, 1]]
    with pytest.raises(ValueError, match="not one of"):
        read_entities_jsonl(path, answer_names=["No", "Yes"])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"answers": {"q": "Yes"}}\n{"name": "no answers"}\n')
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        read_entities_jsonl(bad)
    with pytest.raises(ValueError, match="answers must be"):
        EntityTable(["q"], ["Yes"], torch.tensor([[1]]))


def test_data_module_splits_by_entity_and_by_question(tmp_path):
    data = tiny.data(held_out_questions=[1, 4])
    splits = [
        set(data.train_entities.tolist()),
        set(data.val_entities.tolist()),
        set(data.test_entities.tolist()),
    ]
    assert sum(map(len, splits)) == data.table.answers.shape[0]
    assert not (splits[0] & splits[1]) and not (splits[0] & splits[2])
    bank = data.bank
    held_out = {tuple(bank.questions[q]) for q in (1, 4)}

    def questions_in(ids):
        starts = [0] + [i + 3 for i, t in enumerate(ids) if t == bank.answer_id][:-1]
        ends = [i for i, t in enumerate(ids) if t == bank.answer_id]
        return {tuple(ids[s:e]) for s, e in zip(starts, ends)}

    train = data.train_dataloader().dataset
    assert all(not (questions_in(train[i][0]) & held_out) for i in range(len(train)))
    val = data.val_dataloader().dataset
    assert held_out <= questions_in(val[0][0])
    with pytest.raises(ValueError, match="held_out_questions"):
        tiny.data(held_out_questions=list(range(tiny.NUM_QUESTIONS)))
    with pytest.raises(ValueError, match="leaves no training entity"):
        tiny.data(num_val=30, num_test=30)
    with pytest.raises(ValueError, match="source must be"):
        tiny.data(source="census")
    with pytest.raises(TypeError, match="`latent` must be a LatentWorldOptions"):
        tiny.data(latent={"num_questions": tiny.NUM_QUESTIONS})
    path = tmp_path / "entities.jsonl"
    path.write_text(
        "".join(
            json.dumps({"answers": {f"q{i}": "Yes" if (i + n) % 3 else "No" for i in range(4)}})
            + "\n"
            for n in range(12)
        )
    )
    users = tiny.data(source=str(path), num_val=2, num_test=2)
    assert users.table.answers.shape == (12, 4) and len(users.train_entities) == 8
    batch = next(iter(users.train_dataloader()))
    assert int((batch["labels"] != -100).sum()) == 4 * batch["input_ids"].shape[0]


def test_empirical_predictive_counts_the_matching_rows():
    from lightning_info.methods.adaptive_elicitation.world import EmpiricalPredictiveModel

    table = digits_table(region=2, threshold=0.5)
    rows = table.answers[:300].clone()
    rows[0, 6] = -1  # a missing answer is neither matched nor counted
    model = EmpiricalPredictiveModel(rows, num_answers=2, smoothing=0.5)
    for context in ([], [(1, 1)], [(1, 1), (13, 0), (2, 1)]):
        p = model.predictive([context], [5, 6])[0]
        for j, q in enumerate((5, 6)):
            counts = [0.5, 0.5]
            for row in rows.tolist():
                if all(row[c] == y for c, y in context) and row[q] != -1:
                    counts[row[q]] += 1
            expected = torch.tensor(counts, dtype=torch.float64) / sum(counts)
            torch.testing.assert_close(p[j], expected, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="smoothing"):
        EmpiricalPredictiveModel(rows, 2, smoothing=0.0)
