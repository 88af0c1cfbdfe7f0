"""A NaN guidance weight is refused (issue 35): ``weight > 0`` is false for NaN, so
``impute(guidance_weight=nan)`` used to sample without guidance, silently."""

from __future__ import annotations

import math

import pytest
import torch

from lightning_info.methods.prodiff import ProDiff

TINY = dict(embed_dim=16, encoder_layers=1, encoder_heads=2, encoder_feedforward=16,
            unet_channels=8, unet_multipliers=(1, 2), unet_res_blocks=1, attention_lengths=(),
            num_steps=20, sampling_steps=3, num_prototypes=4)  # fmt: skip


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return ProDiff(6, **TINY).eval()


def _window():
    return torch.rand(2, 6, 3, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize(
    ("weight", "exception", "message"),
    [
        (math.nan, ValueError, "`guidance_weight` must be finite"),
        (math.inf, ValueError, "`guidance_weight` must be finite"),
        (-0.5, ValueError, "`guidance_weight` must be >= 0"),
        ("2", TypeError, "`guidance_weight` must be a real number"),
    ],
)
def test_a_bad_guidance_weight_is_refused(model, weight, exception, message):
    with pytest.raises(exception, match=message):
        ProDiff(6, **TINY, guidance_weight=weight)
    with pytest.raises(exception, match=message):
        model.impute(_window(), guidance_weight=weight)


def test_weight_zero_is_the_conditional_sampler(model):
    draw = lambda w: model.impute(_window(), guidance_weight=w,  # noqa: E731
                                  generator=torch.Generator().manual_seed(3))  # fmt: skip
    unguided = draw(0)
    assert torch.isfinite(unguided).all()
    assert not torch.equal(unguided, draw(2.0))  # the guidance changes the sample
