"""InceptionTime and its classifier: architecture, initialisation and training behaviour."""

from __future__ import annotations

import math

import lightning.pytorch as pl
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from lightning_info.core.options import AdamWOptions
from lightning_info.methods.fic_tsc.module import InceptionTimeClassifier
from lightning_info.methods.fic_tsc.networks import InceptionTime, inception_kernel_sizes


@pytest.fixture(autouse=True)
def single_thread():
    # Tiny convolutions run far slower with two intra-op threads on a shared two-core host.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _trainer(max_epochs: int) -> pl.Trainer:
    return pl.Trainer(
        max_epochs=max_epochs,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )


@pytest.mark.parametrize(("in_channels", "length"), [(1, 150), (6, 100), (12, 7)])
def test_features_have_four_times_num_filters(in_channels: int, length: int) -> None:
    torch.manual_seed(0)
    model = InceptionTime(in_channels)
    features = model(torch.randn(3, in_channels, length))
    assert features.shape == (3, 128)
    small = InceptionTime(in_channels, num_filters=5, depth=2, kernel_size=10)
    assert small(torch.randn(2, in_channels, length)).shape == (2, 20)


def test_features_are_time_average_of_feature_map() -> None:
    torch.manual_seed(0)
    model = InceptionTime(2, num_filters=4, depth=3, kernel_size=8).eval()
    x = torch.randn(4, 2, 33)
    with torch.no_grad():
        fmap = model.feature_map(x)
        torch.testing.assert_close(model(x), fmap.mean(dim=-1))


def test_kernel_sizes_are_halved_and_made_odd() -> None:
    assert inception_kernel_sizes(40) == (39, 19, 9)
    assert inception_kernel_sizes(9) == (9, 3, 1)
    assert inception_kernel_sizes(4) == (3, 1, 1)
    model = InceptionTime(3)
    for block in model.blocks:
        assert [c.kernel_size[0] for c in block.convs] == [39, 19, 9]
        assert all(c.bias is None for c in block.convs)


@pytest.mark.parametrize("length", [1, 8, 37, 64, 300])
def test_same_padding_keeps_length(length: int) -> None:
    torch.manual_seed(0)
    model = InceptionTime(3, num_filters=4, depth=6)
    assert model.feature_map(torch.randn(2, 3, length)).shape == (2, 16, length)


