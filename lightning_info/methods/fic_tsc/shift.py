"""Controlled train/test shift: the test split rescaled, offset or noised, the training data not.

The paper's claim is that the Fisher-information constraint helps when the test distribution
differs from the training one. On the bundled UCR/UEA sets no such shift is known, so one is
made: a named transformation of a copy of the test inputs, applied after the normalisation
fitted on the training data (so the normalisation cannot undo it, and the magnitudes are in
training standard deviations under ``normalize="channel"``):

* ``scale``: ``x * magnitude``, the amplitude rescaled about the training mean;
* ``offset``: ``x + magnitude``, every value moved by ``magnitude`` training standard deviations;
* ``noise``: ``x + magnitude * z``, ``z`` standard normal from ``numpy.random.default_rng(seed)``
  (the same noise for every model tested on the same split and seed);
* ``none``: ``x`` unchanged.

Each function returns a new array and never writes to its input. The inputs must be a
floating-point array (an integer array would round the factor and the noise), and a shift that
turns finite inputs into infinities in their dtype (``scale`` by ``1e300`` of float32 data) is
refused with a ValueError rather than returned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from lightning_info.core.validation import (
    require_choice,
    require_finite,
    require_int,
    require_non_negative,
    require_positive,
)

__all__ = ["SHIFT_KINDS", "ShiftOptions", "add_noise", "apply_shift", "offset", "rescale"]

SHIFT_KINDS = ("none", "scale", "offset", "noise")


def rescale(x: np.ndarray, factor: float) -> np.ndarray:
    """``x * factor``, a new array of ``x``'s dtype."""
    _require_floating(x)
    with np.errstate(over="ignore"):
        return (x * np.asarray(factor, dtype=x.dtype)).astype(x.dtype, copy=False)


def offset(x: np.ndarray, amount: float) -> np.ndarray:
    """``x + amount``, a new array of ``x``'s dtype."""
    _require_floating(x)
    with np.errstate(over="ignore"):
        return (x + np.asarray(amount, dtype=x.dtype)).astype(x.dtype, copy=False)


def add_noise(x: np.ndarray, std: float, seed: int) -> np.ndarray:
    """``x + std * z`` with ``z = numpy.random.default_rng(seed).standard_normal(x.shape)``
    drawn in ``x``'s floating dtype: a new array, the same for the same ``(x, std, seed)``."""
    _require_floating(x)
    z = np.random.default_rng(seed).standard_normal(x.shape, dtype=x.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        return (x + np.asarray(std, dtype=x.dtype) * z).astype(x.dtype, copy=False)


def _require_floating(x: np.ndarray) -> None:
    if not isinstance(x, np.ndarray) or x.dtype not in (np.float16, np.float32, np.float64):
        got = x.dtype if isinstance(x, np.ndarray) else type(x).__name__
        raise TypeError(
            f"`x` must be a floating-point array, got {got}; convert it first "
            "(e.g. `x.astype(np.float32)`)."
        )


@dataclass(frozen=True)
class ShiftOptions:
    """One named shift of the test inputs (module docstring).

    Args:
        kind: ``"none"``, ``"scale"``, ``"offset"`` or ``"noise"``.
        magnitude: the factor of ``scale`` (> 0), the amount of ``offset``, the standard
            deviation of ``noise`` (>= 0); ignored by ``none``.
        seed: the noise's seed (``noise`` only).
    """

    kind: Literal["none", "scale", "offset", "noise"] = "none"
    magnitude: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        require_choice(self.kind, "shift kind", SHIFT_KINDS)
        require_finite(self.magnitude, "shift magnitude")
        require_int(self.seed, "shift seed", 0)
        if self.kind == "scale":
            require_positive(self.magnitude, "shift magnitude (scale)")
        if self.kind == "noise":
            require_non_negative(self.magnitude, "shift magnitude (noise)")
        object.__setattr__(self, "magnitude", float(self.magnitude))

    @property
    def name(self) -> str:
        """``none``, ``scale x2``, ``offset +0.5``, ``noise 0.25``: the row name in tables."""
        if self.kind == "none":
            return "none"
        if self.kind == "scale":
            return f"scale x{self.magnitude:g}"
        if self.kind == "offset":
            return f"offset {self.magnitude:+g}"
        return f"noise {self.magnitude:g}"


def apply_shift(x: np.ndarray, shift: ShiftOptions | None) -> np.ndarray:
    """``x`` under ``shift`` (``None``: unchanged), always a new array; ``x`` is not written.

    Raises a ValueError when the shift makes finite values of ``x`` infinite or NaN in ``x``'s
    dtype (the magnitude is too large for the data)."""
    if shift is not None and not isinstance(shift, ShiftOptions):
        raise TypeError(
            f"`shift` must be a ShiftOptions or None, got {type(shift).__name__}; e.g. "
            "ShiftOptions('scale', 2.0)."
        )
    _require_floating(x)
    if shift is None or shift.kind == "none":
        return x.copy()
    if shift.kind == "scale":
        shifted = rescale(x, shift.magnitude)
    elif shift.kind == "offset":
        shifted = offset(x, shift.magnitude)
    else:
        shifted = add_noise(x, shift.magnitude, shift.seed)
    broken = int(np.count_nonzero(~np.isfinite(shifted) & np.isfinite(x)))
    if broken:
        raise ValueError(
            f"shift {shift.name!r} makes {broken} value(s) of the {x.dtype} inputs non-finite; "
            "choose a smaller magnitude."
        )
    return shifted


# data modules keep their options in the hyperparameters, which torch.load reads weights-only
torch.serialization.add_safe_globals([ShiftOptions])
