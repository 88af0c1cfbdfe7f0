"""Bad input to the ROME entry points fails early with a message naming the argument."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lightning_info.methods.rome.attacks import (
    fgsm,
    next_class_targets,
    pgd,
    shifted_targets,
    training_attack_labels,
)
from lightning_info.methods.rome.augment import DSA
from lightning_info.methods.rome.bottleneck import GaussianBottleneck, InformationBottleneckMixin
from lightning_info.methods.rome.evaluation import (
    attacked_predictions,
    evaluate_distilled,
    train_fresh_net,
)
from lightning_info.methods.rome.functional import image_grid, rome_alignment
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
from lightning_info.methods.rome.module import (
    AttackOptions,
    DistillationOptions,
    NetworkPoolOptions,
    RobustEvaluationOptions,
    ROMEDistillation,
)
from lightning_info.methods.rome.network import SmallConvNet
from tests.methods.rome.tiny_ib import TinyEncoderClassifier, TinyIBClassifier


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


def _bottleneck() -> GaussianBottleneck:
    torch.manual_seed(0)
    return GaussianBottleneck(4, 2, seed=0)


def _load_bottleneck_state(state: torch.Tensor) -> None:
    bottleneck = _bottleneck()
    saved = bottleneck.state_dict()
    saved["_extra_state"] = state
    bottleneck.load_state_dict(saved)


def _load_bottleneck_of_other_size() -> None:
    GaussianBottleneck(4, 3, seed=0).load_state_dict(_bottleneck().state_dict())


def _ib_classifier(**attributes) -> TinyIBClassifier:
    return type("Configured", (TinyIBClassifier,), attributes)()


class _ReturnsLogits(TinyEncoderClassifier):
    def training_step(self, batch, batch_idx):
        return {"logits": self(batch[0])}


def _ib_step_without_loss() -> None:
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
    model = type(
        "BottleneckLogits", (InformationBottleneckMixin, _ReturnsLogits), {"ib_latent_dim": 4}
    )()
    model.training_step((x, torch.tensor([0, 1, 2, 0])), 0)


def _net() -> SmallConvNet:
    torch.manual_seed(0)
    return SmallConvNet(1, 3, 8, width=2)


def _ib_step_with_a_head_of_another_width() -> None:
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
    _ib_classifier(ib_latent_dim=5).training_step((x, torch.tensor([0, 1, 2, 0])), 0)


BAD_INPUT = [
    pytest.param(
        _ib_step_with_a_head_of_another_width,
        RuntimeError,
        r"bottleneck's 5 features .*`ib_latent_dim` = 5 features, so the next layer must take 5",
        id="ib-mixin-latent-dim-not-the-head-width",
    ),
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
    pytest.param(
        lambda: next_class_targets([0, 1], 3),
        TypeError,
        r"`y` must be a torch.Tensor of class labels, got list",
        id="next-class-list-labels",
    ),
    pytest.param(
        lambda: next_class_targets(LABELS, 2),
        ValueError,
        r"`y` must hold labels in \[0, 2\), got values in \[0, 2\]",
        id="next-class-label-out-of-range",
    ),
    pytest.param(
        lambda: next_class_targets(LABELS, True),
        TypeError,
        r"`num_classes` must be an int, got True",
        id="next-class-bool-num-classes",
    ),
    pytest.param(
        lambda: training_attack_labels(LABELS, 3, "rotating", "1"),
        TypeError,
        r"`step` must be an int, got '1'",
        id="training-labels-str-step",
    ),
    pytest.param(
        lambda: training_attack_labels(LABELS, 3, "rotating", 1.5),
        TypeError,
        r"`step` must be an int, got 1.5",
        id="training-labels-float-step",
    ),
    pytest.param(
        lambda: training_attack_labels(LABELS, 3, "rotating", -1),
        ValueError,
        r"`step` must be >= 0, got -1",
        id="training-labels-negative-step",
    ),
    pytest.param(
        lambda: training_attack_labels(torch.tensor([0]), 1, "rotating", 0),
        ValueError,
        r"`num_classes` must be >= 2, got 1",
        id="training-labels-one-class",
    ),
    pytest.param(
        lambda: training_attack_labels(LABELS.float(), 3, "untargeted", 0),
        TypeError,
        r"`y` must hold integer class labels, got dtype torch.float32",
        id="training-labels-untargeted-float-labels",
    ),
    pytest.param(
        lambda: training_attack_labels(LABELS, 3, "prev", 0),
        ValueError,
        r"`target_map` must be one of \('next', 'rotating', 'untargeted'\), got 'prev'",
        id="training-labels-unknown-map",
    ),
    pytest.param(
        lambda: attack_success_rates("0.9", [0.5]),
        TypeError,
        r"`clean_acc` must hold numbers, got a string in '0.9'",
        id="asr-str-clean",
    ),
    pytest.param(
        lambda: attack_success_rates(69.9, [50.0]),
        ValueError,
        r"accuracies must be fractions in \[0, 1\] \(0.6995, not 69.95\)",
        id="asr-percent",
    ),
    pytest.param(
        lambda: attack_success_rates(0.9, []),
        ValueError,
        r"`attack_accs` must be a non-empty 1-D sequence",
        id="asr-empty",
    ),
    pytest.param(
        lambda: improved_robustness_ratio(0.9, [float("nan")]),
        ValueError,
        r"`attack_accs` contains 1 NaN/inf value\(s\)",
        id="irr-nan-accuracy",
    ),
    pytest.param(
        lambda: improved_robustness_ratio(0.9, ["0.5"]),
        TypeError,
        r"`attack_accs` must hold numbers, got a string",
        id="irr-str-accuracy",
    ),
    pytest.param(
        lambda: rome_alignment(torch.ones(2, 3, dtype=torch.long), torch.ones(2, 3)),
        TypeError,
        r"`features_syn` must be a real floating-point tensor, got dtype torch.int64",
        id="alignment-integer-features",
    ),
    pytest.param(
        lambda: rome_alignment(torch.ones(2, 3), torch.ones(2, 4)),
        ValueError,
        r"`a` and `b` need the same feature size",
        id="alignment-mismatched-features",
    ),
    pytest.param(
        lambda: rome_alignment(torch.ones(0, 3), torch.ones(2, 3)),
        ValueError,
        r"`a` is empty",
        id="alignment-empty",
    ),
    pytest.param(
        lambda: rome_alignment(torch.full((2, 3), float("nan")), torch.ones(2, 3)),
        ValueError,
        r"contains 6 NaN/inf value\(s\)",
        id="alignment-nan-features",
    ),
    pytest.param(
        lambda: SmallConvNet(1, 3, 8.0),
        TypeError,
        r"`image_size` must be an int, got 8.0",
        id="small-net-float-image-size",
    ),
    pytest.param(
        lambda: _net()(torch.rand(2, 3, 8, 8)),
        ValueError,
        r"SmallConvNet expects images of shape \(N, 1, 8, 8\), got \(2, 3, 8, 8\)",
        id="small-net-other-channels",
    ),
    pytest.param(
        lambda: _net()(torch.rand(2, 1, 12, 12)),
        ValueError,
        r"expects images of shape \(N, 1, 8, 8\), got \(2, 1, 12, 12\)",
        id="small-net-other-image-size",
    ),
    pytest.param(
        lambda: _net().features(torch.rand(1, 8, 8)),
        ValueError,
        r"expects images of shape \(N, 1, 8, 8\), got \(1, 8, 8\)",
        id="small-net-unbatched",
    ),
    pytest.param(
        lambda: _net()(_images(2, dtype=torch.float64)),
        TypeError,
        r"`x` has dtype torch.float64 but the network's weights are torch.float32",
        id="small-net-float64-images",
    ),
    pytest.param(
        lambda: DistillationOptions(real_batch=2.0),
        TypeError,
        r"`distillation.real_batch` must be an int, got 2.0",
        id="distillation-float-real-batch",
    ),
    pytest.param(
        lambda: DistillationOptions(alpha=float("nan")),
        ValueError,
        r"`distillation.alpha` must be finite, got nan",
        id="distillation-nan-alpha",
    ),
    pytest.param(
        lambda: DistillationOptions(momentum=1.0),
        ValueError,
        r"`distillation.momentum` must lie in \[0, 1\), got 1.0",
        id="distillation-momentum-one",
    ),
    pytest.param(
        lambda: DistillationOptions(dsa_strategy="color_zoom"),
        ValueError,
        r"Unknown augmentation family 'zoom' in strategy 'color_zoom'",
        id="distillation-unknown-dsa-family",
    ),
    pytest.param(
        lambda: DSA(mean=0.5),
        TypeError,
        r"`mean` must be a sequence with one value per channel, got 0.5; wrap it: \(0.5,\)",
        id="dsa-bare-mean",
    ),
    pytest.param(
        lambda: DSA(mean=(0.0, 0.0), std=(1.0,)),
        ValueError,
        r"need one value per channel each, got 2 and 1 values",
        id="dsa-mismatched-mean-std",
    ),
    pytest.param(
        lambda: DSA(flip=True),
        TypeError,
        r"`flip` must be a real number, got True",
        id="dsa-bool-flip",
    ),
    pytest.param(
        lambda: DSA()(_images(2), 0),
        TypeError,
        r"`generator` must be a torch.Generator, got int",
        id="dsa-seed-as-generator",
    ),
    pytest.param(
        lambda: DSA()(_images(2), torch.Generator(), per_batch="no"),
        TypeError,
        r"`per_batch` must be True or False, got 'no'",
        id="dsa-per-batch-str",
    ),
    pytest.param(
        lambda: DSA()(torch.full((2, 1, 8, 8), 255, dtype=torch.uint8), torch.Generator()),
        TypeError,
        r"`x` must be a real floating-point tensor, got dtype torch.uint8",
        id="dsa-integer-pixels",
    ),
    pytest.param(
        lambda: DSA.for_images(torch.ones(0, 1, 8, 8)),
        ValueError,
        r"`images` is empty",
        id="dsa-for-no-images",
    ),
    pytest.param(
        lambda: GaussianBottleneck(4, 2, seed=1.5),
        TypeError,
        r"`seed` must be an int, got 1.5",
        id="bottleneck-float-seed",
    ),
    pytest.param(
        lambda: _bottleneck()(torch.ones(2, 4, dtype=torch.float64)),
        TypeError,
        r"weights are torch.float32 but the features have dtype torch.float64",
        id="bottleneck-float64-features",
    ),
    pytest.param(
        lambda: _bottleneck()(torch.ones(2, 3)),
        ValueError,
        r"GaussianBottleneck expects 4 input features, got shape \(2, 3\)",
        id="bottleneck-other-feature-size",
    ),
    pytest.param(
        lambda: _bottleneck().kl(),
        RuntimeError,
        r"kl\(\) needs a forward call first",
        id="bottleneck-kl-before-forward",
    ),
    pytest.param(
        lambda: _load_bottleneck_state(torch.tensor([1.5, 2.0])),
        ValueError,
        r"saved state must be an integer tensor \[seed, draws\]",
        id="bottleneck-load-float-state",
    ),
    pytest.param(
        lambda: _load_bottleneck_state(torch.tensor([-1, -5])),
        ValueError,
        r"saved state has seed=-1, draws=-5; both must be >= 0",
        id="bottleneck-load-negative-state",
    ),
    pytest.param(
        lambda: _load_bottleneck_state(torch.tensor([1])),
        ValueError,
        r"saved state must be an integer tensor \[seed, draws\]",
        id="bottleneck-load-short-state",
    ),
    pytest.param(
        _load_bottleneck_of_other_size,
        RuntimeError,
        r"size mismatch for mean.weight",
        id="bottleneck-load-other-configuration",
    ),
    pytest.param(
        lambda: _ib_classifier(ib_latent_dim=0),
        ValueError,
        r"`latent_dim` must be >= 1, got 0",
        id="ib-mixin-zero-latent-dim",
    ),
    pytest.param(
        lambda: _ib_classifier(ib_input_dim=0),
        ValueError,
        r"`in_features` must be >= 1, got 0",
        id="ib-mixin-zero-input-dim",
    ),
    pytest.param(
        lambda: _ib_classifier(ib_beta=float("nan")),
        ValueError,
        r"`ib_beta` must be finite, got nan",
        id="ib-mixin-nan-beta",
    ),
    pytest.param(
        lambda: _ib_classifier(ib_encoder="missing"),
        AttributeError,
        r"needs `self.missing` to be an nn.Module",
        id="ib-mixin-missing-encoder",
    ),
    pytest.param(
        _ib_step_without_loss,
        TypeError,
        r"needs training_step to return a loss tensor or a dict with 'loss', got dict",
        id="ib-mixin-dict-without-loss",
    ),
]


from lightning_info.methods.rome import functional as _core  # noqa: E402

_IMAGES = torch.full((2, 1, 2, 2), 0.5)
_LABELS = torch.tensor([0, 1])

BAD_INPUT += [
    pytest.param(
        lambda: _core.check_attacks("fgsm"),
        TypeError,
        r"`attacks` must be a sequence of strings, got a single str",
        id="check-attacks-bare-string",
    ),
    pytest.param(
        lambda: _core.check_attacks(["fgsm", "fgsm"]),
        ValueError,
        r"`attacks` must be distinct names",
        id="check-attacks-repeated",
    ),
    pytest.param(
        lambda: _core.check_attacks(["cw"]),
        ValueError,
        r"`attacks` names the unknown attack\(s\) \['cw'\]",
        id="check-attacks-unknown",
    ),
    pytest.param(
        lambda: _core.check_real(_IMAGES * 255, _LABELS),
        ValueError,
        r"`real_images` must be finite pixels in \[0, 1\] \(not normalised\)",
        id="check-real-unscaled-pixels",
    ),
    pytest.param(
        lambda: _core.check_real(_IMAGES, _LABELS.float()),
        TypeError,
        r"`real_labels` must be an integer tensor \(N,\), got dtype torch.float32",
        id="check-real-float-labels",
    ),
    pytest.param(
        lambda: _core.check_real(_IMAGES, torch.tensor([True, False])),
        TypeError,
        r"`real_labels` must be an integer tensor \(N,\), got dtype torch.bool",
        id="check-real-bool-labels",
    ),
    pytest.param(
        lambda: _core.check_real(_IMAGES, torch.tensor([0])),
        ValueError,
        r"`real_images` and `real_labels` must hold the same, non-zero N",
        id="check-real-unpaired",
    ),
    pytest.param(
        lambda: _core.check_real(_IMAGES, torch.tensor([-1, 0])),
        ValueError,
        r"`real_labels` must be >= 0",
        id="check-real-negative-label",
    ),
]


def test_check_real_copies_without_touching_the_input():
    images, labels = _core.check_real(_IMAGES, _LABELS.int())
    assert torch.equal(images, _IMAGES) and images.data_ptr() != _IMAGES.data_ptr()
    assert labels.dtype == torch.long and labels.tolist() == [0, 1]
