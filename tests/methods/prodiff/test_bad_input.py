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


from lightning_info.methods.prodiff import (  # noqa: E402
    classifier_free_guidance,
    endpoints_only,
    epsilon_from_x0,
    great_circle_interpolation,
    interior_fractions,
    interior_l1_loss,
    kmeans,
    linear_interpolation,
    match_clusters,
    prototype_attention,
    prototype_contrastive_loss,
    prototype_cross_entropy,
    prototype_usage,
    prototype_weights,
)

NAN = math.nan
FEATURES, PROTOTYPES = torch.randn(4, 3), torch.randn(5, 3)
NOISE = torch.randn(2, 5, 3)


def _window(*times: float) -> torch.Tensor:
    """A (1, k, 3) window near Beijing at ``times``."""
    rows = [[t, 40.0 + 0.001 * i, 116.3 + 0.001 * i] for i, t in enumerate(times)]
    return torch.tensor([rows], dtype=torch.float64)


BAD_INPUT += [
    pytest.param(
        lambda: kmeans(torch.ones(10, 2, dtype=torch.long), 2),
        TypeError,
        r"`points` must be a real floating-point tensor, got dtype torch.int64",
        id="kmeans-int-points",
    ),
    pytest.param(
        lambda: kmeans([[0.0, 1.0]], 1),
        TypeError,
        r"`points` must be a torch.Tensor, got list",
        id="kmeans-list",
    ),
    pytest.param(
        lambda: kmeans(torch.randn(10, 2), 2.0),
        TypeError,
        r"`k` must be an int",
        id="kmeans-k-float",
    ),
    pytest.param(
        lambda: kmeans(torch.full((10, 2), NAN), 2),
        ValueError,
        r"`points` hold NaN or infinity",
        id="kmeans-nan",
    ),
    pytest.param(
        lambda: kmeans(torch.randn(10, 2), 2, generator=0),
        TypeError,
        r"`generator` must be a torch.Generator, got int",
        id="kmeans-generator-int",
    ),
    pytest.param(
        lambda: match_clusters(torch.full((2, 2), NAN), torch.zeros(3, 2)),
        ValueError,
        r"`centres` or `prototypes` hold NaN or infinity",
        id="match-clusters-nan",
    ),
    pytest.param(
        lambda: match_clusters(torch.zeros(4, 2), torch.zeros(3, 2)),
        ValueError,
        r"4 clusters cannot be matched one to one to 3 prototypes",
        id="match-clusters-too-many",
    ),
    pytest.param(
        lambda: prototype_cross_entropy(FEATURES, PROTOTYPES, torch.tensor([0.0, 1, 2, 3])),
        ValueError,
        r"`labels` must be \(4,\) integer prototype indices, got dtype torch.float32",
        id="prototype-ce-float-labels",
    ),
    pytest.param(
        lambda: prototype_cross_entropy(FEATURES, PROTOTYPES, torch.tensor([0, 1])),
        ValueError,
        r"`labels` must be \(4,\) integer prototype indices.*shape \(2,\)",
        id="prototype-ce-labels-length",
    ),
    pytest.param(
        lambda: prototype_cross_entropy(FEATURES, torch.randn(5, 4), torch.tensor([0, 1, 2, 3])),
        ValueError,
        r"`features` and `prototypes` must be \(B, d\) and \(K, d\) of one width d",
        id="prototype-ce-width-mismatch",
    ),
    pytest.param(
        lambda: prototype_contrastive_loss(FEATURES, PROTOTYPES, NAN),
        ValueError,
        r"`margin` must be finite",
        id="prototype-contrastive-margin-nan",
    ),
    pytest.param(
        lambda: prototype_contrastive_loss(FEATURES, PROTOTYPES, -1.0),
        ValueError,
        r"`margin` must be >= 0",
        id="prototype-contrastive-margin-negative",
    ),
    pytest.param(
        lambda: prototype_attention(FEATURES, torch.randn(5, 4)),
        ValueError,
        r"`query` and `prototypes` must be \(B, d\) and \(K, d\)",
        id="prototype-attention-width-mismatch",
    ),
    pytest.param(
        lambda: prototype_weights(FEATURES, PROTOTYPES, True),
        ValueError,
        r"`temperature` must be a finite number > 0, got True",
        id="prototype-weights-temperature-bool",
    ),
    pytest.param(
        lambda: prototype_weights(FEATURES.long(), PROTOTYPES),
        TypeError,
        r"`query` must be a real floating-point tensor",
        id="prototype-weights-int-query",
    ),
    pytest.param(
        lambda: prototype_usage(torch.full((2, 3), NAN)),
        ValueError,
        r"`weights` must be finite and non-negative",
        id="prototype-usage-nan",
    ),
    pytest.param(
        lambda: endpoints_only(torch.randn(5, 3)),
        ValueError,
        r"`window` must be \(B, k >= 2, C\), got shape \(5, 3\)",
        id="endpoints-only-2d",
    ),
    pytest.param(
        lambda: interior_l1_loss(
            torch.zeros(2, 3, 5, dtype=torch.long), torch.zeros(2, 3, 5, dtype=torch.long)
        ),
        TypeError,
        r"`predicted` must be a real floating-point tensor",
        id="interior-l1-int",
    ),
    pytest.param(
        lambda: interior_l1_loss(torch.zeros(2, 3, 5), torch.zeros(2, 3, 4)),
        ValueError,
        r"`predicted` and `target` must be \(B, C, k >= 3\) of one shape",
        id="interior-l1-shape-mismatch",
    ),
    pytest.param(
        lambda: classifier_free_guidance(NOISE, NOISE, NAN),
        ValueError,
        r"`weight` must be finite",
        id="guidance-weight-nan",
    ),
    pytest.param(
        lambda: classifier_free_guidance(NOISE, torch.randn(2, 4, 3), 1.0),
        ValueError,
        r"`conditional` and `unconditional` must have one shape",
        id="guidance-shape-mismatch",
    ),
    pytest.param(
        lambda: epsilon_from_x0(NOISE, NOISE, 1.0),
        ValueError,
        r"`alpha_bar` must lie in \(0, 1\), got 1.0",
        id="epsilon-alpha-bar-one",
    ),
    pytest.param(
        lambda: epsilon_from_x0(NOISE, torch.randn(2, 4, 3), torch.tensor(0.5)),
        ValueError,
        r"`noisy` and `x0` must have one shape",
        id="epsilon-shape-mismatch",
    ),
    pytest.param(
        lambda: interior_fractions(_window(0, 200, 120), "given"),
        ValueError,
        r"interior times must lie between its endpoints' times: sort each trajectory",
        id="interior-fractions-unsorted-times",
    ),
    pytest.param(
        lambda: interior_fractions(_window(0, NAN, 120), "given"),
        ValueError,
        r"`window's interior times` contains 1 NaN/inf",
        id="interior-fractions-nan-time",
    ),
    pytest.param(
        lambda: interior_fractions(_window(0, 60, 120), "linear"),
        ValueError,
        r"`interior_times` must be one of \('interpolate', 'given'\)",
        id="interior-fractions-unknown-mode",
    ),
    pytest.param(
        lambda: linear_interpolation(_window(0, 60, 120).long()),
        TypeError,
        r"`window` must be a floating tensor, got dtype torch.int64",
        id="linear-interpolation-int",
    ),
    pytest.param(
        lambda: great_circle_interpolation(_window(0, 60)),
        ValueError,
        r"a window of length 2 has no interior point to fill",
        id="great-circle-interpolation-no-interior",
    ),
    pytest.param(
        lambda: great_circle_interpolation(_window(0, 60, 120)[0]),
        ValueError,
        r"`window` must be \(B, k, 3\) of \(time, lat, lng\), got shape \(3, 3\)",
        id="great-circle-interpolation-2d",
    ),
]


