"""ProDiff's networks: the timestep sinusoid against its closed form, the UNet at every window
length (odd ones included), conditioning that reaches the output, the encoder's shape rules."""

from __future__ import annotations

import math

import pytest
import torch

from lightning_info.methods.prodiff.denoiser import (
    EndpointCondition,
    TrajectoryUNet,
    timestep_embedding,
)
from lightning_info.methods.prodiff.encoder import TrajectoryEncoder


def test_timestep_embedding_closed_form():
    steps = torch.tensor([0, 1, 17, 499])
    dim = 10
    out = timestep_embedding(steps, dim)
    half = dim // 2
    for row, t in enumerate(steps.tolist()):
        for j in range(half):
            w = math.exp(-math.log(10000.0) * j / (half - 1))
            assert out[row, j].item() == pytest.approx(math.sin(t * w), abs=1e-5)
            assert out[row, half + j].item() == pytest.approx(math.cos(t * w), abs=1e-5)
    assert timestep_embedding(steps, 11).shape == (4, 11)
    assert torch.equal(timestep_embedding(steps, 11)[:, -1], torch.zeros(4))


@pytest.mark.parametrize("length", [3, 7, 16, 33])
def test_unet_keeps_the_window_shape_at_every_length(length):
    torch.manual_seed(0)
    unet = TrajectoryUNet(
        length, base_channels=8, multipliers=(1, 2, 2), res_blocks=1, attention_lengths=(length,)
    )
    x = torch.randn(2, 3, length)
    out = unet(x, torch.tensor([0, 499]), torch.randn(2, unet.embed_dim))
    assert out.shape == x.shape and torch.isfinite(out).all()


def test_unet_output_depends_on_the_step_and_the_condition():
    torch.manual_seed(0)
    unet = TrajectoryUNet(9, base_channels=8, multipliers=(1, 2), res_blocks=1).eval()
    x = torch.randn(2, 3, 9)
    condition = torch.randn(2, unet.embed_dim)
    base = unet(x, torch.tensor([5, 5]), condition)
    assert not torch.allclose(base, unet(x, torch.tensor([300, 300]), condition))
    assert not torch.allclose(base, unet(x, torch.tensor([5, 5]), 2 * condition))
    with pytest.raises(ValueError, match=r"\(B, 3, 9\)"):
        unet(torch.randn(2, 3, 8), torch.tensor([0, 0]))


def test_endpoint_condition_sums_its_branches():
    torch.manual_seed(0)
    condition = EndpointCondition(3, 12, prototype_dim=5)
    start, end, prototype = torch.randn(4, 3), torch.randn(4, 3), torch.randn(4, 5)
    expected = condition.start(start) + condition.end(end) + condition.prototype(prototype)
    torch.testing.assert_close(condition(start, end, prototype), expected)
    with pytest.raises(ValueError, match="pass `prototype`"):
        condition(start, end)
    assert EndpointCondition(3, 12)(start, end).shape == (4, 12)


def test_encoder_sums_over_time_into_one_normalised_feature():
    torch.manual_seed(0)
    encoder = TrajectoryEncoder(6, embed_dim=16, num_layers=1, num_heads=2, dropout=0.0).eval()
    features = encoder(torch.randn(5, 6, 3))
    assert features.shape == (5, 16)
    torch.testing.assert_close(features.mean(1), torch.zeros(5), atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match=r"\(B, 6, C\)"):
        encoder(torch.randn(5, 7, 3))
    with pytest.raises(ValueError, match="multiple of `num_heads`"):
        TrajectoryEncoder(6, embed_dim=10, num_heads=4)
