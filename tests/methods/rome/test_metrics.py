"""BEARD robustness scores: the benchmark's reported values, edge cases, and the pooled Metrics."""

from __future__ import annotations

import math

import pytest
import torch
from torchmetrics.utilities.data import dim_zero_sum

from lightning_info.methods.rome.metrics import (
    ImprovedRobustnessRatio,
    RobustnessRatio,
    attack_efficiency,
    attack_success_rates,
    crei,
    improved_crei,
    improved_robustness_ratio,
    robustness_ratio,
)

# Clean accuracy and FGSM, PGD, PGD-L2, C&W accuracies of a benchmark row, as fractions.
CLEAN = 0.6995
ATTACKS = [0.4468, 0.4559, 0.5081, 0.4471]
NAMES = ("fgsm", "pgd", "pgd_l2", "cw")


def test_reported_benchmark_values_are_reproduced():
    assert round(float(robustness_ratio(CLEAN, ATTACKS)), 2) == 6.99
    assert round(float(improved_robustness_ratio(CLEAN, ATTACKS)), 2) == 87.86
    asr = attack_success_rates(CLEAN, ATTACKS)
    torch.testing.assert_close(asr, torch.tensor([0.2527, 0.2436, 0.1914, 0.2524]).double())
    mean, worst = 0.235025, 0.2527
    assert float(robustness_ratio(CLEAN, ATTACKS)) == pytest.approx(100 * (1 - mean / worst))
    assert float(improved_robustness_ratio(CLEAN, torch.tensor(ATTACKS))) == pytest.approx(
        100 * (1 - mean * worst / CLEAN**2)
    )


def test_percentages_are_rejected_with_a_hint():
    with pytest.raises(ValueError, match="not 69.95"):
        robustness_ratio(69.95, [44.68, 45.59])
    with pytest.raises(ValueError, match="fractions"):
        improved_robustness_ratio(0.7, [0.4, 1.2])
    with pytest.raises(ValueError, match="non-empty"):
        robustness_ratio(0.7, [])
    with pytest.raises(ValueError, match="NaN"):
        robustness_ratio(0.7, [float("nan")])


def test_no_successful_attack_and_attacks_that_help():
    assert float(robustness_ratio(0.8, [0.8, 0.8])) == 100.0
    assert float(improved_robustness_ratio(0.8, [0.8, 0.8])) == 100.0
    assert float(robustness_ratio(0.8, [0.9, 0.85])) == 100.0
    # ASR = (-0.1, 0.05): mean -0.025, max 0.05
    assert float(robustness_ratio(0.5, [0.6, 0.45])) == pytest.approx(150.0)
    assert float(improved_robustness_ratio(0.5, [0.6, 0.45])) == pytest.approx(100.5)
    # equal attacks: the mean attack is as strong as the worst one
    assert float(robustness_ratio(0.8, [0.4, 0.4])) == pytest.approx(0.0)
    assert math.isnan(float(improved_robustness_ratio(0.0, [0.0, 0.0])))
    assert float(robustness_ratio(0.0, [0.0])) == 100.0


def test_attack_efficiency_and_the_combined_indices():
    # mean attack time 10/3, so AE = (10/3 - 1) / (5 - 1)
    ae = float(attack_efficiency(1.0, [2.0, 3.0, 5.0]))
    assert ae == pytest.approx(100 * 7 / 12)
    assert float(attack_efficiency(2.0, [2.0, 2.0])) == 0.0
    times = (1.0, [2.0, 3.0, 5.0, 10 / 3])  # one per attack; the same mean 10/3 and max 5
    rr = float(robustness_ratio(CLEAN, ATTACKS))
    irr = float(improved_robustness_ratio(CLEAN, ATTACKS))
    assert float(crei(CLEAN, ATTACKS, *times)) == pytest.approx(0.5 * rr + 0.5 * ae)
    assert float(improved_crei(CLEAN, ATTACKS, *times)) == pytest.approx(0.5 * irr + 0.5 * ae)
    weighted = float(crei(CLEAN, ATTACKS, *times, alpha=0.25))
    assert weighted == pytest.approx(0.25 * rr + 0.75 * ae)
    with pytest.raises(ValueError, match="alpha"):
        crei(CLEAN, ATTACKS, *times, alpha=1.5)
    with pytest.raises(ValueError, match=">= 0"):
        attack_efficiency(-1.0, [2.0])


