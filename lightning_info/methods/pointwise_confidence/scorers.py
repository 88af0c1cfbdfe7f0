"""Pointwise-information confidence scores (Wongso, Ghosh & Motani, ICML 2025).

Each scorer gives, for a sample with penultimate features ``z`` (or logits) and every class
``k``, a pointwise information value in bits, and the confidence of the prediction is

    conf(x) = softmax_k(PI_k(x))[y_hat],     y_hat = argmax of the classifier's logits.

- PMI(z; k) = log2 p(z, k) / (p(z) p(k)), estimated by a critic ``T(z) in R^K`` trained to tell
  joint pairs ``(z_i, y_i)`` from product pairs ``(z_i, k)``, ``k ~ p(k)`` (the expectation over
  ``k`` is taken exactly, weighted by the label prior):
  ``"classifier"``: a probabilistic classifier of joint pairs against ``B - 1`` product pairs per
  joint pair (logistic loss), whose odds are ``p(z,k) / ((B - 1) p(z) p(k))``, so
  PMI = ``log((B - 1) sigma(T) / (1 - sigma(T))) = T + log(B - 1)``;
  ``"density_ratio"``: ``r = softplus(T)`` maximising ``E_joint r - 1/2 E_prod r^2`` (least-squares
  density-ratio fitting, optimum ``r = p(z,k)/p(z)p(k)``), PMI = ``log max(r, 1e-4)``;
  ``"fjs"``: maximising the Jensen-Shannon bound of
  :func:`~lightning_info.measures.mutual_information.jensen_shannon_mi`, whose optimal critic is
  the log density
  ratio, PMI = ``T`` (the classifier objective with ``B = 2``).
- PVI(x -> k) = -log2 g_null(k) + log2 g[x](k) (Ethayarajh et al., 2022) with ``g`` the classifier
  itself, a temperature-scaled copy, a retrained head on the features, or an ensemble of heads,
  and the null model ``g_null`` trained on empty inputs. A null model that sees only an all-zero
  input learns the label marginal; ``null="prior"`` uses that optimum directly.
- PSI(z; k) = mean over ``M`` random unit directions ``theta`` of
  ``log2 p(theta^T z | k) / sum_j pi_j p(theta^T z | j)``, the class-conditional densities of the
  1-D projections fitted by histograms (50 bins) or Gaussians, clipped at 1e-5.

With ``g`` the classifier and the prior as null model, ``softmax_k(PVI_k) =
softmax((logits - ln pi) / ln 2)``: PVI then ranks like the prior-corrected softmax, and gains over
max-softmax need a retrained or ensembled ``g``.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lightning_info.core.validation import (
    require_bool,
    require_finite_tensor,
    require_int,
    require_non_negative,
    require_positive,
    require_real_tensor,
)
from lightning_info.measures.mutual_information import jensen_shannon_mi
from lightning_info.scoring.base import PosthocScorer, check_outputs

LN2 = math.log(2.0)
PROBABILITY_FLOOR = 1e-12
LOG_PROBABILITY_FLOOR = math.log(PROBABILITY_FLOOR)
_PMI_OBJECTIVES = ("classifier", "density_ratio", "fjs")
_PVI_VARIANTS = ("classifier", "temperature", "head", "ensemble")
_DENSITIES = ("histogram", "gaussian")


def confidence_from_pointwise(values: Tensor, logits: Tensor) -> Tensor:
    """``softmax_k(values)`` at the classifier's predicted class ``argmax(logits)``, ``(N,)``."""
    predicted = logits.argmax(1, keepdim=True)
    return values.softmax(1).gather(1, predicted).squeeze(1)


