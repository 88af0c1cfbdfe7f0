"""ROME as in the reference: the adversarially trained pool (targets, persistent optimizers,
running accuracy, exact resume), the siamese augmentation and the image step in normalised units."""

from __future__ import annotations

from functools import partial

import lightning.pytorch as pl
import pytest
import torch

from lightning_info.methods.rome import (
    AttackOptions,
    DistillationOptions,
    NetworkPoolOptions,
    ROMEDistillation,
    SmallConvNet,
    rome_alignment,
)
from lightning_info.methods.rome import module as rome_module
from lightning_info.methods.rome.attacks import training_attack_labels
from tests.methods.rome.conftest import quiet_trainer as _trainer
from tests.methods.rome.conftest import shuffled_digits, small_rome


@pytest.fixture(scope="module")
def digits():
    x, y = shuffled_digits(max_class=4)
    return x[:400].view(-1, 1, 8, 8), y[:400]


def _pool_module(x, y, *, distillation=None, pool=None, **kwargs) -> ROMEDistillation:
    """A toy module whose pool grows and trains every step; the dicts override option fields."""
    pool = {
        "num_nets": 2,
        "max_nets": 3,
        "add_every": 2,
        "refresh_every": 1,
        "nets_per_refresh": 1,
        "train_steps": 2,
        **(pool or {}),
    }
    distillation = {"real_batch": 24, **(distillation or {})}
    return small_rome(x, y, distillation=distillation, pool=pool, **kwargs)


def test_training_attack_labels_for_each_map():
    y = torch.tensor([0, 1, 2, 3, 4])
    goal, targeted = training_attack_labels(y, 5, "next", step=7)
    assert targeted and goal.tolist() == [1, 2, 3, 4, 0]
    goal, targeted = training_attack_labels(y, 5, "untargeted", step=7)
    assert not targeted and goal.tolist() == y.tolist()
    shifts = []
    for step in range(8):  # s = 1 + step mod 4 visits 1, 2, 3, 4 in turn
        goal, targeted = training_attack_labels(y, 5, "rotating", step=step)
        assert targeted and not (goal == y).any()
        shifts.append(int((goal[0] - y[0]) % 5))
    assert shifts == [1, 2, 3, 4, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="target_map"):
        training_attack_labels(y, 5, "random", step=0)


@pytest.mark.parametrize("attack_target", ["next", "untargeted", "rotating"])
def test_pool_and_alignment_attack_with_the_chosen_map(digits, monkeypatch, attack_target):
    x, y = digits
    calls = []
    real_labels = rome_module.training_attack_labels
    real_pgd = rome_module.pgd

    def spy_labels(labels, num_classes, target_map, step, **kwargs):
        goal, targeted = real_labels(labels, num_classes, target_map, step, **kwargs)
        calls.append({"y": labels.clone(), "goal": goal.clone(), "step": step})
        return goal, targeted

    def spy_pgd(model, inputs, targets, eps, **kwargs):
        calls[-1]["targets"], calls[-1]["targeted"] = targets.clone(), kwargs["targeted"]
        return real_pgd(model, inputs, targets, eps, **kwargs)

    monkeypatch.setattr(rome_module, "training_attack_labels", spy_labels)
    monkeypatch.setattr(rome_module, "pgd", spy_pgd)
    module = _pool_module(x, y, attack={"target": attack_target})
    _trainer(2).fit(module)
    # per step: 5 class batches of the alignment, then 2 mixed batches of the pool's training
    assert len(calls) == 2 * (5 + 2)
    pool_calls = calls[5:7] + calls[12:14]
    assert all(len(set(call["y"].tolist())) > 1 for call in pool_calls)
    for call in calls:
        assert torch.equal(call["targets"], call["goal"])
        if attack_target == "untargeted":
            assert not call["targeted"] and torch.equal(call["goal"], call["y"])
        else:
            shift = 1 if attack_target == "next" else 1 + call["step"] % 4
            assert call["targeted"] and torch.equal(call["goal"], (call["y"] + shift) % 5)