def _synthetic_batches(n_batches=4, batch=50, classes=7, seed=0):
    """Logits per batch whose attacked versions are right with falling probability."""
    generator = torch.Generator().manual_seed(seed)
    hit_rates = torch.tensor([0.9, 0.5, 0.6, 0.7, 0.55])
    batches = []
    for _ in range(n_batches):
        target = torch.randint(0, classes, (batch,), generator=generator)
        logits = torch.randn(len(hit_rates), batch, classes, generator=generator)
        right = torch.rand(len(hit_rates), batch, generator=generator) < hit_rates[:, None]
        logits[right] = logits[right].scatter(1, target.expand_as(right)[right][:, None], 10.0)
        batches.append((logits[0], logits[1:], target))
    return batches


def _pooled_accuracies(batches):
    clean = torch.cat([(c.argmax(1) == t) for c, _, t in batches]).double().mean()
    attacks = torch.cat([(a.argmax(2) == t) for _, a, t in batches], dim=1).double().mean(1)
    return clean, attacks


@pytest.mark.parametrize(
    ("metric_class", "formula"),
    [(RobustnessRatio, robustness_ratio), (ImprovedRobustnessRatio, improved_robustness_ratio)],
)
def test_metrics_equal_the_formulas_on_pooled_accuracies(metric_class, formula):
    batches = _synthetic_batches()
    clean, attacks = _pooled_accuracies(batches)
    expected = formula(clean, attacks)

    stacked = metric_class(attacks=4)
    named = metric_class(attacks=NAMES)
    labels = metric_class(attacks=NAMES)
    for clean_logits, attack_logits, target in batches:
        stacked.update(clean_logits, attack_logits, target)
        shuffled = {name: attack_logits[i] for i, name in reversed(list(enumerate(NAMES)))}
        named.update(clean_logits, shuffled, target)
        labels.update(clean_logits.argmax(1), attack_logits.argmax(2), target)
    for metric in (stacked, named, labels):
        torch.testing.assert_close(metric.compute(), expected)
        got_clean, got_attacks = metric.accuracies()
        torch.testing.assert_close(got_clean, clean)
        torch.testing.assert_close(got_attacks, attacks)
    assert 0 < float(expected) < 100


@pytest.mark.parametrize("metric_class", [RobustnessRatio, ImprovedRobustnessRatio])
def test_states_are_sums_that_merge_like_one_process_over_all_data(metric_class):
    batches = _synthetic_batches(n_batches=6, seed=1)
    whole, first, second = (metric_class(attacks=NAMES) for _ in range(3))
    for index, (clean_logits, attack_logits, target) in enumerate(batches):
        whole.update(clean_logits, attack_logits, target)
        (first if index % 2 == 0 else second).update(clean_logits, attack_logits, target)

    assert all(whole._reductions[name] is dim_zero_sum for name in whole._defaults)
    summed = {name: getattr(first, name) + getattr(second, name) for name in whole._defaults}
    for name, value in summed.items():
        assert torch.equal(value, getattr(whole, name))

    first.merge_state(second)
    torch.testing.assert_close(first.compute(), whole.compute())
    assert not torch.allclose(second.compute(), whole.compute())


def test_metric_no_successful_attack_and_reset():
    metric = RobustnessRatio(attacks=2)
    target = torch.tensor([0, 1, 2, 1])
    metric.update(target, torch.stack([target, target]), target)
    assert float(metric.compute()) == 100.0
    metric.reset()
    assert int(metric.total) == 0 and metric.attack_correct.tolist() == [0, 0]


def test_metric_inputs_are_checked():
    target = torch.tensor([0, 1, 1])
    preds = torch.tensor([0, 1, 0])
    with pytest.raises(TypeError, match="attack names"):
        RobustnessRatio(attacks=2).update(preds, {"a": preds, "b": preds}, target)
    with pytest.raises(ValueError, match="exactly the keys"):
        RobustnessRatio(attacks=["a", "b"]).update(preds, {"a": preds}, target)
    with pytest.raises(ValueError, match=r"\(2, N"):
        RobustnessRatio(attacks=2).update(preds, preds[None], target)
    with pytest.raises(ValueError, match="preds_clean"):
        RobustnessRatio(attacks=1).update(preds[:2], preds[None], target)
    with pytest.raises(ValueError, match="repeat"):
        RobustnessRatio(attacks=["a", "a"])
    with pytest.raises(ValueError, match="attacks"):
        ImprovedRobustnessRatio(attacks=0)