def label_prior(labels: Tensor, num_classes: int) -> Tensor:
    """Empirical class frequencies ``(K,)``; every class must occur.

    When the missing classes are all above the largest label, the logits are likely wider than
    the classifier's output (another layer's activations): the error says so."""
    counts = torch.bincount(labels, minlength=num_classes).double()
    if (counts == 0).any():
        missing = torch.nonzero(counts == 0).flatten().tolist()
        shown = missing if len(missing) <= 10 else [*missing[:10], "..."]
        top = int(labels.max())
        if min(missing) > top:
            raise ValueError(
                f"classes {shown} have no fitting samples: the labels stop at {top} but `logits` "
                f"have K = {num_classes} columns. If the logits are not the classifier's output "
                "(a hidden layer hooked as the head), name the output layer with `head=`; "
                "otherwise fit on a split where every class occurs."
            )
        raise ValueError(
            f"classes {shown} have no fitting samples; every class of the K = {num_classes} "
            "logits must occur in the split the scorer is fitted on."
        )
    return (counts / counts.sum()).float()


def fit_temperature(
    logits: Tensor, labels: Tensor, steps: int = 100, bounds: tuple[float, float] = (0.05, 20.0)
) -> float:
    """Temperature ``T`` minimising ``NLL(softmax(logits / T), labels)`` (Guo et al., 2017).

    The search runs over ``log T`` and the result is clamped to ``bounds`` (``0 < low <= high``).
    When every fitting prediction is correct the NLL keeps falling as ``T -> 0`` and no finite
    optimum exists; the lower bound is then returned with a warning (fit on held-out data that
    has errors). ``logits`` must be finite floats ``(N, K)`` and ``labels`` integer classes in
    ``[0, K)``.
    """
    require_real_tensor(logits, "logits")
    if logits.dim() != 2 or not logits.is_floating_point():
        raise ValueError("`logits` must be a floating-point (N, K) tensor.")
    require_finite_tensor(logits, "logits")
    _, logits, labels = check_outputs(logits, logits, labels)
    steps = require_int(steps, "steps", 1)
    if not isinstance(bounds, (tuple, list)) or len(bounds) != 2:
        raise ValueError(f"`bounds` must be a pair (low, high), got {bounds!r}.")
    low_bound = require_positive(bounds[0], "bounds[0]")
    high_bound = require_positive(bounds[1], "bounds[1]")
    if low_bound > high_bound:
        raise ValueError(f"`bounds` must have low <= high, got {bounds!r}.")
    log_t = torch.zeros((), requires_grad=True)
    optimizer = torch.optim.LBFGS([log_t], lr=0.5, max_iter=steps, line_search_fn="strong_wolfe")
    logits, labels = logits.detach().double(), labels.detach()

    def closure() -> Tensor:
        optimizer.zero_grad()
        loss = F.cross_entropy(logits / log_t.double().exp(), labels)
        loss.backward()
        return loss

    optimizer.step(closure)
    low, high = low_bound, high_bound
    temperature = float(log_t.detach().exp())
    if temperature < low and bool((logits.argmax(1) == labels).all()):
        warnings.warn(
            "every fitting prediction is correct, so the NLL has no finite minimiser in T; "
            f"using T = {low}. Fit the temperature on held-out data with errors.",
            stacklevel=2,
        )
    return min(max(temperature, low), high)


def _mlp(inputs: int, hidden: int, outputs: int) -> nn.Module:
    if hidden == 0:
        return nn.Linear(inputs, outputs)
    return nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, outputs))


def _train(module: nn.Module, loss_fn, steps: int, lr: float, weight_decay: float) -> nn.Module:
    """Full-batch Adam on ``loss_fn(module)`` for ``steps`` steps; returns the module in eval."""
    optimizer = torch.optim.Adam(module.parameters(), lr=lr, weight_decay=weight_decay)
    module.train()
    with torch.enable_grad():
        for _ in range(steps):
            optimizer.zero_grad()
            loss_fn(module).backward()
            optimizer.step()
    return module.eval()


def _seeded(seed: int, build):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


