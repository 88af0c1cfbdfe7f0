"""Bad input to the OOD-shaping entry points fails early with a message naming the argument."""

from __future__ import annotations

import pytest
import torch
from lightning.pytorch import Trainer
from torch import nn

from lightning_info import DigitsDataModule, MLPClassifier
from lightning_info.methods.ood_shaping.callback import OODShapingReport
from lightning_info.methods.ood_shaping.functional import (
    PLF,
    VRA,
    FeatureQuantiles,
    Identity,
    PiecewiseLinear,
    ReAct,
    Shaper,
    energy_score,
    make_shaper,
    piecewise_linear,
)
from lightning_info.methods.ood_shaping.metrics import (
    OODAUROC,
    OODFPRAt95TPR,
    fpr_at_95_tpr,
    ood_auroc,
)
from lightning_info.methods.ood_shaping.scorers import FeatureShapingScorer, tune
from tests.tiny import QUIET


def _layer() -> nn.Linear:
    torch.manual_seed(0)
    return nn.Linear(4, 3)


def _features(n: int = 20, d: int = 4, seed: int = 0) -> torch.Tensor:
    return torch.rand(n, d, generator=torch.Generator().manual_seed(seed))


class _Digits(DigitsDataModule):
    """Digits whose ``ood_dataloaders`` return ``ood`` for ``split``."""

    def __init__(self, split: str, ood) -> None:
        super().__init__(classes=3, val_fraction=0.3, batch_size=64)
        self.split, self.ood = split, ood

    def ood_dataloaders(self, split: str = "test"):
        return self.ood if split == self.split else super().ood_dataloaders(split)


def _fit(tmp_path, data):
    trainer = Trainer(
        max_epochs=1,
        callbacks=[OODShapingReport(shapers=["identity"], tune_trials=1)],
        default_root_dir=tmp_path,
        **QUIET,
    )
    try:
        trainer.fit(MLPClassifier(64, 3, hidden=[8]), datamodule=data)
    finally:
        assert trainer.global_step == 0  # refused before the first step


def _empty_loader():
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.empty(0, 64)))


def _load_truncated(tmp_path):
    scorer = FeatureShapingScorer(_layer(), "react").fit_features(_features())
    scorer.save(tmp_path / "whole.pt")
    (tmp_path / "cut.pt").write_bytes((tmp_path / "whole.pt").read_bytes()[:150])
    FeatureShapingScorer(_layer(), "react").load(tmp_path / "cut.pt")


def _state_without(key):
    state = FeatureShapingScorer(_layer(), "react").fit_features(_features()).state_dict()
    del state[key]
    FeatureShapingScorer(_layer(), "react").load_state_dict(state)


def _pooled_auroc(scores, is_in_distribution):
    metric = OODAUROC()
    metric.update(scores, is_in_distribution)
    return metric.compute()


_NAN = float("nan")
_IN, _OUT = torch.tensor([0.9, 0.7, 0.4]), torch.tensor([0.5, 0.1])