def test_running_accuracy_counts_the_pool_training_batches_and_resets(digits, monkeypatch):
    x, y = digits
    seen = []  # (step, correct, count) of every pool-training batch
    real_ce = rome_module.F.cross_entropy

    def spy(logits, labels, *args, **kwargs):
        if labels.shape[0] == 24:  # a pool batch; the synthetic ones hold 2 images
            correct = int((logits.argmax(1) == labels).sum())
            seen.append((int(module.iteration), correct, labels.shape[0]))
        return real_ce(logits, labels, *args, **kwargs)

    monkeypatch.setattr(rome_module.F, "cross_entropy", spy)
    logged = []

    class Record(pl.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            logged.append(float(trainer.callback_metrics["rome/acc_net"]))

    module = _pool_module(
        x, y, pool={"num_nets": 1, "max_nets": 1, "add_every": 0, "acc_window": 3}
    )
    assert module.pool.running_accuracy(0) == 0.0  # untrained: no batch seen
    _trainer(5, callbacks=[Record()]).fit(module)
    assert logged[0] == 0.0  # the first step's performance term is off, as in the reference
    # counts since the reset at step 3 (steps 3 and 4), before it steps 0-2 (logged at step 3)
    after = [(c, n) for step, c, n in seen if step >= 3]
    assert module.pool.running_accuracy(0) == pytest.approx(
        sum(c for c, _ in after) / sum(n for _, n in after)
    )
    before = [(c, n) for step, c, n in seen if step < 2]
    assert logged[2] == pytest.approx(sum(c for c, _ in before) / sum(n for _, n in before))
    assert logged[3] == 0.0  # reset at step 3, before the pool trains again


def _pool_state(module: ROMEDistillation) -> dict:
    return {
        "synthetic": module.synthetic.detach().clone(),
        "weights": [p.detach().clone() for net in module.nets for p in net.parameters()],
        "momentum": [
            state["momentum_buffer"].clone()
            for saved in module.pool.checkpoint_state()
            for state in saved["optimizer"]["state"].values()
        ],
        "counts": [saved["counts"] for saved in module.pool.checkpoint_state()],
    }


def _same(a: dict, b: dict) -> bool:
    return (
        torch.equal(a["synthetic"], b["synthetic"])
        and len(a["weights"]) == len(b["weights"])
        and all(torch.equal(p, q) for p, q in zip(a["weights"], b["weights"]))
        and len(a["momentum"]) == len(b["momentum"])
        and all(torch.equal(p, q) for p, q in zip(a["momentum"], b["momentum"]))
        and a["counts"] == b["counts"]
    )


_RESUMED = {"distillation": {"dsa_strategy": "color_crop_flip"}, "pool": {"nets_per_refresh": 3}}


def test_pool_optimizers_and_counts_resume_exactly(digits, tmp_path):
    x, y = digits
    straight = _pool_module(x, y, **_RESUMED)
    _trainer(6).fit(straight)
    trained = [saved["optimizer"]["state"] for saved in straight.pool.checkpoint_state()]
    assert len(straight.nets) == 3 and all(trained[:-1])  # momentum buffers to carry over

    first = _pool_module(x, y, **_RESUMED)
    trainer = _trainer(3)
    trainer.fit(first)
    path = tmp_path / "half.ckpt"
    trainer.save_checkpoint(path)
    saved = torch.load(path, weights_only=False)
    assert len(saved["rome_pool"]) == len(first.nets)

    resumed = _pool_module(x, y, **_RESUMED)
    _trainer(6).fit(resumed, ckpt_path=path)
    assert _same(_pool_state(resumed), _pool_state(straight))

    # without the saved optimizer states the pool's momentum starts afresh: not the same run
    del saved["rome_pool"]
    torch.save(saved, tmp_path / "stateless.ckpt")
    fresh = _pool_module(x, y, **_RESUMED)
    _trainer(6).fit(fresh, ckpt_path=tmp_path / "stateless.ckpt")
    assert not _same(_pool_state(fresh), _pool_state(straight))


def test_one_step_moves_pixels_by_lr_times_std_squared():
    # three classes of 8 images each; a real batch of 8 takes the whole class, so the
    # alignment loss is deterministic and the step can be rebuilt by hand
    generator = torch.Generator().manual_seed(0)
    y = torch.arange(3).repeat_interleave(8)
    x = 0.25 * y.float().view(-1, 1, 1, 1) + 0.3 * torch.rand(24, 2, 6, 6, generator=generator)
    lr = 0.05
    module = ROMEDistillation(
        x,
        y,
        images_per_class=2,
        net=partial(SmallConvNet, width=4),
        distillation=DistillationOptions(
            alpha=1.0, real_batch=8, lr=lr, momentum=0.0, dsa_strategy=None
        ),
        attack=AttackOptions(robust=False),
        pool=NetworkPoolOptions(num_nets=1, refresh_every=0, add_every=0),
    )
    pixels = module.images.detach().clone().requires_grad_(True)
    net = module.nets[0]
    loss = sum(
        rome_alignment(net.features(pixels[2 * c : 2 * c + 2]), net.features(x[y == c]))
        for c in range(3)
    )
    (grad,) = torch.autograd.grad(loss, pixels)
    std = x.std(dim=(0, 2, 3)).view(1, -1, 1, 1)
    assert torch.allclose(module.pixel_std, std)
    expected = (pixels.detach() - lr * std**2 * grad).clamp(0, 1)
    _trainer(1).fit(module)
    assert (expected - pixels).abs().max() > 1e-4  # the step is visible
    assert torch.allclose(module.images.detach(), expected, atol=1e-6)


def test_real_and_synthetic_batches_share_each_augmentation_draw(digits):
    x, y = digits
    module = _pool_module(
        x, y, pool={"refresh_every": 0}, distillation={"dsa_strategy": "crop_scale_rotate"}
    )
    calls = []
    augmentation = module.augmentation

    def recording(batch, generator, **kwargs):
        calls.append((batch.shape[0], generator.initial_seed()))
        return augmentation(batch, generator, **kwargs)

    module.augmentation = recording
    _trainer(2).fit(module)
    assert len(calls) == 2 * 5 * 2
    pairs = list(zip(calls[::2], calls[1::2]))  # (real, synthetic) of each class and step
    for (real_size, real_seed), (syn_size, syn_seed) in pairs:
        assert (real_size, syn_size) == (24, 2) and real_seed == syn_seed
    assert len({seed for (_, seed), _ in pairs}) == len(pairs)  # a new draw per class and step


def test_rejects_unknown_attack_target_and_constant_channel(digits):
    x, y = digits
    with pytest.raises(ValueError, match="attack.target"):
        _pool_module(x, y, attack={"target": "previous"})
    flat = torch.cat([x, torch.full_like(x, 0.5)], dim=1)
    with pytest.raises(ValueError, match=r"channels \[1\].*constant"):
        _pool_module(flat, y)


def test_synthetic_images_stay_pixels_under_large_steps(digits):
    x, y = digits
    module = _pool_module(x, y, distillation={"lr": 500.0, "dsa_strategy": "color"})
    _trainer(2).fit(module)
    images = module.images.detach()
    assert images.min() >= -1e-6 and images.max() <= 1 + 1e-6


def test_network_pool_keeps_optimizers_and_counts_with_their_networks():
    from torch import nn

    from lightning_info.methods.rome.pool import NetworkPool

    pool = NetworkPool(max_size=2, lr=0.1, momentum=0.9, weight_decay=0.0)
    nets = [nn.Linear(3, 2) for _ in range(3)]
    x, y = torch.randn(6, 3), torch.tensor([0, 1, 0, 1, 0, 1])
    pool.add(nets[0])
    pool.add(nets[1])
    with torch.no_grad():  # the step counts the predictions it trains on, made before it
        correct = int((nets[1](x).argmax(1) == y).sum())
    pool.train_step(1, x, y)
    pool.add(nets[2])  # the oldest (nets[0], untrained) leaves
    assert list(pool.nets) == nets[1:]
    # nets[1] keeps its momentum and counts in position 0; nets[2] starts afresh
    first, second = pool.checkpoint_state()
    assert first["optimizer"]["state"] and not second["optimizer"]["state"]
    assert first["counts"] == (correct, 6) and second["counts"] == (0, 0)
    assert pool.running_accuracy(0) == correct / 6 and pool.running_accuracy(1) == 0.0
    pool.reset_accuracies()
    assert pool.running_accuracy(0) == 0.0
    with pytest.raises(ValueError, match="state of 1 pool networks for a pool of 2"):
        pool.load_checkpoint_state([first])
