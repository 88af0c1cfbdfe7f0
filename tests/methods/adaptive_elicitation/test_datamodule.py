"""ElicitationDataModule: every block of an entity once per sequence, a new order each epoch
keyed by (seed, epoch, entity), labels at the answers, and the accuracy the module logs."""

from __future__ import annotations

import torch
from lightning.pytorch import Trainer

from tests.methods.adaptive_elicitation import tiny
from tests.tiny import QUIET


def _blocks(data, ids):
    """The (question, answer) blocks of one encoded entity, read back from its tokens."""
    bank, out, start = data.bank, [], 0
    for i, token in enumerate(ids):
        if token == bank.answer_id:
            question = bank.questions.index(ids[start:i])
            out.append((question, bank.answer_ids.index(ids[i + 1])))
            start = i + 3
    return out


def test_each_epoch_shuffles_every_entity_s_blocks_reproducibly():
    data = tiny.data()
    loader = data.train_dataloader()
    dataset, sampler = loader.dataset, loader.sampler
    orders = []
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        keys = list(sampler)
        assert sorted(k[0] for k in keys) == list(range(len(data.train_entities))) and {
            k[1] for k in keys
        } == {epoch}
        ids, labels = dataset[(3, epoch)]
        blocks = _blocks(data, ids)
        entity = int(data.train_entities[3])
        expected = {(q, int(data.table.answers[entity, q])) for q in range(tiny.NUM_QUESTIONS)}
        assert set(blocks) == expected and len(blocks) == tiny.NUM_QUESTIONS
        kept = [y for y in labels if y != -100]
        assert kept == [data.bank.answer_ids[a] for _, a in blocks]
        orders.append([q for q, _ in blocks])
        assert dataset[(3, epoch)] == (ids, labels)
    assert orders[0] != orders[1]


def _accuracy_by_hand(module, data, loader) -> float:
    """The argmax over the answer tokens at every labelled position, counted over the loader."""
    hits = []
    for batch in loader:
        with torch.no_grad():
            logits = module.model(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
            ).logits
        for row in range(batch["input_ids"].shape[0]):
            for pos in range(1, batch["input_ids"].shape[1]):
                target = int(batch["labels"][row, pos])
                if target != -100:
                    scores = logits[row, pos - 1, data.bank.answer_ids]
                    hits.append(data.bank.answer_ids[int(scores.argmax())] == target)
    return sum(hits) / len(hits)


def test_validation_and_test_log_answer_nll_and_accuracy(tmp_path):
    data, module = tiny.data(), tiny.module()
    trainer = Trainer(max_epochs=1, default_root_dir=tmp_path, **QUIET)
    trainer.fit(module, datamodule=data)
    metrics = trainer.callback_metrics
    assert torch.isfinite(metrics["val/loss"])
    expected = _accuracy_by_hand(module, data, data.val_dataloader())
    assert abs(expected - float(metrics["val/accuracy"])) < 1e-6
    tested = trainer.test(module, datamodule=data, verbose=False)[0]
    expected = _accuracy_by_hand(module, data, data.test_dataloader())
    assert abs(expected - tested["test/accuracy"]) < 1e-6
