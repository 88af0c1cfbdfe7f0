"""Language-model pieces of information-gain selection for supervised fine-tuning.

Offline instruction text from the standard library's docstrings (:mod:`.corpus`), tiny locally
built causal LMs and a loader for pretrained ones (:mod:`.tiny_lm`), and the response-token
features ``X_i`` of a frozen causal LM (:mod:`.features`), and a fine-tuning module (:mod:`.sft`).
"""

from lightning_info.language.corpus import (
    DEFAULT_MODULES,
    PROMPT_TEMPLATES,
    instruction_dataset,
    module_of,
    split_corpus,
    stdlib_docstrings,
)
from lightning_info.language.features import (
    pooled_features,
    response_features,
    tokenize_prompt_response,
)
from lightning_info.language.sft import CausalLMFineTuner
from lightning_info.language.tiny_lm import load_causal_lm, tiny_causal_lm, train_bpe_tokenizer

__all__ = [
    "CausalLMFineTuner",
    "DEFAULT_MODULES",
    "PROMPT_TEMPLATES",
    "instruction_dataset",
    "load_causal_lm",
    "module_of",
    "pooled_features",
    "response_features",
    "split_corpus",
    "stdlib_docstrings",
    "tiny_causal_lm",
    "tokenize_prompt_response",
    "train_bpe_tokenizer",
]