def test_epsilon_from_x0_takes_a_number_as_its_tensor():
    x0 = torch.randn(2, 5, 3, dtype=torch.float64)
    noise = torch.randn_like(x0)
    noisy = math.sqrt(0.3) * x0 + math.sqrt(0.7) * noise
    torch.testing.assert_close(epsilon_from_x0(noisy, x0, 0.3), noise)
    torch.testing.assert_close(epsilon_from_x0(noisy, x0, torch.tensor(0.3)), noise)


def test_given_interior_times_between_the_endpoints_still_give_fractions():
    fractions = interior_fractions(_window(0, 30, 90, 120), "given")
    torch.testing.assert_close(fractions, torch.tensor([[0.25, 0.75]], dtype=torch.float64))
    reverse = interior_fractions(_window(120, 90, 30, 0), "given")  # time running backwards
    torch.testing.assert_close(reverse, torch.tensor([[0.25, 0.75]], dtype=torch.float64))


from lightning_info.methods.prodiff import (  # noqa: E402
    EndpointCondition,
    MaxTrajectoryDeviation,
    MeanTrajectoryDeviation,
    PrototypeOptions,
    TimeMAE,
    TrajectoryCoverage,
    TrajectoryEncoder,
    TrajectoryUNet,
    WindowScaling,
    check_window,
    cut_windows,
    synthetic_city,
    timestep_embedding,
    trajectory_metrics,
    trajectory_scores,
)


