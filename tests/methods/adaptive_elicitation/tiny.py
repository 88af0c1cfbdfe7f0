"""A tiny tokenizer, GPT-2 and latent-type data module for the elicitation tests and the plugin
table (built locally, cached per process)."""

from __future__ import annotations

import functools

from lightning_info.core.options import AdamWOptions
from lightning_info.lm.tiny_lm import tiny_causal_lm, train_bpe_tokenizer
from lightning_info.methods.adaptive_elicitation.datamodule import (
    ElicitationDataModule,
    LatentWorldOptions,
)
from lightning_info.methods.adaptive_elicitation.entities import latent_world_questions
from lightning_info.methods.adaptive_elicitation.module import ElicitationLM

NUM_QUESTIONS = 6


@functools.lru_cache(maxsize=1)
def _questions_tokenizer():
    return train_bpe_tokenizer(latent_world_questions(NUM_QUESTIONS) * 5, vocab_size=300)


def data(batch_size: int = 8, **kwargs) -> ElicitationDataModule:
    latent = LatentWorldOptions(num_questions=NUM_QUESTIONS, num_entities=48)
    kwargs = {"latent": latent, "num_val": 8, "num_test": 8, **kwargs}
    return ElicitationDataModule(_questions_tokenizer(), batch_size=batch_size, **kwargs)


def module() -> ElicitationLM:
    bank = data().bank  # adds the block tokens to the shared tokenizer before the model is built
    model = tiny_causal_lm(_questions_tokenizer(), n_layer=1, n_embd=16, n_head=2, seed=0)
    optimizer = AdamWOptions(lr=1e-2, warmup_fraction=0.0, schedule_steps=20)
    return ElicitationLM(model, bank.answer_ids, optimizer=optimizer)
