"""Trajectory windows for ProDiff (Bu et al., ICML 2025): a seeded synthetic city or a CSV of
GPS / check-in points, cut into windows of ``k`` consecutive points of (hour, lat, lng).

:func:`synthetic_city` draws trajectories from four route archetypes (the offline stand-in for
FourSquare / WuXi / GeoLife); :class:`TrajectoryDataModule` cuts windows, splits them, min-max
scales them with statistics of the TRAINING split only and serves batches
``{"window": scaled (B, k, 3) float32, "raw": unscaled (B, k, 3) float64}``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor

from lightning_info.core.files import read_csv_table
from lightning_info.core.validation import (
    require_finite,
    require_fraction,
    require_int,
    require_non_negative,
    require_positive,
)
from lightning_info.data.scaling import MinMaxScaling
from lightning_info.data.splits import SplitDataModule, TensorRows
from lightning_info.methods.prodiff.geometry import METRES_PER_DEGREE

__all__ = [
    "ARCHETYPES",
    "SyntheticCity",
    "TrajectoryColumns",
    "TrajectoryDataModule",
    "cut_windows",
    "read_trajectory_csv",
    "synthetic_city",
]

#: The route archetypes of :func:`synthetic_city`, in the order of its labels.
ARCHETYPES = ("straight", "l_shaped", "arc", "detour")


# ----------------------------------------------------------------------------- synthetic city


def _polyline(vertices: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Points at arc lengths ``s`` (metres from the first vertex) along a polyline."""
    cumulative = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(vertices, axis=0), axis=1))]
    return np.stack([np.interp(s, cumulative, vertices[:, a]) for a in (0, 1)], -1)


def _route(
    kind: int, length_m: float, s: np.ndarray, rng: np.random.Generator, left: float
) -> np.ndarray:
    """``(len(s), 2)`` east / north metres of a route of the given archetype and length, starting
    at the origin heading east, at arc lengths ``s`` in ``[0, length_m]``; a bent route runs on
    the left (north) of its chord with probability ``left``."""
    side = 1.0 if rng.random() < left else -1.0  # the side of the chord the route runs on
    if kind == 0:  # straight
        return np.stack((s, np.zeros_like(s)), -1)
    if kind == 1:  # L-shaped: two legs with a 60-120 degree turn
        first = rng.uniform(0.3, 0.7) * length_m
        turn = -side * math.radians(rng.uniform(60.0, 120.0))  # a right turn runs left
        corner = np.array([first, 0.0])
        end = corner + (length_m - first) * np.array([math.cos(turn), math.sin(turn)])
        return _polyline(np.stack((np.zeros(2), corner, end)), s)
    if kind == 2:  # arc: a circular segment sweeping 60-240 degrees
        sweep = math.radians(rng.uniform(60.0, 240.0))
        radius = length_m / sweep
        angle = s / radius
        return np.stack((radius * np.sin(angle), -side * radius * (1.0 - np.cos(angle))), -1)
    # detour: along a road, out to one side, onward, back to the road, onward
    lead, tail, offset = rng.uniform(0.1, 0.25), rng.uniform(0.1, 0.25), rng.uniform(0.1, 0.2)
    along = 1.0 - lead - tail - 2.0 * offset
    x = np.cumsum([0.0, lead, 0.0, along, 0.0, tail]) * length_m
    y = np.array([0.0, 0.0, offset, offset, 0.0, 0.0]) * side * length_m
    return _polyline(np.stack((x, y), -1), s)