def _updated(metric, pred, target=None):
    metric.update(pred, _window(0, 60, 120) if target is None else target)
    return metric.compute()


def _shifted(latitude: float) -> torch.Tensor:
    return _window(0, 60, 120) + torch.tensor([0.0, latitude, 0.0], dtype=torch.float64)


def _encoder():
    return TrajectoryEncoder(5, embed_dim=8, num_heads=2, num_layers=1)


def _unet():
    return TrajectoryUNet(8, base_channels=8, multipliers=(1,), res_blocks=1, groups=4)


BAD_INPUT += [
    pytest.param(
        lambda: trajectory_scores(torch.full((1, 3, 3), NAN), _window(0, 60, 120)),
        ValueError,
        r"`pred` and `target` must be finite at the interior points",
        id="scores-nan",
    ),
    pytest.param(
        lambda: trajectory_scores(_shifted(160.0), _window(0, 60, 120)),
        ValueError,
        r"a latitude \(channel 1\) lies outside \[-90, 90\]",
        id="scores-latitude-200",
    ),
    pytest.param(
        lambda: trajectory_scores(torch.ones(1, 3, 3, dtype=torch.bool), torch.ones(1, 3, 3)),
        TypeError,
        r"`pred` must be a floating tensor, got dtype torch.bool",
        id="scores-bool",
    ),
    pytest.param(
        lambda: trajectory_scores(_window(0, 60, 120), _window(0, 60, 120), "1"),
        TypeError,
        r"`thresholds_km` must be a real number, got '1'",
        id="scores-thresholds-str",
    ),
    pytest.param(
        lambda: trajectory_metrics([-1.0]),
        ValueError,
        r"`thresholds_km` must be > 0, got -1.0",
        id="metrics-threshold-negative",
    ),
    pytest.param(
        lambda: _updated(MeanTrajectoryDeviation(), torch.full((1, 3, 3), NAN)),
        ValueError,
        r"must be finite at the interior points",
        id="mtd-nan",
    ),
    pytest.param(
        lambda: _updated(MeanTrajectoryDeviation(), _window(0, 60, 120).long()),
        TypeError,
        r"`pred` must be a floating tensor, got dtype torch.int64",
        id="mtd-int",
    ),
    pytest.param(
        lambda: MeanTrajectoryDeviation().compute(),
        ValueError,
        r"MeanTrajectoryDeviation has seen no window",
        id="mtd-compute-before-update",
    ),
    pytest.param(
        lambda: MaxTrajectoryDeviation(reduction="sum"),
        ValueError,
        r"`reduction` must be 'mean' .* or 'max'",
        id="maxtd-reduction-unknown",
    ),
    pytest.param(
        lambda: _updated(MaxTrajectoryDeviation(), _shifted(160.0)),
        ValueError,
        r"a latitude \(channel 1\) lies outside \[-90, 90\]",
        id="maxtd-latitude-200",
    ),
    pytest.param(
        lambda: _updated(TimeMAE(), _window(0, 60, 120), _window(0, 60, 120)[:, :2]),
        ValueError,
        r"`pred` and `target` must both be \(B, k, 3\) windows",
        id="time-mae-shape-mismatch",
    ),
    pytest.param(
        lambda: TrajectoryCoverage([True]),
        TypeError,
        r"`thresholds_km` must be a real number, got True",
        id="coverage-threshold-bool",
    ),
    pytest.param(
        lambda: TrajectoryCoverage([1.0, 1.0]),
        ValueError,
        r"`thresholds_km` has repeated values",
        id="coverage-threshold-repeated",
    ),
    pytest.param(
        lambda: synthetic_city(2.5, 5),
        TypeError,
        r"`num_trajectories` must be an int, got 2.5",
        id="synthetic-city-count-float",
    ),
    pytest.param(
        lambda: synthetic_city(2, 5, center=(200.0, 0.0)),
        ValueError,
        r"`center` latitude must lie in \[-80, 80\]",
        id="synthetic-city-center-latitude",
    ),
    pytest.param(
        lambda: cut_windows([torch.rand(10, 3).numpy()], 3.0, 1),
        TypeError,
        r"`window_length` must be an int, got 3.0",
        id="cut-windows-length-float",
    ),
    pytest.param(
        lambda: cut_windows([torch.rand(10, 3).numpy()], 3, True),
        TypeError,
        r"`stride` must be an int, got True",
        id="cut-windows-stride-bool",
    ),
    pytest.param(
        lambda: cut_windows([torch.rand(10, 3).numpy()], 3, 0),
        ValueError,
        r"`stride` must be >= 1, got 0",
        id="cut-windows-stride-zero",
    ),
    pytest.param(
        lambda: cut_windows([torch.rand(10, 3).numpy()], 0, 1),
        ValueError,
        r"`window_length` must be >= 1, got 0",
        id="cut-windows-length-zero",
    ),
    pytest.param(
        lambda: cut_windows([torch.rand(10).numpy()], 3, 1),
        ValueError,
        r"`sequences\[0\]` must be \(n, 3\) \(time, lat, lng\), got shape \(10,\)",
        id="cut-windows-1d-sequence",
    ),
    pytest.param(
        lambda: cut_windows(torch.rand(10, 3).numpy(), 3, 1),
        TypeError,
        r"`sequences` must be a list of \(n, 3\) arrays, got one array",
        id="cut-windows-one-array",
    ),
    pytest.param(
        lambda: timestep_embedding(torch.arange(3), 8.0),
        TypeError,
        r"`dim` must be an int, got 8.0",
        id="timestep-embedding-dim-float",
    ),
    pytest.param(
        lambda: timestep_embedding(torch.zeros(3, 2), 8),
        ValueError,
        r"`steps` must be 1-D \(B,\)",
        id="timestep-embedding-2d-steps",
    ),
    pytest.param(
        lambda: EndpointCondition(True, 8),
        TypeError,
        r"`channels` must be an int, got True",
        id="endpoint-condition-channels-bool",
    ),
    pytest.param(
        lambda: EndpointCondition(3, 8)(torch.zeros(2, 3), torch.zeros(2, 4)),
        ValueError,
        r"`start` and `end` must both be \(B, 3\)",
        id="endpoint-condition-shape-mismatch",
    ),
    pytest.param(
        lambda: EndpointCondition(3, 8, prototype_dim=4)(torch.zeros(2, 3), torch.zeros(2, 3)),
        ValueError,
        r"this condition was built with prototypes: pass `prototype`",
        id="endpoint-condition-missing-prototype",
    ),
    pytest.param(
        lambda: TrajectoryUNet(8, base_channels=8, groups=2.5),
        TypeError,
        r"`groups` must be an int, got 2.5",
        id="unet-groups-float",
    ),
    pytest.param(
        lambda: TrajectoryUNet(8, base_channels=8, groups=4, attention_lengths="16"),
        TypeError,
        r"`attention_lengths` must be a tuple of ints, got the string '16'",
        id="unet-attention-lengths-str",
    ),
    pytest.param(
        lambda: _unet()(torch.zeros(2, 3, 8), torch.tensor([1, 2, 3])),
        ValueError,
        r"`steps` must be \(2,\), one step per input, got \(3,\)",
        id="unet-steps-length",
    ),
    pytest.param(
        lambda: _unet()(torch.zeros(2, 3, 7), torch.tensor([1, 2])),
        ValueError,
        r"the UNet takes \(B, 3, 8\) inputs, got \(2, 3, 7\)",
        id="unet-window-length",
    ),
    pytest.param(
        lambda: _encoder()(torch.zeros(2, 5, 3, dtype=torch.long)),
        ValueError,
        r"the encoder takes floating \(B, 5, C\) windows with C = 3, got \(2, 5, 3\) of dtype "
        r"torch.int64",
        id="encoder-int-window",
    ),
    pytest.param(
        lambda: _encoder()(torch.zeros(2, 5, 4)),
        ValueError,
        r"the encoder takes floating \(B, 5, C\) windows with C = 3, got \(2, 5, 4\)",
        id="encoder-channels",
    ),
    pytest.param(
        lambda: TrajectoryEncoder(2.5),
        TypeError,
        r"`window_length` must be an int, got 2.5",
        id="encoder-window-length-float",
    ),
    pytest.param(
        lambda: WindowScaling((True, 0, 0), (1, 1, 1)),
        TypeError,
        r"`scaling.low` must hold 3 numbers \(time, lat, lng\), got \(True, 0, 0\)",
        id="scaling-bool",
    ),
    pytest.param(
        lambda: WindowScaling("abc", (1, 1, 1)),
        TypeError,
        r"`scaling.low` must hold 3 numbers",
        id="scaling-str",
    ),
    pytest.param(
        lambda: WindowScaling((0, 0, NAN), (1, 1, 1)),
        ValueError,
        r"`scaling.low` must hold 3 finite numbers",
        id="scaling-nan",
    ),
    pytest.param(
        lambda: check_window(torch.zeros(1, 5, 3), 5.0),
        TypeError,
        r"`length` must be an int, got 5.0",
        id="check-window-length-float",
    ),
    pytest.param(
        lambda: check_window(torch.zeros(1, 5, 3, dtype=torch.long), 5),
        TypeError,
        r"`window` must be a real floating-point tensor, got dtype torch.int64",
        id="check-window-int",
    ),
    pytest.param(
        lambda: check_window(torch.full((1, 5, 3), NAN), 5),
        ValueError,
        r"the windows hold NaN or infinity",
        id="check-window-nan",
    ),
    pytest.param(
        lambda: PrototypeOptions(match_pseudo_labels="no"),
        TypeError,
        r"`prototype_options.match_pseudo_labels` must be True or False, got 'no'",
        id="prototype-options-match-str",
    ),
    pytest.param(
        lambda: PrototypeOptions(margin=-1.0),
        ValueError,
        r"`prototype_options.margin` must be >= 0, got -1.0",
        id="prototype-options-margin-negative",
    ),
]


