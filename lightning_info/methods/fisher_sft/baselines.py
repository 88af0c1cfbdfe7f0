"""FisherSFT's baselines: a seeded uniform subset and greedy k-center (farthest point)."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from lightning_info.core.validation import require_finite_tensor, require_int, require_real_floating
from lightning_info.methods.fisher_sft.pool import _check_budget


def random_select(pool_size: int, budget: int, seed: int = 0) -> list[int]:
    """``budget`` distinct indices drawn uniformly with a seeded generator."""
    _check_budget(budget, require_int(pool_size, "pool_size", 1))
    generator = torch.Generator().manual_seed(require_int(seed, "seed", 0))
    return torch.randperm(pool_size, generator=generator)[:budget].tolist()


def k_center_select(points: Tensor, budget: int, seed: int = 0) -> list[int]:
    """Greedy k-center (farthest-point) selection (Gonzalez, 1985) on ``(N, d)`` points.

    Starts from a seeded random point, then repeatedly adds the point farthest (Euclidean) from
    the selected set; a 2-approximation of the k-center objective. The result is a set: ``budget``
    distinct indices. Where several points coincide, each still counts as one candidate: once
    every distinct location is covered (all remaining distances are 0), the next picks are the
    lowest unselected indices, duplicates of points already chosen, so a budget above the number
    of distinct points still gives distinct indices (at covering radius 0). Ties in distance go
    to the lowest index.
    """
    require_real_floating(points, "points")
    if points.dim() != 2:
        raise ValueError(f"`points` must be (N, d), got shape {tuple(points.shape)}.")
    require_finite_tensor(points, "points")
    _check_budget(budget, points.shape[0])
    generator = torch.Generator().manual_seed(require_int(seed, "seed", 0))
    first = int(torch.randint(points.shape[0], (1,), generator=generator))
    selected = [first]
    distance = torch.linalg.vector_norm(points - points[first], dim=1)
    distance[first] = -math.inf
    for _ in range(budget - 1):
        nxt = int(torch.argmax(distance))  # the first maximum; chosen points sit at -inf
        selected.append(nxt)
        distance = torch.minimum(distance, torch.linalg.vector_norm(points - points[nxt], dim=1))
        distance[nxt] = -math.inf
    return selected
