"""Imputation quality over the entries that were missing, as CACTI's evaluation reports it
(Gorla et al., ICML 2025), as torchmetrics Metrics.

The scores and their update / compute functions live in
:mod:`~lightning_info.methods.cacti.functional` (``r2``: the squared Pearson correlation per
column over its missing entries, averaged over the columns; ``rmse``; ``mae``; ``wasserstein``:
the mean per-column 1-D Wasserstein distance). The Metrics accumulate their sufficient
statistics over batches and, under DDP, over processes, and call the same functions that
:func:`~lightning_info.methods.cacti.functional.imputation_scores` runs once on a whole table.
Every Metric takes ``update(imputed, truth, missing)`` with ``(B, d)`` tensors (float, float,
bool) and reads ``truth`` and ``imputed`` only where ``missing`` is ``True`` (they may hold NaN
elsewhere):

- :class:`ImputationR2` keeps, per column, the count and the float64 sums of ``a``, ``b``,
  ``a^2``, ``b^2`` and ``a*b`` (``a`` the truth, ``b`` the imputation) with
  ``dist_reduce_fx="sum"``: O(d) state, merged exactly over batches and processes.
- :class:`ImputationRMSE` and :class:`ImputationMAE` keep a float64 error sum and a count (sum).
- :class:`ImputationWasserstein` keeps every missing entry's (column, truth, imputation) in
  ``cat`` list states (O(number of missing entries) memory, gathered whole under DDP), since the
  1-D Wasserstein distance needs the full empirical distributions.

:func:`imputation_metrics` bundles the four in a ``MetricCollection`` keyed ``r2``, ``rmse``,
``mae`` and ``wasserstein``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric, MetricCollection
from torchmetrics.utilities.data import dim_zero_cat

from lightning_info.core.metrics import DtypeKeepingMetric
from lightning_info.core.validation import require_fraction, require_int
from lightning_info.methods.cacti.functional import (
    VARIANCE_RTOL,
    _absolute_error_update,
    _mae_compute,
    _missing_entries,
    _r2_compute,
    _r2_update,
    _rmse_compute,
    _scalar,
    _squared_error_update,
    _wasserstein_compute,
    _wasserstein_update,
)

__all__ = [
    "ImputationMAE",
    "ImputationR2",
    "ImputationRMSE",
    "ImputationWasserstein",
    "imputation_metrics",
]


# ----------------------------------------------------------------------------- metrics


def _no_missing_entry(metric: Metric) -> ValueError:
    return ValueError(
        f"{type(metric).__name__} has seen no missing entry: there is nothing to score; call "
        "`update(...)` with at least one True in `missing` before `compute()`."
    )


# Not torchmetrics' PearsonCorrCoef(num_outputs=d): it takes every column on the same rows, while
# each column here has its own missing entries (and r2_score is another score).
class ImputationR2(Metric):
    """CACTI's R^2 (Gorla et al., ICML 2025, evaluation): the squared Pearson correlation between
    the imputed and the true values of each column over its missing entries, averaged over the
    columns that have one; equal to ``imputation_scores(...)["r2"]`` on everything seen since the
    last reset. Not sklearn's ``r2_score``.

    State, per column ``j`` over its missing entries (``a`` the truth, ``b`` the imputation), all
    with ``dist_reduce_fx="sum"`` so batches and processes merge exactly: ``count`` (long) and the
    float64 sums ``sum_truth`` (``S_a``), ``sum_imputed`` (``S_b``), ``sum_truth_sq``
    (``S_aa``), ``sum_imputed_sq`` (``S_bb``) and ``sum_product`` (``S_ab``). ``compute`` forms
    the centred sums ``C_aa = S_aa - S_a^2 / n`` (likewise ``C_bb``, ``C_ab = S_ab - S_a S_b /
    n``) and ``r^2 = C_ab^2 / (C_aa C_bb)``, clipped to ``[0, 1]``.

    A column enters the mean when it has ``n >= 2`` missing entries and both the truth and the
    imputation vary there. "Varies" is tested as
    ``C_aa > variance_rtol * S_aa`` (and the same for ``b``): the raw-moment difference of a
    constant column is float64 rounding noise of relative size ~1e-16 times the number of
    accumulation steps, not exactly 0, so it needs a tolerance. With the default ``1e-10`` a column
    is treated as constant when its standard deviation is below ~1e-5 times its root mean square
    ``sqrt(S_aa / n)``; a two-pass computation, which centres the values first, would still
    include such a column, but its correlation from raw moments would have lost ~10 of its 16
    digits anyway. Conversely numpy's ``std() > 0`` holds for some exactly constant columns (n
    copies of 0.1 have a numpy std of ~1e-17, giving r^2 ~ 0), which this test leaves out.
    For the same reason, data whose mean is many standard deviations from 0 loses precision
    (relative error ~1e-16 * mean^2 / variance); centre the columns (e.g. by the training mean)
    if that matters.

    ``compute`` returns a 0-dim float64 tensor: NaN when no column qualifies, and it raises when
    no entry was missing at all (as
    :func:`~lightning_info.methods.cacti.functional.imputation_scores` does).
    """

    is_differentiable = False
    higher_is_better = True
    full_state_update = False

    count: Tensor
    sum_truth: Tensor
    sum_imputed: Tensor
    sum_truth_sq: Tensor
    sum_imputed_sq: Tensor
    sum_product: Tensor

    def __init__(
        self, num_columns: int, *, variance_rtol: float = VARIANCE_RTOL, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.num_columns = require_int(num_columns, "num_columns", 1)
        self.variance_rtol = require_fraction(variance_rtol, "variance_rtol")
        self.add_state(
            "count", default=torch.zeros(self.num_columns, dtype=torch.long), dist_reduce_fx="sum"
        )
        for name in ("sum_truth", "sum_imputed", "sum_truth_sq", "sum_imputed_sq", "sum_product"):
            default = torch.zeros(self.num_columns, dtype=torch.float64)
            self.add_state(name, default=default, dist_reduce_fx="sum")

    def update(self, imputed: Tensor, truth: Tensor, missing: Tensor) -> None:
        b, a, missing = _missing_entries(imputed, truth, missing, self.num_columns, self.device)
        count, s_a, s_b, s_aa, s_bb, s_ab = _r2_update(b, a, missing)
        self.count = self.count + count
        self.sum_truth = self.sum_truth + s_a
        self.sum_imputed = self.sum_imputed + s_b
        self.sum_truth_sq = self.sum_truth_sq + s_aa
        self.sum_imputed_sq = self.sum_imputed_sq + s_bb
        self.sum_product = self.sum_product + s_ab

    def compute(self) -> Tensor:
        if int(self.count.sum()) == 0:
            raise _no_missing_entry(self)
        return _r2_compute(
            self.count,
            self.sum_truth,
            self.sum_imputed,
            self.sum_truth_sq,
            self.sum_imputed_sq,
            self.sum_product,
            self.variance_rtol,
        )


# Not torchmetrics' MeanSquaredError / MeanAbsoluteError: their sums are float32 states (RMSE 1e-7
# from the two-pass float64 oracle on a 500 x 9 table, against 4e-16 here), and their functionals
# return the mean of the entries they are given, which needs x[missing] (a host sync per batch on
# a GPU) and does not reduce over processes.
class _ErrorSum(Metric):
    """A float64 sum of per-entry errors over the missing entries and their count (both "sum").

    Each subclass names its sum differently (``_sum_name``): a ``MetricCollection`` merges into
    one compute group the metrics whose states have the same names and ``allclose`` values after
    the first batch (both 0 when it has no missing entry), and RMSE would then score MAE's sums.
    """

    is_differentiable = False
    higher_is_better = False
    full_state_update = False

    _sum_name: str
    count: Tensor

    def __init__(self, num_columns: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if num_columns is not None:
            num_columns = require_int(num_columns, "num_columns", 1)
        self.num_columns = num_columns
        zero = torch.tensor(0.0, dtype=torch.float64)
        self.add_state(self._sum_name, zero, dist_reduce_fx="sum")
        self.add_state("count", torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    @staticmethod
    def _update(imputed: Tensor, truth: Tensor, missing: Tensor) -> tuple[Tensor, Tensor]:
        raise NotImplementedError

    @staticmethod
    def _compute(error_sum: Tensor, count: Tensor) -> Tensor:
        raise NotImplementedError

    def update(self, imputed: Tensor, truth: Tensor, missing: Tensor) -> None:
        b, a, missing = _missing_entries(imputed, truth, missing, self.num_columns, self.device)
        error_sum, count = self._update(b, a, missing)
        setattr(self, self._sum_name, getattr(self, self._sum_name) + error_sum)
        self.count = self.count + count

    def compute(self) -> Tensor:
        if int(self.count) == 0:
            raise _no_missing_entry(self)
        return self._compute(getattr(self, self._sum_name), self.count)


class ImputationRMSE(_ErrorSum):
    """Root mean squared error of the imputation over all missing entries (CACTI, Gorla et al.,
    ICML 2025, evaluation), equal to ``imputation_scores(...)["rmse"]``.

    State: ``squared_error_sum`` (float64) and ``count`` (long) of the missing entries, both
    ``dist_reduce_fx="sum"``. ``num_columns``, if given, is checked against every batch.
    ``compute`` (0-dim float64) raises when no entry was missing.
    """

    _sum_name = "squared_error_sum"
    squared_error_sum: Tensor

    _update = staticmethod(_squared_error_update)
    _compute = staticmethod(_rmse_compute)


class ImputationMAE(_ErrorSum):
    """Mean absolute error of the imputation over all missing entries (CACTI, Gorla et al., ICML
    2025, evaluation), equal to ``imputation_scores(...)["mae"]``.

    State: ``absolute_error_sum`` (float64) and ``count`` (long) of the missing entries, both
    ``dist_reduce_fx="sum"``. ``num_columns``, if given, is checked against every batch.
    ``compute`` (0-dim float64) raises when no entry was missing.
    """

    _sum_name = "absolute_error_sum"
    absolute_error_sum: Tensor

    _update = staticmethod(_absolute_error_update)
    _compute = staticmethod(_mae_compute)


class ImputationWasserstein(DtypeKeepingMetric):
    """Mean over the columns with missing entries of the 1-D Wasserstein distance between the
    true and the imputed values of the column's missing entries (CACTI, Gorla et al., ICML 2025,
    evaluation; ``scipy.stats.wasserstein_distance``), equal to
    ``imputation_scores(...)["wasserstein"]``.

    The distance needs the whole empirical distributions, so every missing entry is kept: the
    ``cat`` list states ``columns`` (the column index, stored as float64, exact), ``truth_values``
    and ``imputed_values`` (float64); memory is O(number of missing entries) and under DDP they
    are gathered whole onto every process. ``compute`` (0-dim float64, on the metric's device)
    runs scipy on the CPU and raises when no entry was missing.
    """

    is_differentiable = False
    higher_is_better = False
    full_state_update = False

    columns: list[Tensor] | Tensor
    truth_values: list[Tensor] | Tensor
    imputed_values: list[Tensor] | Tensor

    _list_states = ("columns", "truth_values", "imputed_values")

    def __init__(self, num_columns: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.num_columns = require_int(num_columns, "num_columns", 1)
        for name in self._list_states:
            self.add_state(name, default=[], dist_reduce_fx="cat")
        self.set_dtype(torch.float64)  # what a process with no missing entry sends to the gather

    def update(self, imputed: Tensor, truth: Tensor, missing: Tensor) -> None:
        b, a, missing = _missing_entries(imputed, truth, missing, self.num_columns, self.device)
        columns, truth_values, imputed_values = _wasserstein_update(b, a, missing)
        # appended even when empty, so that every process that saw a batch sends float64
        self.columns.append(columns)
        self.truth_values.append(truth_values)
        self.imputed_values.append(imputed_values)

    def compute(self) -> Tensor:
        if isinstance(self.columns, list) and not self.columns:
            raise _no_missing_entry(self)
        columns = dim_zero_cat(self.columns)
        if columns.numel() == 0:
            raise _no_missing_entry(self)
        distance = _wasserstein_compute(
            columns, dim_zero_cat(self.truth_values), dim_zero_cat(self.imputed_values)
        )
        return _scalar(distance, self.device)


def imputation_metrics(
    num_columns: int,
    *,
    prefix: str | None = None,
    postfix: str | None = None,
    **metric_kwargs: Any,
) -> MetricCollection:
    """The four CACTI scores as one ``MetricCollection`` keyed ``r2``, ``rmse``, ``mae`` and
    ``wasserstein`` (plus ``prefix``/``postfix``); ``metric_kwargs`` (e.g. ``sync_on_compute``)
    go to each Metric. Use it as any collection: ``metrics.update(imputed, truth, missing)``,
    ``metrics.compute()``, or ``self.log_dict(metrics)`` after ``metrics(imputed, truth,
    missing)`` in a LightningModule.
    """
    return MetricCollection(
        {
            "r2": ImputationR2(num_columns, **metric_kwargs),
            "rmse": ImputationRMSE(num_columns, **metric_kwargs),
            "mae": ImputationMAE(num_columns, **metric_kwargs),
            "wasserstein": ImputationWasserstein(num_columns, **metric_kwargs),
        },
        prefix=prefix,
        postfix=postfix,
    )