def test_trajectory_scores_of_valid_windows_match_the_metrics():
    target = _window(0, 60, 120, 180)
    pred = target.clone()
    pred[:, 1:-1, 1] += 0.001  # about 111 m north at the interior points
    scores = trajectory_scores(pred, target)
    metric = MeanTrajectoryDeviation()
    metric.update(pred, target)
    assert scores["mtd"] == pytest.approx(float(metric.compute()), rel=1e-9)
    p, t = pred[0, 1:-1], target[0, 1:-1]
    expected = haversine_metres(p[:, 1], p[:, 2], t[:, 1], t[:, 2]).mean()
    assert scores["mtd"] == pytest.approx(float(expected), rel=1e-9)
    assert 100.0 < scores["mtd"] < 120.0
    assert trajectory_scores(pred.tolist(), target.tolist())["mtd"] == pytest.approx(
        scores["mtd"], rel=1e-9
    )


from lightning_info.methods.prodiff import read_trajectory_csv  # noqa: E402

GOOD_CSV = "user,timestamp,lat,lng\na,0,40.0,116.3\na,60,40.001,116.301\n"


def _read_csv(text: str | bytes, **kwargs):
    """A callable of the test's temporary folder that writes ``text`` there and reads it."""

    def call(folder):
        path = folder / "points.csv"
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
        return read_trajectory_csv(path, **{"time_unit": "s", **kwargs})

    return call


