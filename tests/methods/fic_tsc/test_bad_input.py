"""Bad input to the FIC-TSC entry points fails early with a message naming the argument."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from lightning.pytorch import LightningDataModule, Trainer
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from lightning_info.methods.fic_tsc.callback import FisherConstraint, Lookahead
from lightning_info.methods.fic_tsc.datamodule import UCRUEADataModule
from lightning_info.methods.fic_tsc.functional import constrain_fisher_trace_, fisher_penalty
from lightning_info.methods.fic_tsc.module import InceptionTimeClassifier
from lightning_info.methods.fic_tsc.shift import ShiftOptions, apply_shift, rescale
from tests.tiny import QUIET

aeon = pytest.importorskip("aeon")


def _lookahead_state(**changes):
    return {"k": 5, "alpha": 0.5, "slow": None, "steps": None, **changes}


def _load_lookahead(**changes):
    Lookahead().load_state_dict(_lookahead_state(**changes))


def _resume_lookahead_with_other_shapes():
    model = nn.Linear(2, 1)
    callback = Lookahead()
    callback.load_state_dict(_lookahead_state(slow=[torch.zeros(1, 3), torch.zeros(1)]))
    callback.on_fit_start(None, model)


def _gradient_parameter():
    parameter = nn.Parameter(torch.ones(3))
    parameter.grad = torch.ones(3)
    return parameter


def _classifier(**kwargs):
    torch.manual_seed(0)
    return InceptionTimeClassifier(1, 3, num_filters=4, depth=1, kernel_size=8, **kwargs)


def _series(n=4, dtype=torch.float32):
    return torch.randn(n, 1, 16, generator=torch.Generator().manual_seed(0), dtype=dtype)


class _Series(LightningDataModule):
    """Four series of one channel, with the number of classes a data module tells."""

    def __init__(self, num_classes, num_channels=1):
        super().__init__()
        self.num_classes, self.num_channels = num_classes, num_channels

    def train_dataloader(self):
        labels = torch.arange(4) % self.num_classes
        return DataLoader(TensorDataset(_series(), labels), batch_size=2)


def _fit_on(datamodule):
    Trainer(max_steps=1, **QUIET).fit(_classifier(), datamodule=datamodule)


def _ones():
    return np.ones((2, 1, 3), dtype=np.float32)


BAD_INPUT = [
    pytest.param(
        lambda: _load_lookahead(alpha=7),
        ValueError,
        r"`alpha` .*\(0, 1\), got 7",
        id="lookahead-load-alpha-7",
    ),
    pytest.param(
        lambda: _load_lookahead(k=2.7),
        TypeError,
        r"`k` must be an int, got 2.7",
        id="lookahead-load-float-k",
    ),
    pytest.param(
        lambda: _load_lookahead(k=3),
        ValueError,
        r"saved by Lookahead\(k=3, alpha=0.5\) .* this one is Lookahead\(k=5, alpha=0.5\)",
        id="lookahead-load-other-configuration",
    ),
    pytest.param(
        lambda: _load_lookahead(steps=[1.5]),
        TypeError,
        r"`steps\[0\]` must be an int",
        id="lookahead-load-float-steps",
    ),
    pytest.param(
        _resume_lookahead_with_other_shapes,
        ValueError,
        r"slow tensor 0 has shape \(1, 3\) but parameter 0 has shape \(1, 2\): resume the same",
        id="lookahead-resume-other-shapes",
    ),
    pytest.param(
        lambda: FisherConstraint(max_fisher=True),
        TypeError,
        r"`max_fisher` must be a number or a lightning_info Schedule, got True",
        id="fisher-constraint-bool-bound",
    ),
    pytest.param(
        lambda: FisherConstraint(log_prefix=None),
        TypeError,
        r"`log_prefix` must be a non-empty str, got None",
        id="fisher-constraint-prefix-none",
    ),
    pytest.param(
        lambda: FisherConstraint(skip_non_finite="yes"),
        TypeError,
        r"`skip_non_finite` must be a bool, got 'yes'",
        id="fisher-constraint-skip-str",
    ),
    pytest.param(
        lambda: FisherConstraint().load_state_dict({"num_steps": 2, "num_constrained": 5}),
        ValueError,
        r"counts 5 constrained of 2 steps",
        id="fisher-constraint-load-inconsistent-counts",
    ),
    pytest.param(
        lambda: constrain_fisher_trace_([_gradient_parameter()], True),
        TypeError,
        r"`max_fisher` must be a real number, got True",
        id="constrain-bool-bound",
    ),
    pytest.param(
        lambda: fisher_penalty((nn.Parameter(torch.ones(2)) ** 2).sum(), [], max_fisher=True),
        TypeError,
        r"`max_fisher` must be a real number, got True",
        id="penalty-bool-bound",
    ),
    pytest.param(
        lambda: _classifier().training_step((_series(2), torch.tensor([0, 5])), 0),
        ValueError,
        r"`y` must hold class indices in \[0, 3\), got values in \[0, 5\]",
        id="classifier-label-out-of-range",
    ),
    pytest.param(
        lambda: _classifier().training_step((_series(2), torch.tensor([0.0, 1.0])), 0),
        TypeError,
        r"`y` must hold integer class indices, got dtype torch.float32; pass `y.long\(\)`",
        id="classifier-float-labels",
    ),
    pytest.param(
        lambda: _classifier()(_series(2, torch.float64)),
        TypeError,
        r"`x` has dtype torch.float64 but the model's weights are torch.float32; pass "
        r"`x.to\(torch.float32\)`",
        id="classifier-float64-input",
    ),
    pytest.param(
        lambda: _classifier(validate_args=1),
        TypeError,
        r"`validate_args` must be a bool, got 1",
        id="classifier-validate-args-int",
    ),
    pytest.param(
        lambda: _fit_on(_Series(num_classes=5)),
        ValueError,
        r"data module has 5 classes but the model was built for `num_classes`=3",
        id="classifier-datamodule-more-classes",
    ),
    pytest.param(
        lambda: _fit_on(_Series(num_classes=3, num_channels=3)),
        ValueError,
        r"data module has 3 channels but the model was built for `in_channels`=1",
        id="classifier-datamodule-other-channels",
    ),
    pytest.param(
        lambda: apply_shift(_ones(), ShiftOptions("scale", 1e300)),
        ValueError,
        r"shift 'scale x1e\+300' makes 6 value\(s\) of the float32 inputs non-finite; choose "
        r"a smaller magnitude",
        id="shift-scale-overflow",
    ),
    pytest.param(
        lambda: apply_shift(_ones(), ShiftOptions("offset", -1e308)),
        ValueError,
        r"makes 6 value\(s\) of the float32 inputs non-finite",
        id="shift-offset-overflow",
    ),
    pytest.param(
        lambda: apply_shift(_ones(), ShiftOptions("noise", 1e300)),
        ValueError,
        r"shift 'noise 1e\+300' makes .* non-finite",
        id="shift-noise-overflow",
    ),
    pytest.param(
        lambda: rescale(np.arange(3), 1.5),
        TypeError,
        r"`x` must be a floating-point array, got int64; convert it first",
        id="shift-integer-inputs",
    ),
    pytest.param(
        lambda: apply_shift(_ones(), "scale"),
        TypeError,
        r"`shift` must be a ShiftOptions or None, got str; e.g. ShiftOptions\('scale', 2.0\)",
        id="shift-given-as-str",
    ),
    pytest.param(
        lambda: UCRUEADataModule(test_shift=ShiftOptions("scale", 1e300)).setup(),
        ValueError,
        r"shift 'scale x1e\+300' makes .* non-finite",
        id="datamodule-shift-overflow",
    ),
]
