"""ROME: the alignment term, the distillation step (targets, scale, bounds) and evaluation."""

from __future__ import annotations

from functools import partial

import lightning.pytorch as pl
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from lightning_info.core.logging import metric_key
from lightning_info.methods.rome import (
    AttackOptions,
    DistillationOptions,
    NetworkPoolOptions,
    RobustEvaluationOptions,
    ROMEDistillation,
    SmallConvNet,
    evaluate_distilled,
    improved_robustness_ratio,
    next_class_targets,
    rome_alignment,
)
from lightning_info.methods.rome import module as rome_module
from lightning_info.methods.rome.functional import image_grid
from tests.methods.rome.conftest import quiet_trainer as _trainer
from tests.methods.rome.conftest import shuffled_digits
from tests.methods.rome.conftest import small_rome as _small
from tests.tiny import ReleaseProcessGroup


@pytest.fixture(scope="module")
def digits():
    """sklearn's 8x8 digits of classes 0-4, pixels scaled to [0, 1], as (N, 1, 8, 8)."""
    x, y = shuffled_digits(max_class=4)
    x = x.view(-1, 1, 8, 8)
    return x[:600], y[:600], x[600:], y[600:]


_GROWING = {"num_nets": 2, "max_nets": 3, "add_every": 1, "refresh_every": 1, "train_steps": 1}
"""A pool that grows and trains every step."""


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
    module = _small(
        x,
        y,
        distillation={"lr": 40.0},
        pool={"refresh_every": 1, "nets_per_refresh": 1, "train_steps": 1},
    )
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


def test_performance_term_uses_running_accuracy_fraction():
    k, n = 4, 12
    y = torch.arange(k).repeat_interleave(n)
    x = (y.float() / k).view(-1, 1, 1, 1).expand(-1, 1, 4, 4).clone()
    x = x + 0.02 * torch.rand(x.shape, generator=torch.Generator().manual_seed(0))
    alpha, w_ce = 0.2, 0.5
    module = ROMEDistillation(
        x,
        y,
        images_per_class=2,
        net=_OracleNet,
        distillation=DistillationOptions(alpha=alpha, w_ce=w_ce, real_batch=n, dsa_strategy=None),
        attack=AttackOptions(eps=0.01, steps=1),
        pool=NetworkPoolOptions(num_nets=1, refresh_every=0, add_every=0, acc_window=0),
    )
    module.pool.running_accuracy = lambda index: 0.75  # as if trained, 9 of 12 right
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
    assert metrics["rome/acc_net"].item() == pytest.approx(0.75)
    expected = w_ce * (1 - alpha) * 0.75 * ce.item()
    assert metrics["rome/l_perf"].item() == pytest.approx(expected, rel=1e-5)


def test_non_robust_mode_never_attacks(digits, monkeypatch):
    x, y, _, _ = digits

    def forbidden(*args, **kwargs):
        raise AssertionError("pgd must not run when robust=False")

    monkeypatch.setattr(rome_module, "pgd", forbidden)
    module = _small(x, y, attack={"robust": False}, pool={"refresh_every": 1, "train_steps": 1})
    _trainer(2).fit(module)
    assert int(module.iteration) == 2


def test_distillation_reduces_alignment_and_evaluates(digits):
    x, y, test_x, test_y = digits
    module = _small(x, y, distillation={"real_batch": 64, "lr": 7.0}, attack={"robust": False})
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

    start = alignment()
    _trainer(15).fit(module)
    assert alignment() < start
    images, labels = module.distilled_dataset()
    width8 = partial(SmallConvNet, width=8)
    result = evaluate_distilled(
        images, labels, test_x[:200], test_y[:200], epochs=30, lr=0.01, seed=0, eps=0.1, net=width8
    )
    assert set(result) == {"clean", "fgsm", "pgd", "pgd_l2", "rr", "i_rr"}
    for name in ("clean", "fgsm", "pgd", "pgd_l2"):
        assert 0.0 <= result[name] <= 1.0
    assert result["clean"] > 0.4
    again = evaluate_distilled(
        images, labels, test_x[:200], test_y[:200], epochs=30, lr=0.01, seed=0, eps=0.1, net=width8
    )
    assert again == result


