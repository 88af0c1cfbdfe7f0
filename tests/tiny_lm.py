"""A tiny causal LM, tokenizer and prompt/response pool for FisherSFT tests (built, never fetched).

Module-level builders (cached per process) so that ``ddp_spawn`` children can rebuild them.
"""

from __future__ import annotations

import functools

from lightning_info import CausalLMFineTuner, FisherSubsetDataModule
from lightning_info.core.options import AdamWOptions
from lightning_info.lm.corpus import instruction_dataset, stdlib_docstrings
from lightning_info.lm.tiny_lm import tiny_causal_lm, train_bpe_tokenizer

POOL_SIZE = 24


@functools.lru_cache(maxsize=1)
def _short_pairs():
    return [pair for pair in stdlib_docstrings() if 60 < len(pair[1]) < 200]


@functools.lru_cache(maxsize=1)
def tokenizer():
    return train_bpe_tokenizer([text for _, text in _short_pairs()[::2]], vocab_size=400)


def pool():
    return instruction_dataset(_short_pairs()[1::5][:POOL_SIZE], seed=0)


def held_out():
    return instruction_dataset(_short_pairs()[3::7][:8], seed=0)


def finetuner(lora: bool = True) -> CausalLMFineTuner:
    model = tiny_causal_lm(tokenizer(), n_layer=1, n_embd=16, n_head=2, n_positions=256, seed=0)
    lora_args = {"r": 2, "lora_alpha": 4, "target_modules": ["c_attn"]} if lora else None
    return CausalLMFineTuner(model, optimizer=AdamWOptions(lr=1e-2), lora=lora_args)


def subset_data(batch_size: int = 4, **kwargs) -> FisherSubsetDataModule:
    kwargs = {"budget": 8, "progress": False, "max_length": 96, **kwargs}
    return FisherSubsetDataModule(pool(), tokenizer(), batch_size=batch_size, **kwargs)
