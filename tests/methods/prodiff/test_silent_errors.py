"""A NaN guidance weight is refused (issue 35): ``weight > 0`` is false for NaN, so
``impute(guidance_weight=nan)`` used to sample without guidance, silently. The constructor's
``GuidanceOptions(weight=...)`` refuses it too."""

from __future__ import annotations

import math

import pytest
import torch

from lightning_info.methods.prodiff import GuidanceOptions
from tests.methods.prodiff.tiny import tiny_prodiff


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return tiny_prodiff(6, sampling_steps=3).eval()


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
    with pytest.raises(exception, match=message.replace("guidance_weight", "guidance.weight")):
        GuidanceOptions(weight=weight)
    with pytest.raises(exception, match=message):
        model.impute(_window(), guidance_weight=weight)


def test_weight_zero_is_the_conditional_sampler(model):
    def draw(w):
        return model.impute(
            _window(), guidance_weight=w, generator=torch.Generator().manual_seed(3)
        )

    unguided = draw(0)
    assert torch.isfinite(unguided).all()
    assert not torch.equal(unguided, draw(2.0))  # the guidance changes the sample
