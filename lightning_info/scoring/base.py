"""One API for post-hoc scorers: fit on in-distribution outputs of a trained classifier, then
score new inputs from their penultimate features and logits, without touching the network.

A scorer sees a classifier only through ``features`` ``(N, D)`` (penultimate activations),
``logits`` ``(N, K)`` and, when fitting, integer ``labels`` ``(N,)``. ``score`` returns ``(N,)``
values where higher means more confident (failure prediction) or more in-distribution (OOD
detection). Everything a fitted scorer needs lives in ``state_dict()`` (tensors and plain
values), so ``save`` / ``load`` round-trip it with ``torch.save`` (written atomically).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from lightning_info.core.files import atomic_torch_save
from lightning_info.core.validation import require_real_tensor


class PosthocScorer(ABC):
    """Base class of the scorers of :mod:`lightning_info.methods.pointwise_confidence` and
    :mod:`lightning_info.methods.ood_shaping`."""

    name: str = "scorer"
    fitted_widths: tuple[int, int] | None = None
    """``(D, K)`` of the outputs seen by ``fit``; ``score`` requires the same widths."""

    def __init__(self) -> None:
        self.fitted = False

    def fit(self, features: Tensor, logits: Tensor, labels: Tensor) -> PosthocScorer:
        """Fit on in-distribution training or validation outputs; returns ``self``."""
        features, logits, labels = check_outputs(features, logits, labels)
        self._fit(features, logits, labels)
        self.fitted = True
        self.fitted_widths = (features.shape[1], logits.shape[1])
        return self

    def score(self, features: Tensor, logits: Tensor) -> Tensor:
        """``(N,)`` scores, higher = more confident / more in-distribution.

        ``features`` and ``logits`` must have the widths ``D`` and ``K`` seen by ``fit``.
        """
        if not self.fitted:
            raise RuntimeError(f"{type(self).__name__} is not fitted: call `fit(...)` first.")
        features, logits, _ = check_outputs(features, logits)
        self._check_widths(features, logits)
        return self._score(features, logits)

    def _check_widths(self, features: Tensor, logits: Tensor) -> None:
        if self.fitted_widths is None:
            return
        fitted_d, fitted_k = self.fitted_widths
        for name, letter, width, fitted in (
            ("features", "D", features.shape[1], fitted_d),
            ("logits", "K", logits.shape[1], fitted_k),
        ):
            if width != fitted:
                raise ValueError(
                    f"`{name}` have {letter} = {width} but {type(self).__name__} was fitted on "
                    f"{letter} = {fitted}; score outputs of the classifier it was fitted on, or "
                    "fit it again."
                )

    @abstractmethod
    def _fit(self, features: Tensor, logits: Tensor, labels: Tensor) -> None: ...

    @abstractmethod
    def _score(self, features: Tensor, logits: Tensor) -> Tensor: ...

    def state_dict(self) -> dict[str, Any]:
        """Fitted state: tensors and plain values only."""
        state: dict[str, Any] = {"fitted": self.fitted, "fitted_widths": None}
        if self.fitted_widths is not None:
            width_d, width_k = self.fitted_widths
            state["fitted_widths"] = {"features": width_d, "logits": width_k}
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.fitted = bool(state["fitted"])
        widths = state.get("fitted_widths")
        self.fitted_widths = (
            None if widths is None else (int(widths["features"]), int(widths["logits"]))
        )

    def save(self, path: str | Path) -> None:
        atomic_torch_save({"class": type(self).__name__, "state": self.state_dict()}, path)

    def load(self, path: str | Path) -> PosthocScorer:
        """Restore a state saved by :meth:`save` into this (identically configured) scorer."""
        saved = torch.load(path, weights_only=True)
        if saved["class"] != type(self).__name__:
            raise ValueError(
                f"{path} holds a {saved['class']}, not a {type(self).__name__}; load it into "
                "a scorer of that class."
            )
        self.load_state_dict(saved["state"])
        return self


def check_outputs(
    features: Tensor, logits: Tensor, labels: Tensor | None = None
) -> tuple[Tensor, Tensor, Tensor | None]:
    """Validate ``features (N, D)``, ``logits (N, K)`` and optional ``labels (N,)`` in ``[0, K)``;
    returns detached float copies of the first two (observed data is never modified)."""
    for name, value in (("features", features), ("logits", logits)):
        if not isinstance(value, Tensor) or value.dim() != 2 or not value.is_floating_point():
            raise ValueError(f"`{name}` must be a floating-point (N, {name[0].upper()}) tensor.")
        require_real_tensor(value, name)
        if value.shape[0] == 0:
            raise ValueError(f"`{name}` is empty: pass at least one sample.")
        if not torch.isfinite(value).all():
            raise ValueError(f"`{name}` holds NaN or infinite values; check the classifier.")
    if features.shape[0] != logits.shape[0]:
        raise ValueError(
            f"`features` and `logits` must have the same N, got {features.shape[0]} and "
            f"{logits.shape[0]}."
        )
    if labels is not None:
        if not isinstance(labels, Tensor) or labels.dim() != 1 or labels.is_floating_point():
            raise ValueError("`labels` must be an integer (N,) tensor.")
        require_real_tensor(labels, "labels")
        if labels.shape[0] != features.shape[0]:
            raise ValueError(f"`labels` must have N = {features.shape[0]} entries.")
        if labels.min() < 0 or labels.max() >= logits.shape[1]:
            raise ValueError(f"`labels` must lie in [0, {logits.shape[1]}).")
        labels = labels.detach().long()
    return features.detach().float(), logits.detach().float(), labels
