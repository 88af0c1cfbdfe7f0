"""DSA: each op against a brute-force oracle, siamese draws, normalisation, gradients, checks."""

from __future__ import annotations

import pytest
import torch

from lightning_info.methods.rome.augment import (
    DSA,
    DSA_STRATEGY,
    FAMILIES,
    adjust_brightness,
    adjust_contrast,
    adjust_saturation,
    affine,
    choose_family,
    cutout,
    rotation_theta,
    translate,
)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _images(n: int, c: int = 1, h: int = 8, w: int = 8, seed: int = 0) -> torch.Tensor:
    return torch.rand(n, c, h, w, generator=_gen(seed))


def test_translate_matches_pixel_loop():
    x = _images(6, c=2, h=7, w=9)
    tx = torch.tensor([0, 1, -1, 3, -5, 8])
    ty = torch.tensor([2, -3, 0, -9, 4, 1])
    expected = torch.zeros_like(x)
    for n in range(6):
        for i in range(7):
            for j in range(9):
                si, sj = i + int(tx[n]), j + int(ty[n])
                if 0 <= si < 7 and 0 <= sj < 9:
                    expected[n, :, i, j] = x[n, :, si, sj]
    torch.testing.assert_close(translate(x, tx, ty), expected, rtol=0, atol=0)


def test_cutout_matches_mask_loop_with_clipped_squares():
    x = _images(4, c=3, h=8, w=10) + 0.5
    cx, cy = torch.tensor([4, 0, 7, 2]), torch.tensor([5, 9, 0, 3])
    size_h, size_w = 4, 5
    expected = x.clone()
    for n in range(4):
        for i in range(int(cx[n]) - size_h // 2, int(cx[n]) - size_h // 2 + size_h):
            for j in range(int(cy[n]) - size_w // 2, int(cy[n]) - size_w // 2 + size_w):
                if 0 <= i < 8 and 0 <= j < 10:
                    expected[n, :, i, j] = 0.0
    out = cutout(x, cx, cy, size_h, size_w)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    assert (out[1] == 0).sum() < 3 * size_h * size_w


def test_affine_quarter_turn_is_rot90_and_identity_is_exact():
    x = _images(3, c=2, h=6, w=6)
    quarter = torch.tensor([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0]]).expand(3, 2, 3)
    expected = torch.rot90(x, 1, dims=(2, 3))
    torch.testing.assert_close(affine(x, quarter), expected, rtol=0, atol=1e-6)
    assert not torch.allclose(expected, torch.rot90(x, -1, dims=(2, 3)))
    torch.testing.assert_close(affine(x, rotation_theta(torch.full((3,), 90.0))), expected)
    identity = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]).expand(3, 2, 3)
    torch.testing.assert_close(affine(x, identity), x, rtol=0, atol=1e-6)


def test_color_ops():
    x = _images(4, c=3)
    shift = torch.tensor([-0.5, 0.0, 0.25, 0.4])
    torch.testing.assert_close(adjust_brightness(x, shift), x + shift[:, None, None, None])
    factor = torch.tensor([0.0, 0.5, 1.3, 2.0])
    out = adjust_contrast(x, factor)
    torch.testing.assert_close(out.mean(dim=(1, 2, 3)), x.mean(dim=(1, 2, 3)))
    assert torch.allclose(out[0], x[0].mean().expand_as(x[0]))
    grey = _images(4, c=1)
    torch.testing.assert_close(adjust_saturation(grey, factor), grey)
    desaturated = adjust_saturation(x, torch.zeros(4))
    torch.testing.assert_close(desaturated, x.mean(dim=1, keepdim=True).expand_as(x))


def test_siamese_draws_match_across_batch_sizes_and_hit_every_family():
    dsa = DSA(mean=(0.3,), std=(0.2,))
    real = _images(16, seed=1)
    synthetic = real[:3].clone()
    seen = set()
    for seed in range(41):
        seen.add(choose_family(DSA_STRATEGY, _gen(seed)))
        g_real, g_syn = _gen(seed), _gen(seed)
        out_real = dsa(real, g_real, per_batch=True)
        out_syn = dsa(synthetic, g_syn, per_batch=True)
        torch.testing.assert_close(out_syn, out_real[:3], rtol=0, atol=1e-6)
        assert torch.equal(g_real.get_state(), g_syn.get_state())
    assert seen == set(FAMILIES)