@dataclass(frozen=True)
class SyntheticCity:
    """The synthetic city's options; :meth:`generate` draws it (see :func:`synthetic_city`).

    Args:
        num_trajectories: trajectories drawn.
        trajectory_length: fixes per trajectory (``None``: the length :meth:`generate` is
            given, a :class:`TrajectoryDataModule`'s window length).
        center, box_km, noise_m, mean_speed_kmh, speed_variation, sampling_jitter,
            start_hours, margin_m, left_side_probability: see :func:`synthetic_city`.
    """

    num_trajectories: int = 512
    trajectory_length: int | None = None
    center: tuple[float, float] = (40.0, 116.3)
    box_km: float = 10.0
    noise_m: float = 5.0
    mean_speed_kmh: float = 30.0
    speed_variation: float = 0.5
    sampling_jitter: float = 0.3
    start_hours: tuple[float, float] = (6.0, 22.0)
    margin_m: float = 100.0
    left_side_probability: float = 0.5

    def __post_init__(self) -> None:
        require_int(self.num_trajectories, "num_trajectories", 1)
        if self.trajectory_length is not None:
            require_int(self.trajectory_length, "trajectory_length", 2)
        object.__setattr__(self, "center", tuple(self.center))
        object.__setattr__(self, "start_hours", tuple(self.start_hours))
        lat0, _ = (require_finite(c, "center") for c in self.center)
        if abs(lat0) > 80.0:
            raise ValueError(
                f"`center` latitude must lie in [-80, 80] for a flat city, got {lat0}."
            )
        box_m = require_positive(self.box_km, "box_km") * 1000.0
        noise_m = require_non_negative(self.noise_m, "noise_m")
        require_positive(self.mean_speed_kmh, "mean_speed_kmh")
        require_fraction(self.speed_variation, "speed_variation")
        require_fraction(self.sampling_jitter, "sampling_jitter")
        first_hour, last_hour = (require_finite(h, "start_hours") for h in self.start_hours)
        if last_hour < first_hour:
            raise ValueError(f"`start_hours` must be (earliest, latest), got {self.start_hours}.")
        margin = require_non_negative(self.margin_m, "margin_m")
        left = require_finite(self.left_side_probability, "left_side_probability")
        if not 0.0 <= left <= 1.0:
            raise ValueError(f"`left_side_probability` must lie in [0, 1], got {left}.")
        if 5.0 * noise_m > margin:
            raise ValueError(
                f"`margin_m` = {margin} m does not cover 5 standard deviations of the noise "
                f"(`noise_m` = {noise_m} m), so noisy points could leave the box: raise "
                f"`margin_m` to at least {5.0 * noise_m} or lower `noise_m`."
            )
        if box_m - 2.0 * margin <= 0:
            raise ValueError(
                f"`margin_m` = {margin} m leaves no room in a {self.box_km} km box: enlarge "
                "`box_km` or lower `margin_m`."
            )

    def generate(self, seed: int = 0, length: int | None = None) -> tuple[Tensor, Tensor]:
        """``(trajectories, labels)`` of :func:`synthetic_city`, drawn from ``seed``, each
        trajectory ``trajectory_length`` fixes long (else ``length``)."""
        length = self.trajectory_length if self.trajectory_length is not None else length
        if length is None:
            raise ValueError("give `trajectory_length` or the `length` to generate.")
        length = require_int(length, "trajectory_length", 2)
        seed = require_int(seed, "seed", 0)
        n = self.num_trajectories
        lat0, lng0 = (float(c) for c in self.center)
        box_m, margin = self.box_km * 1000.0, float(self.margin_m)
        noise_m, mean_speed = float(self.noise_m), float(self.mean_speed_kmh)
        speed_variation, sampling_jitter = float(self.speed_variation), float(self.sampling_jitter)
        first_hour, last_hour = (float(h) for h in self.start_hours)
        left = float(self.left_side_probability)
        room = box_m - 2.0 * margin

        rng = np.random.default_rng([seed, 0])
        labels = rng.permutation(np.arange(n) % len(ARCHETYPES))
        trajectories = np.empty((n, length, 3))
        for i, kind in enumerate(labels):
            route_m = rng.uniform(0.3, 0.8) * box_m
            steps = rng.uniform(1.0 - sampling_jitter, 1.0 + sampling_jitter, length - 1)
            fraction = np.r_[0.0, np.cumsum(steps)] / steps.sum()
            points = _route(int(kind), route_m, fraction * route_m, rng, left)
            heading = rng.uniform(0.0, 2.0 * math.pi)
            rotation = np.array(
                [[math.cos(heading), -math.sin(heading)], [math.sin(heading), math.cos(heading)]]
            )
            points = points @ rotation.T
            shrink = min(1.0, room / max(np.ptp(points[:, 0]), np.ptp(points[:, 1]), 1e-9))
            points, route_m = points * shrink, route_m * shrink
            low, high = -box_m / 2 + margin - points.min(0), box_m / 2 - margin - points.max(0)
            points = points + rng.uniform(low, np.maximum(low, high))
            speed = mean_speed * rng.uniform(1.0 - speed_variation, 1.0 + speed_variation)
            hours = rng.uniform(first_hour, last_hour) + fraction * route_m / 1000.0 / speed
            trajectories[i, :, 0] = hours
            trajectories[i, :, 1:] = points
        noise = np.random.default_rng([seed, 1]).standard_normal((n, length, 2)) * noise_m
        east, north = trajectories[..., 1] + noise[..., 0], trajectories[..., 2] + noise[..., 1]
        trajectories[..., 1] = lat0 + north / METRES_PER_DEGREE
        trajectories[..., 2] = lng0 + east / (METRES_PER_DEGREE * math.cos(math.radians(lat0)))
        return torch.from_numpy(trajectories), torch.from_numpy(labels).long()


