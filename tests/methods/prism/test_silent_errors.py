"""Min-K%++'s per-token standard deviation is computed two-pass (centred first): the one-pass
``E[log^2 p] - mu^2`` in float32 cancels on a nearly flat next-token distribution (an untrained
model over a 50k vocabulary, ``mu ~ -10.8``) and returned 0, so those tokens scored 0."""

from __future__ import annotations

import pytest
import torch

from lightning_info.methods.prism.attacks import min_k_plus_plus_score, vocabulary_moments


def _oracle(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Two-pass moments of log p in float64."""
    log_p = torch.log_softmax(logits.double(), -1)
    p = log_p.exp()
    mean = (p * log_p).sum(-1)
    return mean, (p * (log_p - mean[..., None]) ** 2).sum(-1).sqrt()


@pytest.mark.parametrize("spread", [1e-2, 5.7e-3, 1e-3])
def test_vocabulary_std_of_a_nearly_flat_float32_row_matches_float64(spread):
    generator = torch.Generator().manual_seed(0)
    logits = (spread * torch.randn(2, 3, 50_000, generator=generator)).float()
    mean, std = vocabulary_moments(logits)
    expected_mean, expected_std = _oracle(logits)
    assert std.dtype == mean.dtype == torch.float64
    assert (std > 0).all()
    torch.testing.assert_close(std, expected_std, rtol=1e-4, atol=0)
    torch.testing.assert_close(mean, expected_mean, rtol=1e-6, atol=0)


def test_masked_tokens_do_not_turn_the_moments_into_nan():
    logits = torch.tensor([[0.0, 1.0, -float("inf"), 2.0]])
    mean, std = vocabulary_moments(logits)
    expected_mean, expected_std = _oracle(logits[:, [0, 1, 3]])
    torch.testing.assert_close(mean, expected_mean)
    torch.testing.assert_close(std, expected_std)


def test_a_flat_row_still_standardises_its_tokens():
    """The token scores are ``(log p - mu) / sigma`` (log p from the same float32 log-softmax, as
    :func:`fragment_token_statistics` takes them), not 0."""
    logits = (1e-2 * torch.randn(1, 5, 50_000, generator=torch.Generator().manual_seed(1))).float()
    picked = torch.log_softmax(logits, -1)[0, :, 7].double()
    mean, std = vocabulary_moments(logits)
    score = min_k_plus_plus_score([picked], [mean[0]], [std[0]], k=1.0)
    expected_mean, expected_std = _oracle(logits)
    exact = torch.log_softmax(logits.double(), -1)[0, :, 7]
    expected = ((exact - expected_mean[0]) / expected_std[0]).mean()
    assert float(score[0]) != 0.0
    assert float(score[0]) == pytest.approx(float(expected), rel=1e-2)