def test_checkpoint_round_trip_restores_images_and_pool(digits, tmp_path):
    x, y, _, _ = digits
    module = _small(x, y, pool=_GROWING)
    trainer = _trainer(3)
    trainer.fit(module)
    assert len(module.nets) == 3 and int(module.nets_built) == 5
    path = tmp_path / "rome.ckpt"
    trainer.save_checkpoint(path)
    # the network factory is not a hyperparameter: it comes again with the real data
    loaded = ROMEDistillation.load_from_checkpoint(
        path, real_images=x, real_labels=y, net=partial(SmallConvNet, width=8), seed=7
    )
    assert loaded.pool_options == module.pool_options and loaded.hparams.seed == 7
    assert torch.equal(loaded.images, module.images)
    assert len(loaded.nets) == 3
    assert int(loaded.iteration) == 3
    for a, b in zip(module.state_dict().items(), loaded.state_dict().items()):
        assert a[0] == b[0] and torch.equal(a[1], b[1])


def test_robust_distillation_reduces_alignment_to_attacked_reals(digits):
    x, y, _, _ = digits
    module = _small(x, y, distillation={"real_batch": 64, "lr": 7.0}, attack={"steps": 3})
    net = module.nets[0]
    generator = torch.Generator().manual_seed(5)
    targets = {c: next_class_targets(y[y == c], 5) for c in range(5)}
    attacked = {
        c: rome_module.pgd(
            net, x[y == c], targets[c], 0.1, steps=3, targeted=True, generator=generator
        )
        for c in range(5)
    }

    def alignment() -> float:
        with torch.no_grad():
            return sum(
                rome_alignment(
                    net.features(module.images[2 * c : 2 * c + 2]), net.features(attacked[c])
                ).item()
                for c in range(5)
            )

    start = alignment()
    _trainer(15).fit(module)
    assert alignment() < 0.7 * start


