"""A tiny tokenizer, GPT-2, multimodal-graph data module and Graph4MM for the Graph4MM tests and
the plugin table (built locally, cached per process)."""

from __future__ import annotations

import functools

from lightning_info.core.options import AdamWOptions
from lightning_info.lm.tiny_lm import tiny_causal_lm
from lightning_info.methods.graph4mm.datamodule import MultimodalGraphDataModule
from lightning_info.methods.graph4mm.encoders import SmallConvEncoder
from lightning_info.methods.graph4mm.module import VARIANTS, Graph4MM, variant_qformer

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
    """A Graph4MM over :func:`lm` with an 8-wide ConvNet and a 16-wide Q-Former of 3 queries
    (one layer, two heads); ``kwargs`` override its arguments."""
    model, tok = lm(), tokenizer()
    if variant != "text_only" and "image_encoder" not in kwargs:
        kwargs["image_encoder"] = SmallConvEncoder(dim=8)
    if "qformer" not in kwargs and variant in VARIANTS:
        kwargs["qformer"] = variant_qformer(variant, dim=16, num_queries=3, layers=1, heads=2)
    kwargs = {
        "optimizer": AdamWOptions(lr=1e-2, warmup_fraction=0.0, schedule_steps=20),
        "max_new_tokens": 6,
        **kwargs,
    }
    return Graph4MM(model, tok, variant=variant, **kwargs)
