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
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["copy_masks", "encoder_length", "inference_layout", "median_truncation", "kept_mask"]


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
    than two visible values; ``True`` = masked. Draws on the CPU with ``generator``."""
    _check_mask(missing, "missing")
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
    return int((ordered[(rows - 1) // 2] + ordered[rows // 2]) // 2)


def median_truncation(
    mask: Tensor, generator: torch.Generator | None = None
) -> tuple[Tensor, Tensor]:
    """MT-CM step 2: the layout ``(positions, padding)`` of ``L = encoder_length`` slots per
    row, each row's visible columns (``~mask``) in random order, truncated to ``L`` or padded."""
    _check_mask(mask, "mask")
    visible = (~mask).sum(1)
    length = max(encoder_length(visible), 1)
    noise = torch.rand(mask.shape, generator=generator).to(mask.device)
    noise = noise.masked_fill(mask, 2.0)  # masked columns sort after every visible one
    positions = noise.argsort(dim=1)[:, :length]
    padding = torch.arange(length, device=mask.device)[None, :] >= visible[:, None]
    return positions, padding


def inference_layout(missing: Tensor) -> tuple[Tensor, Tensor]:
    """Every observed column of every row in column order, padded to the batch's longest row:
    no copy mask, no truncation."""
    _check_mask(missing, "missing")
    observed = (~missing).sum(1)
    length = max(int(observed.max()), 1)
    order = missing.to(torch.uint8).argsort(dim=1, stable=True)  # observed first, in order
    positions = order[:, :length]
    padding = torch.arange(length, device=missing.device)[None, :] >= observed[:, None]
    return positions, padding


def kept_mask(positions: Tensor, padding: Tensor, num_columns: int) -> Tensor:
    """``kept[b, j]``: column ``j`` of row ``b`` sits in an unpadded slot (the paper's
    ``omask``)."""
    kept = torch.zeros(
        positions.shape[0], num_columns + 1, dtype=torch.bool, device=positions.device
    )
    kept.scatter_(1, positions.masked_fill(padding, num_columns), True)
    return kept[:, :num_columns]
