"""Running a causal LM on input embeddings with padding anywhere in the row.

Graph4MM's rows are ``[queries][left-padded prompt][right-padded target]``: padding can sit in
the middle. With the padded positions masked out of attention and positions counted over real
tokens only (``positions``), every real token sees exactly what it would see in its unpadded row,
so a batch equals its rows run one at a time.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from lightning_info.core.validation import require_int
from lightning_info.lm.features import cache_argument, output_cache

__all__ = ["greedy_decode", "positions"]


def positions(mask: Tensor) -> Tensor:
    """Position ids counting real tokens only: ``cumsum(mask) - 1``, 0 at leading pads."""
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


def greedy_decode(
    lm: Any, embeds: Tensor, mask: Tensor, max_new_tokens: int, eos_id: int
) -> Tensor:
    """Greedy continuation of ``embeds (B, T, W)`` (``mask (B, T)``, 1 at real tokens) by
    ``lm`` with its key/value cache: ``(B, <= max_new_tokens)`` token ids; a row that produced
    ``eos_id`` continues with ``eos_id``. Decoding stops when every row has ended."""
    max_new_tokens = require_int(max_new_tokens, "max_new_tokens", 1)
    cache_keyword = cache_argument(lm)
    mask = mask.long()
    pos = positions(mask)
    out = lm(inputs_embeds=embeds, attention_mask=mask, position_ids=pos, use_cache=True)
    next_pos = pos[:, -1:] + 1
    done = torch.zeros(embeds.shape[0], dtype=torch.bool, device=embeds.device)
    tokens = []
    for step in range(max_new_tokens):
        token = out.logits[:, -1].argmax(-1).masked_fill(done, eos_id)
        tokens.append(token)
        done |= token == eos_id
        if bool(done.all()) or step == max_new_tokens - 1:
            break
        mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
        out = lm(
            input_ids=token[:, None],
            attention_mask=mask,
            position_ids=next_pos,
            use_cache=True,
            **{cache_keyword: output_cache(out)},
        )
        next_pos = next_pos + 1
    return torch.stack(tokens, dim=1)
