"""FisherMonitor: per-layer traces against gradients computed by hand, running means, the binding
fraction, accumulation, AMP, the logger's cadence, resume and the sharded strategies."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from lightning.pytorch import Callback, Trainer, seed_everything
from lightning.pytorch.loggers import Logger
from lightning.pytorch.plugins import MixedPrecision
from lightning.pytorch.strategies import FSDPStrategy

from lightning_info import FisherConstraint, FisherMonitor
from tests.tiny import QUIET, TinyClassifier, TinyDataModule

LAYERS = ("net.0", "net.2")


class HandTraces(Callback):
    """Per layer ``sum(g^2)`` of the mean loss gradient of each optimizer step's micro-batches,
    computed by autograd on a copy of the model as it is before the step (the oracle)."""

    def __init__(self, accumulate: int = 1):
        self.accumulate, self.batches, self.steps = accumulate, [], []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if not self.batches:
            self.copy = {k: v.detach().clone() for k, v in pl_module.state_dict().items()}
        self.batches.append(batch)
        if len(self.batches) < self.accumulate:
            return
        model = TinyClassifier()
        model.load_state_dict(self.copy)
        loss = sum(torch.nn.functional.cross_entropy(model(x), y) for x, y in self.batches) / len(
            self.batches
        )
        names = [name for name, _ in model.named_parameters()]
        grads = torch.autograd.grad(loss, list(model.parameters()))
        squares = {n: float(g.double().pow(2).sum()) for n, g in zip(names, grads)}
        self.steps.append(
            {
                layer: sum(v for n, v in squares.items() if n.startswith(layer + "."))
                for layer in LAYERS
            }
        )
        self.batches = []


class Recorder(Logger):
    """A logger that keeps every metrics dict it is sent, with its step."""

    def __init__(self):
        super().__init__()
        self.records = []

    name, version = "recorder", 0

    @property
    def experiment(self):
        return None

    def log_hyperparams(self, params, *args, **kwargs):
        pass

    def log_metrics(self, metrics, step=None):
        self.records.append((step, dict(metrics)))


def _fit(callbacks, *, batch_size=8, **kwargs):
    seed_everything(0)
    model = TinyClassifier()
    trainer = Trainer(callbacks=callbacks, **{**QUIET, "logger": Recorder(), **kwargs})
    trainer.fit(model, datamodule=TinyDataModule(batch_size=batch_size))
    return trainer


def test_each_layer_s_trace_and_running_mean_equal_the_hand_computed_gradients():
    hand, monitor = HandTraces(), FisherMonitor(every_n_steps=1)
    _fit([hand, monitor], max_steps=5)
    assert monitor.group_names == list(LAYERS) and monitor.num_steps == 5
    metrics = monitor.last_logged
    for layer in LAYERS:
        per_step = [step[layer] for step in hand.steps]
        assert metrics[f"fisher_monitor/{layer}/trace"] == pytest.approx(per_step[-1], rel=1e-5)
        mean = sum(per_step) / len(per_step)
        assert monitor.trace_means[layer] == pytest.approx(mean, rel=1e-5)
        assert metrics[f"fisher_monitor/{layer}/trace_mean"] == pytest.approx(mean, rel=1e-5)
    total = sum(hand.steps[-1].values())
    assert metrics["fisher_monitor/trace"] == pytest.approx(total, rel=1e-5)


def test_the_whole_trace_is_the_one_fisher_constraint_measures():
    monitor, constraint = FisherMonitor(every_n_steps=1), FisherConstraint(max_fisher=1e9)
    trainer = _fit([monitor, constraint], max_steps=3, log_every_n_steps=1)
    metrics = trainer.callback_metrics
    assert monitor.last_logged["fisher_monitor/trace"] == pytest.approx(
        metrics["fisher/trace_before"].item(), rel=1e-5
    )


def test_the_binding_fraction_counts_the_steps_over_the_bound():
    hand = HandTraces()
    _fit([hand, FisherMonitor(every_n_steps=1)], max_steps=8, log_every_n_steps=1)
    totals = [sum(step.values()) for step in hand.steps]
    bound = sorted(totals)[len(totals) // 2]  # about half the steps exceed it
    expected = sum(t > bound for t in totals) / len(totals)
    assert 0 < expected < 1
    monitor = FisherMonitor(every_n_steps=4, max_fisher=bound)
    _fit([monitor], max_steps=8)
    assert monitor.binding_fraction == pytest.approx(expected)
    assert monitor.last_logged["fisher_monitor/binding_fraction"] == pytest.approx(expected)
    assert monitor.last_logged["fisher_monitor/max_fisher"] == pytest.approx(bound)


def test_one_measure_per_optimizer_step_under_gradient_accumulation():
    hand, monitor = HandTraces(accumulate=2), FisherMonitor(every_n_steps=1)
    _fit([hand, monitor], max_steps=3, accumulate_grad_batches=2, batch_size=4, log_every_n_steps=1)
    assert monitor.num_steps == 3 and len(hand.steps) == 3
    for layer in LAYERS:
        mean = sum(step[layer] for step in hand.steps) / 3
        assert monitor.trace_means[layer] == pytest.approx(mean, rel=1e-5)


def test_sees_unscaled_gradients_under_amp_grad_scaler():
    precision = MixedPrecision(
        "16-mixed", "cpu", scaler=torch.amp.GradScaler("cpu", init_scale=4096.0)
    )
    amp, plain = FisherMonitor(every_n_steps=1), FisherMonitor(every_n_steps=1)
    _fit([amp], max_steps=1, plugins=[precision], log_every_n_steps=1)
    _fit([plain], max_steps=1, log_every_n_steps=1)
    for layer in LAYERS:
        assert amp.trace_means[layer] == pytest.approx(plain.trace_means[layer], rel=2e-2)


def test_reads_nothing_back_without_a_logger():
    monitor = FisherMonitor(every_n_steps=1)
    _fit([monitor], max_steps=2, logger=False)
    assert monitor.last_logged == {} and monitor.num_steps == 2


def test_logs_every_n_steps_only_and_reaches_the_logger():
    recorder = Recorder()
    _fit([FisherMonitor(every_n_steps=4)], max_steps=8, log_every_n_steps=2, logger=recorder)
    logged = [step for step, metrics in recorder.records if "fisher_monitor/trace" in metrics]
    assert logged == [3, 7]  # the 4th and the 8th optimizer step (the logger counts from 0)
    loss_steps = [step for step, metrics in recorder.records if "train/loss" in metrics]
    assert set(logged) <= set(loss_steps)  # the step Lightning logs that batch's loss at
    names = {name for _, metrics in recorder.records for name in metrics}
    assert {f"fisher_monitor/{layer}/trace_mean" for layer in LAYERS} <= names


@pytest.mark.parametrize(
    ("kwargs", "groups"),
    [
        ({"depth": 1}, ["net"]),
        ({"depth": 3}, ["net.0.bias", "net.0.weight", "net.2.bias", "net.2.weight"]),
        ({"groups": {"first": ["net.0."]}}, ["first", "other"]),
    ],
)
def test_groups_by_depth_or_by_prefix_and_the_groups_add_up(kwargs, groups):
    hand, monitor = HandTraces(), FisherMonitor(every_n_steps=1, **kwargs)
    _fit([hand, monitor], max_steps=2, log_every_n_steps=1)
    assert monitor.group_names == groups
    whole = sum(sum(step.values()) for step in hand.steps) / 2
    assert sum(monitor.trace_means.values()) == pytest.approx(whole, rel=1e-5)


def test_state_round_trip_and_a_resume_with_other_groups_is_refused():
    monitor = FisherMonitor(every_n_steps=1)
    _fit([monitor], max_steps=3, log_every_n_steps=1)
    state = monitor.state_dict()
    restored = FisherMonitor(every_n_steps=1)
    restored.load_state_dict(state)
    assert restored.trace_means == monitor.trace_means and restored.num_steps == 3
    other = FisherMonitor(every_n_steps=1, depth=1)
    other.load_state_dict(state)
    with pytest.raises(ValueError, match=r"measured the groups \['net.0', 'net.2'\], this run's"):
        _fit([other], max_steps=4, log_every_n_steps=1)


def test_refuses_fsdp1_at_setup():
    monitor = FisherMonitor()
    trainer = Trainer(**QUIET, max_steps=1)
    trainer.strategy.__class__ = FSDPStrategy  # only the class is read at setup
    with pytest.raises(RuntimeError, match=r"use ModelParallelStrategy \(FSDP2 fully_shard\)"):
        monitor.setup(trainer, TinyClassifier(), "fit")


def _sharded(strategy: str, tmp_path) -> dict:
    out = tmp_path / f"{strategy}.json"
    script = Path(__file__).with_name("monitor_run.py")
    done = subprocess.run(
        [sys.executable, str(script), strategy, str(out)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def test_two_processes_ddp_and_fsdp2_give_the_single_process_traces(tmp_path):
    """Oracle: one process on the combined batches (each rank holds half of each batch)."""
    ddp, fsdp2, single = (_sharded(s, tmp_path) for s in ("ddp", "model_parallel", "single"))
    for run in (ddp, fsdp2):
        assert run["groups"] == single["groups"] == list(LAYERS)
        assert run["num_steps"] == single["num_steps"] == 4
        for name in ("sums", "logged"):
            torch.testing.assert_close(
                torch.tensor(run[name]), torch.tensor(single[name]), rtol=1e-5, atol=0
            )


class FrozenFirstLayer(TinyClassifier):
    def __init__(self):
        super().__init__()
        self.net[0].requires_grad_(False)  # still in the optimizer, never a gradient


def test_a_group_without_gradients_measures_zero():
    monitor = FisherMonitor(every_n_steps=1)
    seed_everything(0)
    trainer = Trainer(callbacks=[monitor], **{**QUIET, "logger": Recorder(), "max_steps": 2})
    trainer.fit(FrozenFirstLayer(), datamodule=TinyDataModule(batch_size=8))
    assert monitor.trace_means["net.0"] == 0.0 and monitor.trace_means["net.2"] > 0
