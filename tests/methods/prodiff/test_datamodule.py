"""The synthetic city (seeded, four archetypes, in the box, increasing times, the requested
noise) and TrajectoryDataModule (training-only scaling computed by hand, batches, splits, CSV
input with custom column names, every error)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lightning_info.core.sampling import EpochShuffleSampler
from lightning_info.methods.prodiff.datamodule import (
    ARCHETYPES,
    SyntheticCity,
    TrajectoryColumns,
    TrajectoryDataModule,
    synthetic_city,
)
from lightning_info.methods.prodiff.functional import linear_interpolation
from lightning_info.methods.prodiff.geometry import METRES_PER_DEGREE, haversine_metres

CENTER = (40.0, 116.3)
FORTY = SyntheticCity(num_trajectories=40)


# ----------------------------------------------------------------------------- synthetic city


def test_synthetic_city_is_seeded_and_has_every_archetype():
    a, labels_a = synthetic_city(10, 12, seed=3)
    b, labels_b = synthetic_city(10, 12, seed=3)
    c, _ = synthetic_city(10, 12, seed=4)
    assert a.dtype == torch.float64 and a.shape == (10, 12, 3) and labels_a.dtype == torch.long
    assert torch.equal(a, b) and torch.equal(labels_a, labels_b)
    assert not torch.allclose(a, c)
    counts = torch.bincount(labels_a, minlength=len(ARCHETYPES))
    assert sorted(counts.tolist()) == [2, 2, 3, 3]  # all four, as even as 10 allows


def test_synthetic_city_stays_in_the_box_with_increasing_times():
    box_km = 10.0
    trajectories, _ = synthetic_city(200, 30, seed=0, box_km=box_km, noise_m=20.0)
    half_lat = box_km * 500.0 / METRES_PER_DEGREE
    half_lng = half_lat / math.cos(math.radians(CENTER[0]))
    assert float((trajectories[..., 1] - CENTER[0]).abs().max()) <= half_lat
    assert float((trajectories[..., 2] - CENTER[1]).abs().max()) <= half_lng
    assert bool((trajectories[:, 1:, 0] > trajectories[:, :-1, 0]).all())
    assert float(trajectories[:, 0, 0].min()) >= 6.0 and float(trajectories[:, 0, 0].max()) <= 22.0
    # the routes use the box: spread over most of it, not a corner
    assert float(trajectories[..., 1].max() - trajectories[..., 1].min()) > 1.5 * half_lat


def test_synthetic_city_noise_is_as_requested():
    noisy, _ = synthetic_city(200, 40, seed=5, noise_m=15.0)
    clean, _ = synthetic_city(200, 40, seed=5, noise_m=0.0)
    assert torch.equal(noisy[..., 0], clean[..., 0])
    north = (noisy[..., 1] - clean[..., 1]) * METRES_PER_DEGREE
    east = (noisy[..., 2] - clean[..., 2]) * METRES_PER_DEGREE * math.cos(math.radians(CENTER[0]))
    for axis in (north, east):
        assert float(axis.std()) == pytest.approx(15.0, rel=0.03)
        assert abs(float(axis.mean())) < 0.5
    gap = haversine_metres(noisy[..., 1], noisy[..., 2], clean[..., 1], clean[..., 2])
    assert float(gap.pow(2).mean().sqrt()) == pytest.approx(15.0 * math.sqrt(2), rel=0.03)


def test_synthetic_routes_have_their_shapes_and_speeds():
    trajectories, labels = synthetic_city(80, 25, seed=1, noise_m=0.0, speed_variation=0.5)
    straight = trajectories[labels == 0]
    # a noiseless straight route at constant speed: linear in time, so exact given the times
    exact = linear_interpolation(straight, interior_times="given")
    gap = haversine_metres(exact[..., 1], exact[..., 2], straight[..., 1], straight[..., 2])
    assert float(gap.max()) < 0.05
    length = haversine_metres(
        straight[:, 0, 1], straight[:, 0, 2], straight[:, -1, 1], straight[:, -1, 2]
    )
    speed = length / 1000.0 / (straight[:, -1, 0] - straight[:, 0, 0])  # km/h
    assert float(speed.min()) >= 15.0 * 0.999 and float(speed.max()) <= 45.0 * 1.001
    assert float(speed.std()) > 3.0  # it varies per trajectory
    # every other archetype bends away from the chord between its endpoints
    for kind in (1, 2, 3):
        routes = trajectories[labels == kind]
        chord = linear_interpolation(routes, interior_times="given")
        gap = haversine_metres(chord[..., 1], chord[..., 2], routes[..., 1], routes[..., 2])
        assert float(gap.amax(1).min()) > 100.0, ARCHETYPES[kind]


def _bend_sides(trajectories):
    """The sign of the cross product chord x (midpoint - start) in local metres: > 0 when the
    route's middle lies to the left of the chord."""
    lat0 = math.radians(float(trajectories[..., 1].mean()))
    north = trajectories[..., 1] * METRES_PER_DEGREE
    east = trajectories[..., 2] * METRES_PER_DEGREE * math.cos(lat0)
    middle = trajectories.shape[1] // 2
    chord = (east[:, -1] - east[:, 0], north[:, -1] - north[:, 0])
    mid = (east[:, middle] - east[:, 0], north[:, middle] - north[:, 0])
    return torch.sign(chord[0] * mid[1] - chord[1] * mid[0])


