"""Bad input to the pointwise-confidence entry points fails early with a message naming the
argument: saved scorers of another configuration, float labels, logits of the wrong width, the
callback's options, and runs that cannot be reported (checked before the first step)."""

from __future__ import annotations

import sys

import pytest
import torch
from lightning.pytorch import LightningDataModule, Trainer
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from lightning_info.methods.pointwise_confidence import functional as F
from lightning_info.methods.pointwise_confidence.callback import PosthocScoring
from lightning_info.methods.pointwise_confidence.metrics import (
    AURC,
    EAURC,
    AdaptiveCalibrationError,
    AUPRError,
    AUPRSuccess,
    BrierScore,
    ExpectedCalibrationError,
    FailureFPRAt95TPR,
    NegativeLogLikelihood,
)
from lightning_info.methods.pointwise_confidence.scorers import (
    MSPScorer,
    PMIScorer,
    PSIScorer,
    PVIScorer,
    fit_temperature,
)
from lightning_info.scoring import check_outputs
from tests.tiny import QUIET, TinyClassifier


def _outputs(n: int = 30, d: int = 4, k: int = 3):
    generator = torch.Generator().manual_seed(0)
    features = torch.randn(n, d, generator=generator)
    logits = torch.randn(n, k, generator=generator)
    return features, logits, torch.arange(n) % k


def _reload(saved, loaded, tmp_path):
    """Fit ``saved``, save it, load the file into ``loaded``."""
    saved.fit(*_outputs())
    saved.save(tmp_path / "scorer.pt")
    return loaded.load(tmp_path / "scorer.pt")


def _write(tmp_path, content) -> str:
    path = tmp_path / "scorer.pt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        torch.save(content, path)
    return path


def _truncated(tmp_path):
    PSIScorer(num_directions=3).fit(*_outputs()).save(tmp_path / "whole.pt")
    path = _write(tmp_path, (tmp_path / "whole.pt").read_bytes()[:200])
    return PSIScorer(num_directions=3).load(path)


def _state_without(key):
    state = PSIScorer(num_directions=3).fit(*_outputs()).state_dict()
    del state[key]
    PSIScorer(num_directions=3).load_state_dict(state)


class _Splits(LightningDataModule):
    """Labelled random data; ``empty`` names a split whose loader yields no batch, ``missing``
    one without a loader."""

    def __init__(self, empty: str | None = None, missing: str | None = None) -> None:
        super().__init__()
        self.empty, self.missing = empty, missing
        generator = torch.Generator().manual_seed(0)
        self.data = {
            split: TensorDataset(torch.randn(24, 6, generator=generator), torch.arange(24) % 3)
            for split in ("train", "val", "test")
        }

    def _loader(self, split):
        if split == self.missing:
            return None
        data = self.data[split]
        if split == self.empty:
            data = TensorDataset(data.tensors[0][:0], data.tensors[1][:0])
        return DataLoader(data, batch_size=8)

    def train_dataloader(self):
        return self._loader("train")

    def val_dataloader(self):
        return self._loader("val")

    def test_dataloader(self):
        return self._loader("test")


class _TwoHeads(TinyClassifier):
    """Returns the outputs of two linear layers of the same width."""

    def __init__(self) -> None:
        super().__init__()
        self.aux = nn.Linear(6, 3)

    def forward(self, x):
        return {"logits": self.net(x), "aux": self.aux(x)}

    def training_step(self, batch, batch_idx):
        return nn.functional.cross_entropy(self(batch[0])["logits"], batch[1])


def _fit(tmp_path, callback, data=None, model=None):
    trainer = Trainer(max_epochs=1, callbacks=[callback], default_root_dir=tmp_path, **QUIET)
    try:
        trainer.fit(model or TinyClassifier(), datamodule=data or _Splits())
    finally:
        assert trainer.global_step == 0  # refused before the first step


