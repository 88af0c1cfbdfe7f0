"""ROME: the alignment term, the distillation step (targets, scale, bounds) and evaluation."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lightning_info.bottleneck import rome as rome_module
from lightning_info.bottleneck.rome import (
    ROMEDistillation,
    SmallConvNet,
    evaluate_distilled,
    rome_alignment,
)
from tests.bottleneck.conftest import shuffled_digits


@pytest.fixture(scope="module")
def digits():
    """sklearn's 8x8 digits of classes 0-4, pixels scaled to [0, 1], as (N, 1, 8, 8)."""
    x, y = shuffled_digits(max_class=4)
    x = x.view(-1, 1, 8, 8)
    return x[:600], y[:600], x[600:], y[600:]


def _trainer(steps: int, **kwargs) -> pl.Trainer:
    return pl.Trainer(
        max_steps=steps,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        **kwargs,
    )


def _small(x, y, **kwargs) -> ROMEDistillation:
    options = dict(
        images_per_class=2,
        real_batch=32,
        attack_steps=2,
        eps=0.1,
        num_nets=1,
        width=8,
        net_refresh_every=0,
        add_net_every=0,
    )
    options.update(kwargs)
    return ROMEDistillation(x, y, **options)


def test_rome_alignment_matches_hand_computation():
    a = torch.tensor([[1.0, 2.0, 0.0], [3.0, 0.0, 2.0]])
    b = torch.tensor([[0.0, 1.0, 1.0], [0.0, 1.0, 3.0], [3.0, 1.0, -1.0]])
    # means (2, 1, 1) and (1, 1, 1): L1 distance 1, (1/2 * 1)^2 = 0.25
    assert rome_alignment(a, b).item() == pytest.approx(0.25)
    a.requires_grad_(True)
    rome_alignment(a, b).backward()
    # dL/da_ik = (D / 2) * sign(diff_k) / n with D = 1, n = 2: 0.25 on column 0, 0 elsewhere
    assert torch.allclose(a.grad, torch.tensor([[0.25, 0.0, 0.0], [0.25, 0.0, 0.0]]))


def test_small_conv_net_shapes():
    net = SmallConvNet(1, 5, 8, width=8)
    x = torch.rand(3, 1, 8, 8)
    assert net.features(x).shape == (3, 8 * 2 * 2)
    assert net(x).shape == (3, 5)


def test_images_stay_in_unit_box_and_change(digits):
    x, y, _, _ = digits
    module = _small(x, y, lr=5.0, net_refresh_every=1, train_nets_per_refresh=1, net_train_steps=1)
    before = module.distilled_dataset()[0]
    _trainer(3).fit(module)
    images, labels = module.distilled_dataset()
    assert images.shape == (10, 1, 8, 8)
    assert labels.tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert images.min() >= 0 and images.max() <= 1
    assert not torch.equal(images, before)
    assert int(module.iteration) == 3


def test_targets_are_next_class_mod_k(digits, monkeypatch):
    x, y, _, _ = digits
    calls = []
    real_pgd = rome_module.pgd

    def spy(model, inputs, targets, eps, **kwargs):
        calls.append((targets.clone(), kwargs.get("targeted", False)))
        return real_pgd(model, inputs, targets, eps, **kwargs)

    monkeypatch.setattr(rome_module, "pgd", spy)
    module = _small(x, y)
    _trainer(1).fit(module)
    targeted = [t for t, flag in calls if flag]
    assert len(targeted) == 5
    for c, targets in enumerate(targeted):
        assert torch.all(targets == (c + 1) % 5)
    assert torch.all(targeted[4] == 0)


class _OracleNet(nn.Module):
    """Reads the class from the mean pixel ``c / K``: accuracy 1 on the reals below."""

    def __init__(self, channels: int, num_classes: int, size: int):
        super().__init__()
        self.k = num_classes
        self.scale = nn.Parameter(torch.tensor(3.0))

    def features(self, x):
        return x.flatten(1)

    def forward(self, x):
        m = x.flatten(1).mean(1, keepdim=True) * self.k
        return -self.scale * (m - torch.arange(self.k, dtype=x.dtype)) ** 2