@pytest.mark.parametrize("left", [0.0, 1.0])
def test_left_side_probability_decides_the_side_of_every_bend(left):
    trajectories, labels = synthetic_city(120, 21, seed=2, noise_m=0.0, left_side_probability=left)
    side = 1.0 if left == 1.0 else -1.0
    for kind in (1, 2, 3):
        assert torch.all(_bend_sides(trajectories[labels == kind]) == side), ARCHETYPES[kind]
    balanced, labels = synthetic_city(400, 21, seed=2, noise_m=0.0)
    share = float((_bend_sides(balanced[labels != 0]) > 0).double().mean())
    assert 0.4 < share < 0.6


def test_synthetic_city_errors():
    with pytest.raises(ValueError, match="num_trajectories"):
        synthetic_city(0, 10)
    with pytest.raises(ValueError, match="noise_m"):
        synthetic_city(4, 10, noise_m=-1.0)
    with pytest.raises(ValueError, match="no room"):
        synthetic_city(4, 10, box_km=0.1, noise_m=5.0)
    with pytest.raises(ValueError, match="margin_m"):
        synthetic_city(4, 10, noise_m=30.0)
    synthetic_city(4, 10, noise_m=30.0, margin_m=150.0)
    with pytest.raises(ValueError, match="speed_variation"):
        synthetic_city(4, 10, speed_variation=1.0)
    with pytest.raises(ValueError, match="left_side_probability"):
        synthetic_city(4, 10, left_side_probability=1.5)
    with pytest.raises(ValueError, match="trajectory_length"):
        SyntheticCity(trajectory_length=1)
    with pytest.raises(ValueError, match="give `trajectory_length` or the `length`"):
        SyntheticCity().generate(0)


def test_the_synthetic_city_options_draw_what_the_function_draws():
    city = SyntheticCity(num_trajectories=9, noise_m=2.0, left_side_probability=1.0)
    drawn, labels = city.generate(4, length=7)
    expected, expected_labels = synthetic_city(9, 7, 4, noise_m=2.0, left_side_probability=1.0)
    assert torch.equal(drawn, expected) and torch.equal(labels, expected_labels)
    fixed = SyntheticCity(num_trajectories=9, trajectory_length=5)
    assert fixed.generate(0, length=7)[0].shape == (9, 5, 3)  # its own length wins
    assert SyntheticCity(center=[40.0, 116.3]).center == (40.0, 116.3)  # a YAML list


# ----------------------------------------------------------------------------- data module


def _by_hand_windows(num, length, k, seed):
    """Windows cut and time-shifted by hand from the synthetic city."""
    trajectories, _ = synthetic_city(num, length, seed)
    windows = [t[s : s + k] for t in trajectories for s in range(0, length - k + 1, k)]
    windows = torch.stack(windows).clone()
    windows[..., 0] -= windows[:, :1, 0].clone()
    return windows


def test_scaling_uses_the_training_split_only():
    dm = TrajectoryDataModule(
        window_length=6,
        synthetic=SyntheticCity(num_trajectories=30, trajectory_length=18),
        val_fraction=0.2,
        test_fraction=0.2,
        data_seed=3,
    )
    windows = _by_hand_windows(30, 18, 6, seed=3)
    assert len(windows) == 90
    train = windows[dm.splits["train"]]
    low = train.reshape(-1, 3).min(0).values
    high = train.reshape(-1, 3).max(0).values
    assert torch.equal(dm.scale_min, low) and torch.equal(dm.scale_max, high)
    everything = windows.reshape(-1, 3)
    assert not (
        torch.equal(everything.min(0).values, low) and torch.equal(everything.max(0).values, high)
    )  # the held-out windows would have changed the statistics
    scaled = dm.scale(dm.windows["train"]).reshape(-1, 3)
    torch.testing.assert_close(scaled.min(0).values, torch.zeros(3, dtype=torch.float64))
    torch.testing.assert_close(scaled.max(0).values, torch.ones(3, dtype=torch.float64))
    for split in ("train", "val", "test"):
        raw = dm.windows[split]
        assert torch.equal(raw, windows[dm.splits[split]])
        torch.testing.assert_close(dm.unscale(dm.scale(raw)), raw, rtol=0, atol=1e-12)