def _without_matplotlib(tmp_path):
    saved = sys.modules.get("matplotlib"), sys.modules.get("matplotlib.pyplot")
    sys.modules["matplotlib"] = sys.modules["matplotlib.pyplot"] = None
    try:
        _fit(tmp_path, PosthocScoring(scorers=[MSPScorer()], output_dir=str(tmp_path / "out")))
    finally:
        for name, module in zip(("matplotlib", "matplotlib.pyplot"), saved):
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def _output_dir_is_a_file(tmp_path):
    (tmp_path / "report").write_text("a file")
    _fit(tmp_path, PosthocScoring(scorers=[MSPScorer()], output_dir=str(tmp_path / "report")))


def _call(function, *args, **kwargs):
    return lambda: function(*args, **kwargs)


def _pooled(metric_class, **options):
    """The metric ``metric_class(**options)`` as a function: one ``update``, then ``compute``."""

    def compute(*batch):
        metric = metric_class(**options)
        metric.update(*batch)
        return metric.compute()

    return compute


NAN = float("nan")
_PROBS = torch.tensor([[0.7, 0.3], [0.2, 0.8], [0.5, 0.5]])
_LABELS = torch.tensor([0, 1, 1])
_SCORES = torch.tensor([0.9, 0.2, 0.5])
_CORRECT = torch.tensor([True, False, True])

# Functions of class probabilities (N, K) and labels (N,), and their pooled metrics.
_PROBABILITY_METRICS = {
    "nll": F.negative_log_likelihood,
    "brier": F.brier_score,
    "metric-nll": _pooled(NegativeLogLikelihood),
    "metric-brier": _pooled(BrierScore),
}
_PROBABILITY_CASES = [
    (
        "nan-probs",
        (torch.tensor([[NAN, 0.5], [0.5, 0.5]]), _LABELS[:2]),
        ValueError,
        r"`probs` must hold probabilities in \[0, 1\]; apply softmax",
    ),
    (
        "logits-as-probs",
        (torch.tensor([[1.5, -0.5], [0.5, 0.5]]), _LABELS[:2]),
        ValueError,
        r"`probs` must hold probabilities in \[0, 1\]; apply softmax",
    ),
    (
        "rows-not-summing-to-1",
        (torch.tensor([[0.5, 0.2], [0.5, 0.5]]), _LABELS[:2]),
        ValueError,
        r"each row of `probs` must sum to 1 \(off by up to 0.3\)",
    ),
    (
        "integer-probs",
        (torch.tensor([[1, 0], [0, 1]]), _LABELS[:2]),
        ValueError,
        r"`probs` must be a floating-point \(N, K\) tensor, got shape \(2, 2\) and dtype "
        r"torch.int64",
    ),
    (
        "float-labels",
        (_PROBS, _LABELS.float()),
        TypeError,
        r"`labels` must hold integer classes, got dtype torch.float32",
    ),
    (
        "bool-labels",
        (_PROBS[:2], torch.tensor([True, False])),
        TypeError,
        r"`labels` must hold integer classes, got dtype torch.bool",
    ),
    (
        "labels-out-of-range",
        (_PROBS, torch.tensor([0, 2, 1])),
        ValueError,
        r"`labels` must lie in \[0, 2\)",
    ),
    (
        "negative-labels",
        (_PROBS, torch.tensor([0, -1, 1])),
        ValueError,
        r"`labels` must lie in \[0, 2\)",
    ),
    (
        "lengths-differ",
        (_PROBS, _LABELS[:2]),
        ValueError,
        r"`probs` and `labels` must have the same length, got 3 and 2",
    ),
    (
        "empty",
        (torch.zeros(0, 2), torch.zeros(0, dtype=torch.long)),
        ValueError,
        r"`probs` is empty: pass at least one sample",
    ),
]

