"""Bundled UCR/UEA loader and data module, checked against aeon's own loaders."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from lightning_info.methods.fic_tsc import datamodule as ucr_uea
from lightning_info.methods.fic_tsc.datamodule import (
    UCRUEADataModule,
    available_bundled_datasets,
    load_bundled_dataset,
)

aeon_datasets = pytest.importorskip("aeon.datasets")

EXPECTED = {
    "ACSF1",
    "ArrowHead",
    "BasicMotions",
    "GunPoint",
    "ItalyPowerDemand",
    "JapaneseVowels",
    "JapaneseVowels_eq",
    "OSULeaf",
    "PickupGestureWiimoteZ",
    "PickupGestureWiimoteZ_eq",
    "UnitTest",
}


def _ts_file(path: Path, header: str, rows: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header.strip() + "\n@data\n" + "\n".join(rows) + "\n")


CLASSIFICATION_HEADER = """
@problemName Toy
@timeStamps false
@univariate true
@equalLength true
@seriesLength 4
@classLabel true a b
"""


@pytest.fixture
def fake_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for aeon's data folder with a clean, a gappy and a regression problem."""
    rows = ["1.0,2.0,3.0,4.0:a", "4.0,3.0,2.0,1.0:b"]
    _ts_file(tmp_path / "Clean" / "Clean_TRAIN.ts", CLASSIFICATION_HEADER, rows)
    _ts_file(tmp_path / "Clean" / "Clean_TEST.ts", CLASSIFICATION_HEADER, rows[::-1])
    _ts_file(tmp_path / "Clean" / "CleanTrainOnly_TRAIN.ts", CLASSIFICATION_HEADER, rows)
    gappy = ["1.0,?,3.0,4.0:a", "4.0,3.0,2.0,1.0:b"]
    _ts_file(tmp_path / "Gappy" / "Gappy_TRAIN.ts", CLASSIFICATION_HEADER, rows)
    _ts_file(tmp_path / "Gappy" / "Gappy_TEST.ts", CLASSIFICATION_HEADER, gappy)
    _ts_file(tmp_path / "Gappy" / "Gappy_eq_TRAIN.ts", CLASSIFICATION_HEADER, rows)
    _ts_file(tmp_path / "Gappy" / "Gappy_eq_TEST.ts", CLASSIFICATION_HEADER, rows)
    regression = CLASSIFICATION_HEADER.replace("@classLabel true a b", "@targetLabel true")
    _ts_file(tmp_path / "Reg" / "Reg_TRAIN.ts", regression, ["1.0,2.0,3.0,4.0:0.5"])
    _ts_file(tmp_path / "Reg" / "Reg_TEST.ts", regression, ["1.0,2.0,3.0,4.0:0.5"])
    monkeypatch.setattr(ucr_uea, "_bundled_root", lambda: tmp_path)
    return tmp_path


def test_available_names_are_the_bundled_classification_sets() -> None:
    names = available_bundled_datasets()
    assert names == sorted(names)
    assert set(names) >= EXPECTED
    for regression_or_unpaired in ("CardanoSentiment", "Covid3Month", "UnitTestTimeStamps"):
        assert regression_or_unpaired not in names


def test_header_decides_which_sets_are_offered(fake_root: Path) -> None:
    assert available_bundled_datasets() == ["Clean", "Gappy", "Gappy_eq"]


