"""Inputs that used to give a silently wrong answer now give the right one: a Lookahead state is
a snapshot, a non-finite step leaves the weights and the optimizer alone, shifts stay finite."""

from __future__ import annotations

import math
from types import SimpleNamespace
from unittest import mock

import numpy as np
import pytest
import torch
from lightning.pytorch import Callback, Trainer, seed_everything
from torch.utils.data import DataLoader, TensorDataset

from lightning_info.core.schedules import LinearSchedule
from lightning_info.methods.fic_tsc.callback import FisherConstraint, Lookahead
from lightning_info.methods.fic_tsc.functional import (
    constrain_fisher_trace_,
    fisher_penalty,
    gradient_norm,
)
from lightning_info.methods.fic_tsc.networks import InceptionTime
from lightning_info.methods.fic_tsc.penalty import FisherPenalty, double_backward_attention
from lightning_info.methods.fic_tsc.shift import ShiftOptions, apply_shift
from tests.tiny import QUIET, TinyClassifier

HOST_READS = ("item", "tolist", "cpu", "__bool__", "__int__", "__float__")


def test_a_saved_lookahead_state_does_not_follow_the_live_weights():
    callback = Lookahead(k=2, alpha=0.5)
    callback.slow, callback.steps = [torch.zeros(3)], [1]
    saved = callback.state_dict()
    callback.slow[0].add_(1.0)
    callback.steps[0] += 1
    torch.testing.assert_close(saved["slow"][0], torch.zeros(3))
    assert saved["steps"] == [1]
    restored = Lookahead(k=2, alpha=0.5)
    restored.load_state_dict(saved)
    saved["slow"][0].add_(5.0)
    torch.testing.assert_close(restored.slow[0], torch.zeros(3))


def _batches(nan_batch: int | None):
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(32, 6, generator=generator)
    y = torch.randint(0, 3, (32,), generator=generator)
    if nan_batch is not None:
        x[8 * nan_batch] = float("nan")
    return DataLoader(TensorDataset(x, y), batch_size=8)


class _StateSpy(Callback):
    """The weights and the optimizer state before and after each training batch."""

    def __init__(self):
        self.before, self.after = [], []

    @staticmethod
    def _state(trainer, module):
        weights = [p.detach().clone() for p in module.parameters()]
        moments = [
            s["momentum_buffer"].clone() if s.get("momentum_buffer") is not None else None
            for s in trainer.optimizers[0].state.values()
        ]
        return weights, moments

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        self.before.append(self._state(trainer, module))

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.after.append(self._state(trainer, module))


def _fit(nan_batch, **options):
    seed_everything(0)
    model, spy = TinyClassifier(), _StateSpy()
    constraint = FisherConstraint(max_fisher=0.5, **options)
    Trainer(max_epochs=1, callbacks=[constraint, spy], **QUIET).fit(model, _batches(nan_batch))
    return model, spy, constraint


def _assert_same(first, second):
    (weights_a, moments_a), (weights_b, moments_b) = first, second
    for a, b in zip(weights_a, weights_b):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert len(moments_a) == len(moments_b)
    for a, b in zip(moments_a, moments_b):
        assert (a is None and b is None) or torch.equal(a, b)


def test_a_non_finite_step_leaves_the_weights_and_the_optimizer_state_unchanged():
    model, spy, constraint = _fit(nan_batch=2, skip_non_finite=True)
    _assert_same(spy.before[2], spy.after[2])
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert constraint.num_skipped == 1 and constraint.num_steps == 4
    # the other steps are those of a run that never saw the bad batch
    clean_model, clean_spy, _ = _fit(nan_batch=None)
    _assert_same(spy.after[1], clean_spy.after[1])
    assert not torch.equal(spy.after[3][0][0], spy.after[2][0][0])


def test_without_the_skip_a_non_finite_step_reaches_the_weights():
    model, _, constraint = _fit(nan_batch=2, skip_non_finite=False)
    assert constraint.num_skipped == 0
    assert not all(torch.isfinite(p).all() for p in model.parameters())


class _HostReads:
    """Counts reads of a tensor's value on the host (each one a device sync on an accelerator)."""

    def __init__(self):
        self.count = 0
        self._patches = []

    def __enter__(self):
        for name in HOST_READS:
            original = getattr(torch.Tensor, name)

            def counted(tensor, *args, _original=original, **kwargs):
                self.count += 1
                return _original(tensor, *args, **kwargs)

            patch = mock.patch.object(torch.Tensor, name, counted)
            patch.start()
            self._patches.append(patch)
        return self

    def __exit__(self, *exc):
        for patch in self._patches:
            patch.stop()


def _one_hook_call(constraint, gradient, scaler=None):
    parameter = torch.nn.Parameter(torch.ones(3))
    parameter.grad = gradient.clone()
    optimizer = torch.optim.SGD([parameter], lr=0.1)
    trainer = SimpleNamespace(
        global_step=0,
        optimizers=[optimizer],
        precision_plugin=SimpleNamespace(scaler=scaler),
    )
    module = mock.Mock()
    with _HostReads() as reads:
        constraint.on_before_optimizer_step(trainer, module, optimizer)
    return reads.count, parameter.grad