BAD_INPUT += [
    pytest.param(
        _read_csv(GOOD_CSV + "a,120,40.0"),
        ValueError,
        r"points\.csv, line 4: 3 field\(s\) for the header's 4 columns \(a truncated line\?\)",
        id="csv-truncated-line",
    ),
    pytest.param(
        _read_csv("user,timestamp,lat,lat,lng\na,0,40,41,116\n"),
        ValueError,
        r"the header repeats the column name\(s\) \['lat'\]",
        id="csv-repeated-column",
    ),
    pytest.param(_read_csv(""), ValueError, r"points\.csv has no header row", id="csv-empty-file"),
    pytest.param(
        _read_csv("user,timestamp,lat,lng\n"),
        ValueError,
        r"has a header but no rows",
        id="csv-header-only",
    ),
    pytest.param(
        _read_csv(GOOD_CSV, time_unit=None),
        ValueError,
        r"column 'timestamp' is numeric: pass `time_unit`",
        id="csv-numeric-time-without-unit",
    ),
    pytest.param(
        _read_csv(GOOD_CSV, lat_column="latitude"),
        ValueError,
        r"has no column\(s\) \['latitude'\].*`lat_column=`",
        id="csv-missing-column",
    ),
    pytest.param(
        lambda folder: read_trajectory_csv(folder / "absent.csv"),
        FileNotFoundError,
        r"no CSV file at .*absent\.csv",
        id="csv-missing-file",
    ),
]


def test_a_csv_with_a_bom_reads_as_without_it(tmp_path):
    plain, bom = tmp_path / "plain.csv", tmp_path / "bom.csv"
    plain.write_text(GOOD_CSV)
    bom.write_bytes(b"\xef\xbb\xbf" + GOOD_CSV.encode())
    expected = {"a": [[0.0, 40.0, 116.3], [1 / 60, 40.001, 116.301]]}
    for path in (plain, bom):
        read = read_trajectory_csv(path, time_unit="s")
        assert list(read) == ["a"]
        torch.testing.assert_close(
            torch.from_numpy(read["a"]), torch.tensor(expected["a"], dtype=torch.float64)
        )
