"""Language-model pieces of information-gain selection for supervised fine-tuning.

Offline instruction text from the standard library's docstrings (:mod:`.corpus`), tiny locally
built causal LMs and a loader for pretrained ones (:mod:`.tiny_lm`), and the response-token
features ``X_i`` of a frozen causal LM (:mod:`.features`), and a fine-tuning module (:mod:`.sft`).
Auditing what a model saw: train-test n-gram overlap (:mod:`.overlap`, the
:class:`TrainTestOverlap` callback, ``python -m lightning_info.language.overlap_cli``) and
fragment-extraction attacks (PRISM, :mod:`.prism`,
:mod:`.prism_audit`) on synthetic records of correlated fragments (:mod:`.fragments`).
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
from lightning_info.language.fragments import (
    AttackSet,
    build_attack_set,
    fragment_prompt,
    record_texts,
    synthetic_records,
)
from lightning_info.language.overlap import (
    OverlapReport,
    TestInstance,
    compute_overlap,
    llama2_contamination,
    read_test_instances,
    substring_overlap,
    write_report,
)
from lightning_info.language.overlap_callback import TrainTestOverlap
from lightning_info.language.prism import (
    attack_metrics,
    data_aware_scores,
    fragment_log_probability,
    likelihood_ratio,
    posterior,
    prism_score,
    tpr_at_fpr,
)
from lightning_info.language.prism_audit import (
    FragmentAuditor,
    FragmentAuditReport,
    FragmentExtractionAudit,
)
from lightning_info.language.sft import CausalLMFineTuner
from lightning_info.language.tiny_lm import load_causal_lm, tiny_causal_lm, train_bpe_tokenizer

__all__ = [
    "OverlapReport",
    "TestInstance",
    "TrainTestOverlap",
    "compute_overlap",
    "llama2_contamination",
    "read_test_instances",
    "substring_overlap",
    "write_report",
    "AttackSet",
    "FragmentAuditReport",
    "FragmentAuditor",
    "FragmentExtractionAudit",
    "attack_metrics",
    "build_attack_set",
    "data_aware_scores",
    "fragment_log_probability",
    "fragment_prompt",
    "likelihood_ratio",
    "posterior",
    "prism_score",
    "record_texts",
    "synthetic_records",
    "tpr_at_fpr",
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
