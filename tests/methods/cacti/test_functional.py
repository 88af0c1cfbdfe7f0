"""MT-CM invariants and the encoder layouts, against direct per-row computations; the
reconstruction loss against a hand computation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lightning_info.methods.cacti.functional import (
    copy_masks,
    encoder_length,
    inference_layout,
    kept_mask,
    median_truncation,
    reconstruction_loss,
)


def random_missing(rows=200, columns=9, rate=0.35, seed=0):
    g = torch.Generator().manual_seed(seed)
    missing = torch.rand(rows, columns, generator=g) < rate
    missing[:, 0] &= torch.rand(rows, generator=g) < 0.5  # some rows with one observed value
    missing[3] = True
    missing[3, 2] = False  # a row with a single observed value
    return missing


def test_copy_masks_are_a_union_with_another_rows_pattern_or_nothing():
    missing = random_missing()
    mask = copy_masks(missing, 0.9, torch.Generator().manual_seed(1))
    patterns = {tuple(row.tolist()) for row in missing}
    copied = 0
    for i in range(missing.shape[0]):
        assert (mask[i] | missing[i]).equal(mask[i]), "a copy mask never unmasks a missing value"
        if mask[i].equal(missing[i]):
            continue
        copied += 1
        extra = mask[i] & ~missing[i]
        # the added entries are a donor pattern restricted to the row's observed columns
        assert any((torch.tensor(p) & ~missing[i]).equal(extra) for p in patterns), (
            f"row {i}: the added mask is no row's missingness pattern"
        )
        assert (~mask[i]).sum() >= 2, "a copied row keeps at least two visible values"
    assert copied > 0.5 * missing.shape[0]


def test_copy_mask_is_dropped_rather_than_leave_fewer_than_two_visible():
    missing = torch.tensor([[False, False, True, True], [True, True, False, False]])
    # every donor pattern would hide both observed values of the other row
    mask = copy_masks(missing, 1.0, torch.Generator().manual_seed(0))
    assert mask.equal(missing)


def test_copy_probability_sets_the_share_of_copied_rows():
    missing = torch.rand(20000, 12, generator=torch.Generator().manual_seed(2)) < 0.2
    mask = copy_masks(missing, 0.6, torch.Generator().manual_seed(3))
    changed = (mask != missing).any(1).float().mean().item()
    # a copy changes a row unless the donor's pattern adds nothing: P = 0.6 * P(adds something)
    adds = 1 - (1 - 0.2 * 0.8) ** 12
    assert changed == pytest.approx(0.6 * adds, abs=0.015)


@pytest.mark.parametrize(
    "counts, expected", [([3, 5, 4], 4), ([2, 5], 3), ([2, 4, 4, 7], 4), ([1, 2], 1), ([6], 6)]
)
def test_encoder_length_is_the_floor_of_the_median(counts, expected):
    assert encoder_length(torch.tensor(counts)) == expected == int(np.floor(np.median(counts)))


def test_median_truncation_keeps_the_median_count_of_visible_columns():
    mask = random_missing(seed=4)
    positions, padding = median_truncation(mask, torch.Generator().manual_seed(5))
    visible = (~mask).sum(1)
    length = int(np.floor(np.median(visible.numpy())))
    assert positions.shape == padding.shape == (mask.shape[0], length)
    kept = kept_mask(positions, padding, mask.shape[1])
    for i in range(mask.shape[0]):
        slots = positions[i][~padding[i]]
        assert len(set(slots.tolist())) == slots.numel(), "no column twice"
        assert (~mask[i, slots]).all(), "only visible columns are kept"
        assert slots.numel() == min(int(visible[i]), length)
        assert padding[i].sum() == max(length - int(visible[i]), 0)
        assert kept[i].sum() == slots.numel() and kept[i, slots].all()


def test_median_truncation_draws_the_kept_columns_at_random():
    mask = torch.zeros(4000, 6, dtype=torch.bool)  # all visible: keep 6 of 6 ... then truncate
    mask[:, 5] = torch.arange(4000) % 2 == 0  # counts 5 and 6: median 5.5 -> 5
    positions, padding = median_truncation(mask, torch.Generator().manual_seed(6))
    assert positions.shape[1] == 5 and not padding.any()
    full_rows = ~mask[:, 5]
    dropped = (~kept_mask(positions, padding, 6))[full_rows].float().mean(0)
    assert torch.allclose(dropped, torch.full((6,), 1 / 6), atol=0.03), dropped


def test_inference_layout_holds_every_observed_column_in_order():
    missing = random_missing(seed=7)
    positions, padding = inference_layout(missing)
    assert positions.shape[1] == int((~missing).sum(1).max())
    for i in range(missing.shape[0]):
        assert positions[i][~padding[i]].tolist() == torch.nonzero(~missing[i]).flatten().tolist()
    assert kept_mask(positions, padding, missing.shape[1]).equal(~missing)


def test_masks_must_be_boolean_matrices():
    with pytest.raises(ValueError, match="2-D boolean"):
        copy_masks(torch.zeros(3, 4), 0.5)
    with pytest.raises(ValueError, match="2-D boolean"):
        inference_layout(torch.zeros(4, dtype=torch.bool))


def test_reconstruction_loss_by_hand():
    values = torch.tensor([[0.0, 0.5, 1.0], [0.2, 0.4, torch.nan]])
    prediction = torch.tensor([[0.1, 0.5, 0.7], [0.6, 0.1, 0.9]])
    observed = torch.tensor([[True, True, True], [True, True, False]])
    kept = torch.tensor([[True, False, True], [False, True, False]])
    # kept & observed: errors 0.1, -0.3, -0.3 -> (0.01 + 0.09 + 0.09) / 3
    # observed & ~kept: errors 0, 0.4 -> (0 + 0.16) / 2; the NaN at (1, 2) is never read
    loss = reconstruction_loss(prediction, values, observed, kept)
    assert loss.item() == pytest.approx(0.19 / 3 + 0.08, abs=1e-7)
    # nothing re-masked: the second term is dropped, not 0 / 0
    everything = reconstruction_loss(prediction, values, observed, observed)
    assert everything.item() == pytest.approx((0.01 + 0.09 + 0.16 + 0.09) / 5, abs=1e-7)


def test_reconstruction_loss_is_the_mean_over_kept_plus_the_mean_over_re_masked():
    g = torch.Generator().manual_seed(1)
    prediction, values = torch.rand(6, 5, generator=g), torch.rand(6, 5, generator=g)
    observed = torch.rand(6, 5, generator=g) > 0.3
    kept = observed & (torch.rand(6, 5, generator=g) > 0.5)
    squared = (prediction - values) ** 2
    expected = squared[kept].mean() + squared[observed & ~kept].mean()
    assert torch.allclose(reconstruction_loss(prediction, values, observed, kept), expected)
    values_with_nan = torch.where(observed, values, torch.nan)
    loss = reconstruction_loss(prediction.requires_grad_(), values_with_nan, observed, kept)
    assert torch.isfinite(loss)
    loss.backward()
    assert torch.isfinite(prediction.grad).all() and (prediction.grad[~observed] == 0).all()
