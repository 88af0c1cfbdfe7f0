"""ProDiff's coordinates and scaling (issue 35): a latitude outside [-90, 90] or a longitude
outside [-180, 180] is refused by the public entry points, and every ``fit`` takes its data
module's scaling (a second fit on another city used to keep the first city's, so its metres
were wrong); evaluating on a data module that scales differently is refused."""

from __future__ import annotations

import functools
import math

import pytest
import torch

from lightning_info.core.trainers import quiet_trainer
from lightning_info.methods.prodiff import (
    DiffusionOptions,
    ProDiff,
    SamplingOptions,
    SyntheticCity,
    TrajectoryColumns,
    TrajectoryDataModule,
)
from lightning_info.methods.prodiff.geometry import (
    EARTH_RADIUS_M,
    great_circle_interpolate,
    haversine_metres,
)
from tests.methods.prodiff.tiny import tiny_prodiff

SECONDS = TrajectoryColumns(time_unit="s")
BEIJING, SYDNEY = (40.0, 116.3), (-33.9, 151.2)


def _t(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def _csv(folder, lat: float, lng: float) -> str:
    path = folder / "points.csv"
    rows = [f"a,{60 * i},{40.0 + 0.001 * i},{116.3 + 0.001 * i}" for i in range(5)]
    rows[2] = f"a,120,{lat},{lng}"
    path.write_text("user,timestamp,lat,lng\n" + "\n".join(rows) + "\n")
    return str(path)


@functools.cache
def _city(center: tuple[float, float]) -> TrajectoryDataModule:
    return TrajectoryDataModule(
        window_length=6,
        synthetic=SyntheticCity(num_trajectories=40, center=center),
        batch_size=8,
    )


def _fit(model: ProDiff, center: tuple[float, float]) -> ProDiff:
    quiet_trainer(max_steps=1, accelerator="cpu", limit_val_batches=0).fit(
        model, datamodule=_city(center)
    )
    return model


@functools.cache
def _trained_in_beijing() -> ProDiff:
    torch.manual_seed(0)
    return _fit(tiny_prodiff(6, sampling_steps=3), BEIJING)


def _evaluate(stage: str, center: tuple[float, float]):
    trainer = quiet_trainer(accelerator="cpu", limit_val_batches=1, limit_test_batches=1)
    return getattr(trainer, stage)(_trained_in_beijing(), datamodule=_city(center), verbose=False)


BAD_INPUT = [  # each call takes a temporary folder
    pytest.param(
        lambda tmp: haversine_metres(_t(200.0), _t(0.0), _t(0.0), _t(0.0)),
        ValueError,
        r"`lat1` holds a latitude of 200.0 degrees, outside \[-90, 90\]: pass \(latitude, "
        r"longitude\) in degrees",
        id="haversine-latitude-200",
    ),
    pytest.param(
        lambda tmp: haversine_metres(_t(0.0, 1.0), _t(0.0), _t(10.0, -90.5), _t(0.0)),
        ValueError,
        r"`lat2` holds a latitude of -90.5 degrees",
        id="haversine-latitude-below-the-pole",
    ),
    pytest.param(
        lambda tmp: haversine_metres(_t(0.0), _t(0.0), _t(0.0), torch.tensor([[10, 181]])),
        ValueError,
        r"`lng2` holds a longitude of 181 degrees, outside \[-180, 180\]: .*wrap longitudes",
        id="haversine-longitude-181-int",
    ),
    pytest.param(
        lambda tmp: great_circle_interpolate(_t(95.0, 0.0), _t(0.0, 1.0), _t(0.5)),
        ValueError,
        r"`start` holds a latitude of 95.0 degrees",
        id="slerp-start-latitude",
    ),
    pytest.param(
        lambda tmp: great_circle_interpolate(_t(0.0, 0.0), _t(0.0, -360.0), _t(0.5)),
        ValueError,
        r"`end` holds a longitude of -360.0 degrees",
        id="slerp-end-longitude",
    ),
    pytest.param(
        lambda tmp: TrajectoryDataModule(_csv(tmp, 200.0, 116.3), 3, columns=SECONDS),
        ValueError,
        r"user 'a' has latitude 200.0 outside \[-90, 90\]",
        id="csv-latitude-200",
    ),
    pytest.param(
        lambda tmp: TrajectoryDataModule(_csv(tmp, 40.0, 190.0), 3, columns=SECONDS),
        ValueError,
        r"user 'a' has longitude 190.0 outside \[-180, 180\]: wrap it",
        id="csv-longitude-190",
    ),
    pytest.param(
        lambda tmp: TrajectoryDataModule(
            window_length=4, synthetic=SyntheticCity(num_trajectories=4, center=(40.0, 500.0))
        ),
        ValueError,
        r"trajectory 0 has longitude 5\d\d\.\d+ outside \[-180, 180\]",
        id="synthetic-center-longitude",
    ),
    pytest.param(
        lambda tmp: ProDiff(sampling=SamplingOptions(steps=600)),
        ValueError,
        r"600 sampling steps exceed the schedule's 500 steps",
        id="prodiff-more-sampling-steps-than-the-schedule",
    ),
    pytest.param(
        lambda tmp: DiffusionOptions(prediction="v"),
        ValueError,
        r"`diffusion.prediction` must be one of \('epsilon', 'x0'\), got 'v'",
        id="prodiff-unknown-prediction",
    ),
    pytest.param(
        lambda tmp: TrajectoryDataModule(window_length=4, synthetic={"num_trajectories": 4}),
        TypeError,
        r"`synthetic` must be a SyntheticCity",
        id="synthetic-options-as-a-dict",
    ),
    pytest.param(
        lambda tmp: SyntheticCity(noise_m=30.0),
        ValueError,
        r"`margin_m` = 100.0 m does not cover 5 standard deviations of the noise",
        id="synthetic-noise-beyond-the-margin",
    ),
    pytest.param(
        lambda tmp: _evaluate("test", SYDNEY),
        ValueError,
        r"the data module scales windows by low .* but this ProDiff was trained with low .*"
        r"fit on this one first",
        id="test-on-another-city",
    ),
    pytest.param(
        lambda tmp: _evaluate("validate", SYDNEY),
        ValueError,
        r"this ProDiff was trained with low",
        id="validate-on-another-city",
    ),
]


def test_the_whole_valid_range_is_accepted():
    pole_to_pole = haversine_metres(_t(90.0), _t(180.0), _t(-90.0), _t(-180.0))
    torch.testing.assert_close(pole_to_pole, _t(math.pi * EARTH_RADIUS_M))
    across = haversine_metres(_t(0.0), _t(179.5), _t(0.0), _t(-179.5))  # the antimeridian
    torch.testing.assert_close(across, _t(math.pi * EARTH_RADIUS_M / 180.0))
    assert torch.isnan(haversine_metres(_t(math.nan), _t(0.0), _t(0.0), _t(0.0))).all()
    middle = great_circle_interpolate(_t(0.0, 180.0), _t(0.0, -179.0), _t(0.5))
    torch.testing.assert_close(middle, _t(0.0, -179.5).reshape(1, 2))


def test_a_second_fit_takes_the_second_data_modules_scaling():
    torch.manual_seed(0)
    model = _fit(tiny_prodiff(6, sampling_steps=3), BEIJING)
    beijing, sydney = _city(BEIJING), _city(SYDNEY)
    assert not torch.allclose(beijing.scaling.low, sydney.scaling.low)
    torch.testing.assert_close(model.scale_low, beijing.scaling.low.double())
    _fit(model, SYDNEY)
    torch.testing.assert_close(model.scale_low, sydney.scaling.low.double())
    torch.testing.assert_close(model.scale_span, sydney.scaling.span.double())
    assert model.hparams["scaling"].low == tuple(sydney.scaling.low.double().tolist())
    raw = sydney.windows["test"]
    torch.testing.assert_close(model.unscale(sydney.scale(raw)), raw)  # degrees in Sydney
    # evaluating on the city it was last fit on is accepted and scores in metres there (within
    # the city's box, not the thousands of km of Beijing's scaling applied to Sydney)
    result = quiet_trainer(accelerator="cpu", limit_test_batches=1).test(
        model, datamodule=sydney, verbose=False
    )
    assert math.isfinite(result[0]["test/mtd"]) and result[0]["test/mtd"] < 100_000
