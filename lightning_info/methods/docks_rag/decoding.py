"""Constrained decoding of an answer to one of a fixed set of label texts.

Greedy decoding through ``transformers``' ``generate`` with ``prefix_allowed_tokens_fn``: at each
step only the tokens that continue some label's token sequence (a prefix trie of the labels, each
ending in the tokenizer's end-of-sequence token) are allowed, so every answer is a label, whatever
the model. The first label whose tokens the decoded ones equal is the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["LabelTrie", "constrained_answers"]


class LabelTrie:
    """The token sequences of ``labels`` (encoded without special tokens, the eos id appended)
    and, for any generated prefix, the tokens that may follow it."""

    def __init__(self, tokenizer: Any, labels: Sequence[str]):
        if not labels:
            raise ValueError("constrained decoding needs at least one label")
        if tokenizer.eos_token_id is None:
            raise ValueError("constrained decoding needs a tokenizer with an eos token")
        self.eos = int(tokenizer.eos_token_id)
        self.sequences = [
            tuple(tokenizer(label, add_special_tokens=False)["input_ids"]) + (self.eos,)
            for label in labels
        ]
        if len(set(self.sequences)) != len(self.sequences):
            raise ValueError(f"two labels encode to the same tokens: {list(labels)}")
        self.max_tokens = max(len(s) for s in self.sequences)

    def allowed(self, prefix: Sequence[int]) -> list[int]:
        """Tokens that extend ``prefix`` towards a label (the eos token once one is complete)."""
        prefix = tuple(prefix)
        n = len(prefix)
        nxt = sorted({s[n] for s in self.sequences if len(s) > n and s[:n] == prefix})
        return nxt or [self.eos]

    def label_of(self, tokens: Sequence[int]) -> int:
        """The index of the label whose tokens ``tokens`` are (trailing padding ignored)."""
        tokens = tuple(tokens)
        for index, sequence in enumerate(self.sequences):
            if tokens[: len(sequence)] == sequence:
                return index
        raise ValueError(f"decoded tokens {tokens} are no label")


@torch.no_grad()
def constrained_answers(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    trie: LabelTrie,
) -> list[int]:
    """Greedy constrained decoding of left-padded prompts; one label index per row."""
    if input_ids.shape[0] == 0:
        return []
    if bool((attention_mask[:, -1] == 0).any()):
        raise ValueError("constrained decoding needs left-padded prompts (the last column real)")
    width = input_ids.shape[1]

    def allowed(_: int, ids: torch.Tensor) -> list[int]:
        return trie.allowed(ids[width:].tolist())

    out = model.generate(
        input_ids=input_ids,
        attention_mask=attention_mask,
        max_new_tokens=trie.max_tokens,
        do_sample=False,
        num_beams=1,
        prefix_allowed_tokens_fn=allowed,
        pad_token_id=trie.eos,
        eos_token_id=trie.eos,
    )
    return [trie.label_of(row[width:].tolist()) for row in out]
