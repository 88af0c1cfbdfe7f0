"""Median truncated copy masking (MT-CM) and the token layouts of CACTI's encoder.

CACTI (Gorla et al., ICML 2025) trains a masked autoencoder on a table whose own missingness is
the template of its training masks:

1. *Copy masking*: each row ``i`` takes, with probability ``p_cm``, the missingness pattern of
   another row ``j`` as an extra mask, ``mask_i = miss_i | miss_j``; if fewer than two of its
   observed values would stay visible the copy mask is dropped for that row (``mask_i =
   miss_i``).
2. *Median truncation*: the batch's encoder length is ``L = floor(median_i(#visible_i))``; a row
   with more visible values keeps ``L`` of them in random order (the rest are re-masked), a row
   with fewer fills its surplus slots with padding. ``kept`` (the paper's ``omask``) marks the
   values the encoder sees.

A layout is ``(positions, padding)``: ``positions[b, s]`` is the column in slot ``s`` of row
``b`` and ``padding[b, s]`` marks a slot that holds no value. The encoder is given ``padding``
as its key-padding mask, so a padded slot never changes a row's encoding. (The reference code
attends to a frozen pad token instead, and at inference truncates every row of a batch to the
batch's shortest, which is why it predicts one row at a time; with key-padding masks any batch
gives the one-row predictions.)

ReMasker (Du et al., 2023), the masked autoencoder CACTI builds on, is :func:`random_masking`:
no copy mask, a fixed share of each row's observed values re-masked at random.

The training objective (:func:`reconstruction_loss`) is the masked autoencoder's squared error
over the values the encoder saw plus that over the observed values MT-CM hid.

The evaluation's scores over the entries that were missing: ``r2``, the squared Pearson
correlation between the imputed and the true values of one column over its missing entries,
averaged over the columns with missing entries (not sklearn's ``r2_score``); ``rmse`` and ``mae``
over all missing entries; ``wasserstein``, the 1-D Wasserstein distance between the imputed and
the true values of a column's missing entries, averaged over those columns. Each is a pair of
torchmetrics-style functions: ``_<score>_update`` reduces one batch to the score's sufficient
statistics, ``_<score>_compute`` turns the accumulated statistics into the score. The Metrics of
:mod:`~lightning_info.methods.cacti.metrics` accumulate them over batches and processes;
:func:`imputation_scores` runs them once on a whole table.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from lightning_info.core.validation import require_int, require_probability, require_real_tensor

__all__ = [
    "copy_masks",
    "encoder_length",
    "imputation_scores",
    "inference_layout",
    "kept_mask",
    "median_truncation",
    "random_masking",
    "reconstruction_loss",
]


def _check_mask(mask: Tensor, name: str) -> None:
    if mask.ndim != 2 or mask.dtype != torch.bool:
        raise ValueError(
            f"`{name}` must be a 2-D boolean tensor (rows, columns), got "
            f"{tuple(mask.shape)} of {mask.dtype}."
        )


def copy_masks(
    missing: Tensor, probability: float, generator: torch.Generator | None = None
) -> Tensor:
    """MT-CM step 1: ``missing | missing[donor]`` per row with probability ``probability``
    (``donor`` a uniformly drawn *other* row of the batch), unless that leaves the row fewer
    than two visible values; ``True`` = masked. Draws on the CPU with ``generator``.
    ``probability`` is a real number in ``[0, 1]`` (NaN, a bool or 1.5 is refused)."""
    _check_mask(missing, "missing")
    probability = require_probability(probability, "probability")
    rows = missing.shape[0]
    if rows < 2 or probability <= 0:
        return missing.clone()
    draw = torch.rand(rows, generator=generator).to(missing.device) < probability
    offsets = torch.randint(1, rows, (rows,), generator=generator).to(missing.device)
    donors = (torch.arange(rows, device=missing.device) + offsets) % rows
    masked = missing | (missing[donors] & draw[:, None])
    too_few_visible = (~masked).sum(1) < 2
    return torch.where(too_few_visible[:, None], missing, masked)


def encoder_length(visible_counts: Tensor) -> int:
    """``floor(median)`` of the per-row visible counts, the median of an even number of rows
    being the mean of the two middle ones (the reference's ``torch.median`` takes the lower)."""
    ordered = visible_counts.sort().values
    rows = ordered.numel()
    if rows == 0:
        raise ValueError("`visible_counts` is empty: a batch needs at least one row.")
    return int((ordered[(rows - 1) // 2] + ordered[rows // 2]) // 2)


def median_truncation(
    mask: Tensor, generator: torch.Generator | None = None
) -> tuple[Tensor, Tensor]:
    """MT-CM step 2: the layout ``(positions, padding)`` of ``L = encoder_length`` slots per
    row, each row's visible columns (``~mask``) in random order, truncated to ``L`` or padded."""
    _check_mask(mask, "mask")
    return _shuffled_layout(mask, max(encoder_length((~mask).sum(1)), 1), generator)


def _shuffled_layout(
    mask: Tensor, length: int, generator: torch.Generator | None
) -> tuple[Tensor, Tensor]:
    """Each row's visible columns (``~mask``) in uniformly random order in ``length`` slots,
    truncated or padded."""
    visible = (~mask).sum(1)
    noise = torch.rand(mask.shape, generator=generator).to(mask.device)
    noise = noise.masked_fill(mask, 2.0)  # masked columns sort after every visible one
    positions = noise.argsort(dim=1)[:, :length]
    padding = torch.arange(length, device=mask.device)[None, :] >= visible[:, None]
    return positions, padding


def random_masking(
    missing: Tensor, ratio: float = 0.5, generator: torch.Generator | None = None
) -> tuple[Tensor, Tensor]:
    """ReMasker's training layout (Du et al., 2023), the masked autoencoder without copy
    masking: ``L = max(1, int(d * (1 - ratio)))`` slots per row holding ``L`` of the row's
    observed columns drawn uniformly without replacement; the row's other observed values are
    re-masked (reconstructed by the loss). A row with fewer than ``L`` observed values keeps
    them all and is padded (ReMasker fills those slots with missing entries instead). On a
    complete row the re-masked share is ``1 - L / d`` (``ratio`` when ``d * ratio`` is whole)."""
    _check_mask(missing, "missing")
    if isinstance(ratio, bool) or not 0 <= ratio < 1:
        raise ValueError(f"`ratio` (the re-masked share) must lie in [0, 1), got {ratio!r}.")
    length = max(1, int(missing.shape[1] * (1 - ratio)))
    return _shuffled_layout(missing, length, generator)


def inference_layout(missing: Tensor) -> tuple[Tensor, Tensor]:
    """Every observed column of every row in column order, padded to the batch's longest row:
    no copy mask, no truncation. A batch of no rows has an empty layout of one slot."""
    _check_mask(missing, "missing")
    observed = (~missing).sum(1)
    length = max(int(observed.max()), 1) if observed.numel() else 1
    order = missing.to(torch.uint8).argsort(dim=1, stable=True)  # observed first, in order
    positions = order[:, :length]
    padding = torch.arange(length, device=missing.device)[None, :] >= observed[:, None]
    return positions, padding


def kept_mask(positions: Tensor, padding: Tensor, num_columns: int) -> Tensor:
    """``kept[b, j]``: column ``j`` of row ``b`` sits in an unpadded slot (the paper's
    ``omask``).

    Raises unless ``positions`` is an integer tensor, ``padding`` a bool tensor of the same
    shape and ``num_columns`` an int >= 1 (a mismatched ``padding`` would otherwise broadcast)."""
    num_columns = require_int(num_columns, "num_columns", 1)
    if not isinstance(positions, Tensor) or not isinstance(padding, Tensor):
        raise TypeError("`positions` and `padding` must be tensors.")
    if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError(
            f"`positions` must hold integer column indices, got dtype {positions.dtype}."
        )
    if padding.dtype != torch.bool:
        raise TypeError(f"`padding` must be a bool tensor, got dtype {padding.dtype}.")
    if positions.dim() != 2 or padding.shape != positions.shape:
        raise ValueError(
            f"`positions` must be (batch, slots) and `padding` the same shape, got "
            f"{tuple(positions.shape)} and {tuple(padding.shape)}."
        )
    kept = torch.zeros(
        positions.shape[0], num_columns + 1, dtype=torch.bool, device=positions.device
    )
    kept.scatter_(1, positions.masked_fill(padding, num_columns), True)
    return kept[:, :num_columns]


def reconstruction_loss(
    prediction: Tensor, values: Tensor, observed: Tensor, kept: Tensor
) -> Tensor:
    """CACTI's reconstruction objective (Gorla et al., ICML 2025; the reference code's loss):

    ``L = sum_{(i,j) in K} (x_hat_ij - x_ij)^2 / |K| + sum_{(i,j) in R} (x_hat_ij - x_ij)^2 / |R|``

    with ``K = observed & kept`` (the values the encoder saw, the paper's ``omask``) and
    ``R = observed & ~kept`` (the observed values MT-CM hid). A term over an empty set is 0
    (the reference divides by zero there): each sum is divided by ``max(count, 1)``, so no
    count is read on the host; ``values`` at unobserved entries are never read (they may be
    NaN). All arguments are ``(B, d)`` (no broadcasting); the masks are boolean."""
    if not prediction.shape == values.shape == observed.shape == kept.shape:
        raise ValueError(
            "`prediction`, `values`, `observed` and `kept` must share one (B, d) shape, got "
            f"{tuple(prediction.shape)}, {tuple(values.shape)}, {tuple(observed.shape)} and "
            f"{tuple(kept.shape)}."
        )
    for name, mask in (("observed", observed), ("kept", kept)):
        if mask.dtype != torch.bool:
            raise TypeError(f"`{name}` must be a bool mask, got dtype {mask.dtype}.")
    squared = torch.where(observed, prediction - values, 0.0) ** 2
    loss = prediction.new_zeros(())
    for where in (kept & observed, observed & ~kept):
        loss = loss + torch.where(where, squared, 0.0).sum() / where.sum().clamp_min(1)
    return loss


# ------------------------------------------------------------- scores of the evaluation

#: Default relative tolerance of the R^2 "variance > 0" test (see
#: :class:`~lightning_info.methods.cacti.metrics.ImputationR2`).
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


def _scalar(value: float, device: torch.device) -> Tensor:
    return torch.tensor(value, dtype=torch.float64, device=device)


def _r2_update(
    imputed: Tensor, truth: Tensor, missing: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Per column, over one batch's missing entries (``imputed`` = ``b`` and ``truth`` = ``a``
    as :func:`_missing_entries` returns them, 0 elsewhere): the count and the sums ``S_a``,
    ``S_b``, ``S_aa``, ``S_bb``, ``S_ab``."""
    a, b = truth, imputed
    return missing.sum(0), a.sum(0), b.sum(0), (a * a).sum(0), (b * b).sum(0), (a * b).sum(0)


def _r2_compute(
    count: Tensor,
    sum_truth: Tensor,
    sum_imputed: Tensor,
    sum_truth_sq: Tensor,
    sum_imputed_sq: Tensor,
    sum_product: Tensor,
    variance_rtol: float,
) -> Tensor:
    """CACTI's R^2 from the per-column sums: with the centred sums ``C_aa = S_aa - S_a^2 / n``,
    ``C_bb`` likewise and ``C_ab = S_ab - S_a S_b / n``, the mean over the qualifying columns
    (``n >= 2``, ``C_aa > variance_rtol * S_aa`` and ``C_bb > variance_rtol * S_bb``) of
    ``C_ab^2 / (C_aa C_bb)``, clipped to ``[0, 1]``; NaN (0-dim float64) when no column
    qualifies (see :class:`~lightning_info.methods.cacti.metrics.ImputationR2` for the
    tolerance)."""
    n = count.double().clamp_min(1.0)
    s_a, s_b = sum_truth.double(), sum_imputed.double()
    s_aa, s_bb = sum_truth_sq.double(), sum_imputed_sq.double()
    c_aa = s_aa - s_a * s_a / n
    c_bb = s_bb - s_b * s_b / n
    c_ab = sum_product.double() - s_a * s_b / n
    qualifies = (count >= 2) & (c_aa > variance_rtol * s_aa) & (c_bb > variance_rtol * s_bb)
    if not bool(qualifies.any()):
        return _scalar(float("nan"), count.device)
    c_aa, c_bb, c_ab = c_aa[qualifies], c_bb[qualifies], c_ab[qualifies]
    return (c_ab * c_ab / (c_aa * c_bb)).clamp(0.0, 1.0).mean()


def _squared_error_update(imputed: Tensor, truth: Tensor, missing: Tensor) -> tuple[Tensor, Tensor]:
    """The sum of squared errors over one batch's missing entries and their count."""
    errors = imputed - truth  # 0 where not missing
    return (errors * errors).sum(), missing.sum()


def _absolute_error_update(
    imputed: Tensor, truth: Tensor, missing: Tensor
) -> tuple[Tensor, Tensor]:
    """The sum of absolute errors over one batch's missing entries and their count."""
    return (imputed - truth).abs().sum(), missing.sum()


def _rmse_compute(squared_error_sum: Tensor, count: Tensor) -> Tensor:
    """``sqrt(sum (b - a)^2 / n)``."""
    return (squared_error_sum.double() / count).sqrt()


def _mae_compute(absolute_error_sum: Tensor, count: Tensor) -> Tensor:
    """``sum |b - a| / n``."""
    return absolute_error_sum.double() / count


def _wasserstein_update(
    imputed: Tensor, truth: Tensor, missing: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """One batch's missing entries as ``(column index as float64, truth, imputation)``."""
    rows, columns = torch.nonzero(missing, as_tuple=True)
    return columns.double(), truth[rows, columns], imputed[rows, columns]


def _wasserstein_compute(columns: Tensor, truth: Tensor, imputed: Tensor) -> float:
    """The mean over the columns present of the 1-D Wasserstein distance between the truth and
    the imputation of the column's entries (``scipy.stats.wasserstein_distance``)."""
    from scipy.stats import wasserstein_distance

    columns = columns.cpu().numpy().astype(np.int64)
    truth, imputed = truth.cpu().numpy(), imputed.cpu().numpy()
    order = np.argsort(columns, kind="stable")
    columns, truth, imputed = columns[order], truth[order], imputed[order]
    starts = np.flatnonzero(np.r_[True, columns[1:] != columns[:-1]])
    ends = np.r_[starts[1:], columns.size]
    distances = [
        wasserstein_distance(truth[start:end], imputed[start:end])
        for start, end in zip(starts, ends)
    ]
    return float(np.mean(distances))


def imputation_scores(truth, imputed, missing) -> dict[str, float]:
    """``r2``, ``rmse``, ``mae`` and ``wasserstein`` of ``imputed`` against ``truth`` (arrays or
    tensors ``(n, d)``) over the entries where ``missing`` is ``True``: the score functions of
    the Metrics run once on the whole table, so the values equal what the Metrics give over any
    batching. A column whose missing entries are fewer than two, or constant in the truth or the
    imputation, has no correlation and is left out of ``r2`` (NaN when no column is left)."""
    mask = np.asarray(missing.cpu() if isinstance(missing, Tensor) else missing)
    if mask.dtype != bool and not np.isin(mask, (0, 1)).all():
        raise ValueError(
            "`missing` must be a bool mask (or 0/1), got other values; pass `mask > 0.5` or "
            "the mask it was made from."
        )
    imputed, truth, missing = _missing_entries(
        torch.as_tensor(np.asarray(imputed, dtype=np.float64)),
        torch.as_tensor(np.asarray(truth, dtype=np.float64)),
        torch.as_tensor(mask.astype(bool)),
        None,
        torch.device("cpu"),
    )
    if not bool(missing.any()):
        raise ValueError("no entry is missing: there is nothing to score.")
    squared, count = _squared_error_update(imputed, truth, missing)
    absolute, _ = _absolute_error_update(imputed, truth, missing)
    r2 = _r2_compute(*_r2_update(imputed, truth, missing), VARIANCE_RTOL)
    return {
        "r2": float(r2),
        "rmse": float(_rmse_compute(squared, count)),
        "mae": float(_mae_compute(absolute, count)),
        "wasserstein": _wasserstein_compute(*_wasserstein_update(imputed, truth, missing)),
    }
