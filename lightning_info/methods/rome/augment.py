"""Differentiable siamese augmentation (DSA; Zhao & Bilen, 2021) for dataset distillation.

"Dataset Condensation with Differentiable Siamese Augmentation", Bo Zhao and Hakan Bilen, ICML
2021. A strategy such as ``"color_crop_cutout_flip_scale_rotate"`` names families of transforms;
each call picks one family uniformly at random and applies its ops (the reference code's
``single`` mode):

- ``color``: brightness ``z + (b - 0.5) * brightness``, then saturation
  ``(z - m_c) * (s * saturation) + m_c`` with ``m_c`` the mean over channels, then contrast
  ``(z - m) * (c + contrast) + m`` with ``m`` the mean of the image; ``b, s, c ~ U(0, 1)``;
- ``crop``: an integer translation by up to ``round(H * crop_pad)`` rows and
  ``round(W * crop_pad)`` columns either way, zero fill;
- ``cutout``: a zero square of side ``round(H * cutout)`` by ``round(W * cutout)``, centred
  anywhere in the image and clipped to it;
- ``flip``: a flip of the width axis with probability ``flip``;
- ``scale``: bilinear resampling with the axes scaled by ``sx, sy ~ U(1 / scale, scale)``;
- ``rotate``: bilinear resampling rotated by ``U(-rotate, rotate)`` degrees.

Rounding is half up, as in the reference. Every op is differentiable in the image, so gradients
reach synthetic images. With ``per_batch=True`` (the siamese mode) each random parameter is drawn
once per call and shared by the whole batch: the draws do not depend on the batch size, so two
generators seeded alike give a real and a synthetic batch the same transform. With
``per_batch=False`` (training an evaluation network) each sample draws its own parameters; the
family is still one per call.

The reference augments channel-normalised images, and its brightness shift and zero fill are in
those units. Images here are pixels in ``[0, 1]``, so a call normalises with ``mean`` and
``std``, augments, maps back and clamps to ``[0, 1]``: the result is an image again and can be
attacked inside the pixel box (the clamp is differentiable almost everywhere).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from lightning_info.core.validation import (
    require_bool,
    require_finite,
    require_in_range,
    require_non_negative,
    require_positive,
    require_real_floating,
)

DSA_STRATEGY = "color_crop_cutout_flip_scale_rotate"
FAMILIES = ("color", "crop", "cutout", "flip", "scale", "rotate")


def strategy_families(strategy: str) -> tuple[str, ...]:
    """The families of ``strategy`` in order, or a ValueError naming an unknown one."""
    if not isinstance(strategy, str) or not strategy:
        raise ValueError(f"`strategy` must name at least one of {FAMILIES}, got {strategy!r}.")
    families = tuple(strategy.split("_"))
    for family in families:
        if family not in FAMILIES:
            raise ValueError(
                f"Unknown augmentation family {family!r} in strategy {strategy!r}; known "
                f"families are {', '.join(FAMILIES)}, joined by '_'."
            )
    return families


def choose_family(strategy: str, generator: torch.Generator) -> str:
    """One family of ``strategy``, uniformly at random; the first draw of every DSA call."""
    families = strategy_families(strategy)
    index = torch.randint(len(families), (1,), generator=generator, device=generator.device)
    return families[int(index)]


def adjust_brightness(z: Tensor, shift: Tensor) -> Tensor:
    """``z + shift`` with one shift per sample (``shift`` of shape ``(N,)``)."""
    return z + shift.reshape(-1, 1, 1, 1)


def adjust_saturation(z: Tensor, factor: Tensor) -> Tensor:
    """Scale each pixel's deviation from its channel mean by ``factor`` (shape ``(N,)``)."""
    mean = z.mean(dim=1, keepdim=True)
    return (z - mean) * factor.reshape(-1, 1, 1, 1) + mean


def adjust_contrast(z: Tensor, factor: Tensor) -> Tensor:
    """Scale each image's deviation from its own mean by ``factor`` (shape ``(N,)``)."""
    mean = z.mean(dim=(1, 2, 3), keepdim=True)
    return (z - mean) * factor.reshape(-1, 1, 1, 1) + mean