BAD_INPUT = [
    # -- OOD metrics -------------------------------------------------------------------------
    pytest.param(
        lambda: ood_auroc(torch.tensor([_NAN, 1.0]), _OUT),
        ValueError,
        r"`scores_in` contains 1 NaN value\(s\)",
        id="auroc-nan-scores",
    ),
    pytest.param(
        lambda: ood_auroc(_IN, torch.zeros(0)),
        ValueError,
        r"`scores_out` is empty, so only one class is present",
        id="auroc-no-ood-scores",
    ),
    pytest.param(
        lambda: ood_auroc(torch.tensor([True, False]), _OUT),
        TypeError,
        r"`scores_in` must hold real numbers, got dtype torch.bool",
        id="auroc-bool-scores",
    ),
    pytest.param(
        lambda: ood_auroc(torch.ones(2, 2), _OUT),
        ValueError,
        r"`scores_in` must have shape \(N,\), got \(2, 2\)",
        id="auroc-2d-scores",
    ),
    pytest.param(
        lambda: fpr_at_95_tpr(torch.zeros(0), _OUT),
        ValueError,
        r"`scores_in` is empty, so only one class is present",
        id="fpr-no-id-scores",
    ),
    pytest.param(
        lambda: fpr_at_95_tpr(_IN, torch.tensor([_NAN])),
        ValueError,
        r"`scores_out` contains 1 NaN value\(s\)",
        id="fpr-nan-scores",
    ),
    pytest.param(
        lambda: fpr_at_95_tpr(_IN, _OUT, tpr_level=95),
        ValueError,
        r"`tpr_level` must lie in \(0, 1\], got 95 \(0.95, not 95\)",
        id="fpr-level-percent",
    ),
    pytest.param(
        lambda: _pooled_auroc(torch.tensor([_NAN, 1.0]), torch.tensor([1, 0])),
        ValueError,
        r"`scores` contains 1 NaN value\(s\)",
        id="metric-auroc-nan-scores",
    ),
    pytest.param(
        lambda: _pooled_auroc(_IN, torch.tensor([0.9, 0.1, 0.5])),
        ValueError,
        r"`is_in_distribution` must hold only 0/1 or True/False",
        id="metric-auroc-scores-as-flags",
    ),
    pytest.param(
        lambda: _pooled_auroc(_IN, torch.tensor([0, 1, 2])),
        ValueError,
        r"`is_in_distribution` must hold only 0/1 or True/False, found \[2\]",
        id="metric-auroc-flag-out-of-range",
    ),
    pytest.param(
        lambda: _pooled_auroc(_IN, torch.tensor([True, False])),
        ValueError,
        r"`scores` and `is_in_distribution` must have the same length, got 3 and 2",
        id="metric-auroc-lengths-differ",
    ),
    pytest.param(
        lambda: _pooled_auroc(torch.zeros(0), torch.zeros(0, dtype=torch.bool)),
        ValueError,
        r"`scores` is empty: pass at least one sample",
        id="metric-auroc-empty",
    ),
    pytest.param(
        lambda: _pooled_auroc(_IN, torch.ones(3, dtype=torch.bool)),
        ValueError,
        r"OOD AUROC is undefined: only one class is present in `is_in_distribution`",
        id="metric-auroc-only-in-distribution",
    ),
    # -- shapers -----------------------------------------------------------------------------
    pytest.param(
        lambda: ReAct(percentile=True),
        TypeError,
        r"`percentile` must be a real number, got True",
        id="react-percentile-bool",
    ),
    pytest.param(
        lambda: ReAct(percentile="90"),
        TypeError,
        r"`percentile` must be a real number, got '90'",
        id="react-percentile-str",
    ),
    pytest.param(
        lambda: ReAct(percentile=0.9 * 1000),
        ValueError,
        r"`percentile` is a percentile and must lie in \[0, 100\], got 900.0",
        id="react-percentile-out-of-range",
    ),
    pytest.param(
        lambda: VRA(lower_percentile=95, upper_percentile=60),
        ValueError,
        r"`lower_percentile` \(95.0\) must not exceed `upper_percentile` \(60.0\)",
        id="vra-percentiles-swapped",
    ),
    pytest.param(
        lambda: VRA(gamma=float("inf")),
        ValueError,
        r"`gamma` must be finite, got inf",
        id="vra-gamma-inf",
    ),
    pytest.param(
        lambda: PLF(q1=0.95),
        ValueError,
        r"`q1` is a quantile fraction and must lie in \[0, 0.89\], got 0.95",
        id="plf-q1-out-of-range",
    ),
    pytest.param(
        lambda: PLF(m1=_NAN),
        ValueError,
        r"`m1` must be finite, got nan",
        id="plf-slope-nan",
    ),
    pytest.param(
        lambda: PLF(u=True),
        TypeError,
        r"`u` must be a real number, got True",
        id="plf-u-bool",
    ),
    pytest.param(
        lambda: Identity(1.0),
        TypeError,
        r"takes 1 positional argument but 2 were given",
        id="identity-takes-no-parameters",
    ),
    pytest.param(
        lambda: Shaper().build(FeatureQuantiles(_features())),
        NotImplementedError,
        r"Shaper does not implement `build`: use a shaper of SHAPERS \(Identity, ReAct",
        id="base-shaper-build",
    ),
    pytest.param(
        lambda: make_shaper("ReLU"),
        ValueError,
        r"Unknown shaper 'ReLU'; choose one of \['identity', 'plf', 'react', 'vra'\]",
        id="make-shaper-unknown-name",
    ),
    pytest.param(
        lambda: make_shaper(ReAct),
        TypeError,
        r"`shaper` is the class ReAct; pass an instance \(ReAct\(\)\)",
        id="make-shaper-a-class",
    ),
    pytest.param(
        lambda: make_shaper("react", tau=1.0),
        ValueError,
        r"Unknown parameter\(s\) \['tau'\] for shaper 'react'; it takes \['percentile'\]",
        id="make-shaper-unknown-parameter",
    ),
    pytest.param(
        lambda: make_shaper(ReAct(), percentile=50.0),
        ValueError,
        r"Pass parameters either to the shaper or here, not both",
        id="make-shaper-parameters-twice",
    ),
    # -- fitted shaping functions ------------------------------------------------------------
    pytest.param(
        lambda: PiecewiseLinear.make("01", [0.0, 1.0], 0.0, 0.0),
        TypeError,
        r"`knots_x` must be a sequence of numbers, got '01'",
        id="function-knots-str",
    ),
    pytest.param(
        lambda: PiecewiseLinear.make([0.0, True], [0.0, 1.0], 0.0, 0.0),
        TypeError,
        r"`knots_x` must hold real numbers, got True",
        id="function-knot-bool",
    ),
    pytest.param(
        lambda: PiecewiseLinear.make([_NAN], [0.0], 0.0, 0.0),
        ValueError,
        r"`knots_x` contains 1 NaN/inf",
        id="function-knot-nan",
    ),
    pytest.param(
        lambda: PiecewiseLinear.make([1.0, 0.0], [0.0, 1.0], 0.0, 0.0),
        ValueError,
        r"`knots_x` must be non-decreasing, got \[1.0, 0.0\]",
        id="function-knots-decreasing",
    ),
    pytest.param(
        lambda: PiecewiseLinear.make([], [], 0.0, 0.0),
        ValueError,
        r"`knots_x` must be a non-empty 1-D sequence of knots",
        id="function-no-knots",
    ),
    pytest.param(
        lambda: PiecewiseLinear.make([0.0, 1.0], [0.0], 0.0, 0.0),
        ValueError,
        r"`knots_y` must have one entry per knot \(2\), got 1",
        id="function-knot-lengths-differ",
    ),
    pytest.param(
        lambda: PiecewiseLinear.make([0.0], [0.0], True, 0.0),
        TypeError,
        r"`left_slope` must be a real number, got True",
        id="function-slope-bool",
    ),
    pytest.param(
        lambda: PiecewiseLinear.make([0.0], [0.0], 0.0, "1"),
        TypeError,
        r"`right_slope` must be a real number, got '1'",
        id="function-slope-str",
    ),
    pytest.param(
        lambda: PiecewiseLinear.make([0.0], [0.0], 0.0, 0.0, odd="no"),
        TypeError,
        r"`odd` must be True or False, got 'no'",
        id="function-odd-str",
    ),
    pytest.param(
        lambda: PiecewiseLinear.make([0.0], [0.0], 1.0, 1.0)(torch.tensor([1, 2])),
        ValueError,
        r"`z` must be a floating-point tensor",
        id="function-integer-features",
    ),
    pytest.param(
        lambda: PiecewiseLinear.from_state({"knots_x": torch.zeros(1), "knots_y": torch.zeros(1)}),
        ValueError,
        r"the saved shaping function lacks \['left_limits', 'right_limits', 'left_slope', "
        r"'right_slope', 'odd'\]",
        id="function-state-missing-fields",
    ),
    pytest.param(
        lambda: tune(
            "react", _features(), _features(seed=1) + 1, layer=_layer(), fit_features=_features(d=7)
        ),
        ValueError,
        r"`fit_features` have D = 7 but `id_features` have D = 4: the knots must come from the "
        r"same layer",
        id="tune-fit-features-of-another-layer",
    ),
    pytest.param(
        lambda: tune("react", _features(d=7), _features(d=7, seed=1), layer=_layer()),
        ValueError,
        r"`id_features` have D = 7 but the linear layer's weight is \(3, 4\)",
        id="tune-features-wider-than-the-layer",
    ),
    pytest.param(
        lambda: tune(
            "react",
            _features(),
            _features(seed=1),
            layer=_layer(),
            search_space={"percentile": (1, 2, 3)},
        ),
        ValueError,
        r"`search_space\['percentile'\]` must be a number or a \(low, high\) pair, got \(1, 2, 3\)",
        id="tune-box-of-three",
    ),
    pytest.param(
        lambda: tune(
            "react",
            _features(),
            _features(seed=1),
            layer=_layer(),
            search_space={"percentile": "50"},
        ),
        ValueError,
        r"`search_space\['percentile'\]` must be a number or a \(low, high\) pair, got '50'",
        id="tune-box-str",
    ),
    pytest.param(
        lambda: piecewise_linear(_features(), [0.0], [0.0], left_slope=True),
        TypeError,
        r"`left_slope` must be a real number, got True",
        id="piecewise-slope-bool",
    ),
    pytest.param(
        lambda: piecewise_linear(_features(), [True, False], [0.0, 1.0]),
        TypeError,
        r"`knots_x` must hold real numbers, got dtype torch.bool",
        id="piecewise-knots-bool",
    ),
    pytest.param(
        lambda: FeatureQuantiles(_features())([True]),
        ValueError,
        r"quantile fractions must lie in \[0, 1\], got True",
        id="quantile-fraction-bool",
    ),
    pytest.param(
        lambda: energy_score(torch.tensor([[float("nan"), 0.0]])),
        ValueError,
        r"`logits` contain NaN",
        id="energy-nan-logits",
    ),
    pytest.param(
        lambda: OODFPRAt95TPR().update(torch.tensor([0.3, 0.5]), torch.tensor([0.9, 0.1])),
        ValueError,
        r"`is_in_distribution` must hold only 0/1 or True/False",
        id="ood-fpr-scores-as-flags",
    ),
    pytest.param(
        lambda tmp_path: FeatureShapingScorer(_layer()).save(tmp_path / "react.pt"),
        RuntimeError,
        r"FeatureShapingScorer is not fitted: call `fit\(...\)` before saving",
        id="scorer-save-before-fit",
    ),
    pytest.param(
        _load_truncated,
        ValueError,
        r"cut.pt cannot be read as a saved scorer",
        id="scorer-load-truncated-file",
    ),
    pytest.param(
        lambda: _state_without("function"),
        ValueError,
        r"the saved FeatureShapingScorer state lacks 'function'",
        id="scorer-state-missing-key",
    ),
    pytest.param(
        lambda: OODShapingReport(shapers="react"),
        TypeError,
        r"`shapers` must be a sequence of strings, got a single str",
        id="shapers-bare-str",
    ),
    pytest.param(
        lambda: OODShapingReport(fit_on="val", evaluate_on="val"),
        ValueError,
        r"`fit_on` and `evaluate_on` are both 'val'",
        id="fit-on-equals-evaluate-on",
    ),
    pytest.param(
        lambda tmp_path: _fit(tmp_path, _Digits("val", {})),
        ValueError,
        r"needs at least one OOD set from `_Digits.ood_dataloaders\('val'\)`.*got \{\}",
        id="no-ood-val-loaders",
    ),
    pytest.param(
        lambda tmp_path: _fit(tmp_path, _Digits("test", {})),
        ValueError,
        r"`_Digits.ood_dataloaders\('test'\)`",
        id="no-ood-test-loaders",
    ),
    pytest.param(
        lambda tmp_path: _fit(tmp_path, _Digits("val", {"noise": _empty_loader()})),
        ValueError,
        r"the 'OOD val noise' loader yields no batches",
        id="empty-ood-loader",
    ),
]


def test_valid_input_still_works(tmp_path):
    features, layer = _features(), _layer()
    result = tune("react", features, features + 1, layer=layer, fit_features=features, n_trials=2)
    assert 0 <= result.auroc <= 1
    scorer = result.scorer
    scorer.save(tmp_path / "react.pt")
    restored = FeatureShapingScorer(nn.Linear(4, 3), "react").load(tmp_path / "react.pt")
    torch.testing.assert_close(restored.score_features(features), scorer.score_features(features))
    assert torch.isinf(energy_score(torch.tensor([[float("inf"), 0.0]]))).all()
    assert piecewise_linear(features, [0.0], [0.0], left_slope=1, right_slope=0.5).shape == (20, 4)
