"""PMI, PVI and PSI confidence scores against the closed forms of Gaussian class conditionals."""

from __future__ import annotations

import math

import pytest
import torch

from lightning_info.methods.pointwise_confidence.scorers import (
    MSPScorer,
    PMIScorer,
    PSIScorer,
    PVIScorer,
    confidence_from_pointwise,
    fit_temperature,
)

PRIOR = torch.tensor([0.5, 0.3, 0.2])
MEANS = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0]])


def gaussian_classes(n: int, seed: int, means: torch.Tensor = MEANS, scale: float = 1.0):
    """Labels ``y ~ PRIOR`` and ``x | y ~ N(means[y], scale^2 I)``."""
    generator = torch.Generator().manual_seed(seed)
    y = torch.multinomial(PRIOR, n, replacement=True, generator=generator)
    x = means[y] + scale * torch.randn(n, means.shape[1], generator=generator)
    return x, y


def true_pmi(x: torch.Tensor, means: torch.Tensor = MEANS, scale: float = 1.0) -> torch.Tensor:
    """PMI(x; k) = log2 p(k | x) - log2 pi_k for the Gaussian classes, in bits."""
    log_joint = -0.5 * ((x[:, None, :] - means[None]) ** 2).sum(-1) / scale**2 + PRIOR.log()
    return (log_joint.log_softmax(1) - PRIOR.log()) / math.log(2)


def _posterior_weighted_error(estimate, truth):
    """E_x sum_k p(k|x) |estimate - truth|: the error where the classes actually are."""
    posterior = truth.exp2() * PRIOR
    return float(((estimate - truth).abs() * posterior).sum(1).mean())


@pytest.fixture(scope="module")
def data():
    x, y = gaussian_classes(4000, seed=0)
    x_test, _ = gaussian_classes(1000, seed=1)
    return x, y, x_test, torch.zeros(len(y), 3)


@pytest.mark.parametrize("objective", ["classifier", "density_ratio", "fjs"])
def test_pmi_matches_the_gaussian_closed_form(data, objective):
    x, y, x_test, logits = data
    scorer = PMIScorer(objective).fit(x, logits, y)
    error = _posterior_weighted_error(scorer.pointwise(x_test), true_pmi(x_test))
    assert error < 0.3, error


def test_pvi_of_well_specified_logistic_regression_tends_to_pmi(data):
    x, y, x_test, logits = data
    scorer = PVIScorer("head", hidden=0).fit(x, logits, y)
    estimate = scorer.pointwise(x_test, torch.zeros(len(x_test), 3))
    error = (estimate - true_pmi(x_test)).abs().mean().item()
    assert error < 0.15, error
    small = PVIScorer("head", hidden=0).fit(x[:200], logits[:200], y[:200])
    small_error = (small.pointwise(x_test, logits[:1000]) - true_pmi(x_test)).abs().mean().item()
    assert error < small_error  # more data, closer to PMI


def test_psi_equals_pmi_in_one_dimension():
    means = torch.tensor([[0.0], [1.5], [-1.0]])
    x, y = gaussian_classes(40000, seed=2, means=means)
    x_test, _ = gaussian_classes(500, seed=3, means=means)
    scorer = PSIScorer(num_directions=8, density="gaussian").fit(x, torch.zeros(len(y), 3), y)
    truth = true_pmi(x_test, means)
    # densities below the 1e-5 clip (far tails) are the only place the two may differ
    assert _posterior_weighted_error(scorer.pointwise(x_test), truth) < 0.02
    histogram = PSIScorer(num_directions=8, density="histogram", bins=50)
    histogram.fit(x, torch.zeros(len(y), 3), y)
    assert _posterior_weighted_error(histogram.pointwise(x_test), truth) < 0.1


def test_pvi_of_the_classifier_with_prior_null_is_prior_corrected_softmax():
    generator = torch.Generator().manual_seed(4)
    logits = 3 * torch.randn(50, 3, generator=generator)
    labels = torch.multinomial(PRIOR, 50, replacement=True, generator=generator)
    labels[:3] = torch.arange(3)
    scorer = PVIScorer("classifier", null="prior").fit(torch.randn(50, 4), logits, labels)
    prior = torch.bincount(labels, minlength=3).float() / 50
    pvi = scorer.pointwise(torch.randn(50, 4), logits)
    expected = ((logits - prior.log()) / math.log(2)).softmax(1)
    torch.testing.assert_close(pvi.softmax(1), expected, rtol=1e-5, atol=1e-6)
    scores = scorer.score(torch.randn(50, 4), logits)
    torch.testing.assert_close(scores, confidence_from_pointwise(pvi, logits))