def translate(z: Tensor, tx: Tensor, ty: Tensor) -> Tensor:
    """Output ``(i, j)`` of sample ``n`` is input ``(i + tx[n], j + ty[n])``, or 0 outside.

    ``tx`` and ``ty`` are integer tensors of shape ``(N,)``.
    """
    n, c, h, w = z.shape
    padded = F.pad(z, (1, 1, 1, 1))
    rows = (torch.arange(h, device=z.device) + tx.reshape(-1, 1)).clamp(-1, h) + 1
    cols = (torch.arange(w, device=z.device) + ty.reshape(-1, 1)).clamp(-1, w) + 1
    padded = padded.gather(2, rows.reshape(n, 1, h, 1).expand(n, c, h, w + 2))
    return padded.gather(3, cols.reshape(n, 1, 1, w).expand(n, c, h, w))


def cutout(z: Tensor, cx: Tensor, cy: Tensor, size_h: int, size_w: int) -> Tensor:
    """Zero the ``size_h`` by ``size_w`` square of rows from ``cx - size_h // 2`` and columns
    from ``cy - size_w // 2`` in each sample, clipped to the image (``cx, cy`` of shape ``(N,)``).
    """
    _, _, h, w = z.shape
    top = (cx - size_h // 2).reshape(-1, 1)
    left = (cy - size_w // 2).reshape(-1, 1)
    rows = torch.arange(h, device=z.device)
    cols = torch.arange(w, device=z.device)
    in_rows = (rows >= top) & (rows < top + size_h)
    in_cols = (cols >= left) & (cols < left + size_w)
    keep = ~(in_rows[:, :, None] & in_cols[:, None, :])
    return z * keep[:, None].to(z.dtype)


def flip_width(z: Tensor, flip: Tensor) -> Tensor:
    """Flip the width axis of the samples where the boolean ``flip`` (shape ``(N,)``) is set."""
    return torch.where(flip.reshape(-1, 1, 1, 1), z.flip(3), z)


def scale_theta(sx: Tensor, sy: Tensor) -> Tensor:
    """Affine matrices ``[[sx, 0, 0], [0, sy, 0]]`` of shape ``(N, 2, 3)``."""
    zero = torch.zeros_like(sx)
    return torch.stack([sx, zero, zero, zero, sy, zero], dim=1).reshape(-1, 2, 3)


def rotation_theta(degrees: Tensor) -> Tensor:
    """Affine matrices ``[[cos, -sin, 0], [sin, cos, 0]]`` of shape ``(N, 2, 3)``."""
    radians = degrees * (math.pi / 180.0)
    cos, sin, zero = radians.cos(), radians.sin(), torch.zeros_like(radians)
    return torch.stack([cos, -sin, zero, sin, cos, zero], dim=1).reshape(-1, 2, 3)


def affine(z: Tensor, theta: Tensor) -> Tensor:
    """Bilinear resampling of ``z`` on ``F.affine_grid(theta)``, zero padding, corners aligned."""
    grid = F.affine_grid(theta.to(z.dtype), list(z.shape), align_corners=True)
    return F.grid_sample(z, grid, mode="bilinear", padding_mode="zeros", align_corners=True)


def _round_half_up(value: float) -> int:
    return math.floor(value + 0.5)


@dataclass(frozen=True)
class DSA:
    """Differentiable siamese augmentation (Zhao & Bilen, 2021) of pixel images in ``[0, 1]``.

    One family of ``strategy`` per call, as in the reference code's ``single`` mode; the ops act
    on ``(x - mean) / std`` and the result is mapped back and clamped to ``[0, 1]`` (see the
    module docstring). ``mean`` and ``std`` hold one value per channel.
    """

    strategy: str = DSA_STRATEGY
    mean: tuple[float, ...] = (0.0,)
    std: tuple[float, ...] = (1.0,)
    flip: float = 0.5
    scale: float = 1.2
    rotate: float = 15.0
    crop_pad: float = 0.125
    cutout: float = 0.5
    brightness: float = 1.0
    saturation: float = 2.0
    contrast: float = 0.5

    def __post_init__(self) -> None:
        strategy_families(self.strategy)
        for name in ("mean", "std"):
            if isinstance(getattr(self, name), (int, float, str)):
                raise TypeError(
                    f"`{name}` must be a sequence with one value per channel, got "
                    f"{getattr(self, name)!r}; wrap it: ({getattr(self, name)!r},)."
                )
        mean = tuple(require_finite(m, "mean") for m in self.mean)
        std = tuple(require_positive(s, "std") for s in self.std)
        if not mean or len(mean) != len(std):
            raise ValueError(
                f"`mean` and `std` need one value per channel each, got {len(mean)} and "
                f"{len(std)} values."
            )
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "std", std)
        for name in ("flip", "cutout"):
            if require_non_negative(getattr(self, name), name) > 1.0:
                raise ValueError(f"`{name}` must lie in [0, 1], got {getattr(self, name)!r}.")
        require_in_range(self.scale, "scale", 1.0)
        for name in ("rotate", "crop_pad", "brightness", "saturation", "contrast"):
            require_non_negative(getattr(self, name), name)

    @classmethod
    def for_images(cls, images: Tensor, strategy: str = DSA_STRATEGY, **kwargs) -> DSA:
        """Channel mean/std of (N, C, H, W) images as the normalisation."""
        if images.dim() != 4:
            raise ValueError(f"`images` must be (N, C, H, W), got shape {tuple(images.shape)}.")
        if images.shape[0] == 0:
            raise ValueError(
                "`images` is empty; pass at least one image to read mean and std from."
            )
        images = images.detach().double()
        mean = images.mean(dim=(0, 2, 3)).tolist()
        std = images.std(dim=(0, 2, 3), correction=0).tolist()
        return cls(strategy=strategy, mean=tuple(mean), std=tuple(std), **kwargs)

    def __call__(
        self,
        x: Tensor,
        generator: torch.Generator,
        *,
        per_batch: bool = True,
        family: str | None = None,
    ) -> Tensor:
        """x: (N, C, H, W) floating-point pixels in ``[0, 1]``; C must equal len(mean). Draws
        come from ``generator`` (a ``torch.Generator``) only. ``family``: the family of the
        strategy to apply; ``None`` draws it from ``generator`` (its first draw, read on the
        host: a device synchronisation for a generator on an accelerator), so a caller that
        chooses on the host passes it and the call reads no value back."""
        require_real_floating(x, "x")
        if not isinstance(generator, torch.Generator):
            raise TypeError(
                f"`generator` must be a torch.Generator, got {type(generator).__name__}; e.g. "
                "torch.Generator().manual_seed(0)."
            )
        require_bool(per_batch, "per_batch")
        if x.dim() != 4 or x.shape[1] != len(self.mean):
            raise ValueError(
                f"`x` must be (N, C, H, W) with C = {len(self.mean)} channels (one per mean/std "
                f"value), got shape {tuple(x.shape)}."
            )
        if family is None:
            family = choose_family(self.strategy, generator)
        elif family not in strategy_families(self.strategy):
            raise ValueError(
                f"`family` must be one of the strategy's families "
                f"{strategy_families(self.strategy)}, got {family!r}."
            )
        mean = x.new_tensor(self.mean).reshape(1, -1, 1, 1)
        std = x.new_tensor(self.std).reshape(1, -1, 1, 1)
        count = 1 if per_batch else x.shape[0]
        z = self._augment(family, (x - mean) / std, generator, count)
        return (z * std + mean).clamp(0.0, 1.0)

    def _augment(self, family: str, z: Tensor, generator: torch.Generator, count: int) -> Tensor:
        n, _, h, w = z.shape

        def uniform() -> Tensor:
            u = torch.rand(count, generator=generator, device=generator.device)
            return u.to(z.device, z.dtype).expand(n)

        def integers(low: int, high: int) -> Tensor:
            k = torch.randint(low, high, (count,), generator=generator, device=generator.device)
            return k.to(z.device).expand(n)

        if family == "color":
            z = adjust_brightness(z, (uniform() - 0.5) * self.brightness)
            z = adjust_saturation(z, uniform() * self.saturation)
            return adjust_contrast(z, uniform() + self.contrast)
        if family == "crop":
            pad_h, pad_w = _round_half_up(h * self.crop_pad), _round_half_up(w * self.crop_pad)
            tx = integers(-pad_h, pad_h + 1)
            return translate(z, tx, integers(-pad_w, pad_w + 1))
        if family == "cutout":
            size_h, size_w = _round_half_up(h * self.cutout), _round_half_up(w * self.cutout)
            cx = integers(0, h)
            return cutout(z, cx, integers(0, w), size_h, size_w)
        if family == "flip":
            return flip_width(z, uniform() < self.flip)
        if family == "scale":
            low = 1.0 / self.scale
            sx = low + uniform() * (self.scale - low)
            return affine(z, scale_theta(sx, low + uniform() * (self.scale - low)))
        return affine(z, rotation_theta((2.0 * uniform() - 1.0) * self.rotate))
