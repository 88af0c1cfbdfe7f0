"""A tiny tokenizer, causal LM, data module and DocKSRAG for the DocKS-RAG tests and the plugin
table (built locally, cached per process)."""

from __future__ import annotations

import functools

from lab.docks_rag.study import PROMPT_WORDS
from lightning_info.core.options import AdamWOptions
from lightning_info.lm.tiny_lm import tiny_causal_lm, train_bpe_tokenizer
from lightning_info.methods.docks_rag.datamodule import (
    DocKGOptions,
    DocREDDataModule,
    DocREDSource,
    HybridPromptOptions,
)
from lightning_info.methods.docks_rag.functional import document_text
from lightning_info.methods.docks_rag.module import DocKSRAG
from lightning_info.methods.docks_rag.synthetic import RELATIONS, synthetic_docred


@functools.lru_cache(maxsize=1)
def tokenizer():
    texts = [document_text(d) for d in synthetic_docred(20, seed=0, world_seed=0)]
    texts += [" | ".join([*PROMPT_WORDS, *RELATIONS.values()])] * 5
    return train_bpe_tokenizer(texts, vocab_size=500)


SOURCE = DocREDSource(num_train=4, num_dev=2)
PROMPT = HybridPromptOptions(top_k=2, query_triples=False)  # no prompt holds its own pair
KNOWLEDGE = DocKGOptions(encoder="tfidf", encoder_dim=8, kg_steps=10)


def data(batch_size: int = 8, **kwargs) -> DocREDDataModule:
    """The tiny data module; ``source``, ``prompt`` and ``knowledge`` default to the module's
    tiny options, the other arguments to ``DocREDDataModule``'s (``max_length`` 384)."""
    kwargs = {
        "source": SOURCE,
        "prompt": PROMPT,
        "knowledge": KNOWLEDGE,
        "max_length": 384,
        **kwargs,
    }
    return DocREDDataModule(tokenizer(), batch_size=batch_size, **kwargs)


def language_model(seed: int = 0):
    return tiny_causal_lm(tokenizer(), n_layer=1, n_embd=16, n_head=2, n_positions=384, seed=seed)


def module(lora: bool = True, **kwargs) -> DocKSRAG:
    lora_args = {"r": 2, "lora_alpha": 4, "lora_dropout": 0.0} if lora else None
    kwargs.setdefault("optimizer", AdamWOptions(lr=1e-2))
    return DocKSRAG(language_model(), lora=lora_args, **kwargs)
