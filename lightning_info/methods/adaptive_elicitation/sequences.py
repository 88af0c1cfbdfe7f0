"""Entities as token sequences of question/answer blocks, and a language model's predictive
distributions over the answers.

An entity is a sequence of blocks ``question tokens, <Answer>, answer token, <EOS>`` ending with
``<EOP>``, as in the reference format (``question\\n<Answer>ANSWER\\n<EOS>`` ... ``<EOP>``). The
markers and one token per answer are added to the tokenizer as special tokens
(:func:`add_elicitation_tokens`), so an answer is one next-token prediction over the ``A`` answer
tokens. :class:`LMPredictive` gives a causal LM the predictive interface of ``functional.py``:
``p(Y_q | C)`` is the softmax, over the answer tokens only, of the logits after
``blocks(C) + question q + <Answer>``; all ``(context, question)`` rows of a call go through the
model in one padded batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

__all__ = ["ANSWER", "END_OF_BLOCK", "END_OF_ENTITY", "LMPredictive", "QuestionBank",
           "add_elicitation_tokens", "encode_entity"]  # fmt: skip

ANSWER, END_OF_BLOCK, END_OF_ENTITY = "<Answer>", "<EOS>", "<EOP>"


def add_elicitation_tokens(tokenizer: Any, num_answers: int) -> list[int]:
    """Add the block markers and answer tokens ``<A0>`` ... to ``tokenizer`` (resize the model's
    embeddings to ``len(tokenizer)`` afterwards); returns the answer token ids."""
    answers = [f"<A{i}>" for i in range(num_answers)]
    tokenizer.add_special_tokens(
        {"additional_special_tokens": [ANSWER, END_OF_BLOCK, END_OF_ENTITY, *answers]}
    )
    return tokenizer.convert_tokens_to_ids(answers)


class QuestionBank:
    """The question texts, tokenised once, and the token ids the blocks are made of."""

    def __init__(self, tokenizer: Any, questions: Sequence[str], num_answers: int):
        if not questions:
            raise ValueError("no questions")
        self.tokenizer = tokenizer
        self.answer_ids = add_elicitation_tokens(tokenizer, num_answers)
        self.answer_id, self.block_id, self.entity_id = tokenizer.convert_tokens_to_ids(
            [ANSWER, END_OF_BLOCK, END_OF_ENTITY]
        )
        self.questions = [
            list(tokenizer(q, add_special_tokens=False)["input_ids"]) for q in questions
        ]
        self.num_answers = num_answers

    def block(self, question: int, answer: int | None) -> list[int]:
        """One block; ``answer=None`` stops after ``<Answer>``, where the answer is predicted."""
        head = [*self.questions[question], self.answer_id]
        return head if answer is None else [*head, self.answer_ids[answer], self.block_id]


def encode_entity(
    bank: QuestionBank, blocks: Sequence[tuple[int, int]]
) -> tuple[list[int], list[int]]:
    """``(input_ids, labels)`` of an entity's blocks in the given order, ``<EOP>`` last; the
    labels are ``-100`` except at the answer tokens (the cross-entropy is on answers only)."""
    ids, labels = [], []
    for question, answer in blocks:
        block = bank.block(question, answer)
        ids += block
        labels += [-100] * (len(block) - 2) + [block[-2], -100]
    return [*ids, bank.entity_id], [*labels, -100]


class LMPredictive:
    """A causal LM as a predictive model (module docstring). ``batch_size`` rows per forward."""

    def __init__(self, model: Any, bank: QuestionBank, batch_size: int = 256):
        self.model, self.bank, self.batch_size = model, bank, batch_size
        self.num_answers = bank.num_answers

    @torch.no_grad()
    def predictive(
        self, contexts: Sequence[Sequence[tuple[int, int]]], questions: Sequence[int]
    ) -> Tensor:
        rows = [
            [t for q, a in context for t in self.bank.block(q, a)] + self.bank.block(d, None)
            for context in contexts
            for d in questions
        ]
        device = next(self.model.parameters()).device
        answer_ids = torch.tensor(self.bank.answer_ids, device=device)
        out = []
        for start in range(0, len(rows), self.batch_size):
            chunk = rows[start : start + self.batch_size]
            width = max(len(r) for r in chunk)
            ids = torch.zeros(len(chunk), width, dtype=torch.long)
            mask = torch.zeros(len(chunk), width, dtype=torch.long)
            for i, r in enumerate(chunk):
                ids[i, : len(r)], mask[i, : len(r)] = torch.tensor(r), 1
            logits = self.model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
            last = mask.sum(1).to(device) - 1
            answer_logits = logits[torch.arange(len(chunk), device=device), last][:, answer_ids]
            out.append(torch.softmax(answer_logits.double(), dim=-1).cpu())
        return torch.cat(out).view(len(contexts), len(questions), self.num_answers)
