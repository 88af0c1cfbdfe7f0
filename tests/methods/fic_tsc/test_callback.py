"""FisherConstraint inside a Trainer: placement, accumulation, AMP, schedules, logging, errors."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from lightning.pytorch import Callback, Trainer, seed_everything
from lightning.pytorch.plugins import MixedPrecision
from lightning.pytorch.strategies import (
    DDPStrategy,
    DeepSpeedStrategy,
    FSDPStrategy,
    ModelParallelStrategy,
)

from lightning_info import FisherConstraint, LinearSchedule
from lightning_info.core.strategies import gradient_norm_source, require_replicated_gradients
from tests.tiny import QUIET, TinyClassifier, TinyDataModule


class GradientSpy(Callback):
    """Records the gradients the optimizer is about to use, at its position in the callback list."""

    def __init__(self):
        self.steps: list[list[torch.Tensor]] = []

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        self.steps.append([p.grad.detach().clone() for p in pl_module.parameters()])

    def traces(self) -> list[float]:
        return [sum(float(g.double().pow(2).sum()) for g in step) for step in self.steps]


def _fit(callbacks, *, model=None, batch_size=8, **kwargs):
    seed_everything(0)
    model = model or TinyClassifier()
    trainer = Trainer(callbacks=callbacks, **{**QUIET, **kwargs})
    trainer.fit(model, datamodule=TinyDataModule(batch_size=batch_size))
    return trainer, model


def _manual_gradients(model, batches):
    """Mean gradient over ``batches`` computed by hand, as accumulation should produce it."""
    model.zero_grad()
    for x, y in batches:
        (torch.nn.functional.cross_entropy(model(x), y) / len(batches)).backward()
    return [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("max_fisher", [1e-3, 1e-1, 1e3])
def test_first_step_equals_clip_grad_norm_of_the_hand_computed_gradient(max_fisher):
    seed_everything(0)
    reference_model = TinyClassifier()
    data = TinyDataModule(batch_size=8)
    batch = next(iter(data.train_dataloader()))
    params = list(reference_model.parameters())
    grads = _manual_gradients(reference_model, [batch])
    torch.nn.utils.clip_grad_norm_(params, math.sqrt(max_fisher))
    expected = [p.grad for p in params]

    spy = GradientSpy()
    _fit([FisherConstraint(max_fisher=max_fisher), spy], max_steps=1)
    for seen, want, raw in zip(spy.steps[0], expected, grads):
        torch.testing.assert_close(seen, want, rtol=0, atol=1e-6)
        if max_fisher == 1e3:
            torch.testing.assert_close(seen, raw, rtol=0, atol=0)


def test_acts_once_per_optimizer_step_under_gradient_accumulation():
    raw_spy, constrained_spy = GradientSpy(), GradientSpy()
    constraint = FisherConstraint(max_fisher=1e-3)
    trainer, _ = _fit(
        [raw_spy, constraint, constrained_spy], max_steps=3, accumulate_grad_batches=2, batch_size=4
    )
    assert trainer.global_step == 3
    assert constraint.num_steps == 3 and len(raw_spy.steps) == 3

    seed_everything(0)
    reference_model = TinyClassifier()
    loader = iter(TinyDataModule(batch_size=4).train_dataloader())
    grads = _manual_gradients(reference_model, [next(loader), next(loader)])
    for seen, want in zip(raw_spy.steps[0], grads):
        torch.testing.assert_close(seen, want, rtol=1e-5, atol=1e-7)
    for trace in constrained_spy.traces():
        assert trace == pytest.approx(1e-3, rel=1e-4)


def test_sees_unscaled_gradients_under_amp_grad_scaler():
    scale = 2.0**12
    precision = MixedPrecision(
        "16-mixed", "cpu", scaler=torch.amp.GradScaler("cpu", init_scale=scale)
    )
    amp_trainer, _ = _fit([FisherConstraint(max_fisher=1e-2)], max_steps=1, plugins=[precision])
    assert precision.scaler.get_scale() == scale
    fp32_trainer, _ = _fit([FisherConstraint(max_fisher=1e-2)], max_steps=1)
    amp_trace = amp_trainer.callback_metrics["fisher/trace_before"].item()
    fp32_trace = fp32_trainer.callback_metrics["fisher/trace_before"].item()
    assert amp_trace == pytest.approx(fp32_trace, rel=2e-2)
    assert amp_trainer.callback_metrics["fisher/trace_after"].item() == pytest.approx(
        1e-2, rel=1e-3
    )


def test_schedule_sets_the_bound_of_each_step():
    schedule = LinearSchedule(1e-1, 1e-3, 4)
    raw_spy, constrained_spy = GradientSpy(), GradientSpy()
    _fit([raw_spy, FisherConstraint(max_fisher=schedule), constrained_spy], max_steps=6)
    for step, (raw, constrained) in enumerate(zip(raw_spy.traces(), constrained_spy.traces())):
        assert constrained == pytest.approx(min(raw, schedule(step)), rel=1e-4)


def test_logs_traces_and_the_fraction_of_constrained_steps():
    raw_spy = GradientSpy()
    constraint = FisherConstraint(max_fisher=2.0)
    trainer, _ = _fit([raw_spy, constraint], max_epochs=3)
    raw = raw_spy.traces()
    expected_fraction = sum(t > 2.0 for t in raw) / len(raw)
    assert 0 < expected_fraction < 1, "pick a bound that binds on some steps only"
    assert constraint.constrained_fraction == pytest.approx(expected_fraction)
    last_epoch = raw[-8:]
    metrics = trainer.callback_metrics
    assert metrics["fisher/constrained_fraction"].item() == pytest.approx(
        sum(t > 2.0 for t in last_epoch) / 8
    )
    assert metrics["fisher/trace_before"].item() == pytest.approx(raw[-1], rel=1e-5)
    assert metrics["fisher/trace_after"].item() == pytest.approx(min(raw[-1], 2.0), rel=1e-5)
    assert metrics["fisher/max_fisher"].item() == pytest.approx(2.0)
    assert constraint.state_dict() == {
        "num_steps": 24,
        "num_constrained": round(expected_fraction * 24),
        "num_skipped": 0,
    }


@pytest.mark.parametrize("bad", [0.0, -2.0, float("nan"), float("inf"), "2.0", True])
def test_rejects_invalid_bounds_at_construction(bad):
    with pytest.raises((ValueError, TypeError), match="max_fisher|value|real number"):
        FisherConstraint(max_fisher=bad)


def test_rejects_a_schedule_that_reaches_zero_before_the_step_is_taken():
    with pytest.raises(ValueError, match="max_fisher > 0"):
        _fit([FisherConstraint(max_fisher=LinearSchedule(1.0, 0.0, 2))], max_steps=4)


def test_replicated_gradient_check_refuses_sharded_strategies():
    trainer = SimpleNamespace(strategy=FSDPStrategy())
    with pytest.raises(RuntimeError, match="FSDPStrategy.*DDP"):
        require_replicated_gradients(trainer, "FisherConstraint")


def test_gradient_norm_source_per_strategy():
    def source(strategy):
        return gradient_norm_source(SimpleNamespace(strategy=strategy), "FisherConstraint")

    assert source(FSDPStrategy()) == "fsdp"
    assert source(ModelParallelStrategy()) == "gradients"
    assert source(DDPStrategy()) == "gradients"
    with pytest.raises(RuntimeError, match="DeepSpeed.*FSDP"):
        source(object.__new__(DeepSpeedStrategy))  # no deepspeed needed to be refused
    with pytest.raises(RuntimeError, match="does not support"):
        source(object())


def _sharded_run(strategy: str, tmp_path) -> dict:
    out = tmp_path / f"{strategy}.json"
    script = Path(__file__).with_name("sharded_run.py")
    done = subprocess.run(
        [sys.executable, str(script), strategy, str(out)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def test_fully_sharded_gradients_give_the_ddp_trace_and_update(tmp_path):
    # FSDP2 under ModelParallelStrategy: DTensor gradient shards, reduced by get_total_norm
    sharded = _sharded_run("model_parallel", tmp_path)
    replicated = _sharded_run("ddp", tmp_path)
    assert len(sharded["traces"]) == 4
    for (before, after), (ddp_before, ddp_after) in zip(sharded["traces"], replicated["traces"]):
        assert before == pytest.approx(ddp_before, rel=1e-5) and before > 1e-4
        assert after == pytest.approx(1e-4, rel=1e-4) and ddp_after == pytest.approx(1e-4, rel=1e-4)
    for name, values in sharded["params"].items():
        torch.testing.assert_close(torch.tensor(values), torch.tensor(replicated["params"][name]))


class TwoOptimizerClassifier(TinyClassifier):
    """Manual optimization with one optimizer per layer, stepped one after the other."""

    def __init__(self):
        super().__init__()
        self.automatic_optimization = False

    def training_step(self, batch, batch_idx):
        x, y = batch
        for optimizer in self.optimizers():
            optimizer.zero_grad()
            self.manual_backward(torch.nn.functional.cross_entropy(self(x), y))
            optimizer.step()

    def configure_optimizers(self):
        first, second = self.net[0], self.net[2]
        return [
            torch.optim.SGD(first.parameters(), lr=0.5),
            torch.optim.SGD(second.parameters(), lr=0.5),
        ]


def test_each_optimizer_is_constrained_on_its_own_parameters():
    constraint = FisherConstraint(max_fisher=1e-3)
    # In manual optimization every optimizer.step() is one global step: 2 batches x 2 optimizers.
    trainer, model = _fit([constraint], model=TwoOptimizerClassifier(), max_steps=4)
    assert constraint.num_steps == 4 and constraint.constrained_fraction == 1.0
    metrics = trainer.callback_metrics
    for index in (0, 1):
        assert metrics[f"fisher/opt{index}/trace_after"].item() == pytest.approx(1e-3, rel=1e-4)
        assert metrics[f"fisher/opt{index}/trace_before"].item() > 1e-3
    # The last step belonged to the second optimizer: only its layer was rescaled.
    last_layer = sum(float(p.grad.double().pow(2).sum()) for p in model.net[2].parameters())
    assert last_layer == pytest.approx(1e-3, rel=1e-4)