@pytest.mark.parametrize("family", FAMILIES)
def test_per_batch_shares_and_per_sample_varies_the_transform(family):
    x = _images(1, c=3, h=12, w=12, seed=2).expand(16, 3, 12, 12).contiguous()
    dsa = DSA(strategy=family, mean=(0.4, 0.5, 0.6), std=(0.2, 0.3, 0.25))
    shared = dsa(x, _gen(0), per_batch=True)
    torch.testing.assert_close(shared, shared[:1].expand_as(shared), rtol=0, atol=1e-6)
    varied = dsa(x, _gen(0), per_batch=False)
    assert not torch.allclose(varied, varied[:1].expand_as(varied), atol=1e-4)


def test_flip_round_trips_the_normalisation():
    x = _images(5, c=3, seed=3)
    stats = {"mean": (0.4, 0.5, 0.6), "std": (0.2, 0.3, 0.25)}
    torch.testing.assert_close(DSA("flip", flip=0.0, **stats)(x, _gen(0)), x)
    torch.testing.assert_close(DSA("flip", flip=1.0, **stats)(x, _gen(0)), x.flip(3))
    flipped = set()
    for seed in range(12):
        out = DSA("flip", **stats)(x, _gen(seed))
        is_flipped = torch.allclose(out, x.flip(3), atol=1e-6)
        assert is_flipped or torch.allclose(out, x, atol=1e-6)
        flipped.add(is_flipped)
    assert flipped == {True, False}


@pytest.mark.parametrize("family", FAMILIES)
def test_gradient_reaches_the_images(family):
    x = (_images(4, c=3) * 0.5 + 0.25).requires_grad_()
    dsa = DSA(strategy=family, mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25), flip=1.0)
    dsa(x, _gen(0)).sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0


def test_for_images_uses_channel_statistics():
    x = _images(10, c=3) * torch.tensor([1.0, 0.5, 0.2]).reshape(1, 3, 1, 1)
    dsa = DSA.for_images(x, "crop", cutout=0.25)
    assert dsa.strategy == "crop" and dsa.cutout == 0.25
    expected_std = x.permute(1, 0, 2, 3).reshape(3, -1).std(dim=1, correction=0)
    torch.testing.assert_close(torch.tensor(dsa.mean), x.mean(dim=(0, 2, 3)))
    torch.testing.assert_close(torch.tensor(dsa.std), expected_std)


def test_bad_input_raises_helpful_errors():
    with pytest.raises(ValueError, match=r"'zoom'.*color, crop, cutout, flip, scale, rotate"):
        DSA(strategy="color_zoom")
    with pytest.raises(ValueError, match="strategy"):
        DSA(strategy="")
    with pytest.raises(ValueError, match=r"one value per channel.*3 and 1"):
        DSA(mean=(0.1, 0.2, 0.3), std=(0.5,))
    with pytest.raises(ValueError, match="std"):
        DSA(std=(0.0,))
    with pytest.raises(ValueError, match="flip"):
        DSA(flip=1.5)
    with pytest.raises(ValueError, match="scale"):
        DSA(scale=0.8)
    with pytest.raises(ValueError, match=r"C = 1 channels.*\(2, 3, 8, 8\)"):
        DSA()(_images(2, c=3), _gen(0))


def test_output_stays_in_the_pixel_box():
    x = _images(8, c=3)
    dsa = DSA(mean=(0.5, 0.4, 0.3), std=(0.2, 0.2, 0.2), brightness=4.0, contrast=3.0)
    for seed in range(20):
        for per_batch in (True, False):
            out = dsa(x, _gen(seed), per_batch=per_batch)
            assert out.min() >= 0.0 and out.max() <= 1.0
