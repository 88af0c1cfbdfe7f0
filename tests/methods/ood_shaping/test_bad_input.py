"""Bad input to the OOD-shaping entry points fails early with a message naming the argument."""

from __future__ import annotations

import pytest
import torch
from lightning.pytorch import Trainer
from torch import nn

from lightning_info import DigitsDataModule, MLPClassifier
from lightning_info.methods.ood_shaping.callback import OODShapingReport
from lightning_info.methods.ood_shaping.functional import (
    FeatureQuantiles,
    energy_score,
    piecewise_linear,
)
from lightning_info.methods.ood_shaping.metrics import OODFPRAt95TPR
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


BAD_INPUT = [
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
