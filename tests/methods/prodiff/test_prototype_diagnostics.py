"""ProDiff's prototype diagnostics (issue 39): the usage of the prototypes by the endpoint
queries (hand-built weights of known entropy, a collapsed case, the Metric against the
function), the attention temperature (the paper's ``sqrt(D)`` bounds every weight near
``1 / K``), the gradient norms reaching the prototypes, and what a Trainer logs."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from lab.prodiff.study import prototype_diagnostics, train_prodiff
from lightning_info.core.trainers import quiet_trainer
from lightning_info.methods.prodiff import (
    PrototypeOptions,
    SyntheticCity,
    TrajectoryDataModule,
    prototype_usage,
    prototype_weights,
)
from lightning_info.methods.prodiff.metrics import _PrototypeUsage as PrototypeUsage
from tests.methods.prodiff.tiny import tiny_prodiff

KEYS = ("entropy", "effective", "sample_effective", "hard_effective", "max_weight")


def _close(value, expected):
    assert float(value) == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_usage_of_one_hot_assignments_equals_the_hand_computed_entropy():
    # windows on prototypes 0, 0, 1, 2 of 4: usage (1/2, 1/4, 1/4, 0)
    weights = F.one_hot(torch.tensor([0, 0, 1, 2]), 4).double()
    usage = prototype_usage(weights)
    entropy = -(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25))  # 1.5 ln 2
    torch.testing.assert_close(usage["usage"], torch.tensor([0.5, 0.25, 0.25, 0.0]).double())
    _close(usage["entropy"], entropy)
    _close(usage["effective"], 2**1.5)  # exp(1.5 ln 2)
    _close(usage["hard_effective"], 2**1.5)
    _close(usage["sample_effective"], 1.0)  # every window on one prototype
    _close(usage["max_weight"], 1.0)


def test_usage_of_mixing_windows_separates_batch_spread_from_per_window_spread():
    # each window mixes two prototypes half and half; together they cover all four alike
    weights = torch.tensor([[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5]], dtype=torch.float64)
    usage = prototype_usage(weights)
    _close(usage["entropy"], math.log(4))
    _close(usage["effective"], 4.0)
    _close(usage["sample_effective"], 2.0)
    _close(usage["hard_effective"], 2.0)  # arg-max: prototypes 0 and 2 (first of a tie)
    _close(usage["max_weight"], 0.5)


def test_a_collapsed_attention_uses_one_prototype_and_a_uniform_one_all():
    collapsed = F.one_hot(torch.full((6,), 2), 5).double()
    usage = prototype_usage(collapsed)
    _close(usage["entropy"], 0.0)
    for key in ("effective", "sample_effective", "hard_effective", "max_weight"):
        _close(usage[key], 1.0)
    uniform = prototype_usage(torch.full((6, 5), 0.2, dtype=torch.float64))
    _close(uniform["effective"], 5.0)
    _close(uniform["sample_effective"], 5.0)
    _close(uniform["max_weight"], 0.2)
    _close(uniform["hard_effective"], 1.0)  # every tie goes to the first: a collapse of arg-max


def test_usage_refuses_weights_that_are_not_an_attention():
    with pytest.raises(ValueError, match="non-empty"):
        prototype_usage(torch.ones(3))
    with pytest.raises(ValueError, match="sum to 1"):
        prototype_usage(torch.ones(2, 3))
    with pytest.raises(ValueError, match="non-negative"):
        prototype_usage(torch.tensor([[1.5, -0.5]]))


def test_the_metric_over_uneven_batches_equals_the_function_on_the_whole():
    g = torch.Generator().manual_seed(0)
    weights = torch.softmax(3 * torch.randn(23, 6, generator=g, dtype=torch.float64), -1)
    expected = prototype_usage(weights)
    metric, first, second = PrototypeUsage(6), PrototypeUsage(6), PrototypeUsage(6)
    for part in weights.split([10, 1, 12]):
        metric.update(part)
    first.update(weights[:7])
    second.update(weights[7:])
    first.merge_state(second)  # the reduction a DDP sync applies: sums
    for result in (metric.compute(), first.compute()):
        for key in KEYS:
            torch.testing.assert_close(result[key], expected[key], rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match=r"\(B, 6\)"):
        metric.update(weights[:, :5])
    with pytest.raises(ValueError, match="no weights"), pytest.warns(UserWarning):
        PrototypeUsage(6).compute()
    with pytest.raises(ValueError, match=">= 1"):
        PrototypeUsage(0)


def test_the_papers_temperature_keeps_every_weight_near_one_over_k():
    """softmax(cos / sqrt(d)): cosines lie in [-1, 1], so no weight exceeds e^(2 / sqrt(d))
    times another, whatever the query -- even a query equal to one prototype."""
    g = torch.Generator().manual_seed(1)
    d, k = 512, 20
    prototypes = torch.randn(k, d, generator=g, dtype=torch.float64)
    query = torch.cat([prototypes[:1], -prototypes[:1], torch.randn(30, d, generator=g).double()])
    weights = prototype_weights(query, prototypes)
    ratio = weights.max(-1).values / weights.min(-1).values
    assert (ratio <= math.exp(2 / math.sqrt(d)) + 1e-12).all()
    assert prototype_usage(weights)["sample_effective"] > 0.99 * k
    # the formula, and a small temperature lets the query equal to prototype 0 pick it
    cosine = F.normalize(query, dim=-1) @ F.normalize(prototypes, dim=-1).T
    torch.testing.assert_close(weights, torch.softmax(cosine / math.sqrt(d), -1))
    sharp = prototype_weights(query, prototypes, temperature=0.01)
    torch.testing.assert_close(sharp, torch.softmax(cosine / 0.01, -1))
    assert sharp[0, 0] > 0.99
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="temperature"):
            prototype_weights(query, prototypes, temperature=bad)
        with pytest.raises(ValueError, match="attention_temperature"):
            PrototypeOptions(attention_temperature=bad)


def test_the_module_attends_with_its_temperature():
    window = torch.rand(5, 6, 3, generator=torch.Generator().manual_seed(2))
    torch.manual_seed(0)
    model = tiny_prodiff(prototype_options=PrototypeOptions(num_prototypes=4)).eval()
    with torch.no_grad():
        query = model.encoder(window * torch.tensor([1, 0, 0, 0, 0, 1.0])[None, :, None])
        expected = prototype_weights(query, model.prototypes)
    torch.testing.assert_close(model.prototype_weights(window), expected)
    torch.testing.assert_close(model.query_prototype(window), expected @ model.prototypes)
    torch.manual_seed(0)
    sharp = tiny_prodiff(
        prototype_options=PrototypeOptions(num_prototypes=4, attention_temperature=0.05)
    ).eval()
    with torch.no_grad():
        expected = prototype_weights(query, sharp.prototypes, temperature=0.05)
    torch.testing.assert_close(sharp.prototype_weights(window), expected)
    with pytest.raises(RuntimeError, match="has none"):
        tiny_prodiff(use_prototypes=False).prototype_weights(window)


def test_gradient_norms_per_loss_reach_the_prototypes_and_leave_the_model_alone():
    torch.manual_seed(0)
    model = tiny_prodiff()
    window = torch.rand(8, 6, 3, generator=torch.Generator().manual_seed(3))
    state = torch.get_rng_state()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    norms = model.prototype_gradient_norms(window, torch.Generator().manual_seed(4))
    assert torch.equal(torch.get_rng_state(), state)  # the global stream is untouched
    for name, parameter in model.named_parameters():
        assert parameter.grad is None and torch.equal(parameter, before[name])
    assert norms["ce"] == 0.0  # L_ce detaches the prototypes (the paper's)
    assert norms["diffusion"] > 0 and norms["contrastive"] > 0  # both paths carry gradient
    assert norms["encoder_total"] > 0
    # the total is the norm of the summed gradients: recompute it by hand
    model.eval()  # no dropout, so one backward can be compared with the diagnostics
    norms = model.prototype_gradient_norms(window, torch.Generator().manual_seed(4))
    losses = model.losses(window, torch.Generator().manual_seed(4))
    options = model.prototype_options
    total = losses["diffusion"] + options.contrastive_weight * losses["contrastive"]
    total = total + options.ce_weight * losses["ce"]
    total.backward()
    assert norms["total"] == pytest.approx(float(model.prototypes.grad.norm()), rel=1e-5)
    with pytest.raises(RuntimeError, match="has none"):
        tiny_prodiff(use_prototypes=False).prototype_gradient_norms(window)


def test_a_trainer_logs_the_usage_at_validation_and_the_gradient_norms_in_training():
    data = TrajectoryDataModule(
        window_length=6, synthetic=SyntheticCity(num_trajectories=60), batch_size=8
    )
    torch.manual_seed(0)
    model = tiny_prodiff()
    trainer = quiet_trainer(
        max_epochs=1, limit_train_batches=2, limit_val_batches=2, accelerator="cpu"
    )
    trainer.fit(model, datamodule=data)
    logged = trainer.callback_metrics
    assert 1.0 <= float(logged["val/prototype_effective"]) <= 4.0 + 1e-6
    assert 1.0 <= float(logged["val/prototype_hard_effective"]) <= 4.0 + 1e-6
    assert 0.25 - 1e-6 <= float(logged["val/prototype_max_weight"]) <= 1.0
    assert float(logged["train/prototype_grad_norm"]) > 0
    assert float(logged["train/encoder_grad_norm"]) > 0
    trainer.test(model, datamodule=data, verbose=False)
    assert "test/prototype_sample_effective" in trainer.callback_metrics
    ablation = tiny_prodiff(use_prototypes=False)
    trainer = quiet_trainer(
        max_epochs=1, limit_train_batches=1, limit_val_batches=1, accelerator="cpu"
    )
    trainer.fit(ablation, datamodule=data)
    assert not any("prototype" in key for key in trainer.callback_metrics)


def test_the_studys_diagnostics_do_not_change_what_it_trains():
    """The recipe records the diagnostics around its fits; the fit must be the one it would
    be without them (its tables are the card's)."""
    data = TrajectoryDataModule(
        window_length=5, synthetic=SyntheticCity(num_trajectories=48), batch_size=16
    )
    model = {
        "encoder": {"embed_dim": 8, "num_layers": 1, "num_heads": 2, "feedforward_dim": 8},
        "denoiser": {"base_channels": 4, "multipliers": [1], "res_blocks": 1},
        "diffusion": {"num_steps": 20},
        "sampling": {"steps": 4},
        "prototype_options": {"num_prototypes": 4},
    }
    found = {}
    plain = train_prodiff(data, True, 0, model, 2)
    tracked = train_prodiff(data, True, 0, model, 2, found)
    for (name, a), (_, b) in zip(plain.state_dict().items(), tracked.state_dict().items()):
        assert torch.equal(a, b), name
    assert found["grad_start_ce"] == 0.0 and found["grad_start_diffusion"] > 0
    assert found["grad_train"] > 0
    usage = prototype_diagnostics(tracked, data)
    assert usage["num_prototypes"] == 4 and len(usage["usage"]) == 4
    assert sum(usage["usage"]) == pytest.approx(1.0)
    assert 1.0 <= usage["hard_effective"] <= usage["num_prototypes"]