# Functions of scores (N,) and correctness (N,), and their pooled metrics; the calibration
# errors name their scores `confidences`.
_FAILURE_METRICS = {
    "aupr-success": (F.aupr_success, "scores"),
    "aupr-error": (F.aupr_error, "scores"),
    "failure-fpr": (F.failure_fpr_at_95_tpr, "scores"),
    "e-aurc": (F.e_aurc, "scores"),
    "ece": (F.expected_calibration_error, "confidences"),
    "adaptive-ece": (F.adaptive_calibration_error, "confidences"),
    "metric-aupr-success": (_pooled(AUPRSuccess), "scores"),
    "metric-aupr-error": (_pooled(AUPRError), "scores"),
    "metric-failure-fpr": (_pooled(FailureFPRAt95TPR), "scores"),
    "metric-e-aurc": (_pooled(EAURC), "scores"),
    "metric-adaptive-ece": (_pooled(AdaptiveCalibrationError), "confidences"),
}
_FAILURE_CASES = [
    (
        "nan-scores",
        (torch.tensor([NAN, 0.2, 0.5]), _CORRECT),
        ValueError,
        r"`{scores}` contains 1 NaN value\(s\)",
    ),
    (
        "scores-as-correct",
        (_SCORES, torch.tensor([0.9, 0.1, 0.5])),
        ValueError,
        r"`correct` must hold only 0/1 or True/False, found \[0.1",
    ),
    (
        "correct-out-of-range",
        (_SCORES, torch.tensor([0, 2, 1])),
        ValueError,
        r"`correct` must hold only 0/1 or True/False, found \[2\]",
    ),
    (
        "lengths-differ",
        (_SCORES, _CORRECT[:2]),
        ValueError,
        r"`{scores}` and `correct` must have the same length, got 3 and 2",
    ),
    (
        "empty",
        (torch.zeros(0), torch.zeros(0, dtype=torch.bool)),
        ValueError,
        r"`{scores}` is empty: pass at least one sample",
    ),
    (
        "complex-scores",
        (_SCORES.to(torch.complex64), _CORRECT),
        TypeError,
        r"`{scores}` must hold real numbers, got dtype torch.complex64",
    ),
]

_METRIC_ROWS = [
    pytest.param(_call(function, *args), error, message, id=f"{name}-{case}")
    for name, function in _PROBABILITY_METRICS.items()
    for case, args, error, message in _PROBABILITY_CASES
] + [
    pytest.param(_call(function, *args), error, message.format(scores=scores), id=f"{name}-{case}")
    for name, (function, scores) in _FAILURE_METRICS.items()
    for case, args, error, message in _FAILURE_CASES
]

