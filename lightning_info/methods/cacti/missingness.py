"""Simulated missingness for imputation benchmarks: MCAR, MAR and MNAR at a target rate.

The mechanisms of the evaluation protocol CACTI (Gorla et al., ICML 2025) follows, in the style of
hyperimpute's simulators; every function returns a boolean mask ``(n, d)`` (``True`` = missing)
and never touches the data it is given.

- ``mcar``: every entry missing independently with probability ``rate``.
- ``mar``: a share ``observed_share`` of the columns is always observed; every other column ``j``
  is missing with probability ``sigmoid(x_obs @ w_j + b_j)``, a logistic model of the *observed*
  columns only, ``w_j`` random and scaled so that ``x_obs @ w_j`` has unit standard deviation, and
  the intercept ``b_j`` solved by bisection so that the mean probability over the rows is
  ``rate``. The missingness then depends only on values that stay observed.
- ``mnar``: the same logistic model, but its inputs are columns that are themselves masked
  (completely at random, at ``rate``): the missingness depends on values that may be missing.

``rate`` is the expected share of missing entries among the columns that can be missing (all
columns for ``mcar``; the non-observed ones for ``mar``; every column for ``mnar``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lightning_info.core.validation import require_fraction, require_int

__all__ = ["MECHANISMS", "MissingnessOptions", "simulate_missing", "solve_intercepts"]

MECHANISMS = ("mcar", "mar", "mnar")


def _table(x) -> np.ndarray:
    try:
        table = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise TypeError(
            f"the table must hold numbers ({error}); encode text columns as numbers first."
        ) from error
    if table.ndim != 2 or table.shape[0] < 2 or table.shape[1] < 2:
        raise ValueError(f"need a 2-D table of at least 2 rows and 2 columns, got {table.shape}.")
    if not np.isfinite(table).all():
        raise ValueError("the table must be complete and finite to simulate missingness on it.")
    return table


def _rate(rate: float) -> float:
    rate = require_fraction(rate, "rate")
    if not 0 < rate < 1:
        raise ValueError(f"`rate` must lie in (0, 1), got {rate!r}.")
    return rate


@dataclass(frozen=True)
class MissingnessOptions:
    """The strength of simulated missingness, :func:`simulate_missing`'s knobs besides the
    mechanism (which the caller chooses).

    Args:
        rate: the expected share of missing entries among the columns that can be missing, in
            ``(0, 1)``.
        observed_share: the share of always-observed columns (``mar``, at least one) and of
            input columns of the logistic model (``mnar``), in ``[0, 1)``.
        drop_empty_rows: drop the rows the simulated missingness leaves without any observed
            value (there is nothing to impute them from; a data module counts them in
            ``dropped_rows``) instead of refusing the table (high rates on few columns draw
            some).
    """

    rate: float = 0.3
    observed_share: float = 0.3
    drop_empty_rows: bool = False

    def __post_init__(self) -> None:
        _rate(self.rate)
        require_fraction(self.observed_share, "observed_share")


def solve_intercepts(scores: np.ndarray, rate: float, steps: int = 60) -> np.ndarray:
    """Per column ``j``, ``b_j`` with ``mean_i sigmoid(scores[i, j] + b_j) = rate`` (bisection;
    the mean is increasing in ``b``).

    ``scores`` is a finite real ``(n, d)`` array with ``n >= 1``, ``rate`` lies in ``(0, 1)``
    and ``steps >= 1`` halvings of the bracket ``[-50, 50]``, widened to hold the root when a
    score lies beyond it."""
    if isinstance(scores, str) or np.asarray(scores).dtype.kind not in "iuf":
        raise TypeError(
            f"`scores` must be a real (n, d) array, got {type(scores).__name__} of dtype "
            f"{np.asarray(scores).dtype}."
        )
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2 or scores.shape[0] == 0:
        raise ValueError(
            f"`scores` must be an (n, d) array with n >= 1 rows, got shape {scores.shape}; one "
            "column is scores[:, None]."
        )
    if not np.isfinite(scores).all():
        raise ValueError("`scores` must be finite: replace NaN/inf before solving.")
    rate = _rate(rate)
    steps = require_int(steps, "steps", 1)
    low = np.full(scores.shape[1], min(-50.0, -50.0 - scores.max(initial=0.0)))
    high = np.full(scores.shape[1], max(50.0, 50.0 - scores.min(initial=0.0)))
    for _ in range(steps):
        middle = (low + high) / 2
        mean = (1 / (1 + np.exp(-(scores + middle)))).mean(0)
        too_high = mean > rate
        high = np.where(too_high, middle, high)
        low = np.where(too_high, low, middle)
    return (low + high) / 2


def _logistic_mask(
    inputs: np.ndarray, outputs: int, rate: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Missing-indicator draws of ``outputs`` columns from a logistic model of ``inputs``, and
    their probabilities."""
    weights = rng.standard_normal((inputs.shape[1], outputs))
    centred = inputs - inputs.mean(0)
    scores = centred @ weights
    spread = scores.std(0)
    scores = scores / np.where(spread > 0, spread, 1.0)
    probabilities = 1 / (1 + np.exp(-(scores + solve_intercepts(scores, rate))))
    return rng.random(probabilities.shape) < probabilities, probabilities


def simulate_missing(
    x,
    rate: float = 0.3,
    mechanism: str = "mcar",
    observed_share: float = 0.3,
    seed: int = 0,
) -> np.ndarray:
    """A boolean missing mask ``(n, d)`` for the complete table ``x`` (see the module
    docstring); ``observed_share`` is the share of always-observed columns of ``mar`` (at least
    one) and of input columns of ``mnar``."""
    table = _table(x)
    rate = _rate(rate)
    if mechanism not in MECHANISMS:
        raise ValueError(f"`mechanism` must be one of {MECHANISMS}, got {mechanism!r}.")
    observed_share = require_fraction(observed_share, "observed_share")
    rng = np.random.default_rng(require_int(seed, "seed", 0))
    n, d = table.shape
    if mechanism == "mcar":
        return rng.random((n, d)) < rate
    inputs_count = min(max(1, round(observed_share * d)), d - 1)
    order = rng.permutation(d)
    inputs, outputs = order[:inputs_count], order[inputs_count:]
    mask = np.zeros((n, d), dtype=bool)
    mask[:, outputs], _ = _logistic_mask(table[:, inputs], len(outputs), rate, rng)
    if mechanism == "mnar":  # the model's inputs are themselves missing, at random
        mask[:, inputs] = rng.random((n, len(inputs))) < rate
    return mask