def synthetic_city(
    num_trajectories: int,
    length: int,
    seed: int = 0,
    *,
    center: tuple[float, float] = (40.0, 116.3),
    box_km: float = 10.0,
    noise_m: float = 5.0,
    mean_speed_kmh: float = 30.0,
    speed_variation: float = 0.5,
    sampling_jitter: float = 0.3,
    start_hours: tuple[float, float] = (6.0, 22.0),
    margin_m: float = 100.0,
    left_side_probability: float = 0.5,
) -> tuple[Tensor, Tensor]:
    """Seeded trajectories in a square city of side ``box_km`` around ``center`` (lat, lng).

    Each trajectory follows one of :data:`ARCHETYPES` (labels ``0 .. 3``, as equal in number as
    ``num_trajectories`` allows, in random order): a straight road, an L (two legs, a 60-120
    degree turn), an arc (a circular segment of 60-240 degrees) or a detour (a road with a
    rectangular bypass to one side). Each bent route runs on the left of the chord from its
    start to its end with probability ``left_side_probability`` (0.5: no preferred side; 1.0: a
    city whose every bent route keeps to the left of its chord). Routes get a random heading
    and a nominal length of 30-80% of the box, shrunk where needed so the whole route fits
    inside the box less a margin of ``margin_m`` (which must cover 5 standard deviations of the
    noise, so the noisy points stay in the box too), and are placed at random inside it. The
    vehicle moves at a constant speed drawn per trajectory from ``mean_speed_kmh * U(1 -
    speed_variation, 1 + speed_variation)``; the ``length`` fixes are taken at irregular times
    (intervals ``U(1 - sampling_jitter, 1 + sampling_jitter)`` times the mean) from a start
    hour ``U(*start_hours)``, so times (hours) increase strictly and the points lie at the
    matching arc lengths. GPS noise is Gaussian, ``noise_m`` metres of standard deviation east
    and north, converted to degrees.

    Positions are east / north metres of a local equirectangular map around ``center``
    (``lat = lat_0 + y / m``, ``lng = lng_0 + x / (m cos lat_0)``, ``m`` = 111,195 m per degree):
    the box is ``|lat - lat_0| <= box / (2 m)``, ``|lng - lng_0| <= box / (2 m cos lat_0)``.
    The routes and times come from one generator and the noise from another (both seeded by
    ``seed``), and the margin does not depend on ``noise_m``, so ``noise_m=0`` with the same seed
    and ``margin_m`` gives the noiseless routes of a noisy draw.

    Returns:
        ``(trajectories, labels)``: float64 ``(num_trajectories, length, 3)`` of (hour, lat, lng)
        and long ``(num_trajectories,)`` indices into :data:`ARCHETYPES`.
    """
    return SyntheticCity(
        num_trajectories,
        require_int(length, "length", 2),
        center,
        box_km,
        noise_m,
        mean_speed_kmh,
        speed_variation,
        sampling_jitter,
        start_hours,
        margin_m,
        left_side_probability,
    ).generate(seed)


# ----------------------------------------------------------------------------- CSV input


