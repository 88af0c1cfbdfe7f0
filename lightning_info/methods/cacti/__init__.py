"""CACTI: context-aware copy-masked tabular imputation (Gorla et al., ICML 2025).

``CACTI`` (LightningModule), ``TabularImputationDataModule``, ``CACTIImputer`` (scikit-learn),
median truncated copy masking (``functional``), the evaluation protocol's missingness
(``missingness``), the column context embeddings (``context``) and the imputation Metrics.
"""

from lightning_info.methods.cacti.context import column_descriptions, context_texts, embed_columns
from lightning_info.methods.cacti.datamodule import TabularImputationDataModule
from lightning_info.methods.cacti.functional import copy_masks, inference_layout, median_truncation
from lightning_info.methods.cacti.imputer import CACTIImputer
from lightning_info.methods.cacti.metrics import (
    ImputationMAE,
    ImputationR2,
    ImputationRMSE,
    ImputationWasserstein,
    imputation_metrics,
    imputation_scores,
)
from lightning_info.methods.cacti.missingness import MECHANISMS, simulate_missing, solve_intercepts
from lightning_info.methods.cacti.module import CACTI

__all__ = [
    "CACTI",
    "CACTIImputer",
    "ImputationMAE",
    "ImputationR2",
    "ImputationRMSE",
    "ImputationWasserstein",
    "MECHANISMS",
    "TabularImputationDataModule",
    "column_descriptions",
    "context_texts",
    "copy_masks",
    "embed_columns",
    "imputation_metrics",
    "imputation_scores",
    "inference_layout",
    "median_truncation",
    "simulate_missing",
    "solve_intercepts",
]
