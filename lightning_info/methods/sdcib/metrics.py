"""The fused clustering of a multi-view model as a torchmetrics Metric."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities import dim_zero_cat

from lightning_info.core.validation import require_index, require_int
from lightning_info.measures.clustering import clustering_scores
from lightning_info.methods.sdcib.functional import aligned_vote

__all__ = ["AlignedVoteClustering"]


class AlignedVoteClustering(Metric):
    """ACC, NMI and ARI of :func:`~lightning_info.methods.sdcib.functional.aligned_vote` over
    everything seen since the last reset.

    The alignment of the views needs the whole split, so the per-view soft assignments and the
    labels are kept (``dist_reduce_fx="cat"``: under DDP every rank computes on the gathered
    split, which Lightning's distributed sampler may pad with a few repeated samples).
    """

    full_state_update = False

    def __init__(self, num_views: int, reference: int = 0) -> None:
        super().__init__()
        self.num_views = require_int(num_views, "num_views", 1)
        self.reference = require_index(reference, "reference", self.num_views)
        for view in range(self.num_views):
            self.add_state(f"probabilities_{view}", default=[], dist_reduce_fx="cat")
        self.add_state("target", default=[], dist_reduce_fx="cat")

    def update(self, probabilities: Sequence[Tensor], target: Tensor) -> None:
        if len(probabilities) != self.num_views:
            raise ValueError(f"expected {self.num_views} views, got {len(probabilities)}.")
        for view, p in enumerate(probabilities):
            if p.dim() != 2 or p.shape[0] != target.shape[0]:
                raise ValueError("each view's probabilities must be (B, K) over the batch.")
            getattr(self, f"probabilities_{view}").append(p.detach())
        self.target.append(target.detach())

    def compute(self) -> dict[str, Tensor]:
        probabilities = [
            dim_zero_cat(getattr(self, f"probabilities_{view}")) for view in range(self.num_views)
        ]
        predicted, _ = aligned_vote(probabilities, self.reference)
        scores = clustering_scores(predicted, dim_zero_cat(self.target))
        return {name: torch.tensor(float(value)) for name, value in scores.items()}