class _PointwiseInformationScorer(PosthocScorer):
    """Confidence and class distribution from per-class pointwise-information values."""

    def _values(self, features: Tensor, logits: Tensor) -> Tensor:
        """Per-class values in bits, ``(N, K)``."""
        raise NotImplementedError

    def _score(self, features: Tensor, logits: Tensor) -> Tensor:
        return confidence_from_pointwise(self._values(features, logits), logits)

    def class_probabilities(self, features: Tensor, logits: Tensor) -> Tensor:
        """``softmax_k`` of the per-class values, ``(N, K)``."""
        return self._values(features, logits).softmax(1)


class _NetworkScorer(_PointwiseInformationScorer):
    """Shared training settings of the scorers that fit small networks on the features."""

    def __init__(self, hidden: int, steps: int, lr: float, weight_decay: float, seed: int):
        super().__init__()
        self.hidden = require_int(hidden, "hidden", 0)
        self.steps = require_int(steps, "steps", 1)
        self.lr = require_positive(lr, "lr")
        self.weight_decay = require_non_negative(weight_decay, "weight_decay")
        self.seed = require_int(seed, "seed", 0)
        self.standardize: tuple[Tensor, Tensor] | None = None

    def config(self) -> dict[str, Any]:
        return {
            "hidden": self.hidden,
            "steps": self.steps,
            "lr": self.lr,
            "weight_decay": self.weight_decay,
            "seed": self.seed,
        }

    def _inputs(self, features: Tensor) -> Tensor:
        mean, std = self.standardize
        return (features - mean) / std

    def _set_standardization(self, features: Tensor) -> None:
        self.standardize = (features.mean(0), features.std(0).clamp_min(1e-6))


class PMIScorer(_NetworkScorer):
    """PMI confidence from a critic on the penultimate features (module docstring).

    Args:
        objective: ``"classifier"``, ``"density_ratio"`` or ``"fjs"``.
        negatives: ``B - 1``, product pairs per joint pair of the ``"classifier"`` objective.
        hidden: width of the critic's hidden layer (``0``: a linear critic).
        steps, lr, weight_decay: full-batch Adam on the fitting set.
        seed: seeds the critic's initialisation.
    """

    name = "PMI"

    def __init__(
        self,
        objective: str = "classifier",
        negatives: int = 4,
        hidden: int = 64,
        steps: int = 500,
        lr: float = 1e-2,
        weight_decay: float = 1e-4,
        seed: int = 0,
    ) -> None:
        super().__init__(hidden, steps, lr, weight_decay, seed)
        if objective not in _PMI_OBJECTIVES:
            raise ValueError(f"`objective` must be one of {_PMI_OBJECTIVES}, got {objective!r}.")
        self.objective = objective
        self.negatives = require_int(negatives, "negatives", 1)
        self.critic: nn.Module | None = None

    def config(self) -> dict[str, Any]:
        return {**super().config(), "objective": self.objective, "negatives": self.negatives}

    def _fit(self, features: Tensor, logits: Tensor, labels: Tensor) -> None:
        num_classes = logits.shape[1]
        prior = label_prior(labels, num_classes)
        self._set_standardization(features)
        inputs = self._inputs(features)
        joint = F.one_hot(labels, num_classes).bool()
        critic = _seeded(self.seed, lambda: _mlp(features.shape[1], self.hidden, num_classes))
        self.critic = _train(
            critic,
            lambda net: pmi_critic_loss(net(inputs), joint, prior, self.objective, self.negatives),
            self.steps,
            self.lr,
            self.weight_decay,
        )
        self.shape = (features.shape[1], num_classes)

    def pointwise(self, features: Tensor) -> Tensor:
        """PMI(z; k) in bits, ``(N, K)``."""
        with torch.no_grad():
            output = self.critic(self._inputs(features))
        if self.objective == "density_ratio":
            output = F.softplus(output).clamp_min(1e-4).log()
        elif self.objective == "classifier":
            output = output + math.log(self.negatives)
        return output / LN2

    def _values(self, features: Tensor, logits: Tensor) -> Tensor:
        return self.pointwise(features)

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "shape": list(self.shape),
            "standardize": list(self.standardize),
            "critic": self.critic.state_dict(),
        }

    def _load_fitted(self, state: dict[str, Any]) -> None:
        super()._load_fitted(state)
        self.shape = tuple(state["shape"])
        self.standardize = tuple(state["standardize"])
        self.critic = _mlp(self.shape[0], self.hidden, self.shape[1])
        self.critic.load_state_dict(state["critic"])
        self.critic.eval()


