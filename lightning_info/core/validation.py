"""Argument checks that fail early with a message saying what to do."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch


def require_int(value: int, name: str, minimum: int) -> int:
    """Return ``value``, or raise unless it is an int (not a bool) ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"`{name}` must be an int, got {value!r}.")
    if value < minimum:
        raise ValueError(f"`{name}` must be >= {minimum}, got {value!r}.")
    return value


def require_in_range(value: float, name: str, low: float, high: float | None = None) -> float:
    """Return ``value`` as float, or raise unless ``low <= value`` (and ``value < high``)."""
    value = require_finite(value, name)
    if value < low or (high is not None and value >= high):
        bound = f"in [{low}, {high})" if high is not None else f">= {low}"
        raise ValueError(f"`{name}` must be {bound}, got {value!r}.")
    return value


def require_choice(value: str, name: str, allowed: Sequence[str]) -> str:
    """Return ``value``, or raise unless it is one of ``allowed`` (the runtime twin of a
    ``Literal`` annotation, for callers that bypass LightningCLI's type check)."""
    if value not in allowed:
        raise ValueError(f"`{name}` must be one of {tuple(allowed)}, got {value!r}.")
    return value


def require_finite(value: float, name: str) -> float:
    """Return ``value`` as float, or raise if it is not a finite real number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"`{name}` must be a real number, got {value!r}.")
    if not math.isfinite(value):
        raise ValueError(f"`{name}` must be finite, got {value!r}.")
    return float(value)


def require_positive(value: float, name: str) -> float:
    """Return ``value`` as float, or raise if it is not a finite number > 0."""
    value = require_finite(value, name)
    if value <= 0:
        raise ValueError(f"`{name}` must be > 0, got {value!r}.")
    return value


def require_non_negative(value: float, name: str) -> float:
    """Return ``value`` as float, or raise if it is not a finite number >= 0."""
    value = require_finite(value, name)
    if value < 0:
        raise ValueError(f"`{name}` must be >= 0, got {value!r}.")
    return value


def require_fraction(value: float, name: str, *, inclusive_zero: bool = True) -> float:
    """Return ``value`` as float, or raise unless it lies in [0, 1) (or (0, 1))."""
    value = require_finite(value, name)
    if not (0.0 <= value < 1.0) or (not inclusive_zero and value == 0.0):
        low = "[0" if inclusive_zero else "(0"
        raise ValueError(f"`{name}` must lie in {low}, 1), got {value!r}.")
    return value


_FINITE_CHECK_ELEMENTS = 1 << 22


def all_finite(tensor: torch.Tensor) -> bool:
    """Whether every element is finite.

    A finite sum proves it (a NaN or an infinity makes any sum NaN or infinite) with one
    reduction and no temporary; ``torch.isfinite(...).all()``, which builds a mask as large as
    the input and costs 25x the sum on a (4096, 64) tensor, only runs when the sum is not finite
    (a bad value, or a sum that overflowed), and then a slice at a time: for an LLM-sized
    feature pool the mask would be gigabytes.
    """
    if tensor.numel() == 0 or not (tensor.is_floating_point() or tensor.is_complex()):
        return True
    with torch.no_grad():
        if bool(torch.isfinite(tensor.sum())):
            return True
    if tensor.dim() == 0 or tensor.numel() <= _FINITE_CHECK_ELEMENTS:
        return bool(torch.isfinite(tensor).all())
    rows = max(1, _FINITE_CHECK_ELEMENTS // max(1, tensor[0].numel()))
    return all(bool(torch.isfinite(part).all()) for part in tensor.split(rows))


def require_finite_tensor(tensor: torch.Tensor, name: str) -> torch.Tensor:
    """Raise if ``tensor`` holds NaN or infinity; the tensor itself is not changed."""
    if not all_finite(tensor):
        bad = int((~torch.isfinite(tensor)).sum())
        raise ValueError(
            f"`{name}` contains {bad} NaN/inf value(s); clean or impute them before passing it in."
        )
    return tensor


def require_real_tensor(tensor: torch.Tensor, name: str) -> torch.Tensor:
    """Return ``tensor``, or raise if it is not a tensor or lives on the meta device (no data).

    Only ``tensor.is_meta`` is read, so the check never synchronises with an accelerator.
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"`{name}` must be a torch.Tensor, got {type(tensor).__name__}.")
    if tensor.is_meta:
        raise ValueError(
            f"`{name}` is on the meta device (no data); materialise it first, e.g. load the "
            "weights or build it on a real device such as 'cpu' or 'cuda'."
        )
    return tensor