def read_trajectory_csv(
    path: str | Path,
    *,
    user_column: str = "user",
    time_column: str = "timestamp",
    lat_column: str = "lat",
    lng_column: str = "lng",
    time_format: str | None = None,
    time_unit: str | None = None,
) -> dict[Any, np.ndarray]:
    """User -> a float64 ``(n_u, 3)`` array of (hour, lat, lng), sorted by time (ties keep the
    file's order), users in sorted order.

    Timestamps are parsed by ``pandas.to_datetime(..., utc=True, format=time_format)`` (text such
    as FourSquare's ``Tue Apr 03 18:00:09 +0000 2012`` or GeoLife's ``2008-10-23 02:53:04``) and
    become hours since 1970-01-01 UTC; a numeric timestamp column needs ``time_unit`` (``"s"``
    for Unix seconds, ``"ms"``, ...). Coordinates are checked by
    :class:`TrajectoryDataModule` (NaN, latitude range). The file is read by
    :func:`~lightning_info.core.files.read_csv_table`: a BOM is accepted; a repeated column
    name, a truncated line or an empty file is refused, naming the file and line.
    """
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no CSV file at {str(path)!r}.")
    frame = read_csv_table(path)
    if frame.empty:
        raise ValueError(f"{str(path)!r} has a header but no rows: no trajectory to read.")
    wanted = {"user_column": user_column, "time_column": time_column}
    wanted |= {"lat_column": lat_column, "lng_column": lng_column}
    absent = {arg: name for arg, name in wanted.items() if name not in frame.columns}
    if absent:
        raise ValueError(
            f"{str(path)!r} has no column(s) {sorted(absent.values())}; its columns are "
            f"{list(frame.columns)}: name yours with " + ", ".join(f"`{a}=`" for a in absent) + "."
        )
    stamps = frame[time_column]
    try:
        if pd.api.types.is_numeric_dtype(stamps):
            if time_unit is None:
                raise ValueError(
                    f"column {time_column!r} is numeric: pass `time_unit` ('s' for Unix "
                    "seconds, 'ms', ...) to read it as timestamps."
                )
            parsed = pd.to_datetime(stamps, unit=time_unit, utc=True)
        else:
            parsed = pd.to_datetime(stamps, utc=True, format=time_format)
    except (ValueError, TypeError, OverflowError) as error:
        raise ValueError(
            f"could not parse column {time_column!r} as timestamps ({error}); pass "
            "`time_format` (e.g. '%a %b %d %H:%M:%S %z %Y' for FourSquare) or `time_unit`."
        ) from error
    if parsed.isna().any():
        rows = np.flatnonzero(parsed.isna().to_numpy())[:5].tolist()
        raise ValueError(f"column {time_column!r} has empty timestamps (rows {rows}): drop them.")
    hours = (parsed - pd.Timestamp(0, tz="UTC")) / pd.Timedelta(hours=1)
    table = pd.DataFrame(
        {
            "user": frame[user_column].to_numpy(),
            "hour": hours.to_numpy(dtype=np.float64),
            "lat": pd.to_numeric(frame[lat_column], errors="coerce").to_numpy(np.float64),
            "lng": pd.to_numeric(frame[lng_column], errors="coerce").to_numpy(np.float64),
        }
    )
    return {
        user: group.sort_values("hour", kind="stable")[["hour", "lat", "lng"]].to_numpy(np.float64)
        for user, group in table.groupby("user", sort=True)
    }


@dataclass(frozen=True)
class TrajectoryColumns:
    """How to read a CSV of points (:func:`read_trajectory_csv`, whose keyword arguments these
    are): the user, timestamp, latitude and longitude column names, and the timestamps'
    ``time_format`` (text) or ``time_unit`` (numbers)."""

    user_column: str = "user"
    time_column: str = "timestamp"
    lat_column: str = "lat"
    lng_column: str = "lng"
    time_format: str | None = None
    time_unit: str | None = None

    def read(self, path: str | Path) -> dict[Any, np.ndarray]:
        """:func:`read_trajectory_csv` of ``path`` with these columns."""
        return read_trajectory_csv(path, **asdict(self))


# checkpoints hold the data module's options in its hyperparameters (``weights_only`` loading)
torch.serialization.add_safe_globals([SyntheticCity, TrajectoryColumns])


# ----------------------------------------------------------------------------- windows


def _check_sequences(sequences: dict[Any, np.ndarray], what: str) -> None:
    for index, points in sequences.items():
        if points.ndim != 2 or points.shape[1] != 3:
            raise ValueError(
                f"{what} {index!r} must be (n, 3) (time, lat, lng), got {points.shape}."
            )
        bad = ~np.isfinite(points).all(1)
        if bad.any():
            raise ValueError(
                f"{what} {index!r} has {int(bad.sum())} point(s) with NaN or non-numeric "
                f"time or coordinates (e.g. point {int(np.flatnonzero(bad)[0])}): drop them "
                "before building the windows."
            )
        lat, lng = points[:, 1], points[:, 2]
        if (np.abs(lat) > 90.0).any():
            raise ValueError(
                f"{what} {index!r} has latitude {lat[np.abs(lat) > 90.0][0]} outside [-90, 90]: "
                "are the latitude and longitude columns swapped?"
            )
        if (np.abs(lng) > 180.0).any():
            raise ValueError(
                f"{what} {index!r} has longitude {lng[np.abs(lng) > 180.0][0]} outside "
                "[-180, 180]: wrap it to [-180, 180]."
            )


