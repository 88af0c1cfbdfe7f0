"""The controlled train/test shift: each shift by hand, and only the test split's copy moved."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch

from lightning_info.methods.fic_tsc.shift import (
    ShiftOptions,
    add_noise,
    apply_shift,
    offset,
    rescale,
)

X = np.array([[[1.0, -2.0, 3.0], [0.5, 0.0, -0.25]]], dtype=np.float32)  # (1, 2, 3)


def test_rescale_by_hand() -> None:
    out = rescale(X, 2.0)
    expected = [[[2.0, -4.0, 6.0], [1.0, 0.0, -0.5]]]
    np.testing.assert_array_equal(out, np.array(expected, dtype=np.float32))
    assert out.dtype == np.float32


def test_offset_by_hand() -> None:
    out = offset(X, 0.5)
    expected = [[[1.5, -1.5, 3.5], [1.0, 0.5, 0.25]]]
    np.testing.assert_array_equal(out, np.array(expected, dtype=np.float32))
    assert out.dtype == np.float32


def test_noise_by_hand() -> None:
    z = np.random.default_rng(7).standard_normal((1, 2, 3), dtype=np.float32)
    out = add_noise(X, 0.5, seed=7)
    np.testing.assert_allclose(out, X + 0.5 * z, rtol=0, atol=1e-7)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(add_noise(X, 0.5, seed=7), out)  # the same draw
    assert not np.array_equal(add_noise(X, 0.5, seed=8), out)
    np.testing.assert_array_equal(add_noise(X, 0.0, seed=7), X)


def test_noise_has_the_asked_standard_deviation() -> None:
    zeros = np.zeros((200, 1, 500), dtype=np.float32)
    noise = add_noise(zeros, 0.25, seed=0)
    assert abs(float(noise.std()) - 0.25) < 0.002
    assert abs(float(noise.mean())) < 0.002


@pytest.mark.parametrize(
    "shift",
    [
        None,
        ShiftOptions(),
        ShiftOptions("scale", 3.0),
        ShiftOptions("offset", -1.0),
        ShiftOptions("noise", 0.5, seed=1),
    ],
)
def test_apply_shift_returns_a_new_array_and_leaves_its_input(shift) -> None:
    x = X.copy()
    out = apply_shift(x, shift)
    np.testing.assert_array_equal(x, X)
    assert not np.shares_memory(out, x)
    expected = {
        None: X,
        "none": X,
        "scale": rescale(X, 3.0),
        "offset": offset(X, -1.0),
        "noise": add_noise(X, 0.5, seed=1),
    }[None if shift is None else shift.kind]
    np.testing.assert_array_equal(out, expected)


def test_names() -> None:
    names = [
        ShiftOptions().name,
        ShiftOptions("scale", 2.0).name,
        ShiftOptions("scale", 0.5).name,
        ShiftOptions("offset", 0.5).name,
        ShiftOptions("offset", -1).name,
        ShiftOptions("noise", 0.25).name,
    ]
    assert names == ["none", "scale x2", "scale x0.5", "offset +0.5", "offset -1", "noise 0.25"]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"kind": "blur"}, "kind"),
        ({"kind": "scale", "magnitude": 0.0}, "scale"),
        ({"kind": "noise", "magnitude": -0.1}, "noise"),
        ({"kind": "offset", "magnitude": math.nan}, "magnitude"),
        ({"kind": "noise", "seed": -1}, "seed"),
    ],
)
def test_bad_options_are_refused(kwargs, match) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        ShiftOptions(**kwargs)


def test_options_load_weights_only() -> None:
    buffer = io.BytesIO()
    torch.save({"test_shift": ShiftOptions("noise", 0.5, seed=3)}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)
    assert loaded["test_shift"] == ShiftOptions("noise", 0.5, seed=3)


@pytest.mark.parametrize(
    "shift", [ShiftOptions("scale", 2.0), ShiftOptions("offset", 1.0), ShiftOptions("noise", 0.5)]
)
def test_datamodule_moves_only_a_copy_of_the_test_split(shift) -> None:
    pytest.importorskip("aeon.datasets")
    from lightning_info.methods.fic_tsc.datamodule import (
        UCRUEADataModule,
        load_bundled_dataset,
    )

    raw = load_bundled_dataset("UnitTest")
    plain = UCRUEADataModule("UnitTest", batch_size=4, seed=1)
    shifted = UCRUEADataModule("UnitTest", batch_size=4, seed=1, test_shift=shift)
    plain.setup()
    shifted.setup()
    for name in ("train_dataset", "val_dataset"):
        for a, b in zip(getattr(plain, name).tensors, getattr(shifted, name).tensors):
            assert torch.equal(a, b)
    np.testing.assert_array_equal(plain.channel_mean, shifted.channel_mean)
    np.testing.assert_array_equal(plain.channel_std, shifted.channel_std)
    x, y = plain.test_dataset.tensors
    x_shift, y_shift = shifted.test_dataset.tensors
    assert torch.equal(y, y_shift)
    # by hand, on the normalised test inputs
    if shift.kind == "scale":
        expected = x * 2.0
    elif shift.kind == "offset":
        expected = x + 1.0
    else:
        z = np.random.default_rng(0).standard_normal(tuple(x.shape), dtype=np.float32)
        expected = x + 0.5 * torch.from_numpy(z)
    torch.testing.assert_close(x_shift, expected, rtol=0, atol=1e-6)
    for a, b in zip(raw, shifted._bundled.__dict__.values()):
        np.testing.assert_array_equal(a, b)  # the loaded arrays are not written
    assert shifted.hparams["test_shift"] == shift


def test_datamodule_refuses_a_shift_that_is_not_shift_options() -> None:
    pytest.importorskip("aeon.datasets")
    from lightning_info.methods.fic_tsc.datamodule import UCRUEADataModule

    with pytest.raises(TypeError, match="test_shift"):
        UCRUEADataModule("UnitTest", test_shift={"kind": "scale"})
