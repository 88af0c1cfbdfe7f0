"""benchmarks/fisher_constraint_step.py: it runs end to end, and its SAM step is SAM."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from lightning.pytorch import Callback, LightningModule
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from tests.benchmark_scripts import load_script

bench = load_script("fisher_constraint_step")


class StepSpy(Callback):
    """Parameters and gradients as the optimizer is about to use them."""

    def __init__(self):
        self.params: list[torch.Tensor] = []
        self.grads: list[torch.Tensor] = []

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        self.params = [p.detach().clone() for p in pl_module.parameters()]
        self.grads = [p.grad.detach().clone() for p in pl_module.parameters()]


class LinearClassifier(LightningModule):
    """Softmax regression ``logits = x W^T + b``, plain SGD."""

    def __init__(self, in_features: int = 4, num_classes: int = 3, lr: float = 0.5):
        super().__init__()
        self.lr = lr
        self.linear = nn.Linear(in_features, num_classes)

    def forward(self, x):
        return self.linear(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)


class SAMLinear(bench.SAMMixin, LinearClassifier):
    sam_rho = 0.5


def _linear_gradient(weight, bias, x, y):
    """Gradient of the mean cross-entropy of softmax regression: ``(P - Y)^T x / N``, mean P - Y."""
    residual = torch.softmax(x @ weight.T + bias, dim=1) - F.one_hot(y, weight.shape[0])
    return residual.T @ x / len(y), residual.mean(dim=0)


def _one_batch(x, y):
    return DataLoader(TensorDataset(x, y), batch_size=len(y), shuffle=False)


def test_main_runs_all_four_methods():
    results = bench.main(
        ["--steps", "2", "--warmup", "1", "--repeats", "1", "--dataset", "GunPoint"]
        + ["--num-filters", "4", "--depth", "3"]
    )
    assert list(results) == list(bench.METHODS)
    for result in results.values():
        assert len(result.run_ms) == 1
        assert result.ms_per_step > 0
        assert math.isfinite(result.final_loss)
        assert result.batch_sizes == {50}


def test_sam_step_on_a_linear_model_is_the_hand_computed_update():
    torch.manual_seed(0)
    x, y = torch.randn(12, 4), torch.randint(0, 3, (12,))
    model = SAMLinear()
    w0 = model.linear.weight.detach().double().clone()
    b0 = model.linear.bias.detach().double().clone()

    gw, gb = _linear_gradient(w0, b0, x.double(), y)
    scale = SAMLinear.sam_rho / torch.sqrt(gw.pow(2).sum() + gb.pow(2).sum())
    sam_gw, sam_gb = _linear_gradient(w0 + scale * gw, b0 + scale * gb, x.double(), y)
    lr = model.lr

    spy = StepSpy()
    bench.fit(model, _one_batch(x, y), max_steps=1, callbacks=[spy])

    torch.testing.assert_close(spy.params[0].double(), w0, rtol=0, atol=0)
    torch.testing.assert_close(spy.grads[0].double(), sam_gw, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(spy.grads[1].double(), sam_gb, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(model.linear.weight.double(), w0 - lr * sam_gw, atol=1e-6, rtol=0)
    torch.testing.assert_close(model.linear.bias.double(), b0 - lr * sam_gb, atol=1e-6, rtol=0)
    assert (model.linear.weight.double() - (w0 - lr * gw)).abs().max() > 1e-3


def test_sam_on_inception_time_uses_the_gradient_at_the_perturbed_weights():
    torch.manual_seed(0)
    x, y = torch.randn(16, 3, 32), torch.randint(0, 2, (16,))
    config = dict(num_filters=4, depth=3, kernel_size=8, head_hidden=8, dropout=0.0)
    sam, _ = bench.build("sam", 3, 2, seed=0, **config)
    plain, _ = bench.build("plain", 3, 2, seed=0, **config)
    initial = copy.deepcopy(sam).train()

    params = list(initial.parameters())
    grads = torch.autograd.grad(F.cross_entropy(initial(x), y), params)
    norm = torch.sqrt(sum(g.pow(2).sum() for g in grads))
    with torch.no_grad():
        for p, g in zip(params, grads):
            p.add_(bench.SAM_RHO * g / norm)
    expected = torch.autograd.grad(F.cross_entropy(initial(x), y), params)

    sam_spy, plain_spy = StepSpy(), StepSpy()
    bench.fit(sam, _one_batch(x, y), max_steps=1, callbacks=[sam_spy])
    bench.fit(plain, _one_batch(x, y), max_steps=1, callbacks=[plain_spy])

    for seen, start in zip(sam_spy.params, plain_spy.params):
        torch.testing.assert_close(seen, start, rtol=0, atol=0)
    for seen, want in zip(sam_spy.grads, expected):
        torch.testing.assert_close(seen, want, rtol=1e-4, atol=1e-6)
    difference = sum(float((s - p).abs().sum()) for s, p in zip(sam_spy.grads, plain_spy.grads))
    assert difference > 1e-3
    for name, buffer in plain.named_buffers():
        torch.testing.assert_close(
            sam.get_buffer(name), buffer, rtol=0, atol=0, msg=f"buffer {name}"
        )


def test_smoothed_information_benchmark_quick_run_and_truths():
    pytest.importorskip("infomeasure")
    smoothed = load_script("smoothed_information")

    # the uniform's truth: h -> log 2 as t -> 0; entropy power inequality below, Gaussian above
    assert abs(smoothed.uniform_smoothed_entropy_1d(1e-8) - math.log(2)) < 1e-3
    for t in (0.25, 1.0, 4.0):
        h = smoothed.uniform_smoothed_entropy_1d(t)
        assert 0.5 * math.log(4 + 2 * math.pi * math.e * t) < h
        assert h < smoothed.gaussian_entropy(1, 1 / 3 + t)
    assert smoothed.true_mutual_information("gaussian", 2, 1.0) == pytest.approx(math.log(2))

    results = smoothed.main(["--quick"])
    assert list(results["results"]) == list(smoothed.DISTRIBUTIONS)
    for rows in results["results"].values():
        assert [(r["n"], r["d"], r["t"]) for r in rows] == [(300, 1, 0.25), (300, 1, 1.0)]
        for r in rows:
            assert list(r["entropy"]) == list(smoothed.ENTROPY_METHODS)
            assert list(r["mutual_information"]) == list(smoothed.MI_METHODS)
            for quantity in ("entropy", "mutual_information"):
                for s in r[quantity].values():
                    assert len(s["estimates"]) == 1
                    assert math.isfinite(s["estimates"][0])
                    assert s["mean_abs_error"] < 0.3
                    assert s["seconds"] > 0
            ours = r["entropy"]["ours de Bruijn"]["estimates"][0]
            mi = r["mutual_information"]["ours de Bruijn"]["estimates"][0]
            assert ours - mi == pytest.approx(smoothed.gaussian_entropy(1, r["t"]))
            assert r["entropy"]["ours de Bruijn"]["mean_abs_error"] < 0.1


def test_cacti_benchmark_quick_run_checks_batched_equals_one_row(one_torch_thread):
    bench = load_script("cacti_inference")
    result = bench.main(["--quick"])
    assert result["max_difference"] <= 1e-5
    assert result["options"]["rows"] == 256 and result["options"]["threads"] == 1
    assert all(v > 0 for v in result["rows_per_second"].values())
    assert result["epoch_seconds"] > 0 and result["iterative_fit_seconds"] > 0


def test_elicitation_benchmark_quick_run_checks_batched_equals_per_pair(one_torch_thread):
    bench = load_script("adaptive_elicitation_eig")
    result = bench.main(["--quick"])
    assert result["max_difference"] <= 1e-5 and result["candidates"] == 8
    assert result["options"]["threads"] == 1
    assert set(result["seconds"]) == {"shared", "whole", "per_pair"}
    assert all(v > 0 for v in result["seconds"].values())


def test_graph4mm_benchmark_quick_run_checks_the_four_ways_agree(one_torch_thread):
    bench = load_script("graph4mm_diffusion")
    results = bench.main(["--quick"])
    assert [r["n"] for r in results] == [32, 64]
    for r in results:
        n, float_bytes = r["n"], 4
        assert r["max_difference"] <= 1e-12 and r["solve_difference"] <= 1e-6
        assert r["float32_difference"] <= 1e-4
        # a symmetric graph without self loops; isolated nodes get a self loop in T
        assert r["edges"] % 2 == 0 and 0 < r["edges"] <= n * (n - 1)
        assert r["nnz"] == r["edges"] + r["isolated"]
        assert r["transition_bytes"] == {
            "sparse": (n + 1) * 4 + r["nnz"] * (4 + float_bytes),
            "dense": n * n * float_bytes,
        }
        assert set(r["seconds"]) == set(bench.WAYS) and r["ratio"]["sparse"] == 1
        assert all(s > 0 for s in r["seconds"].values())
        assert all(x > 0 for x in r["ratio"].values())
        output = n * 64 * float_bytes
        assert r["peak_bytes"]["sparse"] >= output and r["peak_bytes"]["dense"] >= output
        assert r["peak_bytes"]["power"] >= 2 * n * n * float_bytes  # A and one power of T
        assert r["peak_bytes"]["solve"] >= n * n * float_bytes + output