@pytest.mark.parametrize("gradient", [torch.full((3,), 3.0), torch.tensor([1.0, math.nan, 0.0])])
def test_the_skip_reads_one_flag_per_step_and_nothing_else(gradient):
    reads, grad = _one_hook_call(FisherConstraint(max_fisher=1.0, skip_non_finite=True), gradient)
    assert reads == 1
    finite = bool(torch.isfinite(gradient).all())
    assert (grad is not None) == finite
    if finite:  # rescaled to the bound: ||g||^2 = 1
        assert float(grad.pow(2).sum()) == pytest.approx(1.0, rel=1e-5)


def test_no_host_read_without_the_skip_or_under_a_grad_scaler():
    gradient = torch.tensor([1.0, math.nan, 0.0])
    reads, grad = _one_hook_call(FisherConstraint(skip_non_finite=False), gradient)
    assert reads == 0 and torch.equal(grad.isnan(), gradient.isnan())
    reads, grad = _one_hook_call(FisherConstraint(skip_non_finite=True), gradient, scaler=object())
    assert reads == 0 and grad is not None  # the scaler skips the step itself


def test_a_schedule_is_validated_once_at_construction():
    with pytest.raises(ValueError, match=r"max_fisher > 0 at every step.*LinearSchedule"):
        FisherConstraint(max_fisher=LinearSchedule(1.0, -1.0, 10))
    constraint = FisherConstraint(max_fisher=LinearSchedule(4.0, 1.0, 10))
    with mock.patch.object(FisherConstraint, "_check_bound", side_effect=AssertionError):
        reads, grad = _one_hook_call(constraint, torch.full((3,), 3.0))
    assert float(grad.pow(2).sum()) == pytest.approx(4.0, rel=1e-5)


@pytest.mark.parametrize(
    ("shift", "expected"),
    [
        (ShiftOptions("scale", 1e30), np.float32(1e30)),
        (ShiftOptions("offset", -2.5), np.float32(-1.5)),
    ],
)
def test_large_but_finite_shifts_still_apply(shift, expected):
    x = np.ones((2, 1, 3), dtype=np.float32)
    shifted = apply_shift(x, shift)
    np.testing.assert_array_equal(shifted, np.full_like(x, expected))
    np.testing.assert_array_equal(x, np.ones_like(x))


def test_one_parameter_tensor_is_taken_whole_by_the_penalty():
    # L = sum_i w_i^2 at w = (1, 2): grad L = 2 w, tr F = ||2 w||^2 = 20
    weight = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    loss = weight.pow(2).sum()
    trace = fisher_penalty(loss, weight)
    assert float(trace) == pytest.approx(20.0)
    assert float(trace) == pytest.approx(float(fisher_penalty(loss, [weight])))
    total, penalty = FisherPenalty(weight=0.5, max_fisher=4.0)(loss, weight)
    assert float(penalty) == pytest.approx(16.0)
    assert float(total) == pytest.approx(5.0 + 0.5 * 16.0)


def _attention_double_gradient(attention):
    q = torch.linspace(-1.0, 1.0, 32, dtype=torch.float64).reshape(1, 1, 4, 8)
    q = q.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(attention(q).pow(2).sum(), q, create_graph=True)
    (second,) = torch.autograd.grad(grad.pow(2).sum(), q)
    return second


def test_attention_in_the_block_has_the_second_derivative_of_its_formula():
    def fused(q):
        with double_backward_attention():
            return torch.nn.functional.scaled_dot_product_attention(q, q, q)

    def formula(q):  # softmax(q q^T / sqrt(d)) q
        return torch.softmax(q @ q.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1) @ q

    torch.testing.assert_close(
        _attention_double_gradient(fused), _attention_double_gradient(formula)
    )


def test_the_network_input_checks_read_no_tensor_values():
    torch.manual_seed(0)
    network = InceptionTime(1, num_filters=2, depth=3, kernel_size=8)
    x = torch.randn(2, 1, 16, generator=torch.Generator().manual_seed(0))
    with _HostReads() as reads:
        features = network(x)
    assert reads.count == 0 and features.shape == (2, 8)


def test_a_float16_gradient_norm_that_fits_in_float16_is_finite_and_clipped():
    param = torch.nn.Parameter(torch.ones(2, dtype=torch.float16))
    param.grad = torch.tensor([180.0, 240.0], dtype=torch.float16)
    assert gradient_norm([param]).item() == 300.0  # ||(180, 240)|| = 300, while 300^2 > 65504
    reference = param.grad.clone()
    constrain_fisher_trace_([param], 1.0)
    expected = reference.double() / 300.0
    torch.testing.assert_close(param.grad.double(), expected, atol=1e-3, rtol=0)