def test_performance_term_uses_accuracy_fraction():
    k, n = 4, 12
    y = torch.arange(k).repeat_interleave(n)
    x = (y.float() / k).view(-1, 1, 1, 1).expand(-1, 1, 4, 4).clone()
    x = x + 0.02 * torch.rand(x.shape, generator=torch.Generator().manual_seed(0))
    alpha, w_ce = 0.2, 0.5
    module = ROMEDistillation(
        x,
        y,
        images_per_class=2,
        alpha=alpha,
        w_ce=w_ce,
        eps=0.01,
        attack_steps=1,
        real_batch=n,
        num_nets=1,
        net_refresh_every=0,
        add_net_every=0,
        net_factory=_OracleNet,
    )
    net = module.nets[0]
    with torch.no_grad():
        assert (net(x).argmax(1) == y).all()
        images, labels = module.distilled_dataset()
        ce = torch.stack(
            [
                F.cross_entropy(net(images[2 * c : 2 * c + 2]), labels[2 * c : 2 * c + 2])
                for c in range(k)
            ]
        ).mean()
    trainer = _trainer(1)
    trainer.fit(module)
    metrics = trainer.callback_metrics
    assert metrics["rome/acc_net"].item() == pytest.approx(1.0)
    assert metrics["rome/l_perf"].item() == pytest.approx(w_ce * (1 - alpha) * ce.item(), rel=1e-5)


def test_non_robust_mode_never_attacks(digits, monkeypatch):
    x, y, _, _ = digits

    def forbidden(*args, **kwargs):
        raise AssertionError("pgd must not run when robust=False")

    monkeypatch.setattr(rome_module, "pgd", forbidden)
    module = _small(x, y, robust=False, net_refresh_every=1, net_train_steps=1)
    _trainer(2).fit(module)
    assert int(module.iteration) == 2


def test_distillation_reduces_alignment_and_evaluates(digits):
    x, y, test_x, test_y = digits
    module = _small(x, y, real_batch=64, lr=1.0)
    net = module.nets[0]

    def alignment() -> float:
        with torch.no_grad():
            images = module.images
            return sum(
                rome_alignment(
                    net.features(images[2 * c : 2 * c + 2]), net.features(x[y == c])
                ).item()
                for c in range(5)
            )

    module.robust = False
    start = alignment()
    _trainer(15).fit(module)
    assert alignment() < start
    images, labels = module.distilled_dataset()
    result = evaluate_distilled(
        images, labels, test_x[:200], test_y[:200], epochs=30, lr=0.01, seed=0, eps=0.1, width=8
    )
    assert set(result) == {"clean", "fgsm", "pgd", "pgd_l2", "rr", "i_rr"}
    for name in ("clean", "fgsm", "pgd", "pgd_l2"):
        assert 0.0 <= result[name] <= 1.0
    assert result["clean"] > 0.4
    again = evaluate_distilled(
        images, labels, test_x[:200], test_y[:200], epochs=30, lr=0.01, seed=0, eps=0.1, width=8
    )
    assert again == result


def test_checkpoint_round_trip_restores_images_and_pool(digits, tmp_path):
    x, y, _, _ = digits
    module = _small(
        x, y, num_nets=2, max_nets=3, add_net_every=1, net_refresh_every=1, net_train_steps=1
    )
    trainer = _trainer(3)
    trainer.fit(module)
    assert len(module.nets) == 3 and int(module.nets_built) == 5
    path = tmp_path / "rome.ckpt"
    trainer.save_checkpoint(path)
    loaded = ROMEDistillation.load_from_checkpoint(path, real_images=x, real_labels=y, seed=7)
    assert torch.equal(loaded.images, module.images)
    assert len(loaded.nets) == 3
    assert torch.equal(loaded._rng.get_state(), module._rng.get_state())
    for a, b in zip(module.state_dict().items(), loaded.state_dict().items()):
        assert a[0] == b[0] and torch.equal(a[1], b[1])
