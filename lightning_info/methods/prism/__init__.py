"""PRISM: fragment extraction from fine-tuned LLMs ("Fragments to Facts", ICML 2025).

See README.md in this folder."""

from lightning_info.methods.prism.auditor import (
    FragmentAuditOptions,
    FragmentAuditor,
    FragmentAuditReport,
)
from lightning_info.methods.prism.callback import FragmentExtractionAudit
from lightning_info.methods.prism.fragments import (
    AttackSet,
    build_attack_set,
    fragment_prompt,
    record_texts,
    synthetic_records,
)
from lightning_info.methods.prism.functional import (
    attack_metrics,
    data_aware_scores,
    fragment_log_probability,
    likelihood_ratio,
    min_k_score,
    posterior,
    prism_score,
    tpr_at_fpr,
)

__all__ = [
    "AttackSet",
    "FragmentAuditOptions",
    "FragmentAuditReport",
    "FragmentAuditor",
    "FragmentExtractionAudit",
    "attack_metrics",
    "build_attack_set",
    "data_aware_scores",
    "fragment_log_probability",
    "fragment_prompt",
    "likelihood_ratio",
    "min_k_score",
    "posterior",
    "prism_score",
    "record_texts",
    "synthetic_records",
    "tpr_at_fpr",
]