def test_splits_partition_the_windows():
    dm = TrajectoryDataModule(
        window_length=4,
        stride=2,
        synthetic=SyntheticCity(num_trajectories=20, trajectory_length=10),
        split_by="group",
        data_seed=1,
    )
    # 4 windows per trajectory (starts 0, 2, 4, 6), split by trajectory
    assert sum(len(index) for index in dm.splits.values()) == 80
    groups = {name: set(dm.groups[index].tolist()) for name, index in dm.splits.items()}
    assert not (groups["train"] & groups["val"] or groups["train"] & groups["test"])
    assert len(groups["test"]) == 2 and len(groups["val"]) == 2
    by_window = TrajectoryDataModule(
        window_length=4,
        stride=2,
        synthetic=SyntheticCity(num_trajectories=20, trajectory_length=10),
        data_seed=1,
    )
    assert [len(by_window.splits[s]) for s in ("train", "val", "test")] == [64, 8, 8]
    everything = np.sort(np.concatenate(list(by_window.splits.values())))
    assert np.array_equal(everything, np.arange(80))


def test_batches_keys_shapes_and_epoch_order():
    dm = TrajectoryDataModule(window_length=5, synthetic=FORTY, batch_size=8, data_seed=4)
    loader = dm.train_dataloader()
    assert isinstance(loader.sampler, EpochShuffleSampler)
    batches = list(loader)
    batch = batches[0]
    assert set(batch) == {"window", "raw"}
    assert batch["window"].shape == (8, 5, 3) and batch["window"].dtype == torch.float32
    assert batch["raw"].shape == (8, 5, 3) and batch["raw"].dtype == torch.float64
    order = list(EpochShuffleSampler(len(dm.windows["train"]), 4))
    raw = torch.cat([b["raw"] for b in batches])
    assert torch.equal(raw, dm.windows["train"][order])
    torch.testing.assert_close(torch.cat([b["window"] for b in batches]), dm.scale(raw).float())
    assert torch.equal(raw[:, 0, 0], torch.zeros(len(raw), dtype=torch.float64))  # relative time
    again = TrajectoryDataModule(window_length=5, synthetic=FORTY, batch_size=8, data_seed=4)
    assert torch.equal(next(iter(again.train_dataloader()))["raw"], batch["raw"])
    test = next(iter(dm.test_dataloader()))
    assert torch.equal(test["raw"], dm.windows["test"][:8])
    assert dm.val_dataloader() is not None
    empty_val = TrajectoryDataModule(
        window_length=5, synthetic=SyntheticCity(num_trajectories=10), val_fraction=0.0
    )
    assert empty_val.val_dataloader() == []


