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
from lightning_info.methods.pointwise_confidence.metrics import AURC, ExpectedCalibrationError
from lightning_info.methods.pointwise_confidence.scorers import (
    MSPScorer,
    PMIScorer,
    PSIScorer,
    PVIScorer,
    fit_temperature,
)
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


BAD_INPUT = [
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
