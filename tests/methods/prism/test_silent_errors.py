"""Min-K%++'s per-token standard deviation is computed two-pass (centred first): the one-pass
``E[log^2 p] - mu^2`` in float32 cancels on a nearly flat next-token distribution (an untrained
model over a 50k vocabulary, ``mu ~ -10.8``) and returned 0, so those tokens scored 0."""

from __future__ import annotations

import json
from dataclasses import asdict

import numpy as np
import pytest
import torch

from lightning_info.methods.prism import (
    AttackSet,
    FragmentExtractionAudit,
    attack_metrics,
    data_aware_scores,
    likelihood_ratio,
    posterior,
    prism_score,
    tpr_at_fpr,
)
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


def test_an_attack_set_file_with_a_bom_loads_into_the_callback(tmp_path):
    """A UTF-8 BOM (as Windows editors write) is read, not refused or kept in the first key."""
    attack_set = AttackSet(["p", "q"], ["f", "g"], [1, 0], ["member", "non_member"])
    path = tmp_path / "attack.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(asdict(attack_set)).encode("utf-8"))
    callback = FragmentExtractionAudit(str(path), shadow=object(), world_models=[object()])
    assert callback.attack_set == attack_set


def test_bool_labels_read_as_zero_one_and_prism_identities_hold():
    """Bool labels are the 0/1 labels they stand for; ``p_w = p_s`` gives ``PRISM = p_s`` and
    ``LR = 1`` gives the prior as posterior (``prism_score``'s documented identities)."""
    scores = [0.1, 0.4, 0.35, 0.8]
    labels = [0, 0, 1, 1]
    as_bools = [bool(y) for y in labels]
    assert tpr_at_fpr(scores, as_bools, 0.5) == tpr_at_fpr(scores, labels, 0.5)
    assert attack_metrics(scores, as_bools) == attack_metrics(scores, labels)
    p_s = torch.tensor([0.2, 0.05, 0.6], dtype=torch.float64)
    torch.testing.assert_close(prism_score([0.3, 0.01, 0.9], p_s, p_s), p_s, atol=1e-9, rtol=0)
    torch.testing.assert_close(
        posterior(likelihood_ratio([0.4], [0.4], eps=0.0), prior=0.7),
        torch.tensor([0.7], dtype=torch.float64),
    )


def test_the_data_aware_attack_leaves_the_features_and_folds_alone():
    features = np.arange(40, dtype=np.float64).reshape(20, 2)
    features[0, 0] = -np.inf
    folds = np.array([0, 0, 1, 1] * 5)
    before_features, before_folds = features.copy(), folds.copy()
    scores, fold_ids = data_aware_scores(features, [0, 1] * 10, folds=folds, classifier="logistic")
    assert np.array_equal(features, before_features) and np.array_equal(folds, before_folds)
    assert scores.shape == (20,) and np.array_equal(fold_ids, folds)