def pmi_critic_loss(
    scores: Tensor, joint: Tensor, prior: Tensor, objective: str, negatives: int = 1
) -> Tensor:
    """Loss of a critic ``scores = T(z_i)_k`` ``(N, K)`` whose optimum gives the density ratio.

    ``joint`` marks the observed ``(i, y_i)``; the product distribution pairs every ``z_i`` with
    every ``k`` at weight ``prior_k`` (an exact expectation over ``k``). At the optimum
    ``T = log p(z,k)/p(z)p(k) - log negatives`` (``"classifier"``), ``T = log p(z,k)/p(z)p(k)``
    (``"fjs"``) or ``softplus(T) = p(z,k)/p(z)p(k)`` (``"density_ratio"``).
    """
    weights = prior.expand_as(scores)
    if objective in ("classifier", "fjs"):
        # the logistic loss of B - 1 weighted negatives; with B = 2 it is -I_JS
        scale = negatives if objective == "classifier" else 1
        extra = (scale - 1) * (weights * F.softplus(scores)).sum(1).mean()
        return -jensen_shannon_mi(scores[joint], scores, weights) + extra
    if objective == "density_ratio":
        ratio = F.softplus(scores)
        return -ratio[joint].mean() + 0.5 * (weights * ratio**2).sum(1).mean()
    raise ValueError(f"`objective` must be one of {_PMI_OBJECTIVES}, got {objective!r}.")


