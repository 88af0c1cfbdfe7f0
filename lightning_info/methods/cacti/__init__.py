"""CACTI: context-aware copy-masked tabular imputation (ICML 2025). In progress: the evaluation
protocol's missingness simulation and scores; the imputer itself is not built yet."""

from lightning_info.methods.cacti.functional import MECHANISMS, simulate_missing, solve_intercepts
from lightning_info.methods.cacti.metrics import imputation_scores

__all__ = ["MECHANISMS", "imputation_scores", "simulate_missing", "solve_intercepts"]
