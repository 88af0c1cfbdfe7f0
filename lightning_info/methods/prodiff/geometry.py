"""Spherical geometry of (latitude, longitude) points in degrees, batched in torch.

- :func:`haversine_metres`: the great-circle distance on a sphere of radius
  :data:`EARTH_RADIUS_M` = 6,371,008.8 m, the IUGG mean Earth radius ``R1 = (2a + b) / 3`` of
  WGS 84 (Moritz, "Geodetic Reference System 1980"), so that 1 degree of latitude is
  ``pi R / 180`` = 111,195.08 m. ProDiff's reference code (``utils.haversine``) uses 6,371 km;
  the two differ by 1.4 parts per million (1.4 mm per km).
- :func:`great_circle_interpolate`: spherical linear interpolation (slerp, Shoemake 1985) between
  two points on the unit sphere: the point a fraction ``f`` of the way along the shorter great-
  circle arc from ``start`` to ``end``.

A sphere, not the WGS 84 ellipsoid: over a city the spherical distance is within ~0.5% of the
geodesic one (the meridian's radius of curvature varies by that much with latitude), which is the
convention of the trajectory literature the metrics follow.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from lightning_info.core.validation import require_positive, require_real_tensor

__all__ = [
    "EARTH_RADIUS_M",
    "METRES_PER_DEGREE",
    "great_circle_interpolate",
    "haversine_metres",
    "latlng_to_unit",
    "unit_to_latlng",
]

#: The IUGG mean Earth radius ``R1`` in metres (see the module docstring).
EARTH_RADIUS_M = 6_371_008.8
#: Metres per degree of latitude (of any great circle) on that sphere: 111,195.08 m.
METRES_PER_DEGREE = math.pi * EARTH_RADIUS_M / 180.0

#: Angles (radians) below which slerp's weights ``sin((1 - f) w) / sin(w)`` are replaced by their
#: limit ``1 - f`` (about 0.6 mm on the Earth), and above ``pi - ANTIPODAL_RAD`` refused.
_SMALL_ANGLE_RAD = 1e-10
_ANTIPODAL_RAD = 1e-6


def _float_dtype(*tensors: Tensor) -> torch.dtype:
    dtype = tensors[0].dtype
    for tensor in tensors[1:]:
        dtype = torch.promote_types(dtype, tensor.dtype)
    return dtype if dtype.is_floating_point else torch.get_default_dtype()


def _require_on_globe(*checks: tuple[str, Tensor, float]) -> None:
    """Refuse coordinates out of range; ``checks`` are ``(argument, degrees, 90.0)`` for
    latitudes and ``(argument, degrees, 180.0)`` for longitudes. One device sync."""
    device = checks[0][1].device
    flags = torch.stack([(t.abs() > limit).any().to(device) for _, t, limit in checks])
    for (name, tensor, limit), flagged in zip(checks, flags.cpu().tolist()):
        if flagged:
            kind = "latitude" if limit == 90.0 else "longitude"
            value = tensor[tensor.abs() > limit].flatten()[0].item()
            raise ValueError(
                f"`{name}` holds a {kind} of {value} degrees, outside [-{limit:g}, {limit:g}]: "
                "pass (latitude, longitude) in degrees, in that order (swapped? radians? scaled "
                "units?), and wrap longitudes into [-180, 180]."
            )


def haversine_metres(
    lat1: Tensor, lng1: Tensor, lat2: Tensor, lng2: Tensor, radius: float = EARTH_RADIUS_M
) -> Tensor:
    """Great-circle distance in metres between ``(lat1, lng1)`` and ``(lat2, lng2)``, in degrees.

    The haversine formula ``a = sin^2(dphi / 2) + cos(phi1) cos(phi2) sin^2(dlambda / 2)``,
    ``d = 2 R atan2(sqrt(a), sqrt(1 - a))`` (the ``atan2`` form is accurate for every distance,
    antipodes included, where ``2 R asin(sqrt(a))`` loses digits). The four tensors broadcast;
    the result has their broadcast shape and promoted floating dtype (float32 in, float32 out:
    pass float64 for sub-metre accuracy far from the origin; ints become the default dtype).
    ``radius`` defaults to :data:`EARTH_RADIUS_M` (6,371,008.8 m). Not differentiable where the
    distance is 0 (the gradient of ``sqrt`` at 0). A latitude outside [-90, 90] or a longitude
    outside [-180, 180] raises (NaN passes through).
    """
    for name, tensor in (("lat1", lat1), ("lng1", lng1), ("lat2", lat2), ("lng2", lng2)):
        require_real_tensor(tensor, name)
    _require_on_globe(
        ("lat1", lat1, 90.0), ("lng1", lng1, 180.0), ("lat2", lat2, 90.0), ("lng2", lng2, 180.0)
    )
    radius = require_positive(radius, "radius")
    dtype = _float_dtype(lat1, lng1, lat2, lng2)
    phi1, lam1, phi2, lam2 = (torch.deg2rad(t.to(dtype)) for t in (lat1, lng1, lat2, lng2))
    a = (
        torch.sin((phi2 - phi1) / 2) ** 2
        + torch.cos(phi1) * torch.cos(phi2) * torch.sin((lam2 - lam1) / 2) ** 2
    ).clamp(0.0, 1.0)
    return (2.0 * radius) * torch.atan2(a.sqrt(), (1.0 - a).sqrt())


def latlng_to_unit(latlng: Tensor) -> Tensor:
    """``(..., 2)`` (lat, lng) in degrees to ``(..., 3)`` unit vectors (x toward (0, 0), z to the
    north pole)."""
    phi, lam = torch.deg2rad(latlng[..., 0]), torch.deg2rad(latlng[..., 1])
    return torch.stack(
        (torch.cos(phi) * torch.cos(lam), torch.cos(phi) * torch.sin(lam), torch.sin(phi)), -1
    )


def unit_to_latlng(unit: Tensor) -> Tensor:
    """``(..., 3)`` vectors (any nonzero length) to ``(..., 2)`` (lat, lng) in degrees, longitude
    in ``(-180, 180]``."""
    x, y, z = unit.unbind(-1)
    lat = torch.atan2(z, torch.hypot(x, y))
    lng = torch.atan2(y, x)
    return torch.rad2deg(torch.stack((lat, lng), -1))


def great_circle_interpolate(start: Tensor, end: Tensor, fractions: Tensor) -> Tensor:
    """Points a fraction of the way along the great circle from ``start`` to ``end``.

    Args:
        start, end: ``(*batch, 2)`` (lat, lng) in degrees (they broadcast).
        fractions: ``(*batch, m)`` or ``(m,)``: where to put the ``m`` points, 0 at ``start``
            and 1 at ``end``, in ``[0, 1]`` (values outside follow the same great circle beyond
            the endpoints).

    Returns:
        ``(*batch, m, 2)`` (lat, lng) in degrees, longitude in ``(-180, 180]``, in the promoted
        floating dtype of the inputs.

    Spherical linear interpolation on the unit sphere: with unit vectors ``p0``, ``p1`` and
    ``w = atan2(|p0 x p1|, p0 . p1)`` the angle between them,
    ``p(f) = sin((1 - f) w) / sin(w) p0 + sin(f w) / sin(w) p1`` -- uniform fractions give equal
    angular (and metric) steps. Where ``w`` is below 1e-10 rad (0.6 mm) the weights are their
    limits ``1 - f`` and ``f``. Antipodal endpoints (within 1e-6 rad, 6 m) have no unique great
    circle and raise, as does a latitude outside [-90, 90] or a longitude outside [-180, 180].
    The endpoints come back up to rounding (~1e-14 degrees in float64), not bit
    for bit: :func:`~lightning_info.methods.prodiff.functional.great_circle_interpolation` copies
    them.
    """
    for name, tensor in (("start", start), ("end", end), ("fractions", fractions)):
        require_real_tensor(tensor, name)
    if start.shape[-1:] != (2,) or end.shape[-1:] != (2,):
        raise ValueError(
            "`start` and `end` must end in a (lat, lng) axis of size 2, got shapes "
            f"{tuple(start.shape)} and {tuple(end.shape)}."
        )
    if fractions.dim() == 0:
        raise ValueError("`fractions` must have a last axis of points, e.g. shape (m,).")
    _require_on_globe(
        ("start", start[..., 0], 90.0),
        ("start", start[..., 1], 180.0),
        ("end", end[..., 0], 90.0),
        ("end", end[..., 1], 180.0),
    )
    dtype = _float_dtype(start, end, fractions)
    p0 = latlng_to_unit(start.to(dtype)).unsqueeze(-2)  # (*batch, 1, 3)
    p1 = latlng_to_unit(end.to(dtype)).unsqueeze(-2)
    f = fractions.to(dtype).unsqueeze(-1)  # (*batch, m, 1)
    omega = torch.atan2(torch.linalg.cross(p0, p1).norm(dim=-1), (p0 * p1).sum(-1)).unsqueeze(-1)
    if bool((omega > math.pi - _ANTIPODAL_RAD).any()):
        raise ValueError(
            "`start` and `end` are (nearly) antipodal: no unique great circle joins them; split "
            "the segment with a waypoint."
        )
    small = omega < _SMALL_ANGLE_RAD
    sin_omega = torch.where(small, torch.ones_like(omega), torch.sin(omega))
    w0 = torch.where(small, 1.0 - f, torch.sin((1.0 - f) * omega) / sin_omega)
    w1 = torch.where(small, f, torch.sin(f * omega) / sin_omega)
    return unit_to_latlng(w0 * p0 + w1 * p1)