def cut_windows(
    sequences: list[np.ndarray], window_length: int, stride: int
) -> tuple[np.ndarray, np.ndarray]:
    """Windows of ``window_length`` consecutive points, starting every ``stride`` points of each
    sequence (a sequence's tail shorter than a window is dropped): ``(W, k, 3)`` float64 and the
    ``(W,)`` index of each window's sequence. Each sequence is an ``(n, 3)`` array."""
    window_length = require_int(window_length, "window_length", 1)
    stride = require_int(stride, "stride", 1)
    if isinstance(sequences, np.ndarray):
        raise TypeError(
            "`sequences` must be a list of (n, 3) arrays, got one array; wrap a single "
            "trajectory in a list: [points]."
        )
    for index, points in enumerate(sequences):
        if np.ndim(points) != 2 or np.shape(points)[1] != 3:
            raise ValueError(
                f"`sequences[{index}]` must be (n, 3) (time, lat, lng), got shape "
                f"{np.shape(points)}."
            )
    windows, groups = [], []
    for index, points in enumerate(sequences):
        for start in range(0, points.shape[0] - window_length + 1, stride):
            windows.append(points[start : start + window_length])
            groups.append(index)
    if not windows:
        longest = max((p.shape[0] for p in sequences), default=0)
        raise ValueError(
            f"fewer points than a window: the longest of {len(sequences)} trajectories has "
            f"{longest} point(s), `window_length` is {window_length}; lower `window_length` or "
            "supply longer trajectories."
        )
    return np.stack(windows), np.asarray(groups, dtype=np.int64)


