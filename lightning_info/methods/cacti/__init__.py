"""CACTI: context-aware copy-masked tabular imputation (Gorla et al., ICML 2025).

``CACTI`` (LightningModule) and its network ``CACTINetwork``, ``TabularImputationDataModule``
(with ``MissingnessOptions`` and ``SplitOptions``), ``CACTIImputer`` (scikit-learn), median
truncated copy masking and the reconstruction loss (``functional``), the evaluation protocol's
missingness (``missingness``), the column context embeddings (``context``) and the imputation
Metrics.
"""

from lightning_info.methods.cacti.context import column_descriptions, context_texts, embed_columns
from lightning_info.methods.cacti.datamodule import SplitOptions, TabularImputationDataModule
from lightning_info.methods.cacti.functional import (
    copy_masks,
    imputation_scores,
    inference_layout,
    median_truncation,
    reconstruction_loss,
)
from lightning_info.methods.cacti.imputer import CACTIImputer
from lightning_info.methods.cacti.metrics import (
    ImputationMAE,
    ImputationR2,
    ImputationRMSE,
    ImputationWasserstein,
    imputation_metrics,
)
from lightning_info.methods.cacti.missingness import (
    MECHANISMS,
    MissingnessOptions,
    simulate_missing,
    solve_intercepts,
)
from lightning_info.methods.cacti.module import CACTI, CACTI_OPTIMIZER
from lightning_info.methods.cacti.networks import CACTINetwork

__all__ = [
    "CACTI",
    "CACTIImputer",
    "CACTINetwork",
    "CACTI_OPTIMIZER",
    "ImputationMAE",
    "ImputationR2",
    "ImputationRMSE",
    "ImputationWasserstein",
    "MECHANISMS",
    "MissingnessOptions",
    "SplitOptions",
    "TabularImputationDataModule",
    "column_descriptions",
    "context_texts",
    "copy_masks",
    "embed_columns",
    "imputation_metrics",
    "imputation_scores",
    "inference_layout",
    "median_truncation",
    "reconstruction_loss",
    "simulate_missing",
    "solve_intercepts",
]