BAD_INPUT = _METRIC_ROWS + [
    # -- metric options and the metrics that need both classes -------------------------------
    pytest.param(
        lambda: F.negative_log_likelihood(_PROBS, _LABELS, eps=True),
        TypeError,
        r"`eps` must be a real number, got True",
        id="nll-eps-bool",
    ),
    pytest.param(
        lambda: F.negative_log_likelihood(_PROBS, _LABELS, eps=1.0),
        ValueError,
        r"`eps` must lie in \[0, 1\), got 1.0",
        id="nll-eps-one",
    ),
    pytest.param(
        lambda: NegativeLogLikelihood(eps=float("nan")),
        ValueError,
        r"`eps` must be finite, got nan",
        id="metric-nll-eps-nan",
    ),
    pytest.param(
        lambda: F.expected_calibration_error(_SCORES, _CORRECT, n_bins=2.0),
        TypeError,
        r"`n_bins` must be an int, got 2.0",
        id="ece-n-bins-float",
    ),
    pytest.param(
        lambda: F.adaptive_calibration_error(_SCORES, _CORRECT, n_bins=True),
        TypeError,
        r"`n_bins` must be an int, got True",
        id="adaptive-ece-n-bins-bool",
    ),
    pytest.param(
        lambda: AdaptiveCalibrationError(n_bins=0),
        ValueError,
        r"`n_bins` must be >= 1, got 0",
        id="metric-adaptive-ece-n-bins-zero",
    ),
    pytest.param(
        lambda: F.expected_calibration_error(torch.tensor([1.5, 0.2, 0.5]), _CORRECT),
        ValueError,
        r"`confidences` must be probabilities in \[0, 1\].*found \[1.5\]",
        id="ece-confidence-above-one",
    ),
    pytest.param(
        lambda: _pooled(AdaptiveCalibrationError)(torch.tensor([float("inf"), 0.2]), _CORRECT[:2]),
        ValueError,
        r"`confidences` must be probabilities in \[0, 1\].*found \[inf\]",
        id="metric-adaptive-ece-infinite-confidence",
    ),
    pytest.param(
        lambda: F.e_aurc(_SCORES, _CORRECT, optimal="exact"),
        ValueError,
        r"`optimal` must be 'discrete' or 'continuous', got 'exact'",
        id="e-aurc-optimal-unknown",
    ),
    pytest.param(
        lambda: EAURC(optimal=1),
        ValueError,
        r"`optimal` must be 'discrete' or 'continuous', got 1",
        id="metric-e-aurc-optimal-int",
    ),
    pytest.param(
        lambda: F.optimal_aurc(_CORRECT, kind="exact"),
        ValueError,
        r"`kind` must be 'discrete' or 'continuous', got 'exact'",
        id="optimal-aurc-kind-unknown",
    ),
    pytest.param(
        lambda: F.optimal_aurc(torch.zeros(0, dtype=torch.bool)),
        ValueError,
        r"`correct` is empty: pass at least one sample",
        id="optimal-aurc-empty",
    ),
    pytest.param(
        lambda: F.optimal_aurc(torch.tensor([0.3, 0.5])),
        ValueError,
        r"`correct` must hold only 0/1 or True/False, found \[0.3",
        id="optimal-aurc-scores-as-correct",
    ),
    pytest.param(
        lambda: F.optimal_aurc(torch.tensor([NAN, 1.0])),
        ValueError,
        r"`correct` must hold only 0/1 or True/False, found \[nan\]",
        id="optimal-aurc-nan",
    ),
    pytest.param(
        lambda: F.failure_fpr_at_95_tpr(_SCORES, _CORRECT, tpr_level=95),
        ValueError,
        r"`tpr_level` must lie in \(0, 1\], got 95 \(0.95, not 95\)",
        id="failure-fpr-level-percent",
    ),
    pytest.param(
        lambda: FailureFPRAt95TPR(tpr_level=True),
        TypeError,
        r"`tpr_level` must be a real number, got True",
        id="metric-failure-fpr-level-bool",
    ),
    pytest.param(
        lambda: F.failure_fpr_at_95_tpr(_SCORES, torch.ones(3, dtype=torch.bool)),
        ValueError,
        r"FPR@95TPR is undefined: only one class is present in `correct`",
        id="failure-fpr-all-correct",
    ),
    pytest.param(
        lambda: _pooled(AUPRError)(_SCORES, torch.ones(3, dtype=torch.bool)),
        ValueError,
        r"AUPR-error is undefined: no sample in `correct` is wrong",
        id="metric-aupr-error-all-correct",
    ),
    pytest.param(
        lambda: ExpectedCalibrationError().compute(),
        ValueError,
        r"`confidences` is empty: pass at least one sample",
        id="metric-ece-compute-before-update",
    ),
    pytest.param(
        lambda: BrierScore().compute(),
        ValueError,
        r"`probs` is empty: pass at least one sample",
        id="metric-brier-compute-before-update",
    ),
    # -- the outputs every scorer checks (lightning_info.scoring.check_outputs) ---------------
    pytest.param(
        lambda: check_outputs(_outputs()[0][:, 0], _outputs()[1]),
        ValueError,
        r"`features` must be a floating-point \(N, D\) tensor, got shape \(30,\) and dtype "
        r"torch.float32",
        id="outputs-features-1d",
    ),
    pytest.param(
        lambda: check_outputs(_outputs()[0], _outputs()[1].tolist()),
        ValueError,
        r"`logits` must be a floating-point \(N, K\) tensor, got list",
        id="outputs-logits-list",
    ),
    pytest.param(
        lambda: check_outputs(_outputs()[0], _outputs()[1].long()),
        ValueError,
        r"`logits` must be a floating-point \(N, K\) tensor, got shape \(30, 3\) and dtype "
        r"torch.int64",
        id="outputs-integer-logits",
    ),
    pytest.param(
        lambda: check_outputs(_outputs()[0], _outputs()[1][:29]),
        ValueError,
        r"`features` and `logits` must have the same N, got 30 and 29",
        id="outputs-lengths-differ",
    ),
    pytest.param(
        lambda: check_outputs(torch.full((30, 4), float("inf")), _outputs()[1]),
        ValueError,
        r"`features` holds NaN or infinite values",
        id="outputs-infinite-features",
    ),
    pytest.param(
        lambda: check_outputs(*_outputs()[:2], _outputs()[2][:29]),
        ValueError,
        r"`labels` must have N = 30 entries",
        id="outputs-labels-short",
    ),
    pytest.param(
        lambda: check_outputs(*_outputs()[:2], [0, 1] * 15),
        TypeError,
        r"`labels` must be a torch.Tensor, got list",
        id="outputs-labels-list",
    ),
    # -- saved scorers of another configuration ----------------------------------------------
    pytest.param(
        lambda tmp_path: _reload(
            PSIScorer(num_directions=3, bins=4), PSIScorer(num_directions=3, bins=8), tmp_path
        ),
        ValueError,
        r"holds a PSIScorer saved with bins=4 \(this scorer: 8\); build the scorer with "
        r"PSIScorer\(bins=4",
        id="psi-load-other-bins",
    ),
    pytest.param(
        lambda tmp_path: _reload(
            PSIScorer(num_directions=3), PSIScorer(num_directions=3, density="gaussian"), tmp_path
        ),
        ValueError,
        r"saved with density='histogram' \(this scorer: 'gaussian'\)",
        id="psi-load-histogram-into-gaussian",
    ),
    pytest.param(
        lambda tmp_path: _reload(
            PSIScorer(num_directions=3, density="gaussian"), PSIScorer(num_directions=3), tmp_path
        ),
        ValueError,
        r"saved with density='gaussian' \(this scorer: 'histogram'\)",
        id="psi-load-gaussian-into-histogram",
    ),
    pytest.param(
        lambda tmp_path: _reload(
            PSIScorer(num_directions=3), PSIScorer(num_directions=5), tmp_path
        ),
        ValueError,
        r"saved with num_directions=3 \(this scorer: 5\)",
        id="psi-load-other-directions",
    ),
    pytest.param(
        lambda tmp_path: _reload(PVIScorer("classifier"), PVIScorer("temperature"), tmp_path),
        ValueError,
        r"holds a PVIScorer saved with variant='classifier' \(this scorer: 'temperature'\)",
        id="pvi-load-other-variant",
    ),
    pytest.param(
        lambda tmp_path: _reload(
            PMIScorer("classifier", steps=2), PMIScorer("fjs", steps=2), tmp_path
        ),
        ValueError,
        r"saved with objective='classifier' \(this scorer: 'fjs'\)",
        id="pmi-load-other-objective",
    ),
    pytest.param(
        lambda tmp_path: _reload(PMIScorer(steps=2), PMIScorer(steps=2, hidden=8), tmp_path),
        ValueError,
        r"saved with hidden=64 \(this scorer: 8\)",
        id="pmi-load-other-hidden",
    ),
    pytest.param(
        lambda tmp_path: _reload(MSPScorer(temperature_scaled=True), MSPScorer(), tmp_path),
        ValueError,
        r"saved with temperature_scaled=True \(this scorer: False\)",
        id="msp-load-other-temperature-scaled",
    ),
    pytest.param(
        lambda tmp_path: PSIScorer().save(tmp_path / "psi.pt"),
        RuntimeError,
        r"PSIScorer is not fitted: call `fit\(...\)` before saving",
        id="save-before-fit",
    ),
    pytest.param(
        lambda tmp_path: PMIScorer().state_dict(),
        RuntimeError,
        r"PMIScorer is not fitted",
        id="state-dict-before-fit",
    ),
    pytest.param(
        _truncated,
        ValueError,
        r"scorer.pt cannot be read as a saved scorer .*truncated or was not written by `save`",
        id="load-truncated-file",
    ),
    pytest.param(
        lambda tmp_path: PSIScorer().load(_write(tmp_path, torch.ones(3))),
        ValueError,
        r"scorer.pt holds a Tensor, not a scorer written by `save`",
        id="load-a-tensor-file",
    ),
    pytest.param(
        lambda: _state_without("prior"),
        ValueError,
        r"the saved PSIScorer state lacks 'prior'; it is incomplete or was edited",
        id="load-state-missing-key",
    ),
    pytest.param(
        lambda: _state_without("config_fingerprint"),
        ValueError,
        r"holds a PSIScorer state without a fingerprint",
        id="load-state-without-fingerprint",
    ),
    pytest.param(
        lambda: PSIScorer().load_state_dict([1, 2]),
        ValueError,
        r"the state is not a saved PSIScorer state",
        id="load-state-not-a-dict",
    ),
    # -- outputs and labels ------------------------------------------------------------------
    pytest.param(
        lambda: PSIScorer(num_directions=3).fit(*_outputs()[:2], torch.rand(30)),
        TypeError,
        r"`labels` must hold integer class indices, got dtype torch.float32; floats such as "
        r"scores",
        id="fit-float-labels",
    ),
    pytest.param(
        lambda: PSIScorer(num_directions=3).fit(_outputs()[0], torch.randn(30, 32), _outputs()[2]),
        ValueError,
        r"classes \[3, 4, .*\] have no fitting samples: the labels stop at 2 but `logits` have "
        r"K = 32 columns.*`head=`",
        id="fit-logits-wider-than-the-labels",
    ),
    pytest.param(
        lambda: PSIScorer(num_directions=3).fit(torch.zeros(30, 0), *_outputs()[1:]),
        ValueError,
        r"`features` has no columns \(shape \(30, 0\)\)",
        id="fit-features-without-columns",
    ),
    pytest.param(
        lambda: PSIScorer(num_directions=3).fit(*_outputs()[:2], (torch.arange(30) % 3)[:, None]),
        ValueError,
        r"`labels` must be an \(N,\) tensor, got shape \(30, 1\)",
        id="fit-labels-2d",
    ),
    pytest.param(
        lambda: fit_temperature(_outputs()[1], torch.rand(30)),
        TypeError,
        r"`labels` must hold integer class indices, got dtype torch.float32",
        id="temperature-float-labels",
    ),
    pytest.param(
        lambda: fit_temperature(_outputs()[1], _outputs()[2] + 1),
        ValueError,
        r"`labels` must lie in \[0, 3\) for logits of K = 3 classes, got values in \[1, 3\]",
        id="temperature-labels-out-of-range",
    ),
    pytest.param(
        lambda: fit_temperature(torch.full((30, 3), float("nan")), _outputs()[2]),
        ValueError,
        r"`logits` contains 90 NaN/inf",
        id="temperature-nan-logits",
    ),
    pytest.param(
        lambda: fit_temperature(*_outputs()[1:], bounds=(20.0, 0.05)),
        ValueError,
        r"`bounds` must have low <= high, got \(20.0, 0.05\)",
        id="temperature-bounds-reversed",
    ),
    pytest.param(
        lambda: fit_temperature(*_outputs()[1:], bounds=(0.0, 5.0)),
        ValueError,
        r"`bounds\[0\]` must be > 0, got 0.0",
        id="temperature-bounds-zero",
    ),
    pytest.param(
        lambda: fit_temperature(*_outputs()[1:], steps=0),
        ValueError,
        r"`steps` must be >= 1, got 0",
        id="temperature-steps-zero",
    ),
    pytest.param(
        lambda: fit_temperature(*_outputs()[1:], steps=True),
        TypeError,
        r"`steps` must be an int, got True",
        id="temperature-steps-bool",
    ),
    # -- scorer options ----------------------------------------------------------------------
    pytest.param(
        lambda: PMIScorer(weight_decay=True),
        TypeError,
        r"`weight_decay` must be a real number, got True",
        id="pmi-weight-decay-bool",
    ),
    pytest.param(
        lambda: PVIScorer(weight_decay=float("nan")),
        ValueError,
        r"`weight_decay` must be finite, got nan",
        id="pvi-weight-decay-nan",
    ),
    pytest.param(
        lambda: PMIScorer(weight_decay=-0.1),
        ValueError,
        r"`weight_decay` must be >= 0, got -0.1",
        id="pmi-weight-decay-negative",
    ),
    pytest.param(
        lambda: MSPScorer(temperature_scaled="no"),
        TypeError,
        r"`temperature_scaled` must be True or False, got 'no'",
        id="msp-temperature-scaled-str",
    ),
    # -- metrics: scores in the label slot (0/1 floats are flags, other floats are refused) ----
    pytest.param(
        lambda: F.aurc([0.3, 0.5, 0.1], [0.9, 0.2, 0.4]),
        ValueError,
        r"`correct` must hold only 0/1 or True/False, found \[0.2",
        id="aurc-scores-as-correct",
    ),
    pytest.param(
        lambda: AURC().update(torch.tensor([0.3, 0.5]), torch.tensor([0.7, 0.2])),
        ValueError,
        r"`correct` must hold only 0/1 or True/False",
        id="metric-aurc-scores-as-correct",
    ),
    pytest.param(
        lambda: ExpectedCalibrationError().update(
            torch.tensor([0.3, 0.5]), torch.tensor([0.7, 0.2])
        ),
        ValueError,
        r"`correct` must hold only 0/1 or True/False",
        id="metric-ece-scores-as-correct",
    ),
    # -- the callback ------------------------------------------------------------------------
    pytest.param(
        lambda: PosthocScoring(fit_on="test", evaluate_on="test"),
        ValueError,
        r"`fit_on` and `evaluate_on` are both 'test'.*fit on another split",
        id="fit-on-equals-evaluate-on",
    ),
    pytest.param(
        lambda: PosthocScoring(scorers="MSP"),
        TypeError,
        r"`scorers` must be a list of scorers, got 'MSP'",
        id="scorers-bare-str",
    ),
    pytest.param(
        lambda: PosthocScoring(scorers=MSPScorer()),
        TypeError,
        r"`scorers` must be a list of scorers.*scorers=\[MSPScorer\(\)\]",
        id="scorers-one-scorer",
    ),
    pytest.param(
        lambda: PosthocScoring(scorers=[]),
        ValueError,
        r"`scorers` is empty; pass at least one scorer, or None",
        id="scorers-empty",
    ),
    pytest.param(
        lambda: PosthocScoring(scorers=[MSPScorer(), MSPScorer()]),
        ValueError,
        r"several scorers named \['MSP'\]",
        id="scorers-repeated-names",
    ),
    pytest.param(
        lambda: PosthocScoring(head=2),
        TypeError,
        r"`head` must be the name of a submodule \(a str\) or None, got 2",
        id="head-int",
    ),
    pytest.param(
        lambda tmp_path: _fit(
            tmp_path, PosthocScoring(scorers=[MSPScorer()]), _Splits(empty="val")
        ),
        ValueError,
        r"the 'val' loader yields no batches \(the split is empty\)",
        id="fit-split-empty",
    ),
    pytest.param(
        lambda tmp_path: _fit(
            tmp_path, PosthocScoring(scorers=[MSPScorer()]), _Splits(missing="val")
        ),
        ValueError,
        r"reads the 'val' split, but _Splits has no `val_dataloader`",
        id="fit-split-without-loader",
    ),
    pytest.param(
        lambda tmp_path: _fit(
            tmp_path, PosthocScoring(scorers=[MSPScorer()]), _Splits(empty="test")
        ),
        ValueError,
        r"the 'test' loader yields no batches",
        id="evaluate-split-empty",
    ),
    pytest.param(
        lambda tmp_path: _fit(tmp_path, PosthocScoring(scorers=[MSPScorer()]), model=_TwoHeads()),
        ValueError,
        r"the model returns the outputs of several nn.Linear layers \['net.2', 'aux'\].*"
        r"pass `head=`",
        id="head-ambiguous-two-returned-layers",
    ),
    pytest.param(
        _without_matplotlib,
        ImportError,
        r"The figures of PosthocScoring need the optional dependency matplotlib.*"
        r"lightning-info\[plots\]",
        id="output-dir-without-plots-extra",
    ),
    pytest.param(
        _output_dir_is_a_file,
        ValueError,
        r"`output_dir` .*report' is a file, not a folder",
        id="output-dir-is-a-file",
    ),
    pytest.param(
        lambda: F.top_label_confidence("0.2,0.8", torch.tensor([1])),
        TypeError,
        r"`probs` must be a floating-point \(N, K\) tensor, got str",
        id="top-label-confidence-probs-text",
    ),
    pytest.param(
        lambda: F.top_label_confidence(torch.tensor([[0.2, 0.8]]), torch.tensor([1.0])),
        TypeError,
        r"`labels` must hold integer classes, got dtype torch.float32",
        id="top-label-confidence-float-labels",
    ),
    pytest.param(
        lambda: F.top_label_confidence(torch.tensor([[0.2, 0.8]]), torch.tensor([True])),
        TypeError,
        r"`labels` must hold integer classes, got dtype torch.bool",
        id="top-label-confidence-bool-labels",
    ),
    pytest.param(
        lambda: F.top_label_confidence(torch.tensor([[float("nan"), 0.8]]), torch.tensor([1])),
        ValueError,
        r"`probs` must hold probabilities in \[0, 1\]; apply softmax",
        id="top-label-confidence-nan-probs",
    ),
    pytest.param(
        lambda: F.top_label_confidence(torch.tensor([[0.2, 0.8]]), torch.tensor([2])),
        ValueError,
        r"`labels` must lie in \[0, 2\)",
        id="top-label-confidence-label-out-of-range",
    ),
    pytest.param(
        lambda: F.top_label_confidence(torch.tensor([[0.2, 0.8]]), torch.tensor([1, 0])),
        ValueError,
        r"`probs` and `labels` must have the same length, got 1 and 2",
        id="top-label-confidence-length-mismatch",
    ),
    pytest.param(
        lambda: F.top_label_confidence(torch.zeros(0, 2), torch.zeros(0, dtype=torch.long)),
        ValueError,
        r"`probs` is empty",
        id="top-label-confidence-empty",
    ),
]


def test_valid_input_still_works(tmp_path):
    scorer = _reload(
        PSIScorer(num_directions=3, bins=4), PSIScorer(num_directions=3, bins=4), tmp_path
    )
    features, logits, labels = _outputs()
    assert scorer.score(features, logits).shape == (30,)
    bool_labels = PSIScorer(num_directions=3).fit(features, logits[:, :2], labels % 2 == 0)
    assert bool_labels.score(features, logits[:, :2]).shape == (30,)
    assert F.failure_auroc([0.3, 0.5], [True, False]).item() == 0.0
    assert F.failure_auroc([0.3, 0.5], [0, 1]).item() == 1.0
    assert PosthocScoring(fit_on="train", evaluate_on="val").fit_description == "train"
