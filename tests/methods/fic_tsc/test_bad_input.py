"""Bad input to the FIC-TSC entry points fails early with a message naming the argument."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from lightning.pytorch import LightningDataModule, Trainer
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from lightning_info.methods.fic_tsc.callback import FisherConstraint, Lookahead
from lightning_info.methods.fic_tsc.datamodule import (
    UCRUEADataModule,
    available_bundled_datasets,
    load_bundled_dataset,
)
from lightning_info.methods.fic_tsc.functional import (
    constrain_fisher_trace_,
    fisher_penalty,
    gradient_norm,
)
from lightning_info.methods.fic_tsc.module import InceptionTimeClassifier
from lightning_info.methods.fic_tsc.monitor_callback import FisherMonitor
from lightning_info.methods.fic_tsc.networks import (
    InceptionModule,
    InceptionTime,
    inception_kernel_sizes,
)
from lightning_info.methods.fic_tsc.penalty import (
    FisherPenalty,
    FisherPenaltyMixin,
    double_backward_attention,
)
from lightning_info.methods.fic_tsc.shift import ShiftOptions, apply_shift, rescale
from tests.tiny import QUIET, TinyClassifier

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


class _TwoOptimizers(TinyClassifier):
    def configure_optimizers(self):
        return [
            torch.optim.SGD(self.net[0].parameters()),
            torch.optim.SGD(self.net[2].parameters()),
        ]

    def training_step(self, batch, batch_idx):  # manual: never reached, refused at train start
        return None


def _monitor_fit(model, monitor=None):
    from tests.tiny import TinyDataModule

    model.automatic_optimization = not isinstance(model, _TwoOptimizers)
    trainer = Trainer(**QUIET, max_steps=1, callbacks=[monitor or FisherMonitor()])
    trainer.fit(model, datamodule=TinyDataModule())


class _OutsideTensor(TinyClassifier):
    def configure_optimizers(self):
        return torch.optim.SGD([*self.parameters(), nn.Parameter(torch.zeros(2, 5))], lr=0.1)


def _monitor_state(**changes):
    state = {"group_names": ["net.0"], "num_steps": 2, "trace_sums": [1.0], "num_binding": 1}
    return {**state, **changes}


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


def _network(**kwargs):
    torch.manual_seed(0)
    return InceptionTime(1, num_filters=2, depth=1, kernel_size=8, **kwargs)


def _square_loss():
    parameter = nn.Parameter(torch.ones(2))
    return (parameter**2).sum(), [parameter]


def _penalise(step):
    loss, parameters = _square_loss()
    return FisherPenalty()(loss, parameters, step)


class _PenalisedManual(FisherPenaltyMixin, TinyClassifier):
    def __init__(self):
        super().__init__()
        self.automatic_optimization = False


class _ReturnsLogits(TinyClassifier):
    def training_step(self, batch, batch_idx):
        return {"logits": self(batch[0])}


class _PenalisedNoLoss(FisherPenaltyMixin, _ReturnsLogits):
    pass


def _mixin_step(model):
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
    return model.training_step((x, torch.tensor([0, 1, 2, 0])), 0)


BAD_INPUT = [
    pytest.param(
        lambda: FisherMonitor(every_n_steps=0),
        ValueError,
        r"`every_n_steps` must be >= 1, got 0",
        id="fisher-monitor-zero-cadence",
    ),
    pytest.param(
        lambda: FisherMonitor(every_n_steps=True),
        TypeError,
        r"`every_n_steps` must be an int",
        id="fisher-monitor-bool-cadence",
    ),
    pytest.param(
        lambda: FisherMonitor(depth=2.0),
        TypeError,
        r"`depth` must be an int",
        id="fisher-monitor-float-depth",
    ),
    pytest.param(
        lambda: FisherMonitor(depth=1, groups={"a": ["net."]}),
        ValueError,
        r"pass `groups` or `depth`, not both",
        id="fisher-monitor-groups-and-depth",
    ),
    pytest.param(
        lambda: FisherMonitor(groups=["net.0"]),
        TypeError,
        r"`groups` must be a non-empty mapping",
        id="fisher-monitor-groups-list",
    ),
    pytest.param(
        lambda: FisherMonitor(groups={"a": [""]}),
        TypeError,
        r"`groups\['a'\]` must hold non-empty str prefixes",
        id="fisher-monitor-empty-prefix",
    ),
    pytest.param(
        lambda: FisherMonitor(max_fisher=-1.0),
        ValueError,
        r"FisherMonitor needs max_fisher > 0, got -1.0",
        id="fisher-monitor-negative-bound",
    ),
    pytest.param(
        lambda: FisherMonitor(max_fisher=True),
        TypeError,
        r"`max_fisher` must be a number or a lightning_info Schedule, got True",
        id="fisher-monitor-bool-bound",
    ),
    pytest.param(
        lambda: FisherMonitor(log_prefix=""),
        TypeError,
        r"`log_prefix` must be a non-empty str",
        id="fisher-monitor-empty-prefix-name",
    ),
    pytest.param(
        lambda: FisherMonitor().load_state_dict(_monitor_state(num_binding=3)),
        ValueError,
        r"not a FisherMonitor checkpoint state",
        id="fisher-monitor-load-more-binding-than-steps",
    ),
    pytest.param(
        lambda: FisherMonitor().load_state_dict(_monitor_state(trace_sums=[1.0, 2.0])),
        ValueError,
        r"names and sums do not match",
        id="fisher-monitor-load-other-lengths",
    ),
    pytest.param(
        lambda: FisherMonitor().load_state_dict(_monitor_state(trace_sums=["1"])),
        TypeError,
        r"`trace_sums` must be floats",
        id="fisher-monitor-load-str-sums",
    ),
    pytest.param(
        lambda: _monitor_fit(_TwoOptimizers()),
        ValueError,
        r"measures one optimizer's gradient; the module configures 2",
        id="fisher-monitor-two-optimizers",
    ),
    pytest.param(
        lambda: _monitor_fit(_OutsideTensor()),
        ValueError,
        r"updates a tensor of shape \(2, 5\) that is not a parameter of the module",
        id="fisher-monitor-tensor-outside-the-module",
    ),
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
        lambda: _classifier(validate_args=True).training_step(
            (_series(2), torch.tensor([0, 5])), 0
        ),
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
    pytest.param(
        lambda: load_bundled_dataset("gunpoint"),
        ValueError,
        r"Unknown bundled data set 'gunpoint'\. Available: .*GunPoint",
        id="bundled-wrong-case-name",
    ),
    pytest.param(
        lambda: load_bundled_dataset(None),
        ValueError,
        r"Unknown bundled data set None\. Available:",
        id="bundled-name-none",
    ),
    pytest.param(
        lambda: load_bundled_dataset(3),
        ValueError,
        r"Unknown bundled data set 3\. Available:",
        id="bundled-name-int",
    ),
    pytest.param(
        lambda: available_bundled_datasets(True),
        TypeError,
        r"takes 0 positional arguments",
        id="bundled-list-takes-no-arguments",
    ),
    pytest.param(
        lambda: inception_kernel_sizes(True),
        TypeError,
        r"`kernel_size` must be an int, got True",
        id="kernel-sizes-bool",
    ),
    pytest.param(
        lambda: inception_kernel_sizes(40.0),
        TypeError,
        r"`kernel_size` must be an int, got 40.0",
        id="kernel-sizes-float",
    ),
    pytest.param(
        lambda: inception_kernel_sizes(3),
        ValueError,
        r"`kernel_size` must be >= 4, got 3",
        id="kernel-sizes-too-small",
    ),
    pytest.param(
        lambda: _network(use_residual="no"),
        TypeError,
        r"`use_residual` must be True or False, got 'no'",
        id="inception-time-residual-str",
    ),
    pytest.param(
        lambda: _network()(_series(2, torch.float64)),
        TypeError,
        r"`x` has dtype torch.float64 but the model's weights are torch.float32; pass "
        r"`x.to\(torch.float32\)`",
        id="inception-time-float64-input",
    ),
    pytest.param(
        lambda: _network()(torch.ones(2, 1, 16, dtype=torch.long)),
        TypeError,
        r"`x` has dtype torch.int64 but the model's weights are torch.float32",
        id="inception-time-integer-input",
    ),
    pytest.param(
        lambda: _network()(torch.ones(2, 16)),
        ValueError,
        r"InceptionTime expects input of shape \(batch, 1, length\) with length >= 1, got "
        r"\(2, 16\)",
        id="inception-time-2d-input",
    ),
    pytest.param(
        lambda: InceptionModule(True, 2, (3,), 2),
        TypeError,
        r"`in_channels` must be an int, got True",
        id="inception-module-bool-channels",
    ),
    pytest.param(
        lambda: InceptionModule(1, 2.0, (3,), 2),
        TypeError,
        r"`num_filters` must be an int, got 2.0",
        id="inception-module-float-filters",
    ),
    pytest.param(
        lambda: InceptionModule(1, 2, (4,), 2),
        ValueError,
        r"`kernel_sizes\[0\]` must be odd so 'same' padding keeps the length, got 4",
        id="inception-module-even-kernel",
    ),
    pytest.param(
        lambda: InceptionModule(1, 2, 3, 2),
        TypeError,
        r"`kernel_sizes` must be a sequence of odd ints, got 3",
        id="inception-module-bare-kernel",
    ),
    pytest.param(
        lambda: InceptionModule(1, 2, (), 2),
        ValueError,
        r"`kernel_sizes` must hold at least one kernel size",
        id="inception-module-no-kernels",
    ),
    pytest.param(
        lambda: InceptionModule(2, 2, (3,), 0),
        ValueError,
        r"`bottleneck_channels` must be >= 1, got 0",
        id="inception-module-zero-bottleneck",
    ),
    pytest.param(
        lambda: InceptionModule(2, 2, (3,), 2)(_series(2)),
        ValueError,
        r"InceptionModule expects input of shape \(batch, 2, length\) with length >= 1, got "
        r"\(2, 1, 16\)",
        id="inception-module-other-channels",
    ),
    pytest.param(
        lambda: FisherPenalty(weight=float("nan")),
        ValueError,
        r"`weight` must be finite, got nan",
        id="fisher-penalty-nan-weight",
    ),
    pytest.param(
        lambda: FisherPenalty(weight=True),
        TypeError,
        r"`weight` must be a number or a lightning_info Schedule, got True",
        id="fisher-penalty-bool-weight",
    ),
    pytest.param(
        lambda: FisherPenalty(max_fisher=-1.0),
        ValueError,
        r"`max_fisher` must be >= 0, got -1.0",
        id="fisher-penalty-negative-bound",
    ),
    pytest.param(
        lambda: _penalise(1.5),
        TypeError,
        r"`step` must be an int, got 1.5",
        id="fisher-penalty-float-step",
    ),
    pytest.param(
        lambda: _penalise(True),
        TypeError,
        r"`step` must be an int, got True",
        id="fisher-penalty-bool-step",
    ),
    pytest.param(
        lambda: FisherPenalty()(1.0, _square_loss()[1]),
        TypeError,
        r"`loss` must be a torch.Tensor, got float",
        id="fisher-penalty-float-loss",
    ),
    pytest.param(
        lambda: _mixin_step(_PenalisedManual()),
        RuntimeError,
        r"FisherPenaltyMixin adds to the loss returned by training_step, which manual "
        r"optimization does not use",
        id="fisher-penalty-mixin-manual-optimization",
    ),
    pytest.param(
        lambda: _mixin_step(_PenalisedNoLoss()),
        TypeError,
        r"needs training_step to return a loss tensor or a dict with 'loss', got dict",
        id="fisher-penalty-mixin-no-loss",
    ),
    pytest.param(
        lambda: double_backward_attention(True),
        TypeError,
        r"takes 0 positional arguments",
        id="double-backward-attention-takes-no-arguments",
    ),
    pytest.param(
        lambda: gradient_norm(nn.Linear(2, 2)),
        TypeError,
        r"`parameters` must be a tensor or an iterable of tensors, got Linear; pass e.g. "
        r"`model.parameters\(\)`",
        id="gradient-norm-module-not-parameters",
    ),
    pytest.param(
        lambda: gradient_norm("weight"),
        TypeError,
        r"`parameters` must be a tensor or an iterable of tensors, got str",
        id="gradient-norm-text",
    ),
    pytest.param(
        lambda: gradient_norm(None),
        TypeError,
        r"`parameters` must be a tensor or an iterable of tensors, got NoneType",
        id="gradient-norm-none",
    ),
    pytest.param(
        lambda: gradient_norm([1.0, 2.0]),
        TypeError,
        r"`parameters\[0\]` must be a tensor, got float",
        id="gradient-norm-floats-not-tensors",
    ),
]
