"""Robustness metrics over no data give NaN with a warning, as torchmetrics' means do; valid
input at the new boundaries still gives the closed-form answers."""

from __future__ import annotations

import math
from unittest import mock

import pytest
import torch
from torch import nn

from lightning_info.methods.rome.attacks import fgsm, pgd, training_attack_labels
from lightning_info.methods.rome.bottleneck import GaussianBottleneck
from lightning_info.methods.rome.functional import predicted_classes
from lightning_info.methods.rome.metrics import ImprovedRobustnessRatio, RobustnessRatio, crei
from lightning_info.methods.rome.network import SmallConvNet


@pytest.mark.parametrize("metric_class", [RobustnessRatio, ImprovedRobustnessRatio])
def test_a_metric_over_no_predictions_is_nan_with_a_warning(metric_class):
    metric = metric_class(["fgsm", "pgd"])
    with pytest.warns(UserWarning, match=r"no predictions.*NaN"):
        assert math.isnan(float(metric.compute()))
    empty = torch.zeros(0, dtype=torch.long)
    metric.update(empty, torch.zeros(2, 0, dtype=torch.long), empty)
    with pytest.warns(UserWarning, match=r"no predictions.*NaN"):
        assert math.isnan(float(metric.compute()))
    # one batch: clean 2/2, fgsm 1/2, pgd 0/2 -> ASR (0.5, 1.0), RR = 100 (1 - 0.75 / 1) = 25
    metric.update(torch.tensor([0, 1]), torch.tensor([[0, 0], [1, 0]]), torch.tensor([0, 1]))
    expected = 25.0 if metric_class is RobustnessRatio else 100 * (1 - 0.75 * 1.0 / 1.0)
    assert float(metric.compute()) == pytest.approx(expected)


def test_one_attack_name_in_a_list_is_one_attack():
    assert RobustnessRatio(["fgsm"]).num_attacks == 1
    assert float(crei(1.0, [0.5], 1.0, [3.0])) == pytest.approx(0.5 * 100 * 0 + 0.5 * 100)


def test_attacks_take_float64_models_and_the_whole_pixel_range():
    torch.manual_seed(0)
    model = nn.Linear(4, 3).double()
    x = torch.rand(2, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    y = torch.tensor([0, 2])
    x_adv = fgsm(model, x, y, 1.0)
    assert x_adv.dtype == torch.float64
    # a step of the whole range sends every pixel to a bound, the side set by the gradient sign
    assert bool(((x_adv == 0) | (x_adv == 1) | (x_adv == x)).all())
    x_l2 = pgd(model, x, y, 2.0, steps=2, norm="l2", random_start=False)
    assert float((x_l2 - x).flatten(1).norm(dim=1).max()) <= 2.0 + 1e-12


def test_the_input_checks_of_the_nets_read_no_tensor_values():
    torch.manual_seed(0)
    net, bottleneck = SmallConvNet(1, 3, 8, width=2), GaussianBottleneck(8, 2, seed=0)
    x = torch.rand(2, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    reads = []
    patches = [
        mock.patch.object(torch.Tensor, name, side_effect=lambda *a, n=name: reads.append(n))
        for name in ("item", "tolist", "cpu", "__bool__", "__int__", "__float__")
    ]
    for patch in patches:
        patch.start()
    try:
        logits, z = net(x), bottleneck(net.features(x))
    finally:
        for patch in patches:
            patch.stop()
    assert reads == [] and logits.shape == (2, 3) and z.shape == (2, 2)


@pytest.mark.parametrize(("step", "shift"), [(0, 1), (1, 2), (2, 1), (5, 2)])
def test_the_rotating_target_map_shifts_by_one_plus_step_mod_k_minus_one(step, shift):
    labels = torch.tensor([0, 1, 2])
    targets, targeted = training_attack_labels(labels, 3, "rotating", step)
    assert targeted and torch.equal(targets, (labels + shift) % 3)


def test_a_nan_row_of_scores_is_never_a_correct_prediction():
    nan = float("nan")
    scores = torch.tensor([[nan, nan, nan], [0.1, nan, 0.2], [0.1, 0.9, 0.0], [2.0, 0.0, 1.0]])
    target = torch.tensor([0, 1, 1, 0])
    assert predicted_classes(scores).tolist() == [-1, -1, 1, 0]
    metric = RobustnessRatio(["fgsm"])
    metric.update(scores, scores.unsqueeze(0), target)
    clean, attacked = metric.accuracies()
    # argmax alone would read row 0 as class 0 and row 1 as class 1: 4 of 4 correct
    assert float(clean) == 0.5 and attacked.tolist() == [0.5]
