"""One API for post-hoc scorers: fit on in-distribution outputs of a trained classifier, then
score new inputs from their penultimate features and logits, without touching the network.

A scorer sees a classifier only through ``features`` ``(N, D)`` (penultimate activations),
``logits`` ``(N, K)`` and, when fitting, integer ``labels`` ``(N,)``. ``score`` returns ``(N,)``
values where higher means more confident (failure prediction) or more in-distribution (OOD
detection). Everything a fitted scorer needs lives in ``state_dict()`` (tensors and plain
values), so ``save`` / ``load`` round-trip it with ``torch.save`` (written atomically). The
saved state carries the scorer's configuration (:meth:`PosthocScorer.config`) and its
fingerprint; loading it into a scorer configured otherwise raises, naming each differing setting.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from lightning_info.core.files import atomic_torch_save
from lightning_info.core.fingerprint import fingerprint, require_fingerprint
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

    def config(self) -> dict[str, Any]:
        """The settings the scorer was built with (plain values); a saved state is refused by a
        scorer whose settings differ."""
        return {}

    def config_fingerprint(self) -> str:
        return fingerprint(type(self).__name__, self.config())

    def state_dict(self) -> dict[str, Any]:
        """Fitted state: tensors and plain values only, with the configuration and its
        fingerprint. Raises ``RuntimeError`` before ``fit`` (there is nothing to save)."""
        if not self.fitted:
            raise RuntimeError(
                f"{type(self).__name__} is not fitted: call `fit(...)` before saving its state."
            )
        state: dict[str, Any] = {
            "fitted": self.fitted,
            "fitted_widths": None,
            "config": self.config(),
            "config_fingerprint": self.config_fingerprint(),
        }
        if self.fitted_widths is not None:
            width_d, width_k = self.fitted_widths
            state["fitted_widths"] = {"features": width_d, "logits": width_k}
        return state

    def check_state(self, state: Any, where: object = "the state") -> None:
        """Raise unless ``state`` is a state of this scorer's class saved with this scorer's
        configuration (each differing setting is named)."""
        name = type(self).__name__
        if not isinstance(state, dict) or "fitted" not in state:
            raise ValueError(
                f"{where} is not a saved {name} state (a dict from `state_dict()`); save the "
                "scorer with `save(path)` and load that file."
            )
        saved = state.get("config")
        if isinstance(saved, dict):
            ours = self.config()
            differ = sorted(k for k in set(saved) | set(ours) if saved.get(k) != ours.get(k))
            if differ:
                listed = ", ".join(
                    f"{k}={saved.get(k)!r} (this scorer: {ours.get(k)!r})" for k in differ
                )
                wanted = ", ".join(f"{k}={saved.get(k)!r}" for k in differ)
                raise ValueError(
                    f"{where} holds a {name} saved with {listed}; build the scorer with "
                    f"{name}({wanted}, ...) to load it, or fit this one."
                )
        require_fingerprint(
            state.get("config_fingerprint"),
            self.config_fingerprint(),
            what=f"{name} state",
            where=where,
        )

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a state of :meth:`state_dict`; see :meth:`check_state` for what is refused."""
        self.check_state(state)
        try:
            self._load_fitted(state)
        except KeyError as err:
            raise ValueError(
                f"the saved {type(self).__name__} state lacks {err.args[0]!r}; it is incomplete "
                "or was edited: fit the scorer again and save it."
            ) from err

    def _load_fitted(self, state: dict[str, Any]) -> None:
        self.fitted = bool(state["fitted"])
        widths = state.get("fitted_widths")
        self.fitted_widths = (
            None if widths is None else (int(widths["features"]), int(widths["logits"]))
        )

    def save(self, path: str | Path) -> None:
        """Write the fitted state to ``path`` (atomically); raises before ``fit``."""
        atomic_torch_save({"class": type(self).__name__, "state": self.state_dict()}, path)

    def load(self, path: str | Path) -> PosthocScorer:
        """Restore a state saved by :meth:`save` into this (identically configured) scorer.

        A file that cannot be read (truncated, not written by ``save``), a scorer of another
        class or of another configuration is refused with a ``ValueError`` naming the file."""
        try:
            saved = torch.load(path, weights_only=True)
        except FileNotFoundError:
            raise
        except Exception as err:
            raise ValueError(
                f"{path} cannot be read as a saved scorer ({type(err).__name__}: "
                f"{str(err).splitlines()[0] if str(err) else ''}); it is truncated or was not "
                "written by `save`: save the fitted scorer again."
            ) from err
        if not isinstance(saved, dict) or "class" not in saved or "state" not in saved:
            raise ValueError(
                f"{path} holds a {type(saved).__name__}, not a scorer written by `save`; "
                "load a file saved by a scorer's `save(path)`."
            )
        if saved["class"] != type(self).__name__:
            raise ValueError(
                f"{path} holds a {saved['class']}, not a {type(self).__name__}; load it into "
                "a scorer of that class."
            )
        self.check_state(saved["state"], path)
        self.load_state_dict(saved["state"])
        return self


def check_outputs(
    features: Tensor, logits: Tensor, labels: Tensor | None = None
) -> tuple[Tensor, Tensor, Tensor | None]:
    """Validate ``features (N, D)``, ``logits (N, K)`` and optional integer (or bool) ``labels
    (N,)`` in ``[0, K)``; returns detached float copies of the first two (observed data is never
    modified). Float labels are refused, not cast."""
    for name, value, width in (("features", features, "D"), ("logits", logits, "K")):
        if not isinstance(value, Tensor) or value.dim() != 2 or not value.is_floating_point():
            got = (
                f"shape {tuple(value.shape)} and dtype {value.dtype}"
                if isinstance(value, Tensor)
                else type(value).__name__
            )
            raise ValueError(f"`{name}` must be a floating-point (N, {width}) tensor, got {got}.")
        require_real_tensor(value, name)
        if value.shape[0] == 0:
            raise ValueError(f"`{name}` is empty: pass at least one sample.")
        if value.shape[1] == 0:
            raise ValueError(
                f"`{name}` has no columns (shape {tuple(value.shape)}); pass the "
                "classifier's penultimate features and logits."
            )
        if not torch.isfinite(value).all():
            raise ValueError(f"`{name}` holds NaN or infinite values; check the classifier.")
    if features.shape[0] != logits.shape[0]:
        raise ValueError(
            f"`features` and `logits` must have the same N, got {features.shape[0]} and "
            f"{logits.shape[0]}."
        )
    if labels is not None:
        require_real_tensor(labels, "labels")
        if labels.is_floating_point() or labels.is_complex():
            raise TypeError(
                f"`labels` must hold integer class indices, got dtype {labels.dtype}; floats "
                "such as scores or probabilities are not labels (pass `labels.long()` if they "
                "are whole class numbers)."
            )
        if labels.dim() != 1:
            raise ValueError(f"`labels` must be an (N,) tensor, got shape {tuple(labels.shape)}.")
        if labels.shape[0] != features.shape[0]:
            raise ValueError(f"`labels` must have N = {features.shape[0]} entries.")
        if labels.min() < 0 or labels.max() >= logits.shape[1]:
            raise ValueError(
                f"`labels` must lie in [0, {logits.shape[1]}) for logits of K = "
                f"{logits.shape[1]} classes, got values in [{int(labels.min())}, "
                f"{int(labels.max())}]; check that `logits` are the classifier's output."
            )
        labels = labels.detach().long()
    return features.detach().float(), logits.detach().float(), labels
