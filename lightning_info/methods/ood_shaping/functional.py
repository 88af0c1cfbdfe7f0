"""OOD detection by shaping penultimate features before the energy score.

Mondal, Jiang & Sundaramoorthi (ICML 2025) derive, from a loss with a KL term separating the
in-distribution (ID) and OOD feature distributions plus an information-bottleneck term, *shaping
functions* ``h`` applied elementwise to the penultimate features ``z`` before the classifier's
final linear layer ``(W, b)``. The OOD score is the energy score of the reshaped logits:

    S(x) = logsumexp_k (W h(z) + b)_k        (higher = more in-distribution).

ReAct, VRA and the paper's new piecewise-linear function (PLF, described in appendix A of the
follow-up arXiv 2602.05935) are all piecewise linear with knots at quantiles of the ID feature
values, so this module builds them on one functional core (the scorer and the tuning are in
``scorer.py``):

- :func:`piecewise_linear` — a piecewise-linear function with optional jumps at its knots,
  vectorised with :func:`torch.bucketize`;
- :func:`energy_score` (AUROC: :func:`~lightning_info.methods.ood_shaping.metrics.ood_auroc`);
- the shapers :class:`Identity`, :class:`ReAct`, :class:`VRA`, :class:`PLF`, each turning ID
  quantiles (:class:`FeatureQuantiles`) into a :class:`PiecewiseLinear`;

Knot placement: every quantile is taken over *all* ``N * D`` feature values of the ID set pooled
together (ReAct's ``tau`` is the 90th percentile of all ID activations, not one per unit), with
linear interpolation between order statistics (``numpy.quantile``'s default).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor

from lightning_info.core.validation import (
    require_bool,
    require_finite,
    require_finite_tensor,
)

__all__ = [
    "energy_score",
    "FeatureQuantiles",
    "Identity",
    "make_shaper",
    "piecewise_linear",
    "PiecewiseLinear",
    "PLF",
    "ReAct",
    "Shaper",
    "SHAPERS",
    "VRA",
]

# --------------------------------------------------------------------------------------------
# Functional core
# --------------------------------------------------------------------------------------------


def piecewise_linear(
    z: Tensor,
    knots_x: Tensor | Sequence[float],
    knots_y: Tensor | Sequence[float],
    left_slope: float = 0.0,
    right_slope: float = 0.0,
    *,
    left_limits: Tensor | Sequence[float] | None = None,
    right_limits: Tensor | Sequence[float] | None = None,
) -> Tensor:
    """Apply a piecewise-linear function with possible jumps at its knots to ``z`` elementwise.

    With knots ``x_0 <= ... <= x_{n-1}``, values ``y_i`` (the function's value *at* ``x_i``), left
    limits ``l_i`` and right limits ``r_i`` (both default to ``y_i``: a continuous function)::

        f(z) = l_0     + left_slope  * (z - x_0)                          z < x_0
        f(z) = r_i     + (l_{i+1} - r_i) * (z - x_i) / (x_{i+1} - x_i)    x_i < z < x_{i+1}
        f(z) = y_i                                                        z = x_i
        f(z) = r_{n-1} + right_slope * (z - x_{n-1})                      z > x_{n-1}

    So a jump at ``x_i`` goes from ``l_i`` to ``r_i``, and the value exactly at the knot is chosen
    freely (``y_i = l_i``: left-continuous, ``y_i = r_i``: right-continuous). Repeated knots are
    allowed; of a run of equal knots the left limit comes from the first copy, and the value and
    right limit from the last. With the default limits and ``left_slope = right_slope = 0`` this
    is ``numpy.interp``. The output has ``z``'s shape and dtype; ``z`` is not modified.
    """
    if not isinstance(z, Tensor) or not z.is_floating_point():
        raise ValueError("`z` must be a floating-point tensor.")
    require_finite_tensor(z, "z")
    kx = _knot_tensor(knots_x, "knots_x", z)
    n = kx.numel()
    ky = _knot_tensor(knots_y, "knots_y", z, n)
    kl = ky if left_limits is None else _knot_tensor(left_limits, "left_limits", z, n)
    kr = ky if right_limits is None else _knot_tensor(right_limits, "right_limits", z, n)
    if n > 1 and (kx[1:] < kx[:-1]).any():
        raise ValueError("`knots_x` must be non-decreasing.")
    left_slope = _slope(left_slope, "left_slope")
    right_slope = _slope(right_slope, "right_slope")

    # seg = (number of knots <= z) - 1: -1 left of x_0, n - 1 right of (or at) x_{n-1}.
    seg = torch.bucketize(z, kx, right=True) - 1
    lo = seg.clamp(0, n - 1)
    hi = (seg + 1).clamp(0, n - 1)
    x_lo, x_hi = kx[lo], kx[hi]
    r_lo = kr[lo]
    width = x_hi - x_lo
    t = (z - x_lo) / torch.where(width > 0, width, torch.ones_like(width))
    inner = r_lo + (kl[hi] - r_lo) * t
    left = kl[0] + left_slope * (z - kx[0])
    right = kr[n - 1] + right_slope * (z - kx[n - 1])
    out = torch.where(seg < 0, left, torch.where(seg >= n - 1, right, inner))
    return torch.where((seg >= 0) & (z == x_lo), ky[lo], out)


def energy_score(logits: Tensor) -> Tensor:
    """``(N,)`` energy score ``logsumexp_k logits_{:, k}``; higher = more in-distribution.

    Sign convention: the free energy of Liu et al. (2020) is ``E(x) = -logsumexp_k f_k(x)``, low
    for ID inputs; the score returned here is ``-E(x)``, so that it ranks like the other scorers.
    """
    if not isinstance(logits, Tensor) or logits.dim() != 2 or not logits.is_floating_point():
        raise ValueError("`logits` must be a floating-point (N, K) tensor.")
    if bool(torch.isnan(logits).any()):
        raise ValueError("`logits` contain NaN; check the classifier's outputs.")
    return torch.logsumexp(logits, dim=1)


def _slope(value: float | Tensor, name: str) -> float:
    if isinstance(value, bool) or (isinstance(value, Tensor) and value.dtype == torch.bool):
        raise TypeError(f"`{name}` must be a real number, got {value!r}.")
    return require_finite(float(value) if isinstance(value, Tensor) else value, name)


def _knot_list(values: Sequence[float], name: str) -> Tensor:
    """A knot tensor (float32 from a sequence; a float tensor keeps its dtype); a str or a bool
    is refused."""
    if isinstance(values, Tensor):
        checked = _knot_tensor(values, name, values)
        return checked if checked.is_floating_point() else checked.float()
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"`{name}` must be a sequence of numbers, got {values!r}.")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"`{name}` must hold real numbers, got {value!r}.")
    return torch.tensor([float(value) for value in values])


def _knot_tensor(
    value: Tensor | Sequence[float], name: str, like: Tensor, length: int | None = None
) -> Tensor:
    if isinstance(value, (str, bytes)):
        raise TypeError(f"`{name}` must be a sequence of numbers, got {value!r}.")
    raw = value if isinstance(value, Tensor) else torch.as_tensor(value)
    if raw.dtype == torch.bool or raw.is_complex():
        raise TypeError(f"`{name}` must hold real numbers, got dtype {raw.dtype}.")
    tensor = raw.to(dtype=like.dtype, device=like.device)
    if tensor.dim() != 1 or tensor.numel() == 0:
        raise ValueError(f"`{name}` must be a non-empty 1-D sequence of knots.")
    if length is not None and tensor.numel() != length:
        raise ValueError(f"`{name}` must have one entry per knot ({length}), got {tensor.numel()}.")
    require_finite_tensor(tensor, name)
    return tensor.contiguous()


# --------------------------------------------------------------------------------------------
# Shaping functions and ID quantiles
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PiecewiseLinear:
    """A fitted shaping function: the arguments of :func:`piecewise_linear` plus ``odd``.

    ``odd = False``: ``h(z) = f(z)``. ``odd = True``: ``f`` acts on ``|z|`` and the sign is
    restored, ``h(z) = sign(z) f(|z|)`` with ``sign(0) = +1`` (so ``h(0) = f(0)``, and ``h`` on
    non-negative post-ReLU features is exactly ``f``).

    Construction checks what :func:`piecewise_linear` would refuse at the first call: knots that
    are empty, of unequal lengths, not finite or not non-decreasing, bool or non-finite slopes,
    and an ``odd`` that is not ``True`` or ``False``.
    """

    knots_x: Tensor
    knots_y: Tensor
    left_limits: Tensor
    right_limits: Tensor
    left_slope: float
    right_slope: float
    odd: bool = False

    @classmethod
    def make(
        cls,
        knots_x: Sequence[float],
        knots_y: Sequence[float],
        left_slope: float,
        right_slope: float,
        *,
        left_limits: Sequence[float] | None = None,
        right_limits: Sequence[float] | None = None,
        odd: bool = False,
    ) -> PiecewiseLinear:
        return cls(
            _knot_list(knots_x, "knots_x"),
            _knot_list(knots_y, "knots_y"),
            _knot_list(knots_y if left_limits is None else left_limits, "left_limits"),
            _knot_list(knots_y if right_limits is None else right_limits, "right_limits"),
            left_slope,
            right_slope,
            odd,
        )

    def __post_init__(self) -> None:
        for name in ("knots_x", "knots_y", "left_limits", "right_limits"):
            object.__setattr__(self, name, _knot_list(getattr(self, name), name))
        kx = _knot_tensor(self.knots_x, "knots_x", self.knots_x)
        n = kx.numel()
        for name in ("knots_y", "left_limits", "right_limits"):
            _knot_tensor(getattr(self, name), name, kx, n)
        if n > 1 and (kx[1:] < kx[:-1]).any():
            raise ValueError(f"`knots_x` must be non-decreasing, got {kx.tolist()}.")
        object.__setattr__(self, "left_slope", _slope(self.left_slope, "left_slope"))
        object.__setattr__(self, "right_slope", _slope(self.right_slope, "right_slope"))
        object.__setattr__(self, "odd", require_bool(self.odd, "odd"))

    def __call__(self, z: Tensor) -> Tensor:
        arguments = (self.knots_x, self.knots_y, self.left_slope, self.right_slope)
        limits = {"left_limits": self.left_limits, "right_limits": self.right_limits}
        if not self.odd:
            return piecewise_linear(z, *arguments, **limits)
        magnitude = piecewise_linear(z.abs(), *arguments, **limits)
        return torch.where(z < 0, -magnitude, magnitude)

    def state_dict(self) -> dict[str, Any]:
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> PiecewiseLinear:
        """The function :meth:`state_dict` saved; a state lacking a field is refused by name."""
        names = [field.name for field in dataclasses.fields(cls)]
        missing = [name for name in names if name not in state]
        if missing:
            raise ValueError(
                f"the saved shaping function lacks {missing}; it is incomplete or was edited "
                "(save the scorer again)."
            )
        return cls(**{name: state[name] for name in names})


class FeatureQuantiles:
    """Quantiles of the pooled ID feature values (all ``N * D`` entries), of ``z`` or ``|z|``.

    The values are sorted once (``|z|`` on first use), so the many shapers of a parameter search
    share one sort; quantiles interpolate linearly between order statistics, like
    ``numpy.quantile`` and ``torch.quantile`` (which refuses inputs above 2**24 elements).
    """

    def __init__(self, features: Tensor) -> None:
        if not isinstance(features, Tensor) or not features.is_floating_point():
            raise ValueError("`features` must be a floating-point tensor.")
        if features.numel() == 0:
            raise ValueError("`features` is empty: pass at least one in-distribution sample.")
        require_finite_tensor(features, "features")
        self._values = features.detach().reshape(-1).float()
        self._sorted: dict[bool, Tensor] = {}

    def __call__(self, fractions: Sequence[float], *, absolute: bool = False) -> list[float]:
        """Quantiles at ``fractions`` (in ``[0, 1]``) of ``z`` (or of ``|z|``), as floats."""
        if absolute not in self._sorted:
            values = self._values.abs() if absolute else self._values
            self._sorted[absolute] = values.sort().values
        ordered = self._sorted[absolute]
        out = []
        for fraction in fractions:
            if isinstance(fraction, bool) or not 0.0 <= fraction <= 1.0:
                raise ValueError(f"quantile fractions must lie in [0, 1], got {fraction!r}.")
            position = fraction * (ordered.numel() - 1)
            below = math.floor(position)
            above = min(below + 1, ordered.numel() - 1)
            low, high = float(ordered[below]), float(ordered[above])
            out.append(low + (high - low) * (position - below))
        return out


class Shaper:
    """A family of shaping functions: parameters (dataclass fields) + ID quantiles -> function.

    Subclasses are frozen dataclasses that validate their parameters, name themselves in
    ``name`` and give the default box of :func:`tune` in ``search_space``.
    """

    name: ClassVar[str]
    search_space: ClassVar[dict[str, tuple[float, float]]]

    def build(self, quantiles: FeatureQuantiles) -> PiecewiseLinear:
        raise NotImplementedError(
            f"{type(self).__name__} does not implement `build`: use a shaper of SHAPERS "
            f"({', '.join(cls.__name__ for cls in SHAPERS.values())}) or a subclass that "
            "returns a PiecewiseLinear from the quantiles."
        )

    def params(self) -> dict[str, float]:
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}


def _require_percentile(value: float, name: str) -> float:
    value = require_finite(value, name)
    if not 0.0 <= value <= 100.0:
        raise ValueError(f"`{name}` is a percentile and must lie in [0, 100], got {value!r}.")
    return value


@dataclass(frozen=True)
class Identity(Shaper):
    """``h(z) = z``: the score is the plain energy of the classifier's own logits."""

    name: ClassVar[str] = "identity"
    search_space: ClassVar[dict[str, tuple[float, float]]] = {}

    def build(self, quantiles: FeatureQuantiles) -> PiecewiseLinear:
        return PiecewiseLinear.make([0.0], [0.0], 1.0, 1.0)


@dataclass(frozen=True)
class ReAct(Shaper):
    """ReAct (Sun et al., 2021): ``h(z) = min(z, tau)``, ``tau`` = ``percentile`` of ID values."""

    percentile: float = 90.0

    name: ClassVar[str] = "react"
    search_space: ClassVar[dict[str, tuple[float, float]]] = {"percentile": (50.0, 99.9)}

    def __post_init__(self) -> None:
        object.__setattr__(self, "percentile", _require_percentile(self.percentile, "percentile"))

    def build(self, quantiles: FeatureQuantiles) -> PiecewiseLinear:
        (tau,) = quantiles([self.percentile / 100])
        return PiecewiseLinear.make([tau], [tau], 1.0, 0.0)


@dataclass(frozen=True)
class VRA(Shaper):
    """VRA (Xu et al., 2023)::

        h(z) = 0          z < a
        h(z) = z + gamma  a <= z <= b
        h(z) = b          z > b

    with ``a``, ``b`` the ``lower_percentile`` / ``upper_percentile`` of the ID values. ``h`` jumps
    at ``a`` (``0 -> a + gamma``) and at ``b`` (``b + gamma -> b``); both jumps are knots with
    separate left/right limits. Defaults are a starting point for :func:`tune`.
    """

    lower_percentile: float = 60.0
    upper_percentile: float = 95.0
    gamma: float = 0.5

    name: ClassVar[str] = "vra"
    search_space: ClassVar[dict[str, tuple[float, float]]] = {
        "lower_percentile": (0.0, 90.0),
        "upper_percentile": (90.0, 99.9),
        "gamma": (0.0, 2.0),
    }

    def __post_init__(self) -> None:
        lower = _require_percentile(self.lower_percentile, "lower_percentile")
        upper = _require_percentile(self.upper_percentile, "upper_percentile")
        if lower > upper:
            raise ValueError(
                f"`lower_percentile` ({lower}) must not exceed `upper_percentile` ({upper})."
            )
        object.__setattr__(self, "lower_percentile", lower)
        object.__setattr__(self, "upper_percentile", upper)
        object.__setattr__(self, "gamma", require_finite(self.gamma, "gamma"))

    def build(self, quantiles: FeatureQuantiles) -> PiecewiseLinear:
        a, b = quantiles([self.lower_percentile / 100, self.upper_percentile / 100])
        g = self.gamma
        return PiecewiseLinear.make(
            [a, b], [a + g, b + g], 0.0, 0.0, left_limits=[0.0, b + g], right_limits=[a + g, b]
        )


@dataclass(frozen=True)
class PLF(Shaper):
    """The piecewise-linear shaper of Mondal et al. (follow-up arXiv 2602.05935, appendix A).

    Acts on ``r = |z|`` and restores the sign: ``h(z) = sign(z) f(|z|)`` with ``sign(0) = +1``
    (for non-negative post-ReLU features ``h = f``). Breakpoints are quantiles of ``|z|`` pooled
    over all ID feature values::

        x1 = F^-1(q1),   x2 = F^-1(q2),   q2 = q1 + 0.10 + u (0.89 - q1),   y1 = y_end + dy

    and ``f`` has three segments. The source fixes only the parameters; this geometry is our
    reading of them (``y1`` sits at ``x1``, ``y_end`` at the end ``x2`` of the middle segment, the
    slopes belong to the two outer segments)::

        f(r) = y_start + m1 r                                 0 <= r < x1    (segment 1)
        f(r) = y1 + (y_end - y1) (r - x1) / (x2 - x1)         x1 <= r < x2   (segment 2)
        f(r) = y_end + m2 (r - x2)                            r >= x2        (segment 3)

    - segment 1 starts at ``y_start`` at ``r = 0`` with slope ``m1``;
    - at ``x1`` ``f`` jumps from ``y_start + m1 x1`` to ``y1`` (continuous only when they agree);
    - segment 2 runs linearly from ``y1`` at ``x1`` to ``y_end`` at ``x2``; with ``dy >= 0`` (the
      search box) it is non-increasing: a peak at ``x1`` falling to ``y_end`` at ``x2``;
    - segment 3 continues from ``y_end`` at ``x2`` with slope ``m2`` for all ``r`` beyond ``x2``
      (``m2 = 0`` clips large activations as ReAct does; ``m2 < 0`` suppresses them).

    ``f`` is continuous at ``x2`` and right-continuous at ``x1``. When ties make ``x1 = x2``,
    segment 2 is empty and ``f(x1) = y_end``; ``x1 = 0`` makes segment 1 empty. The y-values and
    slopes are in feature units. ``q1 in [0, 0.89]`` and ``u in [0, 1]`` keep ``q2 <= 0.99``.
    Defaults are arbitrary; PLF is meant to be fitted with :func:`tune` on the note's box
    (``search_space``).
    """

    q1: float = 0.5
    u: float = 0.5
    m1: float = 1.0
    m2: float = 0.0
    y_start: float = 0.0
    y_end: float = 1.0
    dy: float = 0.0

    name: ClassVar[str] = "plf"
    search_space: ClassVar[dict[str, tuple[float, float]]] = {
        "q1": (0.1, 0.8),
        "u": (0.0, 1.0),
        "m1": (0.0, 5.0),
        "m2": (-5.0, 5.0),
        "y_start": (-5.0, 0.0),
        "y_end": (0.0, 5.0),
        "dy": (0.0, 5.0),
    }

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            object.__setattr__(
                self, field.name, require_finite(getattr(self, field.name), field.name)
            )
        if not 0.0 <= self.q1 <= 0.89:
            raise ValueError(
                f"`q1` is a quantile fraction and must lie in [0, 0.89], got {self.q1}."
            )
        if not 0.0 <= self.u <= 1.0:
            raise ValueError(f"`u` must lie in [0, 1], got {self.u}.")

    @property
    def q2(self) -> float:
        return min(self.q1 + 0.10 + self.u * (0.89 - self.q1), 1.0)

    def build(self, quantiles: FeatureQuantiles) -> PiecewiseLinear:
        x1, x2 = quantiles([self.q1, self.q2], absolute=True)
        y1 = self.y_end + self.dy
        return PiecewiseLinear.make(
            [0.0, x1, x2],
            [self.y_start, y1, self.y_end],
            self.m1,
            self.m2,
            left_limits=[self.y_start, self.y_start + self.m1 * x1, self.y_end],
            right_limits=[self.y_start, y1, self.y_end],
            odd=True,
        )


SHAPERS: dict[str, type[Shaper]] = {cls.name: cls for cls in (Identity, ReAct, VRA, PLF)}


def make_shaper(shaper: str | Shaper, **params: float) -> Shaper:
    """A shaper from a preset name in :data:`SHAPERS` and its parameters (or a ready shaper)."""
    if isinstance(shaper, Shaper):
        if params:
            raise ValueError("Pass parameters either to the shaper or here, not both.")
        return shaper
    if isinstance(shaper, type) and issubclass(shaper, Shaper):
        raise TypeError(
            f"`shaper` is the class {shaper.__name__}; pass an instance ({shaper.__name__}()) or "
            f"a name of {sorted(SHAPERS)}."
        )
    if not isinstance(shaper, str) or shaper not in SHAPERS:
        raise ValueError(f"Unknown shaper {shaper!r}; choose one of {sorted(SHAPERS)}.")
    cls = SHAPERS[shaper]
    allowed = [field.name for field in dataclasses.fields(cls)]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(
            f"Unknown parameter(s) {unknown} for shaper {shaper!r}; it takes {allowed}."
        )
    return cls(**params)
