"""``DocREDScores``: the official DocRED scores of
:mod:`~lightning_info.methods.docks_rag.functional` as a torchmetrics ``Metric`` whose counts
are summed over DDP ranks."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch
from torchmetrics import Metric

from lightning_info.methods.docks_rag.functional import COUNTS, count_facts, scores_from_counts

__all__ = ["DocREDScores"]


class DocREDScores(Metric):
    """The official DocRED scores accumulated over batches of documents and summed over DDP
    ranks: the counts are sums, so the result equals ``functional.docred_scores`` on
    everything.

    ``update(predictions, documents)`` takes a batch's gold documents and the predictions for
    them; give each document to exactly one update. Predictions for titles outside the batch
    are left out (the scorer counts a prediction for a title it does not know as a false
    positive; ``functional.docred_scores`` does too). ``compute()`` returns the dict of
    ``functional.scores_from_counts`` as tensors.

    Args:
        train_facts: ``functional.train_fact_names`` of the training split (empty: Ign F1 =
            F1).
    """

    full_state_update = False

    def __init__(self, train_facts: set[tuple[str, str, str]] = frozenset(), **kwargs) -> None:
        super().__init__(**kwargs)
        self.train_facts = set(train_facts)
        for name in COUNTS:
            self.add_state(name, default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, predictions: Iterable[dict[str, Any]], documents: Sequence[dict]) -> None:
        titles = {d["title"] for d in documents}
        mine = [p for p in predictions if p["title"] in titles]
        for name, value in count_facts(mine, documents, self.train_facts).items():
            setattr(self, name, getattr(self, name) + value)

    def compute(self) -> dict[str, torch.Tensor]:
        counts = {name: float(getattr(self, name)) for name in COUNTS}
        return {k: torch.tensor(v) for k, v in scores_from_counts(counts).items()}
