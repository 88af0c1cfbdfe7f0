"""A tiny tokenizer, GPT-2, multimodal-graph data module and Graph4MM for the Graph4MM tests and
the plugin table (built locally, cached per process)."""

from __future__ import annotations

import functools

from lightning_info.lm.tiny_lm import tiny_causal_lm
from lightning_info.methods.graph4mm.datamodule import MultimodalGraphDataModule
from lightning_info.methods.graph4mm.module import Graph4MM

SIZES = {"num_train": 24, "num_val": 8, "num_test": 8}


@functools.lru_cache(maxsize=1)
def tokenizer():
    """The BPE tokenizer the data module trains on its training texts when given none."""
    return MultimodalGraphDataModule(vocab_size=300, **SIZES).tokenizer


def data(batch_size: int = 8, **kwargs) -> MultimodalGraphDataModule:
    return MultimodalGraphDataModule(tokenizer(), batch_size=batch_size, **{**SIZES, **kwargs})


def lm(seed: int = 0):
    return tiny_causal_lm(tokenizer(), n_layer=1, n_embd=16, n_head=2, seed=seed)


def module(variant: str = "graph4mm", **kwargs) -> Graph4MM:
    kwargs = {"dim": 16, "num_queries": 3, "layers": 1, "heads": 2, "image_dim": 8,
              "lr": 1e-2, "warmup_fraction": 0.0, "schedule_steps": 20, "max_new_tokens": 6,
              **kwargs}  # fmt: skip
    return Graph4MM(lm(), tokenizer(), variant=variant, **kwargs)
