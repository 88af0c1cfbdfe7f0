"""Imputation quality over the entries that were missing, as CACTI's evaluation reports it.

``r2`` is the squared Pearson correlation between the imputed and the true values of one column
over its missing entries, averaged over the columns with missing entries (not sklearn's
``r2_score``); ``rmse`` and ``mae`` are over all missing entries; ``wasserstein`` is the 1-D
Wasserstein distance between the imputed and the true values of a column's missing entries
(scipy), averaged over those columns.
"""

from __future__ import annotations

import numpy as np

__all__ = ["imputation_scores"]


def imputation_scores(truth, imputed, missing) -> dict[str, float]:
    """``r2``, ``rmse``, ``mae`` and ``wasserstein`` of ``imputed`` against ``truth`` over the
    entries where ``missing`` is ``True``. A column whose missing entries are fewer than two, or
    constant in the truth or the imputation, has no correlation and is left out of ``r2``."""
    from scipy.stats import wasserstein_distance

    truth, imputed = np.asarray(truth, np.float64), np.asarray(imputed, np.float64)
    missing = np.asarray(missing, dtype=bool)
    if not truth.shape == imputed.shape == missing.shape or truth.ndim != 2:
        raise ValueError(
            "`truth`, `imputed` and `missing` must be 2-D of one shape, got "
            f"{truth.shape}, {imputed.shape} and {missing.shape}."
        )
    if not missing.any():
        raise ValueError("no entry is missing: there is nothing to score.")
    if not (np.isfinite(truth[missing]).all() and np.isfinite(imputed[missing]).all()):
        raise ValueError("the truth and the imputation must be finite at the missing entries.")
    errors = imputed[missing] - truth[missing]
    correlations, distances = [], []
    for column in np.flatnonzero(missing.any(0)):
        rows = missing[:, column]
        a, b = truth[rows, column], imputed[rows, column]
        distances.append(wasserstein_distance(a, b))
        if rows.sum() >= 2 and a.std() > 0 and b.std() > 0:
            correlations.append(np.corrcoef(a, b)[0, 1] ** 2)
    return {
        "r2": float(np.mean(correlations)) if correlations else float("nan"),
        "rmse": float(np.sqrt(np.mean(errors**2))),
        "mae": float(np.mean(np.abs(errors))),
        "wasserstein": float(np.mean(distances)),
    }
