"""Hop weights that poison or unbalance the diffusion are refused (issue 35): a NaN or negative
weight, a NaN restart probability, and weights summing to more than 1 with ``remainder=True``
(whose remainder on the next power would be negative, silently). Valid boundaries still work."""

from __future__ import annotations

import math

import pytest
import torch

from lightning_info.methods.graph4mm import (
    HopDiffusedAttention,
    diffuse,
    hop_diffused_attention,
    masked_transition,
    ppr_weights,
)

NAN = math.nan


def _inputs():
    g = torch.Generator().manual_seed(0)
    upper = (torch.rand(2, 5, 5, generator=g) < 0.5).triu(1)
    adjacency = (upper | upper.transpose(1, 2)).double()
    scores = torch.softmax(torch.randn(2, 5, 5, generator=g, dtype=torch.float64), dim=-1)
    return scores, adjacency


def _attention(**kwargs):
    return hop_diffused_attention(*_inputs(), **kwargs)


def _diffuse(weights):
    scores, adjacency = _inputs()
    return diffuse(
        masked_transition(scores, adjacency), torch.ones(2, 5, 3, dtype=torch.float64), weights
    )


SUM = r"sum to 1\.5 > 1, so the remainder on the next power would be negative"

BAD_INPUT = [
    pytest.param(
        lambda: _attention(theta=[0.5, NAN]),
        ValueError,
        r"`theta` contains 1 NaN/inf",
        id="theta-nan",
    ),
    pytest.param(
        lambda: _attention(theta=torch.tensor([0.5, math.inf])),
        ValueError,
        r"`theta` contains 1 NaN/inf",
        id="theta-inf-tensor",
    ),
    pytest.param(
        lambda: _attention(theta=[0.5, -0.25]),
        ValueError,
        r"`theta` holds a negative hop weight",
        id="theta-negative",
    ),
    pytest.param(
        lambda: _attention(theta=[0.5, 1.0]),
        ValueError,
        SUM,
        id="theta-sum-above-one-with-remainder",
    ),
    pytest.param(
        lambda: _attention(alpha=NAN), ValueError, "`alpha` must be finite", id="alpha-nan"
    ),
    pytest.param(
        lambda: ppr_weights(alpha=NAN), ValueError, "`alpha` must be finite", id="ppr-alpha-nan"
    ),
    pytest.param(
        lambda: HopDiffusedAttention(8, 2, alpha=NAN),
        ValueError,
        "`alpha` must be finite",
        id="module-alpha-nan",
    ),
    pytest.param(
        lambda: HopDiffusedAttention(8, 2, alpha=1.5),
        ValueError,
        r"alpha \(the restart probability\) must be in \(0, 1\]",
        id="module-alpha-big",
    ),
    pytest.param(
        lambda: _diffuse([1.0, NAN]), ValueError, r"`weights` contains 1 NaN/inf", id="diffuse-nan"
    ),
    pytest.param(
        lambda: _diffuse(torch.tensor([1.0, -1.0])),
        ValueError,
        "`weights` holds a negative hop weight",
        id="diffuse-negative-cpu-tensor",
    ),
]


def test_weights_summing_to_one_leave_no_remainder_and_rows_sum_to_one():
    attention = _attention(theta=[0.7, 0.2, 0.1])  # float sum 0.9999999999999999
    torch.testing.assert_close(attention.sum(-1), torch.ones(2, 5, dtype=torch.float64))
    exact = _attention(theta=[0.5, 0.5])  # remainder exactly 0: the same as without it
    torch.testing.assert_close(exact, _attention(theta=[0.5, 0.5], remainder=False), rtol=0, atol=0)
    # by hand: theta = [0.25, 0.25] leaves 0.5 on T^2
    scores, adjacency = _inputs()
    t = masked_transition(scores, adjacency)
    expected = 0.25 * torch.eye(5, dtype=torch.float64) + 0.25 * t + 0.5 * t @ t
    torch.testing.assert_close(_attention(theta=[0.25, 0.25]), expected, rtol=0, atol=1e-15)
    # weights above 1 are fine when rescaled, and alpha = 1 keeps only T^0
    doubled = _attention(theta=[1.0, 1.0], remainder=False, rescale=True)
    torch.testing.assert_close(doubled, _attention(theta=[0.5, 0.5]))
    torch.testing.assert_close(
        ppr_weights(alpha=1, steps=2), torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    )
    assert HopDiffusedAttention(8, 2, alpha=1)(torch.randn(2, 5, 8), adjacency).isfinite().all()