def test_absolute_time_and_origins():
    city = SyntheticCity(num_trajectories=12, trajectory_length=10)
    relative = TrajectoryDataModule(window_length=5, synthetic=city)
    absolute = TrajectoryDataModule(window_length=5, synthetic=city, relative_time=False)
    for split in ("train", "test"):
        shifted = relative.windows[split].clone()
        shifted[..., 0] += relative.origins[split].unsqueeze(1)
        torch.testing.assert_close(shifted, absolute.windows[split], rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- CSV input


def _write_csv(path, rows, header=("uid", "utc", "latitude", "longitude")):
    lines = [",".join(header)] + [",".join(str(v) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def _foursquare_rows():
    """Two users, 7 and 4 check-ins, written out of order."""
    base = np.datetime64("2012-04-03T18:00:09")
    rows = []
    for user, count in (("u1", 7), ("u2", 4)):
        for i in range(count):
            stamp = (base + np.timedelta64(15 * i + (3 if user == "u2" else 0), "m")).astype(object)
            text = stamp.strftime("%a %b %d %H:%M:%S +0000 %Y")
            rows.append((user, f'"{text}"', 35.6 + 0.001 * i, 139.7 + 0.002 * i))
    return rows[::-1]


def test_csv_with_custom_column_names(tmp_path):
    path = _write_csv(tmp_path / "checkins.csv", _foursquare_rows())
    dm = TrajectoryDataModule(
        str(path),
        window_length=3,
        columns=TrajectoryColumns(
            user_column="uid",
            time_column="utc",
            lat_column="latitude",
            lng_column="longitude",
            time_format="%a %b %d %H:%M:%S %z %Y",
        ),
        relative_time=False,
        val_fraction=0.0,
        test_fraction=0.0,
    )
    # u1: 7 points -> 2 windows (the tail point is dropped); u2: 4 points -> 1 window
    windows = dm.windows["train"]
    assert windows.shape == (3, 3, 3)
    assert dm.group_names == ["u1", "u2"]
    assert dm.groups.tolist() == [0, 0, 1]
    assert bool((windows[:, 1:, 0] > windows[:, :-1, 0]).all())  # sorted by time
    torch.testing.assert_close(
        windows[0, :, 1], torch.tensor([35.6, 35.601, 35.602], dtype=torch.float64)
    )
    seconds = (np.datetime64("2012-04-03T18:00:09") - np.datetime64(0, "s")).astype(np.int64)
    assert float(windows[0, 0, 0]) == pytest.approx(seconds / 3600.0, abs=1e-9)  # hours, UTC
    torch.testing.assert_close(
        windows[1, :, 0] - windows[1, 0, 0], torch.tensor([0.0, 0.25, 0.5], dtype=torch.float64)
    )
    assert float(windows[2, 0, 0] - windows[0, 0, 0]) == pytest.approx(3 / 60)


def test_csv_numeric_timestamps_need_a_unit(tmp_path):
    rows = [("a", 1_700_000_000 + 60 * i, 40.0 + 0.001 * i, 116.3) for i in range(6)]
    path = _write_csv(tmp_path / "points.csv", rows, header=("user", "timestamp", "lat", "lng"))
    with pytest.raises(ValueError, match="time_unit"):
        TrajectoryDataModule(path, window_length=3, test_fraction=0.0, val_fraction=0.0)
    dm = TrajectoryDataModule(
        path,
        window_length=3,
        columns=TrajectoryColumns(time_unit="s"),
        test_fraction=0.0,
        val_fraction=0.0,
    )
    torch.testing.assert_close(
        dm.windows["train"][0, :, 0], torch.tensor([0.0, 1 / 60, 2 / 60], dtype=torch.float64)
    )


@pytest.mark.filterwarnings("ignore:Could not infer format:UserWarning")
def test_csv_errors(tmp_path):
    header = ("user", "timestamp", "lat", "lng")
    good = [("a", f"2020-01-01 00:0{i}:00", 40.0, 116.3 + 0.001 * i) for i in range(5)]
    path = _write_csv(tmp_path / "good.csv", good, header)
    with pytest.raises(ValueError, match="no column"):
        TrajectoryDataModule(path, window_length=3, columns=TrajectoryColumns(user_column="uid"))
    with pytest.raises(ValueError, match="fewer points than a window"):
        TrajectoryDataModule(path, window_length=6)
    nan = [*good[:2], ("a", "2020-01-01 00:09:00", "", 116.3), *good[2:]]
    with pytest.raises(ValueError, match="NaN"):
        TrajectoryDataModule(_write_csv(tmp_path / "nan.csv", nan, header), window_length=3)
    swapped = [(u, t, lng, lat) for u, t, lat, lng in good]
    with pytest.raises(ValueError, match=r"outside \[-90, 90\]"):
        TrajectoryDataModule(_write_csv(tmp_path / "swapped.csv", swapped, header), window_length=3)
    with pytest.raises(ValueError, match="could not parse"):
        TrajectoryDataModule(
            _write_csv(tmp_path / "t.csv", [("a", "soon", 40.0, 116.3)] * 4, header),
            window_length=3,
        )
    with pytest.raises(FileNotFoundError, match="no CSV"):
        TrajectoryDataModule(tmp_path / "absent.csv", window_length=3)


def test_data_module_errors():
    with pytest.raises(ValueError, match="window_length` must be >= 3"):
        TrajectoryDataModule(window_length=2)
    with pytest.raises(TypeError, match="window_length"):
        TrajectoryDataModule(window_length=4.0)
    with pytest.raises(ValueError, match="fewer points than a window"):
        TrajectoryDataModule(
            window_length=8, synthetic=SyntheticCity(num_trajectories=4, trajectory_length=5)
        )
    with pytest.raises(ValueError, match="split_by"):
        TrajectoryDataModule(window_length=4, split_by="user")
    with pytest.raises(ValueError, match="none for training"):
        TrajectoryDataModule(
            window_length=4,
            synthetic=SyntheticCity(num_trajectories=2),
            val_fraction=0.5,
            test_fraction=0.5,
        )
