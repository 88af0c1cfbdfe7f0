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

from lightning_info.core.validation import require_int
from lightning_info.lm.features import cache_argument, output_cache, pad_token_rows

__all__ = [
    "ANSWER",
    "END_OF_BLOCK",
    "END_OF_ENTITY",
    "LMPredictive",
    "QuestionBank",
    "add_elicitation_tokens",
    "answer_tokens",
    "encode_entity",
]

ANSWER, END_OF_BLOCK, END_OF_ENTITY = "<Answer>", "<EOS>", "<EOP>"


def add_elicitation_tokens(tokenizer: Any, num_answers: int) -> list[int]:
    """Add the block markers and answer tokens ``<A0>`` ... to ``tokenizer`` (resize the model's
    embeddings to ``len(tokenizer)`` afterwards); returns the answer token ids."""
    answers = [f"<A{i}>" for i in range(require_int(num_answers, "num_answers", 1))]
    tokenizer.add_special_tokens(
        {"additional_special_tokens": [ANSWER, END_OF_BLOCK, END_OF_ENTITY, *answers]}
    )
    return answer_tokens(tokenizer, num_answers)


def answer_tokens(tokenizer: Any, num_answers: int) -> list[int]:
    """The ids the tokenizer gives the answer tokens ``<A0>`` ... ``<A{num_answers - 1}>``
    (its unknown token's id, or ``None``, for one it does not hold)."""
    return list(tokenizer.convert_tokens_to_ids([f"<A{i}>" for i in range(num_answers)]))


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
    """A causal LM as a predictive model (module docstring).

    With ``share_context`` (the default) each context's tokens go through the model once and
    its ``len(questions)`` rows continue from that key/value cache: the context is left-padded,
    the question suffixes right-padded, with explicit position ids, so every row computes what
    its own unpadded forward pass would. Expected information gain asks for many questions per
    context (the targets after every simulated answer), so this removes most of the work when the
    contexts are long; ``share_context=False`` runs every ``(context, question)`` row whole.
    ``batch_size`` bounds the rows per forward pass.
    """

    def __init__(
        self, model: Any, bank: QuestionBank, batch_size: int = 256, share_context: bool = True
    ):
        batch_size = require_int(batch_size, "batch_size", 1)
        self.model, self.bank, self.batch_size = model, bank, batch_size
        self.share_context = share_context
        self.num_answers = bank.num_answers
        self.num_questions = len(bank.questions)
        self._cache_argument = cache_argument(model)

    def _answer_p(self, logits: Tensor, mask: Tensor) -> Tensor:
        """Softmax over the answer tokens at each row's last real position."""
        device = logits.device
        answer_ids = torch.tensor(self.bank.answer_ids, device=device)
        last = mask.sum(1).to(device) - 1
        answer_logits = logits[torch.arange(logits.shape[0], device=device), last][:, answer_ids]
        return torch.softmax(answer_logits.double(), dim=-1).cpu()

    def _whole_rows(self, rows: list[list[int]]) -> Tensor:
        device = next(self.model.parameters()).device
        out = []
        for start in range(0, len(rows), self.batch_size):
            ids, mask = pad_token_rows(rows[start : start + self.batch_size], 0)
            logits = self.model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
            out.append(self._answer_p(logits, mask))
        return torch.cat(out)

    def _shared_rows(self, contexts: list[list[int]], suffixes: list[list[int]]) -> Tensor:
        """Rows ``context + suffix`` for every (non-empty) context and suffix, context-major."""
        device = next(self.model.parameters()).device
        per_chunk = max(1, self.batch_size // len(suffixes))
        suffix_ids, suffix_mask = pad_token_rows(suffixes, 0)
        out = []
        for start in range(0, len(contexts), per_chunk):
            ids, mask = pad_token_rows(contexts[start : start + per_chunk], 0, left=True)
            positions = (mask.cumsum(1) - 1).clamp(min=0)
            prefix = self.model(
                input_ids=ids.to(device),
                attention_mask=mask.to(device),
                position_ids=positions.to(device),
                use_cache=True,
            )
            cache = output_cache(prefix)
            cache.batch_repeat_interleave(len(suffixes))
            n = ids.shape[0]
            lengths = mask.sum(1).repeat_interleave(len(suffixes))
            rows_ids = suffix_ids.repeat(n, 1)
            rows_mask = suffix_mask.repeat(n, 1)
            rows_positions = lengths[:, None] + torch.arange(suffix_ids.shape[1])[None]
            full_mask = torch.cat([mask.repeat_interleave(len(suffixes), 0), rows_mask], dim=1)
            logits = self.model(
                input_ids=rows_ids.to(device),
                attention_mask=full_mask.to(device),
                position_ids=rows_positions.to(device),
                **{self._cache_argument: cache},
            ).logits
            out.append(self._answer_p(logits, rows_mask))
        return torch.cat(out)

    @torch.no_grad()
    def predictive(
        self, contexts: Sequence[Sequence[tuple[int, int]]], questions: Sequence[int]
    ) -> Tensor:
        prefixes = [[t for q, a in context for t in self.bank.block(q, a)] for context in contexts]
        suffixes = [self.bank.block(d, None) for d in questions]
        if not self.share_context:
            rows = [prefix + suffix for prefix in prefixes for suffix in suffixes]
            out = self._whole_rows(rows)
            return out.view(len(contexts), len(questions), self.num_answers)
        out = torch.empty(len(contexts), len(questions), self.num_answers, dtype=torch.float64)
        empty = [i for i, prefix in enumerate(prefixes) if not prefix]
        if empty:  # nothing to share: the question rows alone
            out[empty] = self._whole_rows(suffixes).expand(len(empty), -1, -1)
        filled = [i for i, prefix in enumerate(prefixes) if prefix]
        if filled:
            shared = self._shared_rows([prefixes[i] for i in filled], suffixes)
            out[filled] = shared.view(len(filled), len(questions), self.num_answers)
        return out
