"""DocKSRAG: constrained decoding against a step-by-step masked argmax without a cache, LoRA
trains only its adapters, a fit lowers the answer loss and logs the official scores, and the
module refuses to run without its data module."""

from __future__ import annotations

import pytest
import torch
from lightning.pytorch import Trainer

from lightning_info.methods.docks_rag.decoding import LabelTrie, constrained_answers
from lightning_info.methods.docks_rag.functional import entity_pairs
from lightning_info.methods.docks_rag.synthetic import RELATIONS
from tests.methods.docks_rag import tiny
from tests.tiny import QUIET


def _oracle_answer(model, prompt_ids, trie):
    """Greedy decoding by hand: the full sequence re-run at every step, the next token the
    argmax of the logits over the trie's allowed tokens."""
    ids, generated = list(prompt_ids), []
    for _ in range(trie.max_tokens):
        allowed = trie.allowed(generated)
        logits = model(input_ids=torch.tensor([ids])).logits[0, -1]
        token = allowed[int(torch.argmax(logits[allowed]))]
        ids.append(token)
        generated.append(token)
        if token == trie.eos:
            break
    return trie.label_of(generated)


def test_trie_allows_only_label_continuations():
    tokenizer = tiny.tokenizer()
    answers = [" none", " country", " country of citizenship"]
    trie = LabelTrie(tokenizer, answers)
    encoded = [tokenizer(a, add_special_tokens=False)["input_ids"] for a in answers]
    assert trie.allowed([]) == sorted({e[0] for e in encoded})
    country = encoded[1]
    assert set(trie.allowed(country)) == {trie.eos, encoded[2][len(country)]}
    assert trie.label_of([*country, trie.eos]) == 1
    with pytest.raises(ValueError, match="no label"):
        trie.label_of([trie.eos])
    with pytest.raises(ValueError, match="same tokens"):
        LabelTrie(tokenizer, [" none", " none"])


@pytest.mark.parametrize("seed", [0, 1])
def test_constrained_decoding_of_left_padded_batches_matches_the_masked_argmax(seed):
    data = tiny.data()
    data.setup("fit")
    model = tiny.language_model(seed=seed)
    trie = LabelTrie(data.tokenizer, data.answers)
    (batch,) = list(data.val_dataloader())
    rows = slice(0, 24)
    chosen = constrained_answers(
        model, batch["input_ids"][rows], batch["attention_mask"][rows], trie
    )
    prompts = [p for prompts in data.eval_prompts for p in prompts][rows]
    assert chosen == [_oracle_answer(model, p, trie) for p in prompts]
    with pytest.raises(ValueError, match="left-padded"):
        constrained_answers(model, batch["input_ids"][:2], torch.tensor([[1] * 3 + [0]] * 2), trie)


def test_lora_trains_only_the_adapters():
    module = tiny.module(lora=True)
    trainable = {n for n, p in module.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    assert all(p.requires_grad for p in tiny.module(lora=False).parameters())


def test_fit_lowers_the_answer_loss_and_logs_the_scores(tmp_path):
    data = tiny.data()
    module = tiny.module(lora=False)
    trainer = Trainer(max_epochs=6, default_root_dir=tmp_path, **QUIET)
    data.setup("fit")
    batch = data._collate_train(data.train_rows)
    with torch.no_grad():
        before = float(module.model(**batch).loss)
    trainer.fit(module, datamodule=data)
    with torch.no_grad():
        after = float(module.model(**batch).loss)
    assert after < 0.6 * before
    scores = trainer.validate(module, datamodule=data, verbose=False)[0]
    assert set(scores) == {"val/precision", "val/recall", "val/f1", "val/ign_f1"}
    assert all(0.0 <= v <= 1.0 for v in scores.values())
    (predictions,) = trainer.predict(module, datamodule=data)
    pairs = {(d["title"], h, t) for d in data.dev_documents for h, t in entity_pairs(d)}
    assert all((p["title"], p["h_idx"], p["t_idx"]) in pairs for p in predictions)
    assert all(p["r"] in RELATIONS for p in predictions)


def test_needs_its_data_module(tmp_path):
    from tests.tiny import TinyDataModule

    trainer = Trainer(fast_dev_run=True, default_root_dir=tmp_path, **QUIET)
    with pytest.raises(ValueError, match="DocREDDataModule"):
        trainer.fit(tiny.module(), datamodule=TinyDataModule())
    with pytest.raises(TypeError, match="AdamWOptions"):
        tiny.module(optimizer={"lr": 1e-3})
