"""Haversine distance against the closed form of a degree of latitude, a direct numpy
implementation and the ``haversine`` package; great-circle interpolation against the great
circle's own geometry and, over 100 m, against linear interpolation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lightning_info.methods.prodiff.geometry import (
    EARTH_RADIUS_M,
    METRES_PER_DEGREE,
    great_circle_interpolate,
    haversine_metres,
    latlng_to_unit,
)


def _t(*values):
    return torch.tensor(values, dtype=torch.float64)


def _random_points(n: int, seed: int):
    """Uniform on the sphere: latitude by arcsin of a uniform, longitude uniform."""
    rng = np.random.default_rng(seed)
    lat = np.degrees(np.arcsin(rng.uniform(-1, 1, n)))
    return lat, rng.uniform(-180, 180, n)


def _numpy_haversine(lat1, lng1, lat2, lng2, radius=EARTH_RADIUS_M):
    """The formula as written: ``2 R asin(sqrt(sin^2(dphi/2) + cos cos sin^2(dlambda/2)))``."""
    phi1, lam1, phi2, lam2 = (np.radians(v) for v in (lat1, lng1, lat2, lng2))
    a = (
        np.sin((phi2 - phi1) / 2) ** 2
        + np.cos(phi1) * np.cos(phi2) * np.sin((lam2 - lam1) / 2) ** 2
    )
    return 2 * radius * np.arcsin(np.sqrt(a))


def test_one_degree_of_latitude_is_111_19_km():
    for lat in (0.0, 40.0, -75.5):
        metres = float(haversine_metres(_t(lat), _t(116.3), _t(lat + 1.0), _t(116.3)))
        assert abs(metres / 1000.0 - 111.19) <= 0.01
        assert metres == pytest.approx(math.pi * 6_371_008.8 / 180.0, rel=1e-12)
    assert pytest.approx(111_195.08, abs=0.01) == METRES_PER_DEGREE
    # one degree of longitude on the equator is a degree of a great circle as well
    assert float(haversine_metres(_t(0.0), _t(10.0), _t(0.0), _t(11.0))) == pytest.approx(
        METRES_PER_DEGREE, rel=1e-12
    )


def test_symmetric_zero_on_identical_points_and_matches_numpy():
    lat1, lng1 = _random_points(2000, 0)
    lat2, lng2 = _random_points(2000, 1)
    a = [torch.from_numpy(v) for v in (lat1, lng1, lat2, lng2)]
    forward = haversine_metres(*a)
    backward = haversine_metres(a[2], a[3], a[0], a[1])
    torch.testing.assert_close(forward, backward, rtol=1e-14, atol=1e-8)
    assert torch.equal(
        haversine_metres(a[0], a[1], a[0], a[1]), torch.zeros(2000, dtype=torch.float64)
    )
    expected = _numpy_haversine(lat1, lng1, lat2, lng2)
    np.testing.assert_allclose(forward.numpy(), expected, rtol=1e-10, atol=1e-3)
    # and at city scale, where the relative agreement is tight
    near_lat, near_lng = lat1 + 0.01 * np.sin(lng2), lng1 + 0.01 * np.cos(lat2)
    near = haversine_metres(a[0], a[1], torch.from_numpy(near_lat), torch.from_numpy(near_lng))
    np.testing.assert_allclose(
        near.numpy(), _numpy_haversine(lat1, lng1, near_lat, near_lng), rtol=1e-9
    )


def test_matches_the_haversine_package():
    haversine = pytest.importorskip("haversine")
    lat1, lng1 = _random_points(200, 2)
    lat2, lng2 = _random_points(200, 3)
    ours = haversine_metres(*(torch.from_numpy(v) for v in (lat1, lng1, lat2, lng2))).numpy()
    theirs = [
        haversine.haversine((a, b), (c, d), unit=haversine.Unit.METERS)
        for a, b, c, d in zip(lat1, lng1, lat2, lng2)
    ]
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-3)


def test_broadcasting_dtypes_and_radius():
    d = haversine_metres(
        _t(40.0), _t(116.3), torch.full((3, 4), 40.5, dtype=torch.float64), _t(116.3)
    )
    assert d.shape == (3, 4)
    f32 = haversine_metres(
        *(torch.tensor([v], dtype=torch.float32) for v in (40.0, 116.3, 40.01, 116.31))
    )
    assert f32.dtype == torch.float32
    f64 = haversine_metres(_t(40.0), _t(116.3), _t(40.01), _t(116.31))
    assert float(f32) == pytest.approx(float(f64), abs=1.0)
    assert float(haversine_metres(_t(0.0), _t(0.0), _t(1.0), _t(0.0), radius=1.0)) == pytest.approx(
        math.pi / 180
    )
    with pytest.raises(ValueError, match="radius"):
        haversine_metres(_t(0.0), _t(0.0), _t(1.0), _t(0.0), radius=-1.0)
    with pytest.raises(TypeError, match="torch.Tensor"):
        haversine_metres(0.0, _t(0.0), _t(1.0), _t(0.0))


def test_great_circle_hits_both_endpoints():
    start = torch.tensor([[40.0, 116.3], [-33.9, 151.2], [10.0, 179.5]], dtype=torch.float64)
    end = torch.tensor([[40.05, 116.4], [51.5, -0.1], [10.5, -179.5]], dtype=torch.float64)
    points = great_circle_interpolate(start, end, _t(0.0, 1.0))
    assert points.shape == (3, 2, 2)
    torch.testing.assert_close(points[:, 0], start, rtol=0, atol=1e-9)
    torch.testing.assert_close(points[:, 1], end, rtol=0, atol=1e-9)


def test_great_circle_lies_on_the_circle_in_equal_steps():
    start = torch.tensor([[40.0, 116.3], [-33.9, 151.2], [10.0, 179.5]], dtype=torch.float64)
    end = torch.tensor([[40.05, 116.4], [51.5, -0.1], [10.5, -179.5]], dtype=torch.float64)
    fractions = torch.linspace(0, 1, 11, dtype=torch.float64)
    points = great_circle_interpolate(start, end, fractions)  # (3, 11, 2)
    normal = torch.linalg.cross(latlng_to_unit(start), latlng_to_unit(end))
    normal = normal / normal.norm(dim=-1, keepdim=True)
    off_plane = (latlng_to_unit(points) * normal.unsqueeze(1)).sum(-1)
    assert float(off_plane.abs().max()) < 1e-12
    steps = haversine_metres(
        points[:, :-1, 0], points[:, :-1, 1], points[:, 1:, 0], points[:, 1:, 1]
    )
    total = haversine_metres(start[:, 0], start[:, 1], end[:, 0], end[:, 1])
    torch.testing.assert_close(steps, (total / 10).unsqueeze(1).expand_as(steps), rtol=1e-9, atol=0)
    # across the antimeridian the midpoint is near longitude 180, not near 0
    assert abs(abs(float(points[2, 5, 1])) - 180.0) < 1e-3


def test_great_circle_batched_fractions_and_errors():
    start = torch.tensor([[40.0, 116.3], [41.0, 116.0]], dtype=torch.float64)
    end = torch.tensor([[40.1, 116.4], [41.0, 116.0]], dtype=torch.float64)  # second: zero length
    fractions = torch.tensor([[0.25, 0.5, 0.75], [0.1, 0.2, 0.3]], dtype=torch.float64)
    points = great_circle_interpolate(start, end, fractions)
    assert points.shape == (2, 3, 2)
    torch.testing.assert_close(points[1], end[1].expand(3, 2), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="antipodal"):
        great_circle_interpolate(_t(0.0, 0.0), _t(0.0, 180.0), _t(0.5))
    with pytest.raises(ValueError, match="size 2"):
        great_circle_interpolate(_t(0.0, 0.0, 0.0), _t(0.0, 1.0), _t(0.5))
    with pytest.raises(ValueError, match="last axis"):
        great_circle_interpolate(_t(0.0, 0.0), _t(0.0, 1.0), torch.tensor(0.5))


def test_great_circle_equals_linear_over_100_metres():
    start = torch.tensor([40.0, 116.3], dtype=torch.float64)
    bearing = math.radians(35.0)
    end = start + torch.tensor(
        [
            100.0 * math.cos(bearing) / METRES_PER_DEGREE,
            100.0 * math.sin(bearing) / (METRES_PER_DEGREE * math.cos(math.radians(40.0))),
        ],
        dtype=torch.float64,
    )
    assert float(haversine_metres(start[0], start[1], end[0], end[1])) == pytest.approx(
        100.0, rel=1e-2
    )
    fractions = torch.linspace(0, 1, 21, dtype=torch.float64)
    spherical = great_circle_interpolate(start, end, fractions)
    linear = start + fractions.unsqueeze(-1) * (end - start)
    gap = haversine_metres(spherical[:, 0], spherical[:, 1], linear[:, 0], linear[:, 1])
    assert float(gap.max()) < 1.0
    assert float(gap.max()) < 1e-3  # in fact well below a millimetre
