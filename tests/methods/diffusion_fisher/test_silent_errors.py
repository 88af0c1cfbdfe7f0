"""The diffusion Fisher at tiny ``sigma`` is computed as ``(I - (alpha / sigma)^2 Cov_w) /
sigma^2``, never forming ``sigma^4`` (which underflowed to 0 and turned ``tr F`` into NaN at
``sigma ~ 1e-10`` in float32 and ``1e-100`` in float64). With one data point ``Cov_w = 0`` and
the closed form is ``F = I / sigma^2``."""

from __future__ import annotations

import pytest
import torch

from lightning_info.methods.diffusion_fisher.functional import (
    diffusion_fisher_matrix,
    diffusion_fisher_mvp,
    diffusion_fisher_terms,
)


@pytest.mark.parametrize(
    ("dtype", "sigma"),
    [
        (torch.float32, 1e-10),
        (torch.float32, 1e-15),
        (torch.float64, 1e-100),
        (torch.float64, 1e-150),
    ],
)
def test_tiny_sigma_matches_the_closed_form_of_one_data_point(dtype, sigma):
    alpha = 0.8
    data = torch.tensor([[0.5, -1.0, 2.0]], dtype=dtype)
    x = alpha * data + torch.tensor([[1.0, 0.5, -0.25]], dtype=dtype) * sigma
    v = torch.tensor([[1.0, -2.0, 3.0]], dtype=dtype)
    terms = diffusion_fisher_terms(x, data, alpha, sigma, vectors=v)
    sigma64 = torch.tensor(sigma, dtype=torch.float64)
    expected_trace = 3 / sigma64**2
    torch.testing.assert_close(terms.trace.double(), expected_trace.reshape(1), rtol=1e-6, atol=0)
    torch.testing.assert_close(terms.mvp.double(), v.double() / sigma64**2, rtol=1e-6, atol=0)
    assert torch.isfinite(terms.score).all()
    matrix = diffusion_fisher_matrix(x, data, alpha, sigma)[0].double()
    torch.testing.assert_close(
        matrix, torch.eye(3, dtype=torch.float64) / sigma64**2, rtol=1e-6, atol=0
    )
    assert torch.isfinite(diffusion_fisher_mvp(x, v, data, alpha, sigma)).all()
