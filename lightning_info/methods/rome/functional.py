"""ROME: robust dataset distillation through the information bottleneck (Zhou et al., ICML 2025).

ROME learns a small synthetic set ``x_s`` (``images_per_class`` images for each of ``K`` classes)
on which a freshly trained network is both accurate and adversarially robust. For a class ``c``,
a batch ``x_r`` of real images of class ``c``, a network ``f`` from a pool with conv features
``e(.)`` and clean accuracy ``acc_net`` in ``[0, 1]`` on ``x_r``, one step minimises

    x_hat_r = PGD_targeted(f, x_r, target=(c + 1) mod K, eps)     (pixel space, [0, 1])
    L_rob   = (1/2 * ||mean_i e(x_s,i) - mean_j e(x_hat_r,j)||_1)^2  (for min I(X; Z | X_hat))
    L_perf  = w_ce * (1 - alpha) * acc_net * CE(f(x_s), c)         (for max I(Y; Z))
    L       = sum_c [alpha * L_rob + L_perf]

over the synthetic pixels, which are then clamped to ``[0, 1]``. The pool of networks is itself
adversarially trained in the loop (untargeted PGD on real batches) and can grow, first in first
out, up to ``max_nets``. With ``robust=False`` the attack is skipped and ``x_hat_r = x_r`` in
the same ``L`` (alignment of clean features plus ``L_perf``); ``robust=False, alpha=1`` is plain
distribution matching, the baseline ROME is compared with.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from lightning_info.core.validation import (
    require_int,
    require_real_floating,
    require_string_sequence,
)
from lightning_info.measures.mutual_information import mean_embedding_distance

__all__ = [
    "ATTACKS",
    "check_attacks",
    "check_real",
    "image_grid",
    "predicted_classes",
    "rome_alignment",
]

ATTACKS = ("fgsm", "pgd", "pgd_l2")


def predicted_classes(logits: Tensor) -> Tensor:
    """``(N,)``: each row's arg-max class, or -1 for a row holding NaN, so that a network that
    diverged is never counted correct (``argmax`` of a NaN row picks the NaN's position, of an
    all-NaN row class 0). On the device, no synchronisation."""
    return torch.where(torch.isnan(logits).any(1), -1, logits.argmax(1))


def rome_alignment(
    features_syn: Tensor, features_adv: Tensor, *, validate_args: bool = True
) -> Tensor:
    """ROME's robustness term ``L_rob = (1/2 * ||mean e(x_s) - mean e(x_hat_r)||_1)^2``.

    Args:
        features_syn: features of the synthetic images, ``(n, d)``; gradients flow through them.
        features_adv: features of the (adversarial) real images, ``(m, d)``. They are a fixed
            target: the caller passes them detached, and this function does not detach them, so
            a caller that wants gradients on both sides can have them.
        validate_args: refuse NaN or infinite features (one host read, a device
            synchronisation on an accelerator); shapes and dtypes are always checked.

    Returns:
        A 0-dim tensor.
    """
    for tensor, name in ((features_syn, "features_syn"), (features_adv, "features_adv")):
        if isinstance(tensor, Tensor):
            require_real_floating(tensor, name)
    distance = mean_embedding_distance(features_syn, features_adv, p=1, validate_args=validate_args)
    return (0.5 * distance) ** 2


def image_grid(images: Tensor, per_row: int, pad: int = 1) -> Tensor:
    """Tile ``(N, C, H, W)`` images row-major, ``per_row`` (an int >= 1) per row, with ``pad``
    (an int >= 0) white pixels."""
    require_int(per_row, "per_row", 1)
    require_int(pad, "pad", 0)
    if not isinstance(images, Tensor) or images.dim() != 4:
        shape = tuple(getattr(images, "shape", ()))
        raise ValueError(f"`images` must be a (N, C, H, W) tensor, got shape {shape}.")
    n, c, h, w = images.shape
    rows = -(-n // per_row)
    grid = images.new_ones(c, rows * (h + pad) + pad, per_row * (w + pad) + pad)
    for i in range(n):
        top, left = pad + (i // per_row) * (h + pad), pad + (i % per_row) * (w + pad)
        grid[:, top : top + h, left : left + w] = images[i]
    return grid


def check_attacks(attacks: Sequence[str], name: str = "attacks") -> tuple[str, ...]:
    """``attacks`` as a tuple of distinct names from :data:`ATTACKS`; a bare string is refused
    (``"fgsm"`` is not the four attacks ``f, g, s, m``: pass ``["fgsm"]``)."""
    attacks = tuple(require_string_sequence(attacks, name))
    unknown = [attack for attack in attacks if attack not in ATTACKS]
    if unknown:
        raise ValueError(f"`{name}` names the unknown attack(s) {unknown}; choose from {ATTACKS}.")
    if not attacks or len(set(attacks)) < len(attacks):
        raise ValueError(f"`{name}` must be distinct names from {ATTACKS}, got {attacks!r}.")
    return attacks


def check_real(images: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """Copies of real ``(N, C, H, W)`` pixel images in ``[0, 1]`` and their integer labels."""
    if not isinstance(images, Tensor) or not images.is_floating_point() or images.dim() != 4:
        raise TypeError("`real_images` must be a floating-point tensor (N, C, H, W).")
    if (
        not isinstance(labels, Tensor)
        or labels.is_floating_point()
        or labels.is_complex()
        or labels.dtype == torch.bool
        or labels.dim() != 1
    ):
        got = f"dtype {labels.dtype}" if isinstance(labels, Tensor) else type(labels).__name__
        raise TypeError(f"`real_labels` must be an integer tensor (N,), got {got}.")
    if labels.shape[0] != images.shape[0] or images.shape[0] == 0:
        raise ValueError("`real_images` and `real_labels` must hold the same, non-zero N.")
    if not torch.isfinite(images).all() or images.min() < 0 or images.max() > 1:
        raise ValueError("`real_images` must be finite pixels in [0, 1] (not normalised).")
    if labels.min() < 0:
        raise ValueError("`real_labels` must be >= 0.")
    return images.detach().clone(), labels.detach().long().clone()
