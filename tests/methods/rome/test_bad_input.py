"""Bad input to the ROME entry points fails early with a message naming the argument."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lightning_info.methods.rome.attacks import fgsm, pgd, shifted_targets
from lightning_info.methods.rome.evaluation import (
    attacked_predictions,
    evaluate_distilled,
    train_fresh_net,
)
from lightning_info.methods.rome.functional import image_grid
from lightning_info.methods.rome.metrics import (
    ImprovedRobustnessRatio,
    RobustnessRatio,
    attack_efficiency,
    crei,
    improved_crei,
    robustness_ratio,
)
from lightning_info.methods.rome.module import (
    AttackOptions,
    NetworkPoolOptions,
    RobustEvaluationOptions,
    ROMEDistillation,
)


def _classifier() -> nn.Module:
    torch.manual_seed(0)
    return nn.Linear(4, 3)


def _pixels(n: int = 2, dtype=torch.float32) -> torch.Tensor:
    return torch.rand(n, 4, generator=torch.Generator().manual_seed(0), dtype=dtype)


LABELS = torch.tensor([0, 2])


def _images(n=4, dtype=torch.float32):
    return torch.rand(n, 1, 8, 8, generator=torch.Generator().manual_seed(0), dtype=dtype)


def _evaluate(**kwargs):
    labels = torch.tensor([0, 1, 0, 1])
    return evaluate_distilled(_images(), labels, _images(2), labels[:2], epochs=1, **kwargs)


def _rome(images=None, labels=None):
    images = _images() if images is None else images
    labels = torch.tensor([0, 1, 0, 1]) if labels is None else labels
    return ROMEDistillation(
        images, labels, images_per_class=1, pool=NetworkPoolOptions(num_nets=1, max_nets=1)
    )


def _update_with_float_target():
    metric = RobustnessRatio(1)
    metric.update(torch.tensor([0, 1]), torch.tensor([[0, 1]]), torch.tensor([0.0, 1.0]))


BAD_INPUT = [
    pytest.param(
        lambda: RobustnessRatio("fgsm"),
        TypeError,
        r"`attacks` must be a sequence of strings, got a single str",
        id="metric-attacks-bare-str",
    ),
    pytest.param(
        lambda: ImprovedRobustnessRatio(2.0),
        TypeError,
        r"`attacks` must be the number of attacks \(an int\) or their names, got 2.0",
        id="metric-attacks-float",
    ),
    pytest.param(
        _update_with_float_target,
        TypeError,
        r"`target` must hold integer class labels, got dtype torch.float32",
        id="metric-float-target",
    ),
    pytest.param(
        lambda: fgsm(_classifier(), _pixels(dtype=torch.float64), LABELS, 0.1),
        TypeError,
        r"`x` has dtype torch.float64 but the model's parameters are torch.float32; pass "
        r"`x.to\(torch.float32\)`",
        id="fgsm-float64-x",
    ),
    pytest.param(
        lambda: fgsm(_classifier(), _pixels(), LABELS, 5.0),
        ValueError,
        r"`eps` = 5.0 is larger than the pixel range clip=\(0.0, 1.0\)",
        id="fgsm-eps-beyond-pixel-range",
    ),
    pytest.param(
        lambda: pgd(_classifier(), _pixels(), LABELS, 5.0, steps=2),
        ValueError,
        r"`eps` = 5.0 is larger than the pixel range",
        id="pgd-eps-beyond-pixel-range",
    ),
    pytest.param(
        lambda: pgd(_classifier(), _pixels(), LABELS, 2.5, steps=2, norm="l2"),
        ValueError,
        r"`eps` = 2.5 is larger than the L2 diameter 2 of the pixel box",
        id="pgd-l2-eps-beyond-pixel-box",
    ),
    pytest.param(
        lambda: AttackOptions(eps=5),
        ValueError,
        r"`attack.eps` must be at most 1 \(the pixel range \[0, 1\]\), got 5",
        id="attack-options-eps-5",
    ),
    pytest.param(
        lambda: AttackOptions(robust="no"),
        TypeError,
        r"`attack.robust` must be a bool, got 'no'",
        id="attack-options-robust-str",
    ),
    pytest.param(
        lambda: RobustEvaluationOptions(attacks="fgsm"),
        TypeError,
        r"`evaluation.attacks` must be a sequence of strings, got a single str",
        id="evaluation-attacks-bare-str",
    ),
    pytest.param(
        lambda: RobustEvaluationOptions(attacks=("fgsm", "cw")),
        ValueError,
        r"`evaluation.attacks` names the unknown attack\(s\) \['cw'\]; choose from",
        id="evaluation-unknown-attack",
    ),
    pytest.param(
        lambda: RobustEvaluationOptions(target_shifts=1),
        TypeError,
        r"`evaluation.target_shifts` must be a sequence of ints, got 1; wrap it: \(1,\)",
        id="evaluation-target-shifts-bare-int",
    ),
    pytest.param(
        lambda: attacked_predictions(_classifier(), _pixels(), LABELS, "fgsm"),
        TypeError,
        r"`attacks` must be a sequence of strings, got a single str",
        id="attacked-predictions-bare-str",
    ),
    pytest.param(
        lambda: _evaluate(attacks="pgd"),
        TypeError,
        r"`attacks` must be a sequence of strings, got a single str",
        id="evaluate-attacks-bare-str",
    ),
    pytest.param(
        lambda: _evaluate(attacks=("fgsm",), target_shifts=("1",)),
        TypeError,
        r"`shift` must be an int, got '1'",
        id="evaluate-target-shift-str",
    ),
    pytest.param(
        lambda: crei(0.9, [0.5], 1.0, [2.0, 3.0, 4.0]),
        ValueError,
        r"attack_accs 1, attack_times 3",
        id="crei-mismatched-lengths",
    ),
    pytest.param(
        lambda: improved_crei(0.9, [0.5, 0.4], 1.0, [2.0]),
        ValueError,
        r"attack_accs 2, attack_times 1",
        id="improved-crei-mismatched-lengths",
    ),
    pytest.param(
        lambda: robustness_ratio(True, [0.5]),
        TypeError,
        r"`clean_acc` must hold numbers, got a bool",
        id="rr-bool-clean",
    ),
    pytest.param(
        lambda: robustness_ratio(0.9, [True, 0.5]),
        TypeError,
        r"`attack_accs` must hold numbers, got a bool",
        id="rr-bool-attack-accuracy",
    ),
    pytest.param(
        lambda: attack_efficiency(1.0, torch.tensor([True])),
        TypeError,
        r"`attack_times` must hold numbers, got a bool",
        id="ae-bool-tensor",
    ),
    pytest.param(
        lambda: shifted_targets(LABELS, 3, True),
        TypeError,
        r"`shift` must be an int, got True",
        id="shifted-targets-bool-shift",
    ),
    pytest.param(
        lambda: shifted_targets(LABELS, 3, 1.5),
        TypeError,
        r"`shift` must be an int, got 1.5",
        id="shifted-targets-float-shift",
    ),
    pytest.param(
        lambda: image_grid(_images(2), 0),
        ValueError,
        r"`per_row` must be >= 1, got 0",
        id="image-grid-zero-per-row",
    ),
    pytest.param(
        lambda: image_grid(_images(2), True),
        TypeError,
        r"`per_row` must be an int, got True",
        id="image-grid-bool-per-row",
    ),
    pytest.param(
        lambda: image_grid(_images(2), 2.0),
        TypeError,
        r"`per_row` must be an int, got 2.0",
        id="image-grid-float-per-row",
    ),
    pytest.param(
        lambda: train_fresh_net(_images(), torch.tensor([0, 1, 0, 1]), epochs=1, batch_size=0),
        ValueError,
        r"`batch_size` must be >= 1, got 0",
        id="fresh-net-batch-size-zero",
    ),
    pytest.param(
        lambda: train_fresh_net(_images(), torch.tensor([0, 1, 0, 5]), epochs=1, num_classes=3),
        ValueError,
        r"`labels` must lie in \[0, 3\) for num_classes=3, got a label 5",
        id="fresh-net-label-out-of-range",
    ),
    pytest.param(
        lambda: train_fresh_net(_images(dtype=torch.float64), torch.tensor([0, 1, 0, 1]), epochs=1),
        TypeError,
        r"`images` have dtype torch.float64 but the network's parameters are torch.float32; "
        r"pass `images.to\(torch.float32\)`",
        id="fresh-net-float64-images",
    ),
    pytest.param(
        lambda: _rome(labels=torch.tensor([True, False, True, False])),
        TypeError,
        r"`real_labels` must be an integer tensor \(N,\), got dtype torch.bool",
        id="rome-bool-labels",
    ),
    pytest.param(
        lambda: _rome(images=_images(dtype=torch.float64)),
        TypeError,
        r"`real_images` have dtype torch.float64 but the network's parameters are torch.float32",
        id="rome-float64-images",
    ),
]
