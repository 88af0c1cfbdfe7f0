"""Imputation quality over the entries that were missing, as CACTI's evaluation reports it.

``r2`` is the squared Pearson correlation between the imputed and the true values of one column
over its missing entries, averaged over the columns with missing entries (not sklearn's
``r2_score``); ``rmse`` and ``mae`` are over all missing entries; ``wasserstein`` is the 1-D
Wasserstein distance between the imputed and the true values of a column's missing entries
(scipy), averaged over those columns.

The definition is the evaluation of CACTI (Gorla et al., ICML 2025): R^2 is the squared Pearson
correlation over the missing entries. :func:`imputation_scores` computes the four scores of one
whole table in numpy and is the reference the Metrics are tested against.

The torchmetrics Metrics accumulate the same scores over batches and, under DDP, over processes;
each takes ``update(imputed, truth, missing)`` with ``(B, d)`` tensors (float, float, bool) and
reads ``truth`` and ``imputed`` only where ``missing`` is ``True`` (they may hold NaN elsewhere):

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

import numpy as np
import torch
from torch import Tensor
from torchmetrics import Metric, MetricCollection
from torchmetrics.utilities.data import dim_zero_cat

from lightning_info.core.metrics import DtypeKeepingMetric
from lightning_info.core.validation import require_fraction, require_int, require_real_tensor

__all__ = [
    "ImputationMAE",
    "ImputationR2",
    "ImputationRMSE",
    "ImputationWasserstein",
    "imputation_metrics",
    "imputation_scores",
]


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
        if rows.sum() >= 2 and np.ptp(a) > 0 and np.ptp(b) > 0:
            correlations.append(np.corrcoef(a, b)[0, 1] ** 2)
    return {
        "r2": float(np.mean(correlations)) if correlations else float("nan"),
        "rmse": float(np.sqrt(np.mean(errors**2))),
        "mae": float(np.mean(np.abs(errors))),
        "wasserstein": float(np.mean(distances)),
    }


# ----------------------------------------------------------------------------- metrics

#: Default relative tolerance of :class:`ImputationR2`'s "variance > 0" test, see there.
VARIANCE_RTOL = 1e-10


def _missing_entries(
    imputed: Tensor,
    truth: Tensor,
    missing: Tensor,
    num_columns: int | None,
    device: torch.device,
) -> tuple[Tensor, Tensor, Tensor]:
    """``(b, a, missing)`` on ``device``: the imputation ``b`` and the truth ``a`` in float64 with
    every entry that is not missing set to 0 by ``torch.where`` (so a NaN there is never read into
    a sum), and the boolean mask; raises on a bad shape or dtype, or a non-finite missing entry."""
    for name, tensor in (("imputed", imputed), ("truth", truth), ("missing", missing)):
        require_real_tensor(tensor, name)
    if missing.dtype != torch.bool:
        raise TypeError(
            f"`missing` must be a bool mask (True where the entry was missing), got dtype "
            f"{missing.dtype}; pass `mask.bool()` for a 0/1 mask."
        )
    for name, tensor in (("imputed", imputed), ("truth", truth)):
        if tensor.dtype == torch.bool or tensor.is_complex():
            raise TypeError(f"`{name}` must hold real numbers, got dtype {tensor.dtype}.")
    if imputed.dim() != 2 or not imputed.shape == truth.shape == missing.shape:
        raise ValueError(
            "`imputed`, `truth` and `missing` must be 2-D (rows, columns) of one shape, got "
            f"{tuple(imputed.shape)}, {tuple(truth.shape)} and {tuple(missing.shape)}."
        )
    if num_columns is not None and imputed.shape[1] != num_columns:
        raise ValueError(
            f"the metric was built for `num_columns` = {num_columns} but the batch has "
            f"{imputed.shape[1]} columns."
        )
    missing = missing.detach().to(device)
    imputed = torch.where(missing, imputed.detach().to(device, torch.float64), 0.0)
    truth = torch.where(missing, truth.detach().to(device, torch.float64), 0.0)
    if not bool(torch.isfinite(imputed).all() & torch.isfinite(truth).all()):  # one device sync
        raise ValueError("the truth and the imputation must be finite at the missing entries.")
    return imputed, truth, missing


def _no_missing_entry(metric: Metric) -> ValueError:
    return ValueError(
        f"{type(metric).__name__} has seen no missing entry: there is nothing to score; call "
        "`update(...)` with at least one True in `missing` before `compute()`."
    )


def _scalar(value: float, device: torch.device) -> Tensor:
    return torch.tensor(value, dtype=torch.float64, device=device)


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

    A column enters the mean, as in :func:`imputation_scores`, when it has ``n >= 2`` missing
    entries and both the truth and the imputation vary there. "Varies" is tested as
    ``C_aa > variance_rtol * S_aa`` (and the same for ``b``): the raw-moment difference of a
    constant column is float64 rounding noise of relative size ~1e-16 times the number of
    accumulation steps, not exactly 0, so it needs a tolerance. With the default ``1e-10`` a column
    is treated as constant when its standard deviation is below ~1e-5 times its root mean square
    ``sqrt(S_aa / n)``; the oracle, which centres the values first, would still include such a
    column, but its correlation from raw moments would have lost ~10 of its 16 digits anyway.
    Conversely the oracle's ``std() > 0`` keeps some exactly constant columns (n copies of 0.1
    have a numpy std of ~1e-17, giving r^2 ~ 0), which this test leaves out.
    For the same reason, data whose mean is many standard deviations from 0 loses precision
    (relative error ~1e-16 * mean^2 / variance); centre the columns (e.g. by the training mean)
    if that matters.

    ``compute`` returns a 0-dim float64 tensor: NaN when no column qualifies, and it raises when
    no entry was missing at all (as :func:`imputation_scores` does).
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
        self.count = self.count + missing.sum(0)
        self.sum_truth = self.sum_truth + a.sum(0)
        self.sum_imputed = self.sum_imputed + b.sum(0)
        self.sum_truth_sq = self.sum_truth_sq + (a * a).sum(0)
        self.sum_imputed_sq = self.sum_imputed_sq + (b * b).sum(0)
        self.sum_product = self.sum_product + (a * b).sum(0)

    def compute(self) -> Tensor:
        if int(self.count.sum()) == 0:
            raise _no_missing_entry(self)
        n = self.count.double().clamp_min(1.0)
        s_a, s_b = self.sum_truth.double(), self.sum_imputed.double()
        s_aa, s_bb = self.sum_truth_sq.double(), self.sum_imputed_sq.double()
        c_aa = s_aa - s_a * s_a / n
        c_bb = s_bb - s_b * s_b / n
        c_ab = self.sum_product.double() - s_a * s_b / n
        qualifies = (
            (self.count >= 2)
            & (c_aa > self.variance_rtol * s_aa)
            & (c_bb > self.variance_rtol * s_bb)
        )
        if not bool(qualifies.any()):
            return _scalar(float("nan"), self.device)
        c_aa, c_bb, c_ab = c_aa[qualifies], c_bb[qualifies], c_ab[qualifies]
        return (c_ab * c_ab / (c_aa * c_bb)).clamp(0.0, 1.0).mean()


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

    def _errors(self, errors: Tensor) -> Tensor:
        raise NotImplementedError

    def update(self, imputed: Tensor, truth: Tensor, missing: Tensor) -> None:
        b, a, missing = _missing_entries(imputed, truth, missing, self.num_columns, self.device)
        total = getattr(self, self._sum_name) + self._errors(b - a).sum()  # 0 where not missing
        setattr(self, self._sum_name, total)
        self.count = self.count + missing.sum()

    def _mean(self) -> Tensor:
        if int(self.count) == 0:
            raise _no_missing_entry(self)
        return getattr(self, self._sum_name).double() / self.count


class ImputationRMSE(_ErrorSum):
    """Root mean squared error of the imputation over all missing entries (CACTI, Gorla et al.,
    ICML 2025, evaluation), equal to ``imputation_scores(...)["rmse"]``.

    State: ``squared_error_sum`` (float64) and ``count`` (long) of the missing entries, both
    ``dist_reduce_fx="sum"``. ``num_columns``, if given, is checked against every batch.
    ``compute`` (0-dim float64) raises when no entry was missing.
    """

    _sum_name = "squared_error_sum"
    squared_error_sum: Tensor

    def _errors(self, errors: Tensor) -> Tensor:
        return errors * errors

    def compute(self) -> Tensor:
        return self._mean().sqrt()


class ImputationMAE(_ErrorSum):
    """Mean absolute error of the imputation over all missing entries (CACTI, Gorla et al., ICML
    2025, evaluation), equal to ``imputation_scores(...)["mae"]``.

    State: ``absolute_error_sum`` (float64) and ``count`` (long) of the missing entries, both
    ``dist_reduce_fx="sum"``. ``num_columns``, if given, is checked against every batch.
    ``compute`` (0-dim float64) raises when no entry was missing.
    """

    _sum_name = "absolute_error_sum"
    absolute_error_sum: Tensor

    def _errors(self, errors: Tensor) -> Tensor:
        return errors.abs()

    def compute(self) -> Tensor:
        return self._mean()


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
        rows, columns = torch.nonzero(missing, as_tuple=True)
        # appended even when empty, so that every process that saw a batch sends float64
        self.columns.append(columns.double())
        self.truth_values.append(a[rows, columns])
        self.imputed_values.append(b[rows, columns])

    def compute(self) -> Tensor:
        from scipy.stats import wasserstein_distance

        if isinstance(self.columns, list) and not self.columns:
            raise _no_missing_entry(self)
        columns = dim_zero_cat(self.columns).cpu().numpy().astype(np.int64)
        if columns.size == 0:
            raise _no_missing_entry(self)
        truth = dim_zero_cat(self.truth_values).cpu().numpy()
        imputed = dim_zero_cat(self.imputed_values).cpu().numpy()
        order = np.argsort(columns, kind="stable")
        columns, truth, imputed = columns[order], truth[order], imputed[order]
        starts = np.flatnonzero(np.r_[True, columns[1:] != columns[:-1]])
        ends = np.r_[starts[1:], columns.size]
        distances = [
            wasserstein_distance(truth[start:end], imputed[start:end])
            for start, end in zip(starts, ends)
        ]
        return _scalar(float(np.mean(distances)), self.device)


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