def test_receptive_field_is_centred_and_matches_kernels() -> None:
    # Two modules with kernels (39, 19, 9): an input change at t reaches exactly t-38..t+38.
    torch.manual_seed(0)
    model = InceptionTime(1, num_filters=8, depth=2).eval()
    x = torch.randn(1, 1, 200)
    bumped = x.clone()
    bumped[0, 0, 100] += 5.0
    with torch.no_grad():
        diff = (model.feature_map(bumped) - model.feature_map(x)).abs().amax(dim=1)[0]
    changed = torch.nonzero(diff > 0).flatten()
    radius = 2 * (39 // 2)
    assert changed.min().item() == 100 - radius
    assert changed.max().item() == 100 + radius


def test_bottleneck_only_for_multichannel_input() -> None:
    uni = InceptionTime(1)
    first = uni.blocks[0]
    assert not first.use_bottleneck
    assert all(conv.in_channels == 1 for conv in first.convs)
    multi = InceptionTime(6)
    assert multi.blocks[0].use_bottleneck
    assert multi.blocks[0].bottleneck.in_channels == 6
    assert all(conv.in_channels == 32 for conv in multi.blocks[0].convs)
    assert all(block.use_bottleneck for block in uni.blocks[1:])


def test_parameter_count_matches_architecture() -> None:
    nf, bottleneck, ksum = 32, 32, 39 + 19 + 9
    bn = 2 * 4 * nf
    first = 1 * nf * ksum + 1 * nf + bn
    later = 4 * nf * bottleneck + bottleneck * nf * ksum + 4 * nf * nf + bn
    shortcuts = (1 * 4 * nf + bn) + bn
    expected = first + 5 * later + shortcuts
    model = InceptionTime(1)
    assert sum(p.numel() for p in model.parameters()) == expected == 388_352


@pytest.mark.parametrize(("depth", "expected"), [(1, 0), (2, 0), (3, 1), (5, 1), (6, 2), (9, 3)])
def test_residual_shortcut_every_three_modules(depth: int, expected: int) -> None:
    model = InceptionTime(2, num_filters=4, depth=depth, kernel_size=8)
    assert len(model.blocks) == depth
    assert len(model.shortcuts) == expected
    assert model.residual_after == tuple(range(2, depth, 3))

    order: list[str] = []
    for i, block in enumerate(model.blocks):
        block.register_forward_hook(lambda *_, i=i: order.append(f"m{i}"))
    for j, shortcut in enumerate(model.shortcuts):
        shortcut.register_forward_hook(lambda *_, j=j: order.append(f"s{j}"))
    model(torch.randn(2, 2, 16))
    expected_order = []
    for i in range(depth):
        expected_order.append(f"m{i}")
        if i % 3 == 2:
            expected_order.append(f"s{i // 3}")
    assert order == expected_order


def test_shortcut_projects_only_when_widths_differ() -> None:
    model = InceptionTime(1, depth=6)
    first, second = model.shortcuts
    assert isinstance(first.proj, nn.Conv1d) and first.proj.in_channels == 1
    assert isinstance(second.proj, nn.Identity)
    wide = InceptionTime(128, depth=3)
    assert isinstance(wide.shortcuts[0].proj, nn.Identity)


def test_residual_can_be_disabled() -> None:
    model = InceptionTime(2, num_filters=4, depth=6, kernel_size=8, use_residual=False)
    assert len(model.shortcuts) == 0
    assert model(torch.randn(2, 2, 16)).shape == (2, 16)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"in_channels": 0}, "in_channels"),
        ({"in_channels": 1, "num_filters": 0}, "num_filters"),
        ({"in_channels": 1, "depth": 0}, "depth"),
        ({"in_channels": 1, "kernel_size": 3}, "kernel_size"),
        ({"in_channels": 1, "bottleneck_channels": 0}, "bottleneck_channels"),
    ],
)
def test_invalid_constructor_arguments(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        InceptionTime(**kwargs)


def test_non_integer_arguments_are_rejected() -> None:
    with pytest.raises(TypeError, match="num_filters"):
        InceptionTime(1, num_filters=2.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="depth"):
        InceptionTime(1, depth=True)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_classes": 1}, "num_classes"),
        ({"head_hidden": 0}, "head_hidden"),
        ({"dropout": 1.0}, "dropout"),
        ({"dropout": -0.1}, "dropout"),
        ({"in_channels": 0}, "in_channels"),
    ],
)
def test_invalid_classifier_arguments(kwargs: dict, match: str) -> None:
    args = {"in_channels": 1, "num_classes": 3, **kwargs}
    with pytest.raises(ValueError, match=match):
        InceptionTimeClassifier(**args)


def test_invalid_optimizer_and_network_arguments() -> None:
    with pytest.raises(ValueError, match="`optimizer.lr` must be > 0"):
        AdamWOptions(lr=0.0)
    with pytest.raises(ValueError, match="`optimizer.weight_decay` must be >= 0"):
        AdamWOptions(weight_decay=-1e-4)
    with pytest.raises(TypeError, match="`optimizer` must be an AdamWOptions"):
        InceptionTimeClassifier(1, 3, optimizer={"lr": 1e-3})
    with pytest.raises(ValueError, match="takes 2 input channels but `in_channels` is 3"):
        InceptionTimeClassifier(3, 2, network=InceptionTime(2, num_filters=2, depth=1))
    with pytest.raises(TypeError, match="int `out_features`"):
        InceptionTimeClassifier(3, 2, network=nn.Conv1d(3, 4, 1))
    with pytest.raises(ValueError, match="`depth`, `num_filters` configure the default network"):
        InceptionTimeClassifier(3, 2, network=InceptionTime(3), num_filters=4, depth=1)


