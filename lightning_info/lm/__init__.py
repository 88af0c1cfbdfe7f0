"""Language-model helpers shared by the LLM methods: the docstring corpus, tiny locally built
causal LMs and a loader, response-token features and the causal-LM fine-tuning module."""

from lightning_info.lm.corpus import (
    DEFAULT_MODULES,
    PROMPT_TEMPLATES,
    instruction_dataset,
    module_of,
    split_corpus,
    stdlib_docstrings,
)
from lightning_info.lm.features import pooled_features, response_features, tokenize_prompt_response
from lightning_info.lm.fine_tuner import CausalLMFineTuner
from lightning_info.lm.tiny_lm import (
    load_causal_lm,
    load_tokenizer,
    sized_causal_lm,
    tiny_causal_lm,
    train_bpe_tokenizer,
)

__all__ = [
    "CausalLMFineTuner",
    "DEFAULT_MODULES",
    "PROMPT_TEMPLATES",
    "instruction_dataset",
    "load_causal_lm",
    "load_tokenizer",
    "module_of",
    "pooled_features",
    "response_features",
    "sized_causal_lm",
    "split_corpus",
    "stdlib_docstrings",
    "tiny_causal_lm",
    "tokenize_prompt_response",
    "train_bpe_tokenizer",
]
