"""k-means pseudo-labels of trajectory features, on the features' device.

ProDiff (Bu et al., ICML 2025) clusters the prototype encoder's features of every training batch
with k-means and trains the prototypes to classify them (its cross-entropy prototype loss). The
clustering runs every step on features that live on the accelerator, so it is written here in
torch (scikit-learn's ``KMeans`` would copy every batch to the CPU and back): k-means++ seeding
(Arthur & Vassilvitskii, 2007: each next centre drawn with probability proportional to the
squared distance to the nearest chosen one) and Lloyd's iterations (assign every point to its
nearest centre, move every centre to the mean of its points; a centre that loses all its points
stays), until the centres stop moving or ``iterations`` run out.
"""

from __future__ import annotations

import torch
from torch import Tensor

from lightning_info.core.validation import require_int

__all__ = ["kmeans"]


def _plus_plus_seeds(points: Tensor, k: int, generator: torch.Generator | None) -> Tensor:
    n = points.shape[0]
    first = int(torch.randint(n, (1,), generator=generator))
    centres = [points[first]]
    nearest = ((points - points[first]) ** 2).sum(1)
    for _ in range(1, k):
        total = nearest.sum()
        weights = nearest / total if total > 0 else torch.full_like(nearest, 1.0 / n)
        chosen = int(torch.multinomial(weights.double().cpu(), 1, generator=generator))
        centres.append(points[chosen])
        nearest = torch.minimum(nearest, ((points - points[chosen]) ** 2).sum(1))
    return torch.stack(centres)


@torch.no_grad()
def kmeans(
    points: Tensor, k: int, iterations: int = 20, generator: torch.Generator | None = None
) -> tuple[Tensor, Tensor]:
    """``(labels (n,), centres (k, d))`` of k-means on ``points (n, d)`` (see the module
    docstring); draws with ``generator`` (a CPU generator), no gradient."""
    if points.ndim != 2 or points.shape[0] == 0:
        raise ValueError(f"`points` must be a non-empty (n, d) tensor, got {tuple(points.shape)}.")
    k = require_int(k, "k", 1)
    if k > points.shape[0]:
        raise ValueError(f"k = {k} clusters need at least {k} points, got {points.shape[0]}.")
    if not torch.isfinite(points).all():
        raise ValueError("`points` hold NaN or infinity.")
    points = points.detach()
    centres = _plus_plus_seeds(points, k, generator)
    for _ in range(require_int(iterations, "iterations", 0)):
        labels = torch.cdist(points, centres).argmin(1)
        sums = torch.zeros_like(centres).index_add_(0, labels, points)
        counts = torch.bincount(labels, minlength=k).to(points.dtype)[:, None]
        moved = torch.where(counts > 0, sums / counts.clamp_min(1), centres)
        if torch.equal(moved, centres):
            break
        centres = moved
    return torch.cdist(points, centres).argmin(1), centres
