"""``FeatureShapingScorer`` (a post-hoc scorer: shaped features, energy score) and ``tune``: random
search, or optuna's TPE when optuna is installed, over a shaper's parameter box, maximising OOD
AUROC on held-out data, as the follow-up paper fits PLF. The shapers are in ``functional.py``."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lightning_info.core.optional import require_extra
from lightning_info.core.validation import (
    require_finite,
    require_finite_tensor,
    require_int,
)
from lightning_info.methods.ood_shaping.functional import (
    SHAPERS,
    FeatureQuantiles,
    PiecewiseLinear,
    Shaper,
    energy_score,
    make_shaper,
)
from lightning_info.methods.ood_shaping.metrics import ood_auroc
from lightning_info.scoring.base import PosthocScorer

# --------------------------------------------------------------------------------------------
# Scorer
# --------------------------------------------------------------------------------------------


class FeatureShapingScorer(PosthocScorer):
    """Energy score of the logits recomputed from shaped penultimate features, ``W h(z) + b``.

    ``layer`` is the classifier's final ``nn.Linear`` (copied), a weight ``(K, D)`` tensor (with
    optional ``bias`` ``(K,)``, zero by default) or a ``(weight, bias)`` pair. ``shaper`` is a
    preset name (``"identity"``, ``"react"``, ``"vra"``, ``"plf"``) with its parameters as keyword
    arguments, or a :class:`Shaper`. ``fit`` places the knots at quantiles of the pooled ID
    feature values (labels are not used); ``score`` ignores the given logits except for a shape
    check and returns ``energy_score(W h(z) + b)``.

    A saved state holds the layer, the shaper's parameters and the fitted function, and
    ``load`` restores all three (a tuned scorer loads into a scorer built with the default
    parameters); only the preset ``shaper`` must match.
    """

    name = "feature_shaping"

    def __init__(
        self,
        layer: nn.Linear | Tensor | tuple[Tensor, Tensor | None],
        shaper: str | Shaper = "react",
        *,
        bias: Tensor | None = None,
        **params: float,
    ) -> None:
        super().__init__()
        self.weight, self.bias = _linear_parameters(layer, bias)
        self.shaper = make_shaper(shaper, **params)
        self.function: PiecewiseLinear | None = None

    @property
    def in_features(self) -> int:
        return self.weight.shape[1]

    def fit_features(self, features: Tensor) -> FeatureShapingScorer:
        """Fit from ID features alone (the logits and labels of ``fit`` are not needed)."""
        self._check_features(features)
        return self.fit_quantiles(FeatureQuantiles(features))

    def fit_quantiles(self, quantiles: FeatureQuantiles) -> FeatureShapingScorer:
        """Fit from precomputed ID quantiles (shared by the trials of :func:`tune`)."""
        self.function = self.shaper.build(quantiles)
        self.fitted = True
        return self

    def shape(self, features: Tensor) -> Tensor:
        """Shaped features ``h(z)``, ``(N, D)``."""
        self._require_fitted()
        return self.function(features)

    def shaped_logits(self, features: Tensor) -> Tensor:
        """``W h(z) + b``, ``(N, K)``."""
        self._require_fitted()
        self._check_features(features)
        return self._logits(features)

    def score_features(self, features: Tensor) -> Tensor:
        """``(N,)`` scores from features alone; same as ``score`` (which ignores the logits)."""
        return energy_score(self.shaped_logits(features.detach().float()))

    def _logits(self, features: Tensor) -> Tensor:
        h = self.shape(features)
        return F.linear(h, self.weight.to(h), self.bias.to(h))

    def _fit(self, features: Tensor, logits: Tensor, labels: Tensor) -> None:
        self._check_dims(features, logits)
        self.fit_quantiles(FeatureQuantiles(features))

    def _score(self, features: Tensor, logits: Tensor) -> Tensor:
        self._check_dims(features, logits)
        return energy_score(self._logits(features))

    def _require_fitted(self) -> None:
        if not self.fitted or self.function is None:
            raise RuntimeError(f"{type(self).__name__} is not fitted: call `fit(...)` first.")

    def _check_features(self, features: Tensor) -> None:
        if (
            not isinstance(features, Tensor)
            or features.dim() != 2
            or not features.is_floating_point()
        ):
            raise ValueError("`features` must be a floating-point (N, D) tensor.")
        if features.shape[0] == 0:
            raise ValueError("`features` is empty: pass at least one sample.")
        require_finite_tensor(features, "features")
        self._check_dims(features, None)

    def _check_dims(self, features: Tensor, logits: Tensor | None) -> None:
        if features.shape[1] != self.in_features:
            raise ValueError(
                f"`features` have D = {features.shape[1]} but the linear layer's weight is "
                f"{tuple(self.weight.shape)} (K, D); pass the penultimate features of this layer."
            )
        if logits is not None and logits.shape[1] != self.weight.shape[0]:
            raise ValueError(
                f"`logits` have K = {logits.shape[1]} but the linear layer has "
                f"{self.weight.shape[0]} outputs; pass the logits of this classifier."
            )

    def config(self) -> dict[str, Any]:
        return {"shaper": self.shaper.name}

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state.update(
            weight=self.weight.clone(),
            bias=self.bias.clone(),
            shaper=self.shaper.name,
            params=self.shaper.params(),
            function=None if self.function is None else self.function.state_dict(),
        )
        return state

    def _load_fitted(self, state: dict[str, Any]) -> None:
        if state["shaper"] != self.shaper.name:
            raise ValueError(
                f"The state holds a {state['shaper']!r} shaper but this scorer uses "
                f"{self.shaper.name!r}; build the scorer with shaper={state['shaper']!r}."
            )
        super()._load_fitted(state)
        self.weight, self.bias = _linear_parameters(state["weight"], state["bias"])
        self.shaper = make_shaper(state["shaper"], **state["params"])
        function = state["function"]
        self.function = None if function is None else PiecewiseLinear.from_state(function)


def _linear_parameters(
    layer: nn.Linear | Tensor | tuple[Tensor, Tensor | None], bias: Tensor | None
) -> tuple[Tensor, Tensor]:
    if isinstance(layer, nn.Linear):
        if bias is not None:
            raise ValueError("Pass `bias` only with a weight tensor; an nn.Linear has its own.")
        weight, bias = layer.weight, layer.bias
    elif isinstance(layer, tuple):
        if len(layer) != 2 or bias is not None:
            raise ValueError("Pass the layer as (weight, bias), or a weight and `bias=`.")
        weight, bias = layer
    else:
        weight = layer
    if not isinstance(weight, Tensor) or weight.dim() != 2 or not weight.is_floating_point():
        raise ValueError("The linear layer's weight must be a floating-point (K, D) tensor.")
    weight = weight.detach().float().clone()
    if bias is None:
        bias = torch.zeros(weight.shape[0])
    if not isinstance(bias, Tensor) or bias.shape != (weight.shape[0],):
        raise ValueError(f"`bias` must be a ({weight.shape[0]},) tensor to match the weight.")
    bias = bias.detach().float().clone().to(weight.device)
    require_finite_tensor(weight, "weight")
    require_finite_tensor(bias, "bias")
    return weight, bias


# --------------------------------------------------------------------------------------------
# Tuning on held-out data
# --------------------------------------------------------------------------------------------


@dataclass
class TuneResult:
    """Outcome of :func:`tune`: the best parameters, their held-out AUROC, the fitted scorer and
    every trial as ``(params, auroc)`` in the order evaluated."""

    params: dict[str, float]
    auroc: float
    scorer: FeatureShapingScorer
    history: list[tuple[dict[str, float], float]]


def tune(
    shaper: str | Callable[..., FeatureShapingScorer],
    id_features: Tensor,
    ood_features: Tensor,
    *,
    layer: nn.Linear | Tensor | tuple[Tensor, Tensor | None] | None = None,
    fit_features: Tensor | None = None,
    search_space: Mapping[str, float | tuple[float, float]] | None = None,
    n_trials: int = 64,
    seed: int = 0,
    method: str = "random",
) -> TuneResult:
    """Choose a shaper's parameters maximising held-out OOD AUROC (ID = positive class).

    ``shaper`` is a preset name (then ``layer`` is required) or a factory
    ``factory(**params) -> FeatureShapingScorer`` (then ``search_space`` is required). Each trial
    fits the knots on the ID quantiles of ``fit_features`` (default: ``id_features``) and scores
    ``id_features`` against ``ood_features``; the logits are recomputed from the layer, so none
    are needed. ``search_space`` maps parameter names to ``(low, high)`` boxes or fixed values
    and updates the preset's default box (:attr:`Shaper.search_space`); parameters left out keep
    the preset's defaults.

    ``method="random"``: ``n_trials`` uniform draws from the box, from a ``torch.Generator``
    seeded with ``seed`` (reproducible; the first best trial wins ties). ``method="tpe"``: optuna's
    seeded TPE sampler (the ``tune`` extra). Parameters that the shaper rejects (e.g. a VRA
    box where ``lower_percentile > upper_percentile`` can be drawn) raise ``ValueError``.
    """
    if method not in ("random", "tpe"):
        raise ValueError(f"Unknown search `method` {method!r}; choose 'random' or 'tpe'.")
    if isinstance(shaper, str):
        if shaper not in SHAPERS:
            raise ValueError(f"Unknown shaper {shaper!r}; choose one of {sorted(SHAPERS)}.")
        if layer is None:
            raise ValueError("Tuning a preset needs the classifier's final `layer`.")
        preset = SHAPERS[shaper]
        box: dict[str, float | tuple[float, float]] = dict(preset.search_space)
        allowed = {field.name for field in dataclasses.fields(preset)}
        unknown = sorted(set(search_space or {}) - allowed)
        if unknown:
            raise ValueError(f"Unknown parameter(s) {unknown} for shaper {shaper!r}.")
        box.update(search_space or {})
        weight, bias = _linear_parameters(layer, None)

        def factory(**params: float) -> FeatureShapingScorer:
            return FeatureShapingScorer((weight, bias), shaper, **params)

    elif callable(shaper):
        if search_space is None:
            raise ValueError("Tuning with a scorer factory needs an explicit `search_space`.")
        box, factory = dict(search_space), shaper
    else:
        raise ValueError("`shaper` must be a preset name or a callable returning a scorer.")
    bounds = _parse_box(box)
    id_features = _held_out(id_features, "id_features")
    ood_features = _held_out(ood_features, "ood_features")
    if id_features.shape[1] != ood_features.shape[1]:
        raise ValueError(
            f"`id_features` and `ood_features` must have the same D, got {id_features.shape[1]} "
            f"and {ood_features.shape[1]}."
        )
    fit_features = id_features if fit_features is None else _held_out(fit_features, "fit_features")
    if fit_features.shape[1] != id_features.shape[1]:
        raise ValueError(
            f"`fit_features` have D = {fit_features.shape[1]} but `id_features` have D = "
            f"{id_features.shape[1]}: the knots must come from the same layer's features."
        )
    if isinstance(shaper, str) and id_features.shape[1] != weight.shape[1]:
        raise ValueError(
            f"`id_features` have D = {id_features.shape[1]} but the linear layer's weight is "
            f"{tuple(weight.shape)} (K, D); pass the penultimate features of this layer."
        )
    n_trials = require_int(n_trials, "n_trials", 1)
    seed = require_int(seed, "seed", 0)
    quantiles = FeatureQuantiles(fit_features)
    history: list[tuple[dict[str, float], float]] = []
    best: list[Any] = [-math.inf, None, None]  # auroc, params, scorer

    def evaluate(params: dict[str, float]) -> float:
        scorer = factory(**params)
        if not isinstance(scorer, FeatureShapingScorer):
            raise ValueError("The scorer factory must return a FeatureShapingScorer.")
        scorer.fit_quantiles(quantiles)
        auroc = float(
            ood_auroc(scorer.score_features(id_features), scorer.score_features(ood_features))
        )
        history.append((params, auroc))
        if auroc > best[0]:
            best[:] = [auroc, params, scorer]
        return auroc

    if method == "random":
        generator = torch.Generator().manual_seed(seed)
        n_draws = n_trials if bounds else 1  # nothing to search: one evaluation
        for _ in range(n_draws):
            draws = torch.rand(len(bounds), generator=generator, dtype=torch.float64).tolist()
            evaluate(
                {name: lo + d * (hi - lo) for (name, (lo, hi)), d in zip(bounds.items(), draws)}
            )
    else:
        _tune_tpe(evaluate, bounds, n_trials, seed)
    return TuneResult(params=best[1], auroc=best[0], scorer=best[2], history=history)


def _tune_tpe(
    evaluate: Callable[[dict[str, float]], float],
    bounds: dict[str, tuple[float, float]],
    n_trials: int,
    seed: int,
) -> None:
    optuna = require_extra("optuna", "tune", "TPE tuning (method='tpe'; 'random' needs no extra)")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))

    def objective(trial: Any) -> float:
        params = {
            name: trial.suggest_float(name, lo, hi) if hi > lo else lo
            for name, (lo, hi) in bounds.items()
        }
        return evaluate(params)

    study.optimize(objective, n_trials=n_trials if bounds else 1)


def _parse_box(box: Mapping[str, float | tuple[float, float]]) -> dict[str, tuple[float, float]]:
    bounds = {}
    for name, value in box.items():
        if isinstance(value, (int, float)):
            value = (value, value)
        if (
            isinstance(value, (str, bytes))
            or not isinstance(value, (tuple, list))
            or len(value) != 2
        ):
            raise ValueError(
                f"`search_space[{name!r}]` must be a number or a (low, high) pair, got {value!r}."
            )
        low, high = value
        low, high = require_finite(low, f"{name} (low)"), require_finite(high, f"{name} (high)")
        if low > high:
            raise ValueError(f"Search box for `{name}` has low {low} > high {high}.")
        bounds[name] = (low, high)
    return bounds


def _held_out(features: Tensor, name: str) -> Tensor:
    if not isinstance(features, Tensor) or features.dim() != 2 or not features.is_floating_point():
        raise ValueError(f"`{name}` must be a floating-point (N, D) tensor.")
    if features.shape[0] == 0:
        raise ValueError(f"`{name}` is empty: tuning needs held-out samples.")
    require_finite_tensor(features, name)
    return features.detach().float()