class TrajectoryDataModule(SplitDataModule):
    """Windows of ``k`` consecutive (hour, lat, lng) points for endpoint-conditioned imputation.

    The trajectories are :func:`synthetic_city` (``source="synthetic"``, drawn by ``synthetic``)
    or a CSV file of points with a user, a timestamp, a latitude and a longitude column
    (:func:`read_trajectory_csv`, FourSquare- or GeoLife-style; the column names are
    ``columns``), grouped per user and sorted by time. Each trajectory gives the windows of
    ``window_length`` consecutive points starting every ``stride`` points (default
    ``window_length``: windows share no point). With
    ``relative_time`` (default) a window's time channel is hours since its first point (known at
    imputation time, being an endpoint); ``origins[split]`` keeps each window's absolute start.

    The windows (``split_by="window"``), or whole trajectories / users (``split_by="group"``,
    so overlapping windows never straddle two splits), are split into train / val / test at
    random by ``data_seed``. Each channel is min-max scaled to ``[0, 1]`` by the minimum and
    maximum over every point of the TRAINING windows only (``scale_min``, ``scale_max``; a
    constant channel has span 1); validation and test windows may fall outside ``[0, 1]``. The
    reference code (``test.py``) instead fits a fresh ``MinMaxScaler`` on each test batch's full
    ground-truth windows, interior points included, before sampling -- the scaled endpoints then
    encode the hidden interior's range, a leak from the answer into the condition.

    Batches are dicts ``{"window": scaled (B, k, 3) float32, "raw": unscaled (B, k, 3)
    float64}``; the train loader shuffles by ``EpochShuffleSampler(seed=data_seed)`` (epoch ``e``
    always gives the same order, so a resumed run sees the batches the uninterrupted one does).

    Args:
        source: ``"synthetic"`` or the path of a CSV file.
        window_length: ``k >= 3`` (two endpoints and at least one interior point).
        stride: points between window starts (default ``window_length``).
        synthetic: the synthetic city's options, :class:`SyntheticCity` (its
            ``trajectory_length`` defaults to ``window_length``; seeded by ``data_seed``).
        columns: how to read the CSV, :class:`TrajectoryColumns`.
        relative_time: time channel relative to each window's first point.
        split_by: ``"window"`` or ``"group"`` (trajectory / user).
        val_fraction, test_fraction: shares of the windows (or groups) held out.
        data_seed: seeds the synthetic city, the split and the shuffling.
        batch_size, num_workers: the loaders'.
    """

    def __init__(
        self,
        source: str | Path = "synthetic",
        window_length: int = 16,
        *,
        stride: int | None = None,
        synthetic: SyntheticCity = SyntheticCity(),
        columns: TrajectoryColumns = TrajectoryColumns(),
        relative_time: bool = True,
        split_by: Literal["window", "group"] = "window",
        val_fraction: float = 0.1,
        test_fraction: float = 0.1,
        data_seed: int = 0,
        batch_size: int = 64,
        num_workers: int = 0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        if isinstance(window_length, bool) or not isinstance(window_length, int):
            raise TypeError(f"`window_length` must be an int, got {window_length!r}.")
        if window_length < 3:
            raise ValueError(
                f"`window_length` must be >= 3 (two endpoints and at least one interior point "
                f"to impute), got {window_length}."
            )
        self.window_length = window_length
        self.stride = require_int(window_length if stride is None else stride, "stride", 1)
        if split_by not in ("window", "group"):
            raise ValueError(f"`split_by` must be 'window' or 'group', got {split_by!r}.")
        self.batch_size = require_int(batch_size, "batch_size", 1)
        self.num_workers = require_int(num_workers, "num_workers", 0)
        self.data_seed = self.shuffle_seed = require_int(data_seed, "data_seed", 0)
        val_fraction = require_fraction(val_fraction, "val_fraction")
        test_fraction = require_fraction(test_fraction, "test_fraction")

        for name, value, kind in (
            ("synthetic", synthetic, SyntheticCity),
            ("columns", columns, TrajectoryColumns),
        ):
            if not isinstance(value, kind):
                raise TypeError(f"`{name}` must be a {kind.__name__}, got {value!r}.")

        self.labels: Tensor | None = None
        if str(source) == "synthetic":
            trajectories, self.labels = synthetic.generate(data_seed, window_length)
            sequences = dict(enumerate(trajectories.numpy()))
            what = "trajectory"
        else:
            sequences = columns.read(source)
            what = "user"
        _check_sequences(sequences, what)
        #: the trajectory index (synthetic) or user id (CSV) of each group index
        self.group_names = list(sequences)
        windows, self.groups = cut_windows(list(sequences.values()), window_length, self.stride)
        origins = windows[:, 0, 0].copy()
        if relative_time:
            windows[..., 0] -= origins[:, None]
        self.splits = self._split(
            self.groups if split_by == "group" else None, len(windows), val_fraction, test_fraction
        )
        self.windows = {name: torch.from_numpy(windows[i]) for name, i in self.splits.items()}
        self.origins = {name: torch.from_numpy(origins[i]) for name, i in self.splits.items()}
        self.scaling = MinMaxScaling(self.windows["train"])
        self.scale_min, self.scale_max = self.scaling.low, self.scaling.high
        self.scale_span = self.scaling.span

    def _split(
        self, groups: np.ndarray | None, count: int, val_fraction: float, test_fraction: float
    ) -> dict[str, np.ndarray]:
        units = np.unique(groups) if groups is not None else np.arange(count)
        order = np.random.default_rng([self.data_seed, 2]).permutation(units)
        test, val = round(test_fraction * len(units)), round(val_fraction * len(units))
        if len(units) - test - val < 1:
            kind = "groups" if groups is not None else "windows"
            raise ValueError(
                f"{len(units)} {kind} leave none for training with test_fraction="
                f"{test_fraction} and val_fraction={val_fraction}: lower them or add data."
            )
        chosen = {
            "test": order[:test],
            "val": order[test : test + val],
            "train": order[test + val :],
        }
        if groups is None:
            return {name: np.sort(part) for name, part in chosen.items()}
        return {name: np.flatnonzero(np.isin(groups, part)) for name, part in chosen.items()}

    def scale(self, x: Tensor) -> Tensor:
        """``(x - scale_min) / scale_span`` per channel of ``(..., 3)`` windows, float64 on
        ``x``'s device."""
        return self.scaling.forward(torch.as_tensor(x))

    def unscale(self, x: Tensor) -> Tensor:
        """The inverse of :meth:`scale`: ``x * scale_span + scale_min``, float64 on ``x``'s
        device (a model's float32 output comes back in float64 degrees)."""
        return self.scaling.inverse(torch.as_tensor(x))

    def dataset(self, split: str) -> TensorRows:
        """A split's windows (``train``, ``val`` or ``test``) as a Dataset of ``window``
        (scaled, float32) and ``raw`` (unscaled, float64), each ``(k, 3)``."""
        raw = self.windows[split]
        return TensorRows(window=self.scale(raw).float(), raw=raw.double())
