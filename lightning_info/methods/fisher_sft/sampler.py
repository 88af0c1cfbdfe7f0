"""Serving a selected subset of a candidate pool: selection strategies, a Sampler, persistence."""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Iterator, Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from torch import Tensor
from torch.utils.data import Sampler

from lightning_info.core.blocks import TokenBlocks, pooled_features
from lightning_info.core.files import atomic_write_text, read_json
from lightning_info.core.fingerprint import fingerprint, require_fingerprint
from lightning_info.core.sampling import EpochShuffleSampler
from lightning_info.core.validation import require_bool, require_index, require_indices, require_int
from lightning_info.methods.fisher_sft.functional import (
    Selection,
    _check_indices,
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
        if features is not None and pool_size is not None and pool_size != size:
            raise ValueError(
                f"`pool_size` = {pool_size!r} but `features` holds {size} examples; pass one of "
                "them, or both for the same pool."
            )
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


SELECTION_FORMAT = "lightning-info/fisher-sft-selection"
"""The ``format`` field of a file written by :func:`save_selection`."""


def describe_tokenizer(tokenizer: Any) -> dict[str, Any]:
    """What a selection depends on of ``tokenizer``: its class and vocabulary."""
    get_vocab = getattr(tokenizer, "get_vocab", None)
    vocabulary = sorted(get_vocab().items()) if callable(get_vocab) else len(tokenizer)
    return {"class": type(tokenizer).__name__, "vocabulary": json.dumps(vocabulary)}


def describe_model(model: Any) -> dict[str, Any]:
    """What a selection depends on of the feature model, read without touching its weights:
    class, configuration (less where it was loaded from) and the shape of its input embedding."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    to_dict = getattr(getattr(base, "config", None), "to_dict", None)
    config = to_dict() if callable(to_dict) else {}
    kept = {
        k: v for k, v in config.items() if not k.startswith("_") and k != "transformers_version"
    }
    get_embeddings = getattr(base, "get_input_embeddings", None)
    embeddings = get_embeddings() if callable(get_embeddings) else None
    weight = getattr(embeddings, "weight", None)
    return {
        "class": type(base).__name__,
        "config": json.dumps(kept, sort_keys=True, default=str),
        "embedding": None if weight is None else list(weight.shape),
    }


def selection_fingerprint(pool: Any, **settings: Any) -> str:
    """The digest tying a saved selection to the pool and the settings it was made with.

    ``pool`` is what the selection code has at hand: the features (a :class:`TokenBlocks` or a
    list of ``(m_i, d)`` tensors), or the examples' texts or ids (a sequence of strings or
    ints, or a tuple of such columns); ``settings`` the rest (strategy, budget, seed, ``lam``,
    ...). Two calls agree only for equal pools (to the last byte) and equal settings.
    """
    if isinstance(pool, TokenBlocks):
        pool = (pool.values, pool.offsets)
    elif isinstance(pool, Sequence) and not isinstance(pool, (str, bytes)):
        pool = list(pool)
    return fingerprint(SELECTION_FORMAT, pool, settings)


def save_selection(
    selection: Selection, path: str | Path, *, fingerprint: str, **metadata: Any
) -> None:
    """Write a selection as JSON, with the ``fingerprint`` of the pool and settings it was made
    for (:func:`selection_fingerprint`) and ``metadata`` (pool size, budget, ...), read back and
    checked by :func:`load_selection`. A selection whose indices are not distinct integer
    indices of its pool is refused before anything is written."""
    if not isinstance(selection, Selection):
        raise TypeError(
            f"`selection` must be a Selection (from select_subset), got {type(selection).__name__}."
        )
    _check_indices(selection.indices, require_int(selection.pool_size, "selection.pool_size", 1))
    if not isinstance(fingerprint, str) or not fingerprint:
        raise TypeError(
            f"`fingerprint` must be the digest of the pool and settings (a str, see "
            f"`selection_fingerprint`), got {fingerprint!r}."
        )
    path = Path(path)
    if path.parent.exists() and not path.parent.is_dir():
        raise NotADirectoryError(
            f"Cannot write the selection to {path}: {path.parent} is a file; pick a path in a "
            "folder."
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "format": SELECTION_FORMAT,
        "fingerprint": fingerprint,
        **asdict(selection),
        "metadata": metadata,
    }
    atomic_write_text(path, json.dumps(record, indent=1) + "\n")


def load_selection(path: str | Path, *, fingerprint: str, **expected: Any) -> Selection:
    """Read a selection saved by :func:`save_selection` for the pool and settings whose
    digest is ``fingerprint``.

    Refused, naming the file, when it was made for another pool or other settings (its
    fingerprint differs, or it has none: written by an older version: delete it and select
    again), when its ``metadata`` differs from ``expected`` (another pool size, budget or
    strategy), when it is not valid JSON, and when its indices are not distinct integer indices
    of the pool (``expected["pool_size"]``, else the recorded size) or not ``expected["budget"]``
    of them (an edited file).
    """
    record = read_json(path)
    if not isinstance(record, dict) or not isinstance(record.get("indices"), list):
        raise ValueError(
            f"{path} is not a FisherSFT selection (a JSON object with `indices`); delete it or "
            "point `SubsetSelectionOptions.path` elsewhere."
        )
    metadata = record.get("metadata", {})
    if not isinstance(metadata, dict):
        raise ValueError(f"{path}: `metadata` must be a JSON object; delete the file.")
    stale = {k: (metadata.get(k), v) for k, v in expected.items() if metadata.get(k) != v}
    if stale:
        details = ", ".join(f"{k}: saved {a!r}, now {b!r}" for k, (a, b) in stale.items())
        raise ValueError(
            f"The selection saved in {path} was made for other settings ({details}); "
            "delete the file or point `SubsetSelectionOptions.path` elsewhere to recompute it."
        )
    require_fingerprint(
        record.get("fingerprint"), fingerprint, what="FisherSFT selection", where=path
    )
    pool_size = expected.get("pool_size", record.get("pool_size"))
    if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
        raise ValueError(f"{path}: `pool_size` must be a positive int, got {pool_size!r}.")
    indices = require_indices(record["indices"], f"indices in {path}", pool_size, unique=True)
    budget = expected.get("budget", metadata.get("budget"))
    if budget is not None and len(indices) != budget:
        raise ValueError(
            f"{path} holds {len(indices)} indices but the selection is for budget={budget} "
            "(an edited or truncated file); delete it and select again."
        )
    values = {f.name: record[f.name] for f in fields(Selection) if f.name in record}
    gains = values.get("gains", [])
    scalars = [values.get("objective"), values.get("lam")]
    scalars += gains if isinstance(gains, list) else [None]
    if not all(_is_number(v) for v in scalars) or not math.isfinite(scalars[1]):
        raise ValueError(
            f"{path}: `objective`, `lam` and `gains` must be numbers; delete the file and "
            "select again."
        )
    return Selection(
        **{**values, "gains": gains, "indices": indices.tolist(), "pool_size": pool_size}
    )


def _is_number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


class FisherSubsetSampler(Sampler[int]):
    """Yields the pool indices of a selected subset, reshuffled every epoch by ``seed + epoch``.

    Build it from indices (``FisherSubsetSampler(selection.indices)``) or let it select:
    ``FisherSubsetSampler.select(features, budget, strategy="fisher")``. Selection is
    deterministic, so every rank that builds it from the same features holds the same subset.
    Under DDP, Lightning wraps the sampler in its ``DistributedSamplerWrapper``, which shards the
    subset and forwards ``set_epoch``. ``state_dict`` holds the subset and the epoch.

    ``indices`` must be distinct non-negative integers (bools, floats and strings are refused,
    not cast); ``shuffle`` a bool.
    """

    def __init__(self, indices: Sequence[int], *, shuffle: bool = True, seed: int = 0) -> None:
        indices = _subset(indices, "indices")
        require_bool(shuffle, "shuffle")
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
        self._order.set_epoch(require_index(epoch, "epoch"))

    def __iter__(self) -> Iterator[int]:
        if not self.shuffle:
            return iter(self.indices)
        return (self.indices[i] for i in self._order)

    def __len__(self) -> int:
        return len(self.indices)

    def state_dict(self) -> dict[str, Any]:
        return {"indices": list(self.indices), **self._order.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        indices = _subset(state_dict["indices"], "state_dict['indices']")
        order = EpochShuffleSampler(len(indices), seed=require_int(state_dict["seed"], "seed", 0))
        order.set_epoch(require_index(state_dict["epoch"], "state_dict['epoch']"))
        self.indices, self._order = indices, order


def _subset(indices: Sequence[int], name: str) -> list[int]:
    """``indices`` as a non-empty list of distinct non-negative ints."""
    checked = require_indices(indices, name, unique=True)
    if checked.numel() == 0:
        raise ValueError(f"`{name}` is empty: a FisherSubsetSampler needs at least one index.")
    return checked.tolist()