def test_pvi_clips_the_probability_at_1e_12_as_the_reference_does():
    labels = torch.tensor([0, 1, 2, 2])
    logits = torch.tensor([[0.0, -200.0, 0.0], [0.0, 0.0, 0.0], [1.0, 2.0, 3.0], [0.0, 0.0, 9.0]])
    scorer = PVIScorer("classifier", null="prior").fit(torch.zeros(4, 1), logits, labels)
    pvi = scorer.pointwise(torch.zeros(4, 1), logits)
    # log2(1e-12) - log2(prior 1/4): the floor, not log2 of e^-200 (about -290 bits)
    assert float(pvi[0, 1]) == pytest.approx(math.log2(1e-12) - math.log2(0.25), rel=1e-6)
    unclipped = (logits.log_softmax(1) - scorer.log_null) / math.log(2)
    torch.testing.assert_close(pvi[1:], unclipped[1:])  # above the floor nothing changes


def test_fit_temperature_recovers_the_generating_temperature():
    generator = torch.Generator().manual_seed(5)
    logits = 4 * torch.randn(20000, 5, generator=generator)
    labels = torch.multinomial((logits / 2.5).softmax(1), 1, generator=generator).squeeze(1)
    assert fit_temperature(logits, labels) == pytest.approx(2.5, rel=0.05)
    msp = MSPScorer(temperature_scaled=True).fit(torch.zeros(20000, 1), logits, labels)
    torch.testing.assert_close(
        msp.score(torch.zeros(20000, 1), logits), (logits / msp.temperature).softmax(1).amax(1)
    )


def test_trained_null_model_learns_the_label_marginal(data):
    x, y, _, logits = data
    scorer = PVIScorer("classifier", null="trained").fit(x, logits, y)
    frequencies = torch.bincount(y, minlength=3).float() / len(y)
    torch.testing.assert_close(scorer.log_null.exp(), frequencies, atol=2e-3, rtol=0)


@pytest.mark.parametrize(
    "make",
    [
        lambda: PMIScorer("density_ratio", steps=50),
        lambda: PVIScorer("ensemble", ensemble_size=2, steps=50, hidden=8),
        lambda: PVIScorer("temperature"),
        lambda: PSIScorer(num_directions=5),
        lambda: MSPScorer(temperature_scaled=True),
    ],
)
def test_save_and_load_give_identical_scores(make, data, tmp_path):
    x, y, x_test, _ = data
    logits = x @ torch.randn(2, 3, generator=torch.Generator().manual_seed(6))
    scorer = make().fit(x, logits, y)
    path = tmp_path / "scorer.pt"
    scorer.save(path)
    restored = make().load(path)
    test_logits = x_test @ torch.randn(2, 3)
    torch.testing.assert_close(
        restored.score(x_test, test_logits), scorer.score(x_test, test_logits)
    )
    scores = scorer.score(x_test, test_logits)
    assert ((scores > 0) & (scores <= 1)).all()


def test_bad_inputs_fail_with_clear_errors(data, tmp_path):
    x, y, _, logits = data
    with pytest.raises(RuntimeError, match="not fitted"):
        PSIScorer().score(x, logits)
    with pytest.raises(ValueError, match="NaN"):
        PSIScorer().fit(torch.full_like(x, float("nan")), logits, y)
    with pytest.raises(ValueError, match="same N"):
        PSIScorer().fit(x[:10], logits, y)
    with pytest.raises(ValueError, match="classes \\[2\\] have no"):
        PSIScorer().fit(x[y < 2], logits[y < 2], y[y < 2])
    with pytest.raises(ValueError, match="labels"):
        PSIScorer().fit(x, logits, y + 3)
    with pytest.raises(ValueError, match="objective"):
        PMIScorer("mine")
    with pytest.raises(ValueError, match="variant"):
        PVIScorer("forest")
    with pytest.raises(ValueError, match="holds a PSIScorer"):
        scorer = PSIScorer(num_directions=3).fit(x, logits, y)
        scorer.save(tmp_path / "psi.pt")
        MSPScorer().load(tmp_path / "psi.pt")


@pytest.mark.parametrize("density", ["gaussian", "histogram"])
def test_psi_ratios_in_one_direction_are_those_of_one_floored_model(data, density):
    # the mixture is the prior-weighted mean of the clipped densities: sum_k pi_k 2^PSI_k = 1,
    # also where the 1e-5 floor is reached (points far from every class)
    x, y, _, _ = data
    scorer = PSIScorer(num_directions=1, density=density).fit(x, torch.zeros(len(y), 3), y)
    far = torch.cat([x[:20], 50 * x[:20]])
    psi = scorer.pointwise(far)
    total = (scorer.prior[None] * torch.exp2(psi)).sum(1)
    torch.testing.assert_close(total, torch.ones_like(total), rtol=1e-5, atol=1e-5)
    assert (scorer.class_densities(far) < 1e-5).any()  # the floor was exercised