class PVIScorer(_NetworkScorer):
    """PVI confidence (module docstring).

    Args:
        variant: ``"classifier"`` (the logits as given), ``"temperature"`` (logits / T, ``T``
            fitted by NLL on the fitting set), ``"head"`` (a head retrained on the features) or
            ``"ensemble"`` (``ensemble_size`` heads with different seeds, probabilities averaged).
        null: ``"prior"`` (the label marginal, the optimum of a null model) or ``"trained"`` (the
            same head trained on all-zero inputs).
        hidden, steps, lr, weight_decay, seed: the heads (``hidden=0``: logistic regression).
        ensemble_size: heads of the ensemble.
    """

    name = "PVI"

    def __init__(
        self,
        variant: str = "head",
        null: str = "prior",
        hidden: int = 0,
        steps: int = 1000,
        lr: float = 5e-2,
        weight_decay: float = 0.0,
        ensemble_size: int = 5,
        seed: int = 0,
    ) -> None:
        super().__init__(hidden, steps, lr, weight_decay, seed)
        if variant not in _PVI_VARIANTS:
            raise ValueError(f"`variant` must be one of {_PVI_VARIANTS}, got {variant!r}.")
        if null not in ("prior", "trained"):
            raise ValueError(f"`null` must be 'prior' or 'trained', got {null!r}.")
        self.variant, self.null = variant, null
        self.ensemble_size = require_int(ensemble_size, "ensemble_size", 1)
        self.heads: list[nn.Module] = []
        self.temperature = 1.0

    def config(self) -> dict[str, Any]:
        return {
            **super().config(),
            "variant": self.variant,
            "null": self.null,
            "ensemble_size": self.ensemble_size,
        }

    def _fit_head(self, inputs: Tensor, labels: Tensor, num_classes: int, seed: int) -> nn.Module:
        head = _seeded(seed, lambda: _mlp(inputs.shape[1], self.hidden, num_classes))
        return _train(
            head,
            lambda net: F.cross_entropy(net(inputs), labels),
            self.steps,
            self.lr,
            self.weight_decay,
        )

    def _fit(self, features: Tensor, logits: Tensor, labels: Tensor) -> None:
        num_classes = logits.shape[1]
        self.shape = (features.shape[1], num_classes)
        if self.null == "prior":
            self.log_null = label_prior(labels, num_classes).log()
        else:
            empty = torch.zeros_like(features)
            null_head = self._fit_head(empty, labels, num_classes, self.seed + 10_000)
            with torch.no_grad():
                self.log_null = null_head(empty[:1]).log_softmax(1)[0]
        if self.variant == "temperature":
            self.temperature = fit_temperature(logits, labels)
        if self.variant in ("head", "ensemble"):
            self._set_standardization(features)
            inputs = self._inputs(features)
            count = self.ensemble_size if self.variant == "ensemble" else 1
            self.heads = [
                self._fit_head(inputs, labels, num_classes, self.seed + i) for i in range(count)
            ]

    def log_probabilities(self, features: Tensor, logits: Tensor) -> Tensor:
        """``log g[x](k)`` of the chosen variant, natural log, ``(N, K)``."""
        if self.variant == "classifier":
            return logits.log_softmax(1)
        if self.variant == "temperature":
            return (logits / self.temperature).log_softmax(1)
        inputs = self._inputs(features)
        with torch.no_grad():
            probs = torch.stack([head(inputs).softmax(1) for head in self.heads]).mean(0)
        return probs.clamp_min(PROBABILITY_FLOOR).log()

    def pointwise(self, features: Tensor, logits: Tensor) -> Tensor:
        """PVI(x -> k) in bits, ``(N, K)``, ``g[x](k)`` clipped below at ``1e-12`` as the
        reference code clips it (a probability the logits put at ``1e-80`` would otherwise give
        -266 bits and dominate any mean over examples)."""
        log_g = self.log_probabilities(features, logits).clamp_min(LOG_PROBABILITY_FLOOR)
        return (log_g - self.log_null) / LN2

    def _values(self, features: Tensor, logits: Tensor) -> Tensor:
        return self.pointwise(features, logits)

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "shape": list(self.shape),
            "log_null": self.log_null,
            "temperature": self.temperature,
            "standardize": None if self.standardize is None else list(self.standardize),
            "heads": [head.state_dict() for head in self.heads],
        }

    def _load_fitted(self, state: dict[str, Any]) -> None:
        super()._load_fitted(state)
        self.shape = tuple(state["shape"])
        self.log_null = state["log_null"]
        self.temperature = float(state["temperature"])
        self.standardize = None if state["standardize"] is None else tuple(state["standardize"])
        self.heads = []
        for head_state in state["heads"]:
            head = _mlp(self.shape[0], self.hidden, self.shape[1])
            head.load_state_dict(head_state)
            self.heads.append(head.eval())


