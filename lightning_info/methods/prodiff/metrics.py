"""ProDiff's trajectory-imputation scores (Bu et al., ICML 2025, evaluation), in metres.

Every score compares generated windows ``pred`` with the true windows ``target``, both
``(B, k, 3)`` of (time, lat, lng) in the data's own units (unscaled: degrees, and hours for the
windows of :class:`~lightning_info.methods.prodiff.datamodule.TrajectoryDataModule`), over the
``k - 2`` INTERIOR points of each window only. The two endpoints are the condition: every
imputer returns them unchanged, so including them (as the reference code's metrics do) only
dilutes every score by ``(k - 2) / k``.

With ``d_ij`` the haversine distance (:func:`~lightning_info.methods.prodiff.geometry.
haversine_metres`, Earth radius 6,371,008.8 m) between interior point ``j`` of generated and true
window ``i``, over ``n`` windows:

- ``mtd``: Mean Trajectory Deviation, the mean of ``d_ij`` over all interior points (equal to the
  mean over windows of their mean, since every window has ``k - 2`` interior points);
- ``maxtd``: Maximum Trajectory Deviation, ``mean_i max_j d_ij``: each window's worst point,
  averaged over windows. The reference's ``max_trajectory_deviation`` returns the single worst
  point of a batch and its test loop takes the max of those over the test set ("Overall MaxTD"):
  one outlier among thousands of windows then decides the score and it only grows with the size
  of the test set, so it is no per-trajectory quality measure. We report the mean of per-window
  maxima as ``maxtd`` and the reference's overall maximum as ``maxtd_overall``
  (``MaxTrajectoryDeviation(reduction="max")``);
- ``time_mae``: the mean absolute error of the time channel over the interior points, in the
  data's time unit (hours);
- ``tc@{t}km``: Trajectory Coverage, the fraction of interior points with ``d_ij <= 1000 t``
  metres (``<=`` as in the reference), for every threshold ``t`` in ``thresholds_km``
  (default 1, 2, ..., 10 km, the reference's 1000 ... 10000 m), and ``tc_mean`` their average
  (the reference's ``AVG_TC``).

The reference averages its scores per test batch and then over batches, so an uneven last batch
is over-weighted; here every interior point (every window, for ``maxtd``) counts once.

:func:`trajectory_scores` computes all of them directly in numpy on whole arrays and is the
reference the Metrics are tested against. The Metrics keep float64 sums and integer counts with
``dist_reduce_fx="sum"`` (``maxtd_overall`` a ``"max"``), so batches and DDP processes merge
exactly; :func:`trajectory_metrics` bundles them in a ``MetricCollection``.

``_PrototypeUsage``, ProDiff's own accumulator, is a diagnostic of the model, not a score: how
the endpoint queries' attention spreads over the prototypes (the keys of
:func:`~lightning_info.methods.prodiff.prototypes.prototype_usage`), merged over batches and
processes the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torchmetrics import Metric, MetricCollection

from lightning_info.core.validation import require_positive, require_real_tensor
from lightning_info.methods.prodiff.geometry import EARTH_RADIUS_M, haversine_metres
from lightning_info.methods.prodiff.prototypes import prototype_usage

__all__ = [
    "DEFAULT_THRESHOLDS_KM",
    "MaxTrajectoryDeviation",
    "MeanTrajectoryDeviation",
    "TimeMAE",
    "TrajectoryCoverage",
    "coverage_key",
    "trajectory_metrics",
    "trajectory_scores",
]

#: The reference's TC thresholds, 1000, 2000, ..., 10000 metres, in km.
DEFAULT_THRESHOLDS_KM = tuple(float(t) for t in range(1, 11))


def coverage_key(threshold_km: float) -> str:
    """The result key of one TC threshold: ``tc@1km``, ``tc@2.5km``."""
    return f"tc@{threshold_km:g}km"


def _thresholds(thresholds_km: Sequence[float]) -> tuple[float, ...]:
    if isinstance(thresholds_km, (int, float)):
        thresholds_km = (thresholds_km,)
    values = tuple(require_positive(t, "thresholds_km") for t in thresholds_km)
    if not values:
        raise ValueError("`thresholds_km` is empty: give at least one distance in km, e.g. (1,).")
    if len({coverage_key(t) for t in values}) != len(values):
        raise ValueError(f"`thresholds_km` has repeated values: {values}.")
    return tuple(sorted(values))


# ----------------------------------------------------------------------------- the oracle


def _numpy_haversine(lat1, lng1, lat2, lng2, radius: float = EARTH_RADIUS_M):
    """The textbook ``2 R asin(sqrt(a))`` in numpy (an implementation apart from the torch one)."""
    phi1, lam1, phi2, lam2 = map(np.radians, (lat1, lng1, lat2, lng2))
    a = (
        np.sin((phi2 - phi1) / 2) ** 2
        + np.cos(phi1) * np.cos(phi2) * np.sin((lam2 - lam1) / 2) ** 2
    )
    return 2 * radius * np.arcsin(np.sqrt(np.clip(a, 0.0, 1.0)))


def _float64(values) -> np.ndarray:
    """``values`` as a float64 array, read at full precision (a list is not rounded through
    float32 on its way)."""
    if isinstance(values, Tensor):
        return values.detach().cpu().numpy().astype(np.float64)
    return np.asarray(values, dtype=np.float64)


def trajectory_scores(
    pred, target, thresholds_km: Sequence[float] = DEFAULT_THRESHOLDS_KM
) -> dict[str, float]:
    """Every score of the module docstring on whole arrays, directly in numpy.

    ``pred`` and ``target`` are ``(n, k, 3)`` arrays or tensors of (time, lat, lng), ``k >= 3``;
    returns ``mtd``, ``maxtd``, ``maxtd_overall`` (metres), ``time_mae`` (time unit),
    ``tc@{t}km`` per threshold and ``tc_mean`` (fractions) as floats.
    """
    pred_given, target_given = pred, target
    pred, target = _float64(pred), _float64(target)
    if pred.shape != target.shape or pred.ndim != 3 or pred.shape[2] != 3 or pred.shape[1] < 3:
        raise ValueError(
            "`pred` and `target` must both be (n, k, 3) (time, lat, lng) with k >= 3, got "
            f"{pred.shape} and {target.shape}."
        )
    if pred.shape[0] == 0:
        raise ValueError("no window to score: `pred` and `target` are empty.")
    _interior(*(torch.as_tensor(v) for v in (pred_given, target_given)), torch.device("cpu"))
    thresholds = _thresholds(thresholds_km)
    p, t = pred[:, 1:-1], target[:, 1:-1]
    distances = _numpy_haversine(p[..., 1], p[..., 2], t[..., 1], t[..., 2])  # (n, k - 2)
    coverage = {coverage_key(c): float(np.mean(distances <= 1000.0 * c)) for c in thresholds}
    return {
        "mtd": float(distances.mean()),
        "maxtd": float(distances.max(axis=1).mean()),
        "maxtd_overall": float(distances.max()),
        "time_mae": float(np.abs(p[..., 0] - t[..., 0]).mean()),
        **coverage,
        "tc_mean": float(np.mean(list(coverage.values()))),
    }


# ----------------------------------------------------------------------------- metrics


def _interior(pred: Tensor, target: Tensor, device: torch.device) -> tuple[Tensor, Tensor]:
    """The interior points ``(B, k - 2, 3)`` of both, float64 on ``device``; raises on a bad
    shape or dtype, a non-finite value or a latitude outside [-90, 90]."""
    for name, tensor in (("pred", pred), ("target", target)):
        require_real_tensor(tensor, name)
        if not tensor.is_floating_point():
            raise TypeError(f"`{name}` must be a floating tensor, got dtype {tensor.dtype}.")
    if pred.shape != target.shape or pred.dim() != 3 or pred.shape[2] != 3:
        raise ValueError(
            "`pred` and `target` must both be (B, k, 3) windows of (time, lat, lng), got "
            f"{tuple(pred.shape)} and {tuple(target.shape)}."
        )
    if pred.shape[1] < 3:
        raise ValueError(
            f"windows of length {pred.shape[1]} have no interior point to score: k must be >= 3."
        )
    pred = pred.detach()[:, 1:-1].to(device, torch.float64)
    target = target.detach()[:, 1:-1].to(device, torch.float64)
    both = torch.stack((pred, target))
    finite = torch.isfinite(both).all()
    latitudes_ok = (both[..., 1].abs() <= 90.0).all()
    finite, latitudes_ok = (bool(v) for v in torch.stack((finite, latitudes_ok)).cpu())
    if not finite:
        raise ValueError(
            "`pred` and `target` must be finite at the interior points (NaN/inf found)."
        )
    if not latitudes_ok:
        raise ValueError(
            "a latitude (channel 1) lies outside [-90, 90]: pass unscaled (time, lat, lng) "
            "windows in degrees, e.g. `datamodule.unscale(pred)`."
        )
    return pred, target


def _distances(pred: Tensor, target: Tensor) -> Tensor:
    return haversine_metres(pred[..., 1], pred[..., 2], target[..., 1], target[..., 2])


def _nothing_seen(metric: Metric) -> ValueError:
    return ValueError(
        f"{type(metric).__name__} has seen no window: call `update(pred, target)` with at least "
        "one window before `compute()`."
    )


def _zero(dtype: torch.dtype = torch.float64) -> Tensor:
    return torch.tensor(0, dtype=dtype)


class _TrajectoryMetric(Metric):
    is_differentiable = False
    full_state_update = False
    higher_is_better = False


class MeanTrajectoryDeviation(_TrajectoryMetric):
    """``mtd``: the mean haversine distance in metres between generated and true interior points
    (ProDiff, Bu et al., ICML 2025; see the module docstring); equal to
    ``trajectory_scores(...)["mtd"]`` on everything seen since the last reset.

    ``update(pred, target)`` with ``(B, k, 3)`` (time, lat, lng) windows, degrees. State:
    ``mtd_distance_sum`` (float64) and ``mtd_point_count`` (long), both ``"sum"``.
    """

    mtd_distance_sum: Tensor
    mtd_point_count: Tensor

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.add_state("mtd_distance_sum", _zero(), dist_reduce_fx="sum")
        self.add_state("mtd_point_count", _zero(torch.long), dist_reduce_fx="sum")

    def update(self, pred: Tensor, target: Tensor) -> None:
        distances = _distances(*_interior(pred, target, self.device))
        self.mtd_distance_sum = self.mtd_distance_sum + distances.sum()
        self.mtd_point_count = self.mtd_point_count + distances.numel()

    def compute(self) -> Tensor:
        if int(self.mtd_point_count) == 0:
            raise _nothing_seen(self)
        return self.mtd_distance_sum / self.mtd_point_count


class MaxTrajectoryDeviation(_TrajectoryMetric):
    """``maxtd``: each window's largest interior-point distance in metres, averaged over windows
    (``reduction="mean"``, the default), or the reference's single largest distance over every
    window seen (``reduction="max"``, ``maxtd_overall``); why the mean is the default is in the
    module docstring. Equal to ``trajectory_scores(...)["maxtd"]`` (or ``["maxtd_overall"]``).

    State: ``maxtd_window_max_sum`` (float64) and ``maxtd_window_count`` (long), both ``"sum"``;
    or, for ``"max"``, ``maxtd_overall_max`` (float64, ``"max"``, -inf before any update) and
    ``maxtd_window_count``. Either merges exactly over batches and processes.
    """

    maxtd_window_count: Tensor

    def __init__(self, reduction: str = "mean", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if reduction not in ("mean", "max"):
            raise ValueError(
                f"`reduction` must be 'mean' (of per-window maxima) or 'max' (over all windows, "
                f"the reference's overall MaxTD), got {reduction!r}."
            )
        self.reduction = reduction
        if reduction == "mean":
            self.add_state("maxtd_window_max_sum", _zero(), dist_reduce_fx="sum")
        else:
            default = torch.tensor(float("-inf"), dtype=torch.float64)
            self.add_state("maxtd_overall_max", default, dist_reduce_fx="max")
        self.add_state("maxtd_window_count", _zero(torch.long), dist_reduce_fx="sum")

    def update(self, pred: Tensor, target: Tensor) -> None:
        distances = _distances(*_interior(pred, target, self.device))  # (B, k - 2)
        if distances.shape[0] == 0:
            return
        window_max = distances.amax(dim=1)
        if self.reduction == "mean":
            self.maxtd_window_max_sum = self.maxtd_window_max_sum + window_max.sum()
        else:
            self.maxtd_overall_max = torch.maximum(self.maxtd_overall_max, window_max.max())
        self.maxtd_window_count = self.maxtd_window_count + window_max.numel()

    def compute(self) -> Tensor:
        if int(self.maxtd_window_count) == 0:
            raise _nothing_seen(self)
        if self.reduction == "max":
            return self.maxtd_overall_max.clone()
        return self.maxtd_window_max_sum / self.maxtd_window_count


class TimeMAE(_TrajectoryMetric):
    """``time_mae``: the mean absolute error of the time channel (channel 0) over the interior
    points, in the data's time unit (hours for the ProDiff DataModule); equal to
    ``trajectory_scores(...)["time_mae"]``.

    State: ``time_abs_error_sum`` (float64) and ``time_point_count`` (long), both ``"sum"``.
    """

    time_abs_error_sum: Tensor
    time_point_count: Tensor

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.add_state("time_abs_error_sum", _zero(), dist_reduce_fx="sum")
        self.add_state("time_point_count", _zero(torch.long), dist_reduce_fx="sum")

    def update(self, pred: Tensor, target: Tensor) -> None:
        pred, target = _interior(pred, target, self.device)
        errors = (pred[..., 0] - target[..., 0]).abs()
        self.time_abs_error_sum = self.time_abs_error_sum + errors.sum()
        self.time_point_count = self.time_point_count + errors.numel()

    def compute(self) -> Tensor:
        if int(self.time_point_count) == 0:
            raise _nothing_seen(self)
        return self.time_abs_error_sum / self.time_point_count


class TrajectoryCoverage(_TrajectoryMetric):
    """TC@t: the fraction of interior points whose distance to the truth is at most ``t`` km
    (``<=``), for every ``t`` in ``thresholds_km`` (default 1, ..., 10), and ``tc_mean`` their
    average; ``compute`` returns the dict ``{"tc@1km": ..., ..., "tc_mean": ...}`` (0-dim float64
    tensors), equal to the ``tc`` entries of :func:`trajectory_scores`. Thresholds are sorted,
    so the values are non-decreasing in that order.

    State: ``tc_hits`` (long, one per threshold) and ``tc_point_count`` (long), both ``"sum"``:
    exact under any merge.
    """

    higher_is_better = True

    tc_hits: Tensor
    tc_point_count: Tensor

    def __init__(self, thresholds_km: Sequence[float] = DEFAULT_THRESHOLDS_KM, **kwargs: Any):
        super().__init__(**kwargs)
        self.thresholds_km = _thresholds(thresholds_km)
        metres = torch.tensor(self.thresholds_km, dtype=torch.float64) * 1000.0
        self.register_buffer("thresholds_m", metres, persistent=False)
        hits = torch.zeros(len(self.thresholds_km), dtype=torch.long)
        self.add_state("tc_hits", hits, dist_reduce_fx="sum")
        self.add_state("tc_point_count", _zero(torch.long), dist_reduce_fx="sum")

    def update(self, pred: Tensor, target: Tensor) -> None:
        distances = _distances(*_interior(pred, target, self.device)).reshape(-1, 1)
        self.tc_hits = self.tc_hits + (distances <= self.thresholds_m.to(distances.device)).sum(0)
        self.tc_point_count = self.tc_point_count + distances.shape[0]

    def compute(self) -> dict[str, Tensor]:
        if int(self.tc_point_count) == 0:
            raise _nothing_seen(self)
        fractions = self.tc_hits.double() / self.tc_point_count
        result = {coverage_key(t): fractions[i] for i, t in enumerate(self.thresholds_km)}
        result["tc_mean"] = fractions.mean()
        return result


class _PrototypeUsage(Metric):
    """How attention weights ``(B, K)`` over ``K`` prototypes use them, over everything seen
    since the last reset: ``compute()`` equals
    :func:`~lightning_info.methods.prodiff.prototypes.prototype_usage` on all the rows at once,
    without ``usage`` -- ``entropy`` (nats), ``effective`` (``exp`` of it, 1 to ``K``),
    ``sample_effective``, ``hard_effective`` and ``max_weight``. States are float64 sums and
    counts, ``"sum"`` across processes."""

    is_differentiable = False
    full_state_update = False
    weight_sum: Tensor
    hard_count: Tensor
    sample_effective_sum: Tensor
    max_weight_sum: Tensor
    row_count: Tensor

    def __init__(self, num_prototypes: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if isinstance(num_prototypes, bool) or not isinstance(num_prototypes, int):
            raise TypeError(f"`num_prototypes` must be an int, got {num_prototypes!r}.")
        if num_prototypes < 1:
            raise ValueError(f"`num_prototypes` must be >= 1, got {num_prototypes}.")
        self.num_prototypes = num_prototypes
        zeros = torch.zeros(num_prototypes, dtype=torch.float64)
        self.add_state("weight_sum", zeros.clone(), dist_reduce_fx="sum")
        self.add_state("hard_count", zeros.clone(), dist_reduce_fx="sum")
        self.add_state("sample_effective_sum", _zero(), dist_reduce_fx="sum")
        self.add_state("max_weight_sum", _zero(), dist_reduce_fx="sum")
        self.add_state("row_count", _zero(torch.long), dist_reduce_fx="sum")

    def update(self, weights: Tensor) -> None:
        if weights.ndim != 2 or weights.shape[1] != self.num_prototypes:
            raise ValueError(
                f"`weights` must be (B, {self.num_prototypes}), got {tuple(weights.shape)}."
            )
        weights = weights.detach().double().to(self.device)
        rows = weights.shape[0]
        stats = prototype_usage(weights)
        self.weight_sum = self.weight_sum + weights.sum(0)
        self.hard_count = (
            self.hard_count
            + torch.bincount(weights.argmax(-1), minlength=self.num_prototypes).double()
        )
        self.sample_effective_sum = self.sample_effective_sum + stats["sample_effective"] * rows
        self.max_weight_sum = self.max_weight_sum + stats["max_weight"] * rows
        self.row_count = self.row_count + rows

    def compute(self) -> dict[str, Tensor]:
        if int(self.row_count) == 0:
            raise ValueError(
                "the prototype usage has seen no weights: call `update(weights)` with at least one "
                "row before `compute()`."
            )
        count = self.row_count.double()
        usage = self.weight_sum / count
        shares = self.hard_count / count
        entropy = -torch.xlogy(usage, usage).sum()
        return {
            "entropy": entropy,
            "effective": entropy.exp(),
            "sample_effective": self.sample_effective_sum / count,
            "hard_effective": (-torch.xlogy(shares, shares).sum()).exp(),
            "max_weight": self.max_weight_sum / count,
        }


def trajectory_metrics(
    thresholds_km: Sequence[float] = DEFAULT_THRESHOLDS_KM,
    *,
    prefix: str | None = None,
    postfix: str | None = None,
    **metric_kwargs: Any,
) -> MetricCollection:
    """Every ProDiff score as one ``MetricCollection``; ``compute()`` gives the keys of
    :func:`trajectory_scores`: ``mtd``, ``maxtd``, ``maxtd_overall``, ``time_mae``,
    ``tc@{t}km`` per threshold and ``tc_mean`` (plus ``prefix`` / ``postfix``).
    ``metric_kwargs`` (e.g. ``sync_on_compute``) go to each Metric. In a LightningModule:
    ``metrics.update(unscale(pred), batch["raw"])`` per step, then
    ``self.log_dict({metric_key(k): v for k, v in metrics.compute().items()})`` (logged names:
    ``tc_at_1km``, :func:`~lightning_info.core.logging.metric_key`) and ``metrics.reset()`` at
    the epoch's end.
    """
    return MetricCollection(
        {
            "mtd": MeanTrajectoryDeviation(**metric_kwargs),
            "maxtd": MaxTrajectoryDeviation(**metric_kwargs),
            "maxtd_overall": MaxTrajectoryDeviation(reduction="max", **metric_kwargs),
            "time_mae": TimeMAE(**metric_kwargs),
            "tc": TrajectoryCoverage(thresholds_km, **metric_kwargs),
        },
        prefix=prefix,
        postfix=postfix,
    )
