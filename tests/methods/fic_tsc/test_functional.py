"""Oracles for the functional FIC core: clip_grad_norm_, the paper's formula, a dense Hessian."""

from __future__ import annotations

import math

import pytest
import torch

from lightning_info.methods.fic_tsc.functional import (
    constrain_fisher_trace_,
    empirical_fisher_trace,
    fisher_penalty,
)


def _params_with_grads(seed: int, scale: float = 1.0) -> list[torch.nn.Parameter]:
    generator = torch.Generator().manual_seed(seed)
    params = []
    for shape in [(5, 3), (7,), (2, 4, 3), ()]:
        p = torch.nn.Parameter(torch.randn(shape, generator=generator))
        p.grad = torch.randn(shape, generator=generator) * scale
        params.append(p)
    return params


def _clone(params):
    copies = [torch.nn.Parameter(p.detach().clone()) for p in params]
    for c, p in zip(copies, params):
        c.grad = p.grad.clone()
    return copies


@pytest.mark.parametrize("max_fisher", [1e-3, 0.5, 2.0, 10.0, 1e4])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rescale_equals_clip_grad_norm(max_fisher, seed):
    ours = _params_with_grads(seed, scale=0.7)
    reference = _clone(ours)
    before, after = constrain_fisher_trace_(ours, max_fisher)
    norm = torch.nn.utils.clip_grad_norm_(reference, math.sqrt(max_fisher))
    for a, b in zip(ours, reference):
        torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=1e-6)
    torch.testing.assert_close(before, norm.pow(2))
    assert after <= max_fisher * (1 + 1e-5)
    expected_after = min(before.item(), max_fisher)
    assert after.item() == pytest.approx(expected_after, rel=1e-5)


@pytest.mark.parametrize("max_fisher", [1e-2, 2.0, 50.0])
def test_rescale_matches_the_papers_formula(max_fisher):
    ours = _params_with_grads(3, scale=1.5)
    raw = [p.grad.clone() for p in ours]
    trace = sum(g.double().pow(2).sum() for g in raw).item()
    c = max_fisher / (trace + 1e-6)
    factor = math.sqrt(c) if c < 1 else 1.0
    constrain_fisher_trace_(ours, max_fisher)
    for p, g in zip(ours, raw):
        torch.testing.assert_close(p.grad, g * factor, rtol=0, atol=1e-6)


def test_trace_is_the_sum_of_squared_gradients():
    params = _params_with_grads(4)
    brute = sum(float((p.grad.double() ** 2).sum()) for p in params)
    assert empirical_fisher_trace(params).item() == pytest.approx(brute, rel=1e-6)
    assert empirical_fisher_trace([torch.nn.Parameter(torch.ones(2))]).item() == 0.0


def test_bound_not_reached_leaves_gradients_bitwise_unchanged():
    params = _params_with_grads(5, scale=1e-3)
    raw = [p.grad.clone() for p in params]
    before, after = constrain_fisher_trace_(params, 100.0)
    assert torch.equal(before, after)
    assert all(torch.equal(p.grad, g) for p, g in zip(params, raw))


@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
def test_non_finite_gradients_are_left_for_the_grad_scaler(bad):
    params = _params_with_grads(6)
    params[1].grad[0] = bad
    raw = [p.grad.clone() for p in params]
    before, after = constrain_fisher_trace_(params, 1e-3)
    assert not torch.isfinite(before) and not torch.isfinite(after)
    for p, g in zip(params, raw):
        torch.testing.assert_close(p.grad, g, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_invalid_bound_is_rejected(bad):
    with pytest.raises(ValueError, match="max_fisher"):
        constrain_fisher_trace_(_params_with_grads(0), bad)


def _tiny_problem():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    model = model.double()
    x = torch.randn(6, 3, dtype=torch.float64)
    y = torch.tensor([0, 1, 1, 0, 1, 0])
    return model, x, y


def _flat_loss(model, x, y):
    shapes = [p.shape for p in model.parameters()]
    names = [n for n, _ in model.named_parameters()]

    def loss_of(flat):
        chunks = torch.split(flat, [math.prod(s) for s in shapes])
        params = {n: c.reshape(s) for n, c, s in zip(names, chunks, shapes)}
        logits = torch.func.functional_call(model, params, (x,))
        return torch.nn.functional.cross_entropy(logits, y)

    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return loss_of, flat


@pytest.mark.parametrize("weight", [0.0, 0.3, 2.0])
def test_penalty_gradient_matches_dense_hessian_double_backward(weight):
    model, x, y = _tiny_problem()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    total = loss + weight * fisher_penalty(loss, model.parameters())
    total.backward()
    ours = torch.cat([p.grad.reshape(-1) for p in model.parameters()])

    loss_of, flat = _flat_loss(model, x, y)
    g = torch.autograd.functional.jacobian(loss_of, flat)
    hessian = torch.autograd.functional.hessian(loss_of, flat)
    expected = g + 2 * weight * hessian @ g
    torch.testing.assert_close(ours, expected, rtol=1e-10, atol=1e-12)


def test_penalty_value_and_hinge():
    model, x, y = _tiny_problem()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss_of, flat = _flat_loss(model, x, y)
    trace = torch.autograd.functional.jacobian(loss_of, flat).pow(2).sum()
    torch.testing.assert_close(fisher_penalty(loss, model.parameters()), trace)
    above = fisher_penalty(loss, model.parameters(), max_fisher=trace.item() * 2)
    assert above.item() == 0.0
    below = fisher_penalty(loss, model.parameters(), max_fisher=trace.item() / 2)
    torch.testing.assert_close(below, trace / 2)


def test_penalty_rejects_bad_input():
    model, x, y = _tiny_problem()
    per_sample = torch.nn.functional.cross_entropy(model(x), y, reduction="none")
    with pytest.raises(ValueError, match="scalar"):
        fisher_penalty(per_sample, model.parameters())
    unrelated = torch.nn.Parameter(torch.ones(3))
    with pytest.raises(ValueError, match="does not depend"):
        fisher_penalty(per_sample.mean(), [unrelated])
    with pytest.raises(ValueError, match="max_fisher"):
        fisher_penalty(per_sample.mean(), model.parameters(), max_fisher=-1.0)
