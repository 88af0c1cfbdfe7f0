"""Entity blocks and their loss labels, and a causal LM's predictive distributions: batched and
chunked rows equal one forward per row, over the answer tokens only."""

from __future__ import annotations

import pytest
import torch

from lightning_info.lm.tiny_lm import tiny_causal_lm, train_bpe_tokenizer
from lightning_info.methods.adaptive_elicitation.functional import expected_information_gain
from lightning_info.methods.adaptive_elicitation.sequences import (
    ANSWER,
    END_OF_BLOCK,
    END_OF_ENTITY,
    LMPredictive,
    QuestionBank,
    encode_entity,
)

QUESTIONS = [f"Is region {i} dark?" for i in range(5)] + ["Is the last region very dark?"]


@pytest.fixture(scope="module")
def bank_and_model():
    tokenizer = train_bpe_tokenizer(QUESTIONS * 5, vocab_size=300)
    bank = QuestionBank(tokenizer, QUESTIONS, num_answers=3)
    model = tiny_causal_lm(tokenizer, n_layer=1, n_embd=16, n_head=2, seed=0)
    return bank, model


def test_blocks_and_labels(bank_and_model):
    bank, _ = bank_and_model
    ids, labels = encode_entity(bank, [(2, 1), (0, 0)])
    text = bank.tokenizer.decode(ids)
    assert text == (
        f"{QUESTIONS[2]}{ANSWER}<A1>{END_OF_BLOCK}"
        f"{QUESTIONS[0]}{ANSWER}<A0>{END_OF_BLOCK}{END_OF_ENTITY}"
    )
    kept = [(i, y) for i, y in enumerate(labels) if y != -100]
    assert [y for _, y in kept] == [bank.answer_ids[1], bank.answer_ids[0]]
    assert all(ids[i] == y and ids[i - 1] == bank.answer_id for i, y in kept)


def _llama(bank):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(bank.tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    return LlamaForCausalLM(config).eval()


@pytest.mark.parametrize("architecture", ["gpt2", "llama"])
def test_predictive_equals_one_forward_per_row(bank_and_model, architecture):
    bank, model = bank_and_model
    if architecture == "llama":  # rotary positions: the shared cache must place them right
        model = _llama(bank)
    # contexts of different token lengths (question 5 is longer than the rest)
    contexts = [[], [(0, 1)], [(0, 2), (3, 0), (5, 1)], [(5, 2), (2, 1)]]
    questions = [1, 2, 4]
    for share, batch_size in ((True, 4), (True, 256), (False, 4)):
        lm = LMPredictive(model, bank, batch_size=batch_size, share_context=share)
        batched = lm.predictive(contexts, questions)
        assert batched.shape == (4, 3, 3)
        for c, context in enumerate(contexts):
            for j, q in enumerate(questions):
                ids = [t for a, b in context for t in bank.block(a, b)] + bank.block(q, None)
                with torch.no_grad():
                    logits = model(input_ids=torch.tensor([ids])).logits[0, -1]
                expected = torch.softmax(logits[bank.answer_ids].double(), dim=-1)
                torch.testing.assert_close(batched[c, j], expected, rtol=1e-5, atol=1e-6)
    eig = expected_information_gain(LMPredictive(model, bank), [(0, 1)], [1, 2, 3], [4, 5])
    assert eig.shape == (3,) and bool(torch.isfinite(eig).all())
    with pytest.raises(ValueError, match="no questions"):
        QuestionBank(bank.tokenizer, [], 2)