@pytest.mark.parametrize(
    ("name", "aeon_loader", "train_shape", "test_shape"),
    [
        ("GunPoint", "load_gunpoint", (50, 1, 150), (150, 1, 150)),
        ("BasicMotions", "load_basic_motions", (40, 6, 100), (40, 6, 100)),
    ],
)
def test_equal_length_sets_match_aeon_loader(
    name: str, aeon_loader: str, train_shape: tuple, test_shape: tuple
) -> None:
    x_train, y_train, x_test, y_test = load_bundled_dataset(name)
    ref_train, ref_y_train = getattr(aeon_datasets, aeon_loader)(split="train")
    ref_test, ref_y_test = getattr(aeon_datasets, aeon_loader)(split="test")
    assert x_train.shape == ref_train.shape == train_shape
    assert x_test.shape == ref_test.shape == test_shape
    assert x_train.dtype == x_test.dtype == np.float32
    np.testing.assert_allclose(x_train, ref_train, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(x_test, ref_test, rtol=1e-6, atol=1e-6)
    assert y_train.shape == ref_y_train.shape and y_test.shape == ref_y_test.shape


def _assert_same_mapping(encoded: np.ndarray, raw: np.ndarray, mapping: dict[int, str]) -> None:
    for code, label in zip(encoded.tolist(), raw.tolist(), strict=True):
        assert mapping.setdefault(code, label) == label


@pytest.mark.parametrize(
    ("name", "aeon_loader"),
    [
        ("BasicMotions", "load_basic_motions"),
        ("PickupGestureWiimoteZ", "load_pickup_gesture_wiimoteZ"),
    ],
)
def test_labels_are_contiguous_and_shared_between_splits(name: str, aeon_loader: str) -> None:
    _, y_train, _, y_test = load_bundled_dataset(name)
    _, raw_train = getattr(aeon_datasets, aeon_loader)(split="train")
    _, raw_test = getattr(aeon_datasets, aeon_loader)(split="test")
    raw_classes = set(raw_train.tolist()) | set(raw_test.tolist())
    assert y_train.dtype == y_test.dtype == np.int64
    assert set(np.concatenate([y_train, y_test]).tolist()) == set(range(len(raw_classes)))
    mapping: dict[int, str] = {}
    _assert_same_mapping(y_train, raw_train, mapping)
    _assert_same_mapping(y_test, raw_test, mapping)
    assert len(set(mapping.values())) == len(mapping) == len(raw_classes)
    ordered = [mapping[k] for k in range(len(mapping))]
    if name == "PickupGestureWiimoteZ":
        assert ordered == [str(i) for i in range(1, 11)]
    else:
        assert ordered == sorted(raw_classes)


@pytest.mark.parametrize(
    ("name", "aeon_loader", "channels", "length"),
    [
        ("JapaneseVowels", "load_japanese_vowels", 12, 29),
        ("PickupGestureWiimoteZ", "load_pickup_gesture_wiimoteZ", 1, 361),
    ],
)
def test_unequal_length_series_are_right_padded_with_zeros(
    name: str, aeon_loader: str, channels: int, length: int
) -> None:
    x_train, _, x_test, _ = load_bundled_dataset(name)
    raw_train, _ = getattr(aeon_datasets, aeon_loader)(split="train")
    raw_test, _ = getattr(aeon_datasets, aeon_loader)(split="test")
    assert isinstance(raw_train, list)
    longest = max(s.shape[1] for s in raw_train + raw_test)
    assert longest == length
    assert x_train.shape == (len(raw_train), channels, length)
    assert x_test.shape == (len(raw_test), channels, length)
    assert len({s.shape[1] for s in raw_train}) > 1
    for padded, raw in [*zip(x_train, raw_train, strict=True), *zip(x_test, raw_test, strict=True)]:
        n = raw.shape[1]
        np.testing.assert_allclose(padded[:, :n], raw, rtol=1e-6, atol=1e-6)
        assert not padded[:, n:].any()


def test_no_bundled_set_has_missing_values() -> None:
    for name in available_bundled_datasets():
        x_train, y_train, x_test, y_test = load_bundled_dataset(name)
        assert np.isfinite(x_train).all() and np.isfinite(x_test).all(), name
        assert x_train.shape[1:] == x_test.shape[1:], name
        assert len(x_train) == len(y_train) and len(x_test) == len(y_test), name


def test_missing_values_raise_error_naming_set_and_remedy(fake_root: Path) -> None:
    with pytest.raises(ValueError, match=r"'Gappy' \(test split\).*NaN.*'Gappy_eq'.*impute"):
        load_bundled_dataset("Gappy")
    x_train, y_train, x_test, y_test = load_bundled_dataset("Clean")
    assert x_train.shape == (2, 1, 4)
    np.testing.assert_array_equal(y_train, [0, 1])
    np.testing.assert_array_equal(y_test, [1, 0])
    np.testing.assert_array_equal(x_test[0, 0], [4.0, 3.0, 2.0, 1.0])


def test_unknown_name_lists_available_names() -> None:
    with pytest.raises(ValueError, match="Unknown bundled data set 'NoSuchSet'") as info:
        load_bundled_dataset("NoSuchSet")
    for name in available_bundled_datasets():
        assert name in str(info.value)
    with pytest.raises(ValueError, match="GunPoint"):
        UCRUEADataModule("gunpoint")


def test_missing_aeon_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aeon", None)
    monkeypatch.setitem(sys.modules, "aeon.datasets", None)
    with pytest.raises(ImportError, match=r"pip install 'lightning-info\[tsc\]'"):
        available_bundled_datasets()
    with pytest.raises(ImportError, match="aeon"):
        load_bundled_dataset("GunPoint")


def test_loader_leaves_aeon_arrays_untouched(monkeypatch: pytest.MonkeyPatch) -> None:
    returned: list[tuple[object, object]] = []
    original = aeon_datasets.load_from_ts_file

    def spy(path: str, *args, **kwargs):
        x, y = original(path, *args, **kwargs)
        copy = [s.copy() for s in x] if isinstance(x, list) else x.copy()
        returned.append((x, copy))
        return x, y

    monkeypatch.setattr(aeon_datasets, "load_from_ts_file", spy)
    for name in ("GunPoint", "JapaneseVowels"):
        x_train, *_ = load_bundled_dataset(name)
        x_train += 100.0
    assert len(returned) == 4
    for x, copy in returned:
        if isinstance(x, list):
            for a, b in zip(x, copy, strict=True):
                np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_array_equal(x, copy)


def test_datamodule_properties_right_after_init() -> None:
    dm = UCRUEADataModule("BasicMotions", batch_size=8)
    assert (dm.num_channels, dm.series_length, dm.num_classes) == (6, 100, 4)
    assert (dm.num_train, dm.num_val, dm.num_test) == (32, 8, 40)
    assert dm.class_names == ("badminton", "running", "standing", "walking")
    assert dm.train_dataset is None


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"batch_size": 0}, ValueError, "batch_size"),
        ({"val_fraction": 1.0}, ValueError, "val_fraction"),
        ({"val_fraction": -0.1}, ValueError, "val_fraction"),
        ({"normalize": "global"}, ValueError, "'channel', 'instance', 'none'"),
        ({"num_workers": -1}, ValueError, "num_workers"),
        ({"batch_size": 8.0}, TypeError, "batch_size"),
    ],
)
def test_datamodule_validates_arguments(kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        UCRUEADataModule("UnitTest", **kwargs)


def _raw_splits(dm: UCRUEADataModule) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x_train, _, x_test, _ = load_bundled_dataset(dm.name)
    train_idx, val_idx = dm.split_indices
    return x_train[train_idx], x_train[val_idx], x_test


def test_channel_normalisation_uses_train_statistics_only() -> None:
    dm = UCRUEADataModule("BasicMotions", normalize="channel", seed=1)
    dm.setup("fit")
    raw_train, raw_val, raw_test = _raw_splits(dm)
    train = dm.train_dataset.tensors[0].numpy()
    assert train.dtype == np.float32
    np.testing.assert_allclose(train.mean(axis=(0, 2)), 0.0, atol=1e-5)
    np.testing.assert_allclose(train.std(axis=(0, 2)), 1.0, atol=1e-4)

    mean = raw_train.astype(np.float64).mean(axis=(0, 2))[None, :, None]
    std = raw_train.astype(np.float64).std(axis=(0, 2))[None, :, None]
    val = dm.val_dataset.tensors[0].numpy()
    test = dm.test_dataset.tensors[0].numpy()
    np.testing.assert_allclose(val, (raw_val - mean) / std, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(test, (raw_test - mean) / std, rtol=1e-5, atol=1e-5)
    assert np.abs(val.mean(axis=(0, 2))).max() > 1e-3
    assert np.abs(test.std(axis=(0, 2)) - 1.0).max() > 1e-3


def test_instance_and_no_normalisation() -> None:
    dm = UCRUEADataModule("BasicMotions", normalize="instance")
    dm.setup("fit")
    for dataset in (dm.train_dataset, dm.val_dataset, dm.test_dataset):
        x = dataset.tensors[0].numpy().astype(np.float64)
        np.testing.assert_allclose(x.mean(axis=2), 0.0, atol=1e-5)
        np.testing.assert_allclose(x.std(axis=2), 1.0, atol=1e-3)

    raw = UCRUEADataModule("BasicMotions", normalize="none")
    raw.setup("fit")
    raw_train, raw_val, raw_test = _raw_splits(raw)
    np.testing.assert_array_equal(raw.train_dataset.tensors[0].numpy(), raw_train)
    np.testing.assert_array_equal(raw.val_dataset.tensors[0].numpy(), raw_val)
    np.testing.assert_array_equal(raw.test_dataset.tensors[0].numpy(), raw_test)


@pytest.mark.parametrize("normalize", ["channel", "instance", "none"])
def test_source_arrays_unchanged_by_setup(normalize: str) -> None:
    dm = UCRUEADataModule("GunPoint", normalize=normalize)
    source = dm._bundled
    dm.setup("fit")
    dm.train_dataset.tensors[0].add_(1.0)
    fresh = load_bundled_dataset("GunPoint")
    np.testing.assert_array_equal(source.x_train, fresh[0])
    np.testing.assert_array_equal(source.x_test, fresh[2])
    np.testing.assert_array_equal(source.y_train, fresh[1])


def test_split_is_stratified_disjoint_and_seeded() -> None:
    _, y = aeon_datasets.load_gunpoint(split="train")
    dm = UCRUEADataModule("GunPoint", val_fraction=0.2, seed=0)
    train_idx, val_idx = dm.split_indices
    assert len(val_idx) == 10 and len(train_idx) == 40
    assert set(train_idx.tolist()).isdisjoint(val_idx.tolist())
    assert set(train_idx.tolist()) | set(val_idx.tolist()) == set(range(50))
    labels = np.asarray(y)
    for label in np.unique(labels):
        share = (labels == label).sum() * 0.2
        assert abs((labels[val_idx] == label).sum() - share) <= 1

    basic = UCRUEADataModule("BasicMotions", val_fraction=0.2, seed=3)
    basic.setup("fit")
    assert torch.bincount(basic.val_dataset.tensors[1]).tolist() == [2, 2, 2, 2]

    same = UCRUEADataModule("GunPoint", val_fraction=0.2, seed=0)
    other = UCRUEADataModule("GunPoint", val_fraction=0.2, seed=1)
    np.testing.assert_array_equal(same.split_indices[1], val_idx)
    assert not np.array_equal(other.split_indices[1], val_idx)


def test_split_falls_back_when_stratification_is_impossible() -> None:
    dm = UCRUEADataModule("ACSF1", val_fraction=0.05)
    assert (dm.num_train, dm.num_val) == (95, 5)


def test_zero_val_fraction_means_no_validation_set() -> None:
    dm = UCRUEADataModule("UnitTest", val_fraction=0.0)
    assert (dm.num_train, dm.num_val) == (20, 0)
    dm.setup("fit")
    assert dm.val_dataset is None
    assert dm.val_dataloader() == []
    assert len(dm.train_dataset) == 20


def _epoch_labels(dm: UCRUEADataModule) -> list[int]:
    return torch.cat([y for _, y in dm.train_dataloader()]).tolist()


def test_loaders_shuffle_reproducibly_and_keep_eval_order() -> None:
    first = UCRUEADataModule("GunPoint", batch_size=7, seed=0)
    again = UCRUEADataModule("GunPoint", batch_size=7, seed=0)
    first.setup("fit")
    again.setup("fit")
    x_a = torch.cat([x for x, _ in first.train_dataloader()])
    x_b = torch.cat([x for x, _ in again.train_dataloader()])
    torch.testing.assert_close(x_a, x_b)
    assert not torch.equal(x_a, first.train_dataset.tensors[0])
    assert sorted(map(tuple, x_a[:, 0, :3].tolist())) == sorted(
        map(tuple, first.train_dataset.tensors[0][:, 0, :3].tolist())
    )

    batches = list(first.train_dataloader())
    assert [len(y) for _, y in batches] == [7, 7, 7, 7, 7, 5]
    assert batches[0][0].dtype == torch.float32 and batches[0][1].dtype == torch.long

    unsplit = [UCRUEADataModule("GunPoint", val_fraction=0.0, seed=seed) for seed in (0, 5)]
    assert _epoch_labels(unsplit[0]) != _epoch_labels(unsplit[1])
    assert sorted(_epoch_labels(unsplit[0])) == sorted(_epoch_labels(unsplit[1]))

    test_y = torch.cat([y for _, y in first.test_dataloader()])
    torch.testing.assert_close(test_y, first.test_dataset.tensors[1])
    val_y = torch.cat([y for _, y in first.val_dataloader()])
    torch.testing.assert_close(val_y, first.val_dataset.tensors[1])


@pytest.fixture
def single_thread():
    # Tiny convolutions run far slower with two intra-op threads on a shared two-core host.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.usefixtures("single_thread")
@pytest.mark.filterwarnings("ignore:Total length of `list` across ranks is zero")
@pytest.mark.parametrize("val_fraction", [0.0, 0.25])
def test_datamodule_drives_a_trainer(val_fraction: float) -> None:
    import lightning.pytorch as pl

    from lightning_info.methods.fic_tsc.module import InceptionTimeClassifier

    pl.seed_everything(0, verbose=False)
    dm = UCRUEADataModule("UnitTest", batch_size=8, val_fraction=val_fraction)
    model = InceptionTimeClassifier(
        dm.num_channels, dm.num_classes, num_filters=2, depth=1, kernel_size=4, head_hidden=4
    )
    trainer = pl.Trainer(
        max_epochs=1,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, dm)
    assert ("val/acc" in trainer.callback_metrics) == (val_fraction > 0)
    results = trainer.test(model, dm, verbose=False)[0]
    assert 0.0 <= results["test/acc"] <= 1.0
