"""Serving a selected subset of a candidate pool: selection strategies, a Sampler, persistence."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from torch import Tensor
from torch.utils.data import Sampler

from lightning_info.core.blocks import TokenBlocks, pooled_features
from lightning_info.core.files import atomic_write_text
from lightning_info.core.sampling import EpochShuffleSampler
from lightning_info.core.validation import require_int
from lightning_info.methods.fisher_sft.functional import (
    Selection,
    as_token_blocks,
    fisher_greedy_select,
    k_center_select,
    log_det_objective,
    random_select,
)

STRATEGIES = ("fisher", "random", "k_center")


def select_subset(
    features: TokenBlocks | Sequence[Tensor] | None,
    budget: int,
    *,
    strategy: str = "fisher",
    pool_size: int | None = None,
    seed: int = 0,
    lam: float = 1.0,
    pooling: str = "none",
    token_weights: Tensor | None = None,
) -> Selection:
    """Select ``budget`` examples with FisherSFT or a baseline behind one interface.

    ``features`` is a :class:`TokenBlocks` or a list of ``(m_i, d)`` tensors, one per example;
    ``token_weights`` (one per token row) weigh the curvature of (FSFT-1) for every strategy's
    objective and for FisherSFT's choice.
    ``"fisher"`` maximises (FSFT-1) greedily; ``"random"`` draws uniformly (``features`` may be
    ``None`` then, with ``pool_size`` given); ``"k_center"`` runs farthest-point selection on the
    mean-pooled features. The objective ``F(S)`` is reported for every strategy that has features.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"`strategy` must be one of {STRATEGIES}, got {strategy!r}.")
    if strategy == "fisher":
        if features is None:
            raise ValueError("strategy='fisher' needs the pool's features.")
        return fisher_greedy_select(
            features, budget, lam=lam, pooling=pooling, token_weights=token_weights
        )
    if strategy == "random":
        size = len(features) if features is not None else pool_size
        if size is None:
            raise ValueError("strategy='random' needs `features` or `pool_size`.")
        indices = random_select(size, budget, seed)
    else:
        if features is None:
            raise ValueError("strategy='k_center' needs the pool's features.")
        features = as_token_blocks(features)
        indices = k_center_select(pooled_features(features, "mean"), budget, seed)
        size = len(features)
    objective = (
        log_det_objective(features, indices, lam, pooling=pooling, token_weights=token_weights)
        if features is not None
        else float("nan")
    )
    return Selection(indices, [], objective, lam, size)


def save_selection(selection: Selection, path: str | Path, **metadata: Any) -> None:
    """Write a selection (and what it was computed for) as JSON."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({**asdict(selection), "metadata": metadata}, indent=1) + "\n"
    atomic_write_text(path, text)


def load_selection(path: str | Path, **expected: Any) -> Selection:
    """Read a selection saved by :func:`save_selection`, checking its metadata against ``expected``.

    A mismatch (another pool size, budget or strategy) raises instead of serving a stale subset.
    """
    record = json.loads(Path(path).read_text())
    metadata = record.pop("metadata", {})
    stale = {k: (metadata.get(k), v) for k, v in expected.items() if metadata.get(k) != v}
    if stale:
        details = ", ".join(f"{k}: saved {a!r}, now {b!r}" for k, (a, b) in stale.items())
        raise ValueError(
            f"The selection saved in {path} was made for other settings ({details}); "
            "delete the file or point `SubsetSelectionOptions.path` elsewhere to recompute it."
        )
    return Selection(**record)


class FisherSubsetSampler(Sampler[int]):
    """Yields the pool indices of a selected subset, reshuffled every epoch by ``seed + epoch``.

    Build it from indices (``FisherSubsetSampler(selection.indices)``) or let it select:
    ``FisherSubsetSampler.select(features, budget, strategy="fisher")``. Selection is
    deterministic, so every rank that builds it from the same features holds the same subset.
    Under DDP, Lightning wraps the sampler in its ``DistributedSamplerWrapper``, which shards the
    subset and forwards ``set_epoch``. ``state_dict`` holds the subset and the epoch.
    """

    def __init__(self, indices: Sequence[int], *, shuffle: bool = True, seed: int = 0) -> None:
        indices = [int(i) for i in indices]
        if not indices:
            raise ValueError("FisherSubsetSampler needs at least one selected index.")
        if min(indices) < 0 or len(set(indices)) != len(indices):
            raise ValueError("Selected indices must be distinct and non-negative.")
        self.indices = indices
        self.shuffle = shuffle
        self._order = EpochShuffleSampler(len(indices), seed=require_int(seed, "seed", 0))
        self.selection: Selection | None = None

    @classmethod
    def select(
        cls,
        features: TokenBlocks | Sequence[Tensor] | None,
        budget: int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        **select_kwargs: Any,
    ) -> FisherSubsetSampler:
        """Select ``budget`` examples with :func:`select_subset` and serve them."""
        selection = select_subset(features, budget, seed=seed, **select_kwargs)
        sampler = cls(selection.indices, shuffle=shuffle, seed=seed)
        sampler.selection = selection
        return sampler

    def set_epoch(self, epoch: int) -> None:
        self._order.set_epoch(epoch)

    def __iter__(self) -> Iterator[int]:
        if not self.shuffle:
            return iter(self.indices)
        return (self.indices[i] for i in self._order)

    def __len__(self) -> int:
        return len(self.indices)

    def state_dict(self) -> dict[str, Any]:
        return {"indices": list(self.indices), **self._order.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.indices = [int(i) for i in state_dict["indices"]]
        self._order = EpochShuffleSampler(len(self.indices), seed=int(state_dict["seed"]))
        self._order.set_epoch(int(state_dict["epoch"]))