def test_injected_network_is_the_default_one_when_built_alike() -> None:
    torch.manual_seed(0)
    default = InceptionTimeClassifier(3, 2, num_filters=4, depth=3, kernel_size=8)
    torch.manual_seed(0)
    network = InceptionTime(3, num_filters=4, depth=3, kernel_size=8)
    injected = InceptionTimeClassifier(3, 2, network=network)
    assert injected.features is network and "network" not in injected.hparams
    for (name, a), (_, b) in zip(default.state_dict().items(), injected.state_dict().items()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)


def test_classifier_architecture_and_hparams() -> None:
    model = InceptionTimeClassifier(6, 4, dropout=0.3)
    assert model.hparams.in_channels == 6 and model.hparams.num_classes == 4
    assert model.hparams.optimizer == AdamWOptions(lr=5e-3, weight_decay=1e-4)
    first, act, drop, last = model.head
    assert (first.in_features, first.out_features) == (128, 128)
    assert isinstance(act, nn.ReLU) and drop.p == 0.3
    assert (last.in_features, last.out_features) == (128, 4)
    assert model(torch.randn(5, 6, 100)).shape == (5, 4)


def test_xavier_uniform_init_and_zero_bias() -> None:
    torch.manual_seed(0)
    model = InceptionTimeClassifier(1, 5)
    linear = model.head[0]
    expected = math.sqrt(2.0 / (linear.in_features + linear.out_features))
    assert linear.weight.std().item() == pytest.approx(expected, rel=0.2)
    bound = math.sqrt(6.0 / (linear.in_features + linear.out_features))
    assert linear.weight.abs().max().item() <= bound

    conv = model.features.blocks[1].convs[0]
    fan_in = conv.in_channels * conv.kernel_size[0]
    fan_out = conv.out_channels * conv.kernel_size[0]
    assert conv.weight.std().item() == pytest.approx(math.sqrt(2.0 / (fan_in + fan_out)), rel=0.2)

    for module in model.modules():
        if isinstance(module, (nn.Conv1d, nn.Linear)) and module.bias is not None:
            assert torch.count_nonzero(module.bias) == 0


def test_optimizer_is_adamw_with_hparams() -> None:
    model = InceptionTimeClassifier(1, 2, optimizer=AdamWOptions(lr=1e-3, weight_decay=0.05))
    optimizer = model.configure_optimizers()
    assert isinstance(optimizer, torch.optim.AdamW)
    assert optimizer.defaults["lr"] == 1e-3
    assert optimizer.defaults["weight_decay"] == 0.05


@pytest.mark.parametrize("step", ["training_step", "validation_step", "test_step"])
def test_steps_reject_wrong_input_shape(step: str) -> None:
    model = InceptionTimeClassifier(3, 2, num_filters=4, depth=1, kernel_size=8)
    y = torch.zeros(2, dtype=torch.long)
    with pytest.raises(ValueError, match=r"shape \(batch, 3, length\)"):
        getattr(model, step)((torch.randn(2, 16), y), 0)
    with pytest.raises(ValueError, match=r"shape \(batch, 3, length\)"):
        getattr(model, step)((torch.randn(2, 1, 16), y), 0)
    with pytest.raises(ValueError, match="targets"):
        getattr(model, step)((torch.randn(2, 3, 16), y[:1]), 0)


def test_tiny_classifier_overfits_random_samples() -> None:
    pl.seed_everything(0, verbose=False)
    x = torch.randn(16, 2, 32)
    y = torch.arange(16) % 4
    loader = DataLoader(TensorDataset(x, y), batch_size=16)
    model = InceptionTimeClassifier(
        2,
        4,
        num_filters=4,
        depth=3,
        kernel_size=8,
        head_hidden=16,
        dropout=0.0,
        optimizer=AdamWOptions(lr=2e-2, weight_decay=1e-4),
    )
    trainer = _trainer(max_epochs=40)
    trainer.fit(model, loader, loader)
    assert {"train/loss", "train/acc", "val/loss", "val/acc"} <= set(trainer.callback_metrics)
    assert trainer.callback_metrics["train/acc"].item() == 1.0

    model.eval()
    with torch.no_grad():
        assert (model(x).argmax(dim=1) == y).all()
    results = trainer.test(model, loader, verbose=False)[0]
    assert results["test/acc"] == 1.0
    assert results["test/loss"] < 0.1
