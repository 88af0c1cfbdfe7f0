"""The monitor's default layer is the last ``nn.Linear`` *applied* in the forward pass, not the
last one registered (issue 35: a head registered before its body was measured at the body's
first Linear, on the raw inputs)."""

from __future__ import annotations

import pytest
import torch
from lightning.pytorch import Trainer
from torch import nn

from lightning_info.core.logging import metric_key
from lightning_info.methods.smoothed_information.callback import SmoothedInformationMonitor
from lightning_info.methods.smoothed_information.functional import (
    SmoothedEstimatorOptions,
    smoothed_information,
)
from tests.tiny import QUIET, TinyClassifier, TinyDataModule


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_torch_thread): ...


class HeadRegisteredFirst(TinyClassifier):
    """``head`` is registered before ``body`` but applied after it: the last registered Linear
    is ``body.0`` (its input: the raw features), the last applied one ``head``."""

    def __init__(self):
        super().__init__()
        del self.net
        torch.manual_seed(0)
        self.head = nn.Linear(16, 3)
        self.body = nn.Sequential(nn.Linear(6, 16), nn.Tanh())

    def forward(self, x):
        return self.head(self.body(x))


class NoLinearInValidation(HeadRegisteredFirst):
    def validation_step(self, batch, batch_idx):
        self.log("val/zero", torch.zeros(()))


def _fit(layers, sanity_steps=0, model=None, **kwargs):
    monitor = SmoothedInformationMonitor(
        layers, t=0.5, max_dim=4, options=SmoothedEstimatorOptions(num_mc=128), **kwargs
    )
    trainer = Trainer(
        max_epochs=1,
        limit_train_batches=2,
        num_sanity_val_steps=sanity_steps,
        callbacks=[monitor],
        **QUIET,
    )
    trainer.fit(model or HeadRegisteredFirst(), TinyDataModule())
    return trainer.callback_metrics, monitor


@pytest.mark.parametrize("sanity_steps", [0, 2])
def test_the_default_is_the_input_of_the_last_applied_linear(sanity_steps):
    default, monitor = _fit(None, sanity_steps)
    named, _ = _fit("body.1")
    assert not any(key.startswith("info/input_of_body.0") for key in default)
    for symbol in ("J", "h", "I"):
        assert float(default[metric_key("info/input_of_head", f"{symbol}_t=0.5")]) == float(
            named[metric_key("info/body.1", f"{symbol}_t=0.5")]
        )
    assert list(monitor._targets) == ["input_of_head"]
    assert not monitor._tracers and not monitor._handles  # every hook removed


def test_the_default_on_a_probe_reads_the_heads_input():
    probe = torch.randn(40, 6, generator=torch.Generator().manual_seed(1))
    model = HeadRegisteredFirst()
    logged, _ = _fit(None, model=model, probe=probe)
    with torch.no_grad():
        features = model.eval().body(probe)
    projection = SmoothedInformationMonitor(max_dim=4)._projection("x", 16)
    info = smoothed_information(
        features.double() @ projection, 0.5, SmoothedEstimatorOptions(num_mc=128)
    )
    assert float(logged["info/input_of_head/j_t_0.5"]) == pytest.approx(
        float(info.fisher), rel=1e-6
    )


def test_no_linear_in_the_validation_step_is_refused_before_training():
    model = NoLinearInValidation()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match="no nn.Linear ran in the validation step.*`layers=`"):
        _fit(None, sanity_steps=1, model=model)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
