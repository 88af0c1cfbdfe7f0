"""Membership-audit statistics as MIMIR and LiRA report them.

Scores follow the audit's convention: higher means "more likely a member" (``labels == 1``).

* :func:`bootstrap_auc`: the mean and standard error of the ROC AUC over bootstrap resamples of
  the ``(score, label)`` pairs, MIMIR's ``bootstrap_roc_auc_mean`` / ``bootstrap_roc_auc_std``;
* :func:`pr_auc`: average precision, members as the positive class (scikit-learn's
  ``average_precision_score``);
* :func:`tpr_at_fpr_levels`: the TPR at low FPR under two conventions, ``"interpolated"`` (linear
  interpolation on the ROC curve, as :func:`~lightning_info.methods.prism.functional.tpr_at_fpr`)
  and ``"at_most"`` (the highest TPR among ROC points whose FPR is at most the level, the step
  read of LiRA and MIMIR);
* :func:`enough_negatives` / :func:`format_rate`: a TPR at FPR ``level`` is measured only with
  at least ``ceil(1 / level)`` non-members; with fewer it prints ``n/a``;
* :func:`membership_report` (every figure of every attack, keyed by logger-safe names),
  :func:`mimir_layout` (the same figures in MIMIR's per-attack results layout) and
  :func:`markdown_report` (one table row per attack).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from lightning_info.core.logging import markdown_table
from lightning_info.core.validation import require_finite, require_int
from lightning_info.measures.ranking import (
    average_precision,
    binary_auroc,
    require_both_classes,
    scores_and_labels,
    threshold_counts,
)
from lightning_info.methods.prism.attacks import negatives_for_fpr

__all__ = [
    "DEFAULT_AUDIT_FPR_LEVELS",
    "bootstrap_auc",
    "enough_negatives",
    "format_rate",
    "markdown_report",
    "membership_report",
    "mimir_layout",
    "pr_auc",
    "tpr_at_fpr_levels",
]

DEFAULT_AUDIT_FPR_LEVELS = (0.001, 0.01)
"""The false-positive rates at which membership audits report the TPR (0.1% and 1%)."""

ArrayLike = Tensor | np.ndarray | Sequence[float]

_CLASSES = ("member", "non-member")
_RATE_KEY = re.compile(r"^tpr_at_(.+)pct_fpr_at_most$")
_ROW_KEYS = ("auc", "auc_se", "auc_bootstrap_mean", "pr_auc", "members", "non_members")
# rows of the (resamples, n) index matrix whose AUCs are computed at once: bounds the working
# memory to a few (block, n) arrays whatever the number of resamples
_BLOCK_ENTRIES = 1 << 22


def bootstrap_auc(
    scores: ArrayLike, labels: ArrayLike, resamples: int = 1000, seed: int = 0
) -> tuple[float, float]:
    """``(mean, standard error)`` of the ROC AUC over ``resamples`` bootstrap resamples.

    As MIMIR's ``get_roc_metrics(..., perform_bootstrap=True)``, which calls
    ``scipy.stats.bootstrap((scores, labels), auc, paired=True, n_resamples=1000)``: each resample
    draws ``n`` of the ``n`` ``(score, label)`` pairs with replacement, jointly (the number of
    members varies between resamples). The draws are scipy's: the index matrix is
    ``np.random.default_rng(seed).integers(0, n, (resamples, n))``, so with ``rng`` set to that
    generator scipy's ``bootstrap_distribution`` holds the same AUCs. The mean is that of the
    resampled AUCs; the standard error is their standard deviation with ``ddof=1`` (scipy's
    ``standard_error``, MIMIR's ``bootstrap_roc_auc_std``).

    A resample that holds one class only has no AUC. MIMIR does not guard against it: sklearn
    gives that resample a NaN AUC, which makes the mean and the standard error NaN. Here such a
    row is drawn again from the same generator until it holds both classes (the rows before it
    keep scipy's draws); with 20 or more pairs of each class this practically never happens.

    The AUC of each resample is exact and tie-aware (``P(s+ > s-) + 1/2 P(s+ = s-)``, sklearn's
    ``roc_auc_score``), computed for a block of resamples at once from the multiplicity of each
    distinct score among members and non-members (no per-resample loop, no per-resample sort).
    Needs ``resamples >= 2`` (one resample has no standard error).
    """
    resamples = require_int(resamples, "resamples", 1)
    if resamples < 2:
        raise ValueError(
            "`resamples` must be >= 2: a standard error needs at least two resamples "
            "(MIMIR uses 1000)."
        )
    seed = require_int(seed, "seed", 0)
    s, y = _scores_and_labels(scores, labels)
    n = s.size
    rng = np.random.default_rng(seed)
    # one call, as scipy's: numpy's bounded integers are not the same stream when drawn in chunks
    index = rng.integers(0, n, (resamples, n))
    group, groups = _tie_groups(s)
    aucs = np.empty(resamples)
    block = max(1, _BLOCK_ENTRIES // n)
    for start in range(0, resamples, block):
        rows = slice(start, start + block)
        aucs[rows] = _resampled_aucs(group[index[rows]], y[index[rows]], groups)
    single = np.flatnonzero(np.isnan(aucs))
    while single.size:
        again = rng.integers(0, n, (single.size, n))
        aucs[single] = _resampled_aucs(group[again], y[again], groups)
        single = single[np.isnan(aucs[single])]
    return float(aucs.mean()), float(aucs.std(ddof=1))


def pr_auc(scores: ArrayLike, labels: ArrayLike) -> float:
    """Average precision, members (``labels == 1``) as the positive class: ``sum_k (R_k -
    R_{k-1}) Prec_k`` over the distinct scores, highest first; equal to sklearn's
    ``average_precision_score(labels, scores)``
    (:func:`~lightning_info.measures.ranking.average_precision`). Needs both classes."""
    s, y = _scores_and_labels(scores, labels)
    return float(average_precision(torch.from_numpy(s), torch.from_numpy(y)))


def tpr_at_fpr_levels(
    scores: ArrayLike,
    labels: ArrayLike,
    levels: Sequence[float] = DEFAULT_AUDIT_FPR_LEVELS,
) -> dict[float, dict[str, float]]:
    """``{level: {"interpolated": ..., "at_most": ...}}``: the TPR at each FPR ``level``.

    Both read the full ROC curve: one point ``(FP(t)/Q, TP(t)/P)`` per distinct score ``t``
    (tied scores accepted together), plus ``(0, 0)``.

    * ``"interpolated"``: ``np.interp(level, fpr, tpr)``, equal to it on sklearn's
      ``roc_curve(labels, scores)`` and to
      :func:`~lightning_info.methods.prism.functional.tpr_at_fpr`: the line between the two ROC
      points around ``level``, a rate no single threshold need reach;
    * ``"at_most"``: the highest TPR among ROC points with ``FPR <= level``, the TPR of the best
      threshold whose false-positive rate does not exceed the level (LiRA's and MIMIR's step
      read of the curve). Their code writes ``tpr[np.where(fpr < level)[0][-1]]`` on sklearn's
      default curve: a strict ``<``, which differs from this only where a ROC point lies exactly
      on the level (1 false positive among 100 non-members at 1%), and a curve with collinear
      points dropped, which can hide a reachable point.

    ``levels``: rates in (0, 1). Needs both classes.
    """
    levels = _check_levels(levels)
    fpr, tpr = _roc_points(*_scores_and_labels(scores, labels))
    result = {}
    for level in levels:
        at_most = tpr[np.searchsorted(fpr, level, side="right") - 1]
        result[level] = {
            "interpolated": float(np.interp(level, fpr, tpr)),
            "at_most": float(at_most),
        }
    return result


def enough_negatives(num_negatives: int, level: float) -> bool:
    """True when ``num_negatives`` non-members measure a TPR at FPR ``level``: at least
    :func:`~lightning_info.methods.prism.attacks.negatives_for_fpr` of them (100 for 1%)."""
    num_negatives = require_int(num_negatives, "num_negatives", 0)
    return num_negatives >= negatives_for_fpr(level)


def format_rate(value: float, num_negatives: int, level: float) -> str:
    """``f"{value:.4f}"``, or ``"n/a (needs >= N negatives)"`` when ``num_negatives`` is fewer
    than the ``N`` a TPR at FPR ``level`` needs (:func:`enough_negatives`)."""
    if not enough_negatives(num_negatives, level):
        return f"n/a (needs >= {negatives_for_fpr(level)} negatives)"
    return f"{require_finite(value, 'value'):.4f}"


def membership_report(
    scores: Mapping[str, ArrayLike],
    labels: ArrayLike,
    levels: Sequence[float] = DEFAULT_AUDIT_FPR_LEVELS,
    resamples: int = 1000,
    seed: int = 0,
) -> dict[str, dict[str, float | int]]:
    """Every audit figure of every attack: ``{attack: row}`` in the order of ``scores``.

    ``scores`` maps an attack's name to its scores (higher = member), one per sample of
    ``labels`` (1 = member, 0 = non-member). Each row holds ``auc`` (exact ROC AUC),
    ``auc_bootstrap_mean`` and ``auc_se`` (:func:`bootstrap_auc`; the same ``seed``, hence the
    same resamples, for every attack), ``pr_auc`` (:func:`pr_auc`), for each level
    ``tpr_at_<100 level>pct_fpr_interpolated`` and ``..._at_most`` (:func:`tpr_at_fpr_levels`;
    ``tpr_at_1pct_fpr_at_most`` for 1%), and the counts ``members`` and ``non_members`` (ints).
    Every key is its own :func:`~lightning_info.core.logging.metric_key`.
    """
    if not isinstance(scores, Mapping):
        raise TypeError(
            f"`scores` must map each attack's name to its scores, got {type(scores).__name__}; "
            "e.g. {'loss': loss_scores}."
        )
    if not scores:
        raise ValueError("`scores` holds no attack; give at least one {name: scores}.")
    for name in scores:
        if not isinstance(name, str) or not name.strip():
            raise TypeError(f"Attack names must be non-empty strings, got {name!r}.")
    levels = _check_levels(levels)
    report = {}
    for name, values in scores.items():
        s, y = _scores_and_labels(values, labels, f"scores[{name!r}]")
        mean, se = bootstrap_auc(s, y, resamples, seed)
        row: dict[str, float | int] = {
            "auc": float(binary_auroc(torch.from_numpy(s), torch.from_numpy(y))),
            "auc_se": se,
            "auc_bootstrap_mean": mean,
            "pr_auc": pr_auc(s, y),
        }
        for level, rates in tpr_at_fpr_levels(s, y, levels).items():
            row[f"{_rate_name(level)}_interpolated"] = rates["interpolated"]
            row[f"{_rate_name(level)}_at_most"] = rates["at_most"]
        row["members"] = int(y.sum())
        row["non_members"] = int(y.size - y.sum())
        report[name] = row
    return report


def mimir_layout(report: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """A :func:`membership_report` in the layout of MIMIR's ``<attack>_results.json``.

    The layout is that of ``compute_metrics_from_scores`` in ``run.py`` of the MIMIR repository
    (``iamgroot42/mimir``; the bootstrap is ``get_roc_metrics`` in
    ``mimir/attacks/attack_utils.py``), one entry per attack::

        {"name": "<attack>_threshold", "info": {"n_samples": ...},
         "metrics": {"roc_auc": ..., "bootstrap_roc_auc_mean": ...,
                     "bootstrap_roc_auc_std": ..., "tpr_at_low_fpr": {level: ...}},
         "pr_metrics": {"pr_auc": ...}, "loss": 1 - pr_auc}

    ``n_samples`` is the number of non-members (MIMIR's count of member/non-member pairs);
    ``tpr_at_low_fpr`` holds the ``at_most`` TPR (MIMIR's own read takes ``FPR < level``,
    strictly). MIMIR's ``pr_auc`` is the trapezoidal area under the precision-recall curve with
    the *non-members* as positive class; here it is the average precision with the members as
    positive class (:func:`pr_auc`), so the two are not comparable number for number. The
    curves (``fpr``, ``tpr``, ``thresholds``, ``precision``, ``recall``), the raw
    ``predictions`` and ``raw_results`` are not in a report and are left out.
    """
    rows = _check_report(report)
    layout = {}
    for name, row in rows.items():
        layout[name] = {
            "name": f"{name}_threshold",
            "info": {"n_samples": int(row["non_members"])},
            "metrics": {
                "roc_auc": float(row["auc"]),
                "bootstrap_roc_auc_mean": float(row["auc_bootstrap_mean"]),
                "bootstrap_roc_auc_std": float(row["auc_se"]),
                "tpr_at_low_fpr": {
                    level: float(row[f"{_rate_name(level)}_at_most"]) for level in _levels_of(row)
                },
            },
            "pr_metrics": {"pr_auc": float(row["pr_auc"])},
            "loss": 1.0 - float(row["pr_auc"]),
        }
    return layout


def markdown_report(
    report: Mapping[str, Mapping[str, Any]], num_negatives: int | None = None
) -> str:
    """A :func:`membership_report` as a Markdown table: one row per attack with the AUC ± its
    bootstrap standard error, the PR AUC, the ``at_most`` TPR at each level (``n/a`` where
    ``num_negatives`` is too few, :func:`format_rate`) and the counts.

    ``num_negatives`` defaults to each row's ``non_members``; it may be smaller (a stricter
    n/a rule), never larger than the non-members a row was measured on.
    """
    rows = _check_report(report)
    levels = _levels_of(next(iter(rows.values())))
    if num_negatives is not None:
        num_negatives = require_int(num_negatives, "num_negatives", 0)
    columns = ["attack", "AUC ± s.e.", "PR AUC"]
    columns += [f"TPR@{100 * level:g}%FPR" for level in levels]
    columns += ["members", "non-members"]
    table = []
    for name, row in rows.items():
        measured = int(row["non_members"])
        if _levels_of(row) != levels:
            raise ValueError(
                f"Attack {name!r} reports TPRs at other FPR levels than the first attack; build "
                "every row with one membership_report call."
            )
        negatives = measured if num_negatives is None else num_negatives
        if negatives > measured:
            raise ValueError(
                f"`num_negatives` is {num_negatives} but attack {name!r} was measured on "
                f"{measured} non-members; pass at most {measured} (or None)."
            )
        cells = [
            name.replace("|", "\\|"),
            f"{float(row['auc']):.4f} ± {float(row['auc_se']):.4f}",
            f"{float(row['pr_auc']):.4f}",
        ]
        cells += [
            format_rate(float(row[f"{_rate_name(level)}_at_most"]), negatives, level)
            for level in levels
        ]
        cells += [str(int(row["members"])), str(measured)]
        table.append(cells)
    header = "TPR at FPR <= level, LiRA's convention; interpolated values in the JSON."
    return header + "\n\n" + markdown_table(columns, table)


# --------------------------------------------------------------------------------------------
# Internals
# --------------------------------------------------------------------------------------------


def _scores_and_labels(
    scores: ArrayLike, labels: ArrayLike, name: str = "scores"
) -> tuple[np.ndarray, np.ndarray]:
    """Float64 scores (``+-inf`` kept, NaN refused) and bool labels as NumPy arrays; both
    classes required."""
    if isinstance(scores, Tensor):
        scores = scores.detach().cpu()
    if isinstance(labels, Tensor):
        labels = labels.detach().cpu()
    s, y = scores_and_labels(scores, labels, name, "labels")
    require_both_classes(y, "labels", _CLASSES, "A membership audit")
    return s.numpy(), y.numpy()


def _tie_groups(scores: np.ndarray) -> tuple[np.ndarray, int]:
    """The rank of each score among the distinct scores (ascending), and their number."""
    distinct, group = np.unique(scores, return_inverse=True)
    return group.reshape(-1), distinct.size


def _resampled_aucs(group: np.ndarray, positive: np.ndarray, groups: int) -> np.ndarray:
    """The tie-aware AUC of each row of a ``(rows, n)`` resample, given the tie group of each
    drawn score and its label; NaN for a row with one class only.

    ``AUC = sum_g pos_g (neg_below_g + neg_g / 2) / (P Q)`` where ``pos_g`` and ``neg_g`` count
    the drawn members and non-members scoring in group ``g``."""
    rows = group.shape[0]
    keys = (np.arange(rows)[:, None] * groups + group).reshape(-1)
    flat_positive = positive.reshape(-1)
    size = rows * groups
    pos = np.bincount(keys[flat_positive], minlength=size).reshape(rows, groups)
    neg = np.bincount(keys[~flat_positive], minlength=size).reshape(rows, groups)
    below = np.cumsum(neg, axis=1) - neg
    wins = (pos * (2 * below + neg)).sum(axis=1) / 2.0
    pairs = pos.sum(axis=1) * neg.sum(axis=1)
    aucs = np.full(rows, np.nan)
    np.divide(wins, pairs, out=aucs, where=pairs > 0)
    return aucs


def _roc_points(scores: np.ndarray, positive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """FPR and TPR at every distinct score, highest first, after ``(0, 0)``."""
    tp, fp = threshold_counts(torch.from_numpy(scores), torch.from_numpy(positive))
    tp, fp = tp.numpy(), fp.numpy()
    return np.r_[0.0, fp / fp[-1]], np.r_[0.0, tp / tp[-1]]


def _rate_name(level: float) -> str:
    return f"tpr_at_{100 * level:g}pct_fpr"


def _check_levels(levels: Sequence[float]) -> tuple[float, ...]:
    if isinstance(levels, (str, bytes)) or not isinstance(levels, Sequence):
        raise TypeError(
            f"`levels` must be a sequence of false-positive rates in (0, 1), got {levels!r}; "
            "wrap one rate in a tuple: (0.01,)."
        )
    if not levels:
        raise ValueError("`levels` is empty; give at least one false-positive rate, e.g. (0.01,).")
    checked = []
    for level in levels:
        value = require_finite(level, "levels")
        if not 0.0 < value < 1.0:
            raise ValueError(
                f"Every false-positive rate in `levels` must lie in (0, 1), got {level!r} "
                "(0.01 for 1%, not 1)."
            )
        checked.append(value)
    names = [_rate_name(level) for level in checked]
    if len(set(names)) < len(names):
        raise ValueError(
            f"`levels` {levels!r} holds rates that coincide (to 6 significant digits); give "
            "each rate once."
        )
    return tuple(checked)


def _levels_of(row: Mapping[str, Any]) -> tuple[float, ...]:
    """The FPR levels a report row holds, read back from its ``..._at_most`` keys."""
    return tuple(float(m.group(1)) / 100 for key in row if (m := _RATE_KEY.match(key)))


def _check_report(report: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Mapping[str, Any]]:
    if not isinstance(report, Mapping) or not report:
        raise TypeError(
            "`report` must be a non-empty {attack: row} mapping, as membership_report returns."
        )
    for name, row in report.items():
        missing = [key for key in _ROW_KEYS if not isinstance(row, Mapping) or key not in row]
        if missing or not _levels_of(row):
            missing = missing or ["tpr_at_<level>pct_fpr_at_most"]
            raise ValueError(
                f"Report row {name!r} lacks {missing}; pass what membership_report returns."
            )
        if any(not math.isfinite(float(row[key])) for key in _ROW_KEYS):
            raise ValueError(f"Report row {name!r} holds a value that is not finite.")
    return report
