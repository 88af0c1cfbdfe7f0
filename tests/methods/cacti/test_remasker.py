"""ReMasker's random re-masking (``masking="random"``): its layout against its distribution and
by hand, the module's training loss against a hand computation, and the study's ReMasker,
tables, rates and tuned settings."""

from __future__ import annotations

import pytest
import torch

from lightning_info.core.sampling import keyed_generator
from lightning_info.methods.cacti.functional import kept_mask, random_masking
from lightning_info.methods.cacti.module import CACTI, build_cacti
from lightning_info.methods.cacti.networks import CACTINetwork


def missing_table(rows=4000, columns=10, rate=0.3, seed=0):
    g = torch.Generator().manual_seed(seed)
    missing = torch.rand(rows, columns, generator=g) < rate
    missing[:100] = False  # complete rows
    missing[100] = True
    missing[100, 4] = False  # one observed value
    return missing


def test_random_masking_keeps_only_observed_columns_each_once_and_as_many_as_fit():
    missing = missing_table()
    positions, padding = random_masking(missing, 0.5, torch.Generator().manual_seed(1))
    assert positions.shape == (4000, 5) and padding.shape == (4000, 5)  # L = int(10 * 0.5)
    observed = (~missing).sum(1)
    for i in range(0, 4000, 7):
        slots = positions[i][~padding[i]].tolist()
        assert len(slots) == len(set(slots)) == min(int(observed[i]), 5)
        assert all(not missing[i, j] for j in slots)  # only observed entries are kept
    kept = kept_mask(positions, padding, 10)
    assert not (kept & missing).any()
    assert kept[100].tolist() == [j == 4 for j in range(10)]  # a lone value is kept, padded
    # complete rows: exactly the ratio re-masked; 0.3 keeps int(10 * 0.7) = 7
    assert ((~kept[:100]).sum(1) == 5).all()
    positions, padding = random_masking(missing[:100], 0.3)
    assert positions.shape == (100, 7) and not padding.any()


def test_random_masking_draws_the_kept_columns_uniformly():
    missing = missing_table()
    kept = kept_mask(*random_masking(missing, 0.5, torch.Generator().manual_seed(2)), 10)
    observed = ~missing
    counts = observed.sum(1, keepdim=True).double()
    expected = torch.where(observed, (counts.clamp(max=5) / counts), 0.0)  # min(o, L) / o
    # per column, the kept share of its observed entries matches the uniform choice's
    for j in range(10):
        rows = observed[:, j]
        share = kept[rows, j].double().mean()
        assert abs(float(share - expected[rows, j].mean())) < 0.03
    remasked = (observed & ~kept).sum() / observed.sum()
    assert abs(float(remasked - (1 - expected[observed].mean()))) < 1e-6  # the same count
    assert 0.3 < float(remasked) < 0.5  # rows with fewer than 5 values re-mask nothing


def test_random_masking_refuses_bad_ratios():
    missing = missing_table(rows=200)
    for ratio in (1.0, -0.1):
        with pytest.raises(ValueError, match="ratio"):
            random_masking(missing, ratio)
    with pytest.raises(ValueError, match="masking"):
        CACTI(5, use_context=False, masking="both")
    with pytest.raises(ValueError, match="mask_ratio"):
        CACTI(5, use_context=False, masking="random", mask_ratio=1.0)


def test_the_remasker_training_loss_is_the_hand_computed_one():
    torch.manual_seed(0)
    network = CACTINetwork(6, None, embed_dim=8, encoder_depth=1, decoder_depth=1, num_heads=2)
    model = CACTI(6, use_context=False, network=network, masking="random", mask_ratio=0.5, seed=3)
    g = torch.Generator().manual_seed(5)
    values = torch.rand(16, 6, generator=g)
    observed = torch.rand(16, 6, generator=g) > 0.2
    observed[0] = True
    values = torch.where(observed, values, torch.nan)  # unobserved entries never read
    loss = model.training_step({"values": values, "observed": observed}, 0)
    # by hand: the same keyed draw, the kept entries (3 of 6) and the re-masked ones
    positions, padding = random_masking(~observed, 0.5, keyed_generator(3, 0, 0))
    assert positions.shape[1] == 3
    kept = kept_mask(positions, padding, 6)
    with torch.no_grad():
        prediction = network(torch.nan_to_num(values), observed, positions, padding, None)
    errors = (prediction - torch.nan_to_num(values)) ** 2
    remasked = observed & ~kept
    assert remasked.any() and (kept & observed).any()
    hand = errors[kept].mean() + errors[remasked].mean()
    assert torch.allclose(loss.detach(), hand, atol=1e-6)
    assert torch.isfinite(loss)


def test_build_cacti_routes_the_masking_settings():
    model = build_cacti(
        5, None, {"embed_dim": 8, "masking": "random", "mask_ratio": 0.25}, use_context=False
    )
    assert model.masking == "random" and model.mask_ratio == 0.25 and not model.use_context
    positions, _ = model.training_layout(torch.ones(4, 5, dtype=torch.bool))
    assert positions.shape == (4, 3)  # int(5 * 0.75) slots: a quarter re-masked
    copy = build_cacti(5, None, {"embed_dim": 8}, use_context=False)
    assert copy.masking == "copy"