class PSIScorer(_PointwiseInformationScorer):
    """PSI confidence from class-conditional densities of random 1-D projections.

    Args:
        num_directions: ``M`` random unit directions (a fixed seeded draw).
        density: ``"histogram"`` (``bins`` equal-width bins over the fitting range, a value
            outside it takes the nearest bin) or ``"gaussian"``.
        bins: histogram bins.
        seed: seeds the directions.
    """

    name = "PSI"

    def __init__(
        self, num_directions: int = 200, density: str = "histogram", bins: int = 50, seed: int = 0
    ) -> None:
        super().__init__()
        self.num_directions = require_int(num_directions, "num_directions", 1)
        if density not in _DENSITIES:
            raise ValueError(f"`density` must be one of {_DENSITIES}, got {density!r}.")
        self.density = density
        self.bins = require_int(bins, "bins", 2)
        self.seed = require_int(seed, "seed", 0)

    def config(self) -> dict[str, Any]:
        return {
            "num_directions": self.num_directions,
            "density": self.density,
            "bins": self.bins,
            "seed": self.seed,
        }

    def _fit(self, features: Tensor, logits: Tensor, labels: Tensor) -> None:
        num_classes = logits.shape[1]
        self.prior = label_prior(labels, num_classes)
        generator = torch.Generator().manual_seed(self.seed)
        directions = torch.randn(features.shape[1], self.num_directions, generator=generator)
        self.directions = directions / directions.norm(dim=0, keepdim=True)
        projected = features @ self.directions  # (N, M)
        one_hot = F.one_hot(labels, num_classes).float()  # (N, K)
        counts = one_hot.sum(0)
        if self.density == "gaussian":
            mean = one_hot.T @ projected / counts[:, None]  # (K, M)
            centred = projected[:, None, :] - mean[None]  # (N, K, M)
            var = (one_hot[:, :, None] * centred**2).sum(0) / counts[:, None]
            self.params = {"mean": mean, "var": var.clamp_min(1e-12)}
        else:
            low, high = projected.min(0).values, projected.max(0).values
            width = ((high - low) / self.bins).clamp_min(1e-12)
            index = self._bin(projected, low, width)  # (N, M)
            hist = torch.zeros(num_classes, self.bins, self.num_directions)
            for k in range(num_classes):
                members = index[labels == k]  # (n_k, M)
                hist[k].scatter_add_(0, members, torch.ones_like(members, dtype=torch.float))
            density = hist / (counts[:, None, None] * width[None, None, :])
            self.params = {"low": low, "width": width, "density": density}

    def _bin(self, projected: Tensor, low: Tensor, width: Tensor) -> Tensor:
        return ((projected - low) / width).floor().long().clamp(0, self.bins - 1)

    def class_densities(self, features: Tensor) -> Tensor:
        """``p(theta_m^T z | k)`` for every sample, class and direction, ``(N, K, M)``."""
        projected = features @ self.directions
        if self.density == "gaussian":
            mean, var = self.params["mean"], self.params["var"]
            z = projected[:, None, :] - mean[None]
            return torch.exp(-0.5 * z**2 / var[None]) / torch.sqrt(2 * math.pi * var[None])
        index = self._bin(projected, self.params["low"], self.params["width"])  # (N, M)
        density = self.params["density"]  # (K, B, M)
        gathered = density.gather(1, index[None].expand(density.shape[0], -1, -1))  # (K, N, M)
        return gathered.permute(1, 0, 2)

    def pointwise(self, features: Tensor) -> Tensor:
        """PSI(z; k) in bits, ``(N, K)``."""
        density = self.class_densities(features).clamp_min(1e-5)
        mixture = (self.prior[None, :, None] * density).sum(1, keepdim=True)
        return (density.log() - mixture.log()).mean(2) / LN2

    def _values(self, features: Tensor, logits: Tensor) -> Tensor:
        return self.pointwise(features)

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "prior": self.prior,
            "directions": self.directions,
            "params": dict(self.params),
        }

    def _load_fitted(self, state: dict[str, Any]) -> None:
        super()._load_fitted(state)
        self.prior, self.directions = state["prior"], state["directions"]
        self.params = dict(state["params"])


class MSPScorer(PosthocScorer):
    """Maximum softmax probability, optionally of temperature-scaled logits (fitted by NLL)."""

    def __init__(self, temperature_scaled: bool = False) -> None:
        super().__init__()
        require_bool(temperature_scaled, "temperature_scaled")
        self.temperature_scaled = temperature_scaled
        self.temperature = 1.0
        self.name = "MSP (temperature)" if temperature_scaled else "MSP"

    def _fit(self, features: Tensor, logits: Tensor, labels: Tensor) -> None:
        if self.temperature_scaled:
            self.temperature = fit_temperature(logits, labels)

    def _score(self, features: Tensor, logits: Tensor) -> Tensor:
        return self.class_probabilities(features, logits).max(1).values

    def class_probabilities(self, features: Tensor, logits: Tensor) -> Tensor:
        """``softmax(logits / T)``, ``(N, K)``."""
        return (logits / self.temperature).softmax(1)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "temperature": self.temperature}

    def config(self) -> dict[str, Any]:
        return {"temperature_scaled": self.temperature_scaled}

    def _load_fitted(self, state: dict[str, Any]) -> None:
        super()._load_fitted(state)
        self.temperature = float(state["temperature"])