def test_image_grid_places_each_image_in_its_cell():
    images = torch.arange(6, dtype=torch.float32).view(6, 1, 1, 1).expand(6, 1, 2, 3) / 10
    grid = image_grid(images, per_row=3, pad=1)
    assert grid.shape == (1, 2 * 3 + 1, 3 * 4 + 1)
    for i in range(6):
        top, left = 1 + (i // 3) * 3, 1 + (i % 3) * 4
        assert torch.all(grid[0, top : top + 2, left : left + 3] == i / 10)
    assert torch.all(grid[0, 0] == 1) and torch.all(grid[0, :, 0] == 1)


def test_trainer_test_matches_evaluate_distilled(tmp_path):
    from lightning_info.data.digits import DigitsDataModule

    data = DigitsDataModule(classes=5, batch_size=100, split_seed=0)
    module = _small(
        data.train_images,
        data.train_labels,
        distillation={"real_batch": 16, "dsa_strategy": "crop_flip"},
        evaluation={"epochs": 20, "eps_l2": 1.0, "target_shifts": (1,)},
    )
    trainer = _trainer(2, default_root_dir=tmp_path)
    trainer.fit(module, datamodule=data)
    (metrics,) = trainer.test(module, datamodule=data, verbose=False)
    images, labels = module.distilled_dataset()
    expected = evaluate_distilled(
        images,
        labels,
        data.test_images,
        data.test_labels,
        epochs=20,
        eps=0.1,
        eps_l2=1.0,
        attack_steps=2,
        net=partial(SmallConvNet, width=8),
        num_classes=5,
        target_shifts=(1,),
        augmentation=module.augmentation,
    )
    # the same seeded network: clean and FGSM (deterministic) agree exactly; PGD's random start
    # is drawn per batch here and once in evaluate_distilled
    assert metrics["test/clean"] == pytest.approx(expected["clean"], abs=1e-6)
    assert metrics["test/fgsm"] == pytest.approx(expected["fgsm"], abs=1e-6)
    for name in ("pgd", "pgd_l2"):
        assert metrics[f"test/{name}"] == pytest.approx(expected[name], abs=0.05)
        assert metrics[f"test/{name}"] <= metrics["test/clean"]
    accs = [metrics[f"test/{name}"] for name in ("fgsm", "pgd", "pgd_l2")]
    i_rr = improved_robustness_ratio(metrics["test/clean"], accs)
    assert metrics["test/i_rr"] == pytest.approx(float(i_rr), rel=1e-5)
    # the targeted protocol (shift 1) likewise, logged as metric_key("test", <its key>)
    assert metrics["test/targetedplus1/fgsm"] == pytest.approx(
        expected["targeted+1/fgsm"], abs=1e-6
    )
    for name in ("pgd", "pgd_l2"):
        key = f"targeted+1/{name}"
        assert metrics[metric_key("test", key)] == pytest.approx(expected[key], abs=0.05)
    accs = [metrics[f"test/targetedplus1/{name}"] for name in ("fgsm", "pgd", "pgd_l2")]
    i_rr = improved_robustness_ratio(metrics["test/clean"], accs)
    assert metrics["test/targetedplus1/i_rr"] == pytest.approx(float(i_rr), rel=1e-5)


def test_ddp_keeps_pool_and_images_identical_across_ranks(digits, tmp_path):
    x, y, _, _ = digits
    module = _small(x, y, pool=_GROWING)
    initial = module.distilled_dataset()[0]
    trainer = _trainer(
        3,
        strategy="ddp_spawn",
        devices=2,
        callbacks=[_SaveState(tmp_path), ReleaseProcessGroup()],
        default_root_dir=tmp_path,
    )
    trainer.fit(module)
    rank0, rank1 = (torch.load(tmp_path / f"rank{r}.pt") for r in range(2))
    assert rank0["iteration"] == rank1["iteration"] == 3
    assert len(rank0["pool"]) == 3  # grown from 2 to 3 (5 built, FIFO)
    assert torch.equal(rank0["images"], rank1["images"])
    assert not torch.equal(rank0["images"], initial)
    for a, b in zip(rank0["pool"], rank1["pool"]):
        assert torch.equal(a, b)


class _SaveState(pl.Callback):
    """Each rank saves its synthetic images and pool weights at the end of training."""

    def __init__(self, folder):
        self.folder = folder

    def on_train_end(self, trainer, pl_module):
        state = {
            "iteration": int(pl_module.iteration),
            "images": pl_module.images.detach().clone(),
            "pool": [
                torch.cat([p.detach().flatten() for p in net.parameters()])
                for net in pl_module.nets
            ],
        }
        torch.save(state, self.folder / f"rank{trainer.global_rank}.pt")


def test_rejects_bad_evaluation_arguments(digits):
    x, y, _, _ = digits
    with pytest.raises(ValueError, match=r"unknown attack\(s\) \['cw'\]"):
        _small(x, y, evaluation={"attacks": ["pgd", "cw"]})
    with pytest.raises(ValueError, match="attacks` must be distinct"):
        _small(x, y, evaluation={"attacks": ["pgd", "pgd"]})


def test_evaluate_distilled_reports_targeted_attacks_per_shift(digits):
    x, y, test_x, test_y = digits
    pick = torch.cat([torch.nonzero(y == c).flatten()[:5] for c in range(int(y.max()) + 1)])
    settings = {"epochs": 5, "seed": 0, "eps": 0.1, "attack_steps": 2}
    settings["net"] = partial(SmallConvNet, width=4)
    result = evaluate_distilled(
        x[pick], y[pick], test_x[:60], test_y[:60], **settings, target_shifts=(1, -1)
    )
    untargeted = {"clean", "fgsm", "pgd", "pgd_l2", "rr", "i_rr"}
    per_shift = {
        f"targeted{s}/{k}" for s in ("+1", "-1") for k in ("fgsm", "pgd", "pgd_l2", "rr", "i_rr")
    }
    assert set(result) == untargeted | per_shift
    for shift in ("+1", "-1"):  # I-RR by hand from the targeted accuracies
        asr = [result["clean"] - result[f"targeted{shift}/{a}"] for a in ("fgsm", "pgd", "pgd_l2")]
        expected = 100 * (1 - (sum(asr) / 3) * max(asr) / result["clean"] ** 2)
        assert result[f"targeted{shift}/i_rr"] == pytest.approx(expected, abs=1e-4)
    plain = evaluate_distilled(x[pick], y[pick], test_x[:60], test_y[:60], **settings)
    assert all(plain[k] == result[k] for k in untargeted)  # the targeted runs change nothing else


class _WideHead(SmallConvNet):
    """A ``SmallConvNet`` that records the shapes it was built for."""

    built: list[tuple[int, int, int]] = []

    def __init__(self, in_channels: int, num_classes: int, image_size: int, width: int = 4):
        super().__init__(in_channels, num_classes, image_size, width)
        _WideHead.built.append((in_channels, num_classes, image_size))


def test_injected_factories_build_the_pool_and_the_evaluation_network(digits, tmp_path):
    x, y, test_x, test_y = digits
    default = _small(x, y, net=None)
    assert default.nets[0].body[0].out_channels == 32  # SmallConvNet's own default width
    _WideHead.built.clear()
    module = _small(
        x,
        y,
        net=_WideHead,
        eval_net=partial(SmallConvNet, width=2),
        pool={"num_nets": 2},
        evaluation={"epochs": 1},
    )
    assert _WideHead.built == [(1, 5, 8)] * 2  # the data's channels, classes and image size
    assert all(type(net) is _WideHead for net in module.nets)
    # each pool member is a fresh draw, seeded by (seed, index)
    assert not torch.equal(module.nets[0].classifier.weight, module.nets[1].classifier.weight)
    again = _small(x, y, net=_WideHead, pool={"num_nets": 2})
    assert torch.equal(module.nets[1].classifier.weight, again.nets[1].classifier.weight)
    data = DataLoader(TensorDataset(test_x, test_y), batch_size=100)
    _trainer(1, default_root_dir=tmp_path).test(module, data, verbose=False)
    evaluated = module._evaluation["net"]
    assert type(evaluated) is SmallConvNet and evaluated.body[0].out_channels == 2
    # without `eval_net` the evaluation network comes from `net`
    same = _small(x, y, net=_WideHead, evaluation={"epochs": 1})
    _trainer(1, default_root_dir=tmp_path).test(same, data, verbose=False)
    assert type(same._evaluation["net"]) is _WideHead


def test_rejects_a_built_network_and_loose_options(digits):
    x, y, _, _ = digits
    with pytest.raises(TypeError, match="must build a network"):
        _small(x, y, net=SmallConvNet(1, 5, 8))
    with pytest.raises(TypeError, match="must build a network"):
        _small(x, y, eval_net=3)
    with pytest.raises(TypeError, match=r"attack=AttackOptions\(\.\.\.\)"):
        ROMEDistillation(x, y, attack={"eps": 0.1})
    with pytest.raises(ValueError, match="pool.num_nets"):
        NetworkPoolOptions(num_nets=4, max_nets=3)
    with pytest.raises(ValueError, match="distillation.alpha"):
        DistillationOptions(alpha=1.5)
    with pytest.raises(ValueError, match="strategy"):
        DistillationOptions(dsa_strategy="colour")
    with pytest.raises(TypeError, match="evaluation.target_shifts"):
        RobustEvaluationOptions(target_shifts=(1.5,))
    with pytest.raises(ValueError, match="maps every class"):
        _small(x, y, evaluation={"target_shifts": (5,)})  # K = 5
