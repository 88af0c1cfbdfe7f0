"""How ProDiff's endpoint queries use the prototypes (Bu et al., ICML 2025): the attention
weights and the diagnostics of issue 39.

The condition's prototype is ``p~ = softmax(cos(q, P) / tau) P``
(:func:`~lightning_info.methods.prodiff.functional.prototype_attention`) for the query feature
``q`` of the endpoints-only window; :func:`prototype_weights` returns the weights alone. The
paper's temperature is ``tau = sqrt(d)``: as a cosine lies in [-1, 1], no weight can exceed
``e^(2 / sqrt(d))`` times another (1.09 at ``d`` = 512, 1.28 at 64), so the mixture is close to
the prototypes' mean for every query, by construction; a smaller ``tau`` sharpens it.

:func:`prototype_usage` summarises ``(B, K)`` weights (rows summing to 1): the batch's mean
weight per prototype (``usage``), its entropy ``H`` in nats and effective number of prototypes
``exp(H)`` (``K``: all used alike, 1: collapsed onto one), the mean per-window effective number
``exp(H(w_i))`` (how many prototypes one window mixes), the effective number of the hard
(arg-max, first of a tie) assignment and the mean largest weight.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from lightning_info.core.validation import require_real_floating

__all__ = ["prototype_usage", "prototype_weights"]


def check_against_prototypes(features: Tensor, prototypes: Tensor, name: str) -> None:
    """Raise unless ``features (B, d)`` and ``prototypes (K, d)`` are floating tensors of one
    width ``d`` (shapes and dtypes only: no device synchronisation)."""
    for tensor, label in ((features, name), (prototypes, "prototypes")):
        require_real_floating(tensor, label)
    if features.dim() != 2 or prototypes.dim() != 2 or features.shape[1] != prototypes.shape[1]:
        raise ValueError(
            f"`{name}` and `prototypes` must be (B, d) and (K, d) of one width d, got "
            f"{tuple(features.shape)} and {tuple(prototypes.shape)}."
        )


def prototype_weights(
    query: Tensor, prototypes: Tensor, temperature: float | None = None
) -> Tensor:
    """``softmax(cos(q, P) / tau)``: ``(B, d)`` queries, ``(K, d)`` prototypes, ``(B, K)`` out,
    each row summing to 1; ``temperature`` ``tau`` (``None``: the paper's ``sqrt(d)``)."""
    check_against_prototypes(query, prototypes, "query")
    tau = math.sqrt(query.shape[-1]) if temperature is None else temperature
    if isinstance(tau, bool) or not (
        isinstance(tau, (int, float)) and math.isfinite(tau) and tau > 0
    ):
        raise ValueError(f"`temperature` must be a finite number > 0, got {temperature!r}.")
    cosine = F.normalize(query, dim=-1) @ F.normalize(prototypes, dim=-1).T
    return torch.softmax(cosine / tau, dim=-1)


def _entropy(p: Tensor) -> Tensor:
    """Entropy in nats over the last axis, ``0 log 0 = 0``."""
    return -torch.xlogy(p, p).sum(-1)


def prototype_usage(weights: Tensor) -> dict[str, Tensor]:
    """How ``(B, K)`` attention weights (rows summing to 1) use the ``K`` prototypes (module
    docstring): ``usage`` ``(K,)``, the mean weight of each prototype; ``entropy`` ``H`` of
    ``usage`` in nats and ``effective`` ``exp(H)``, from 1 (every window on one prototype) to
    ``K`` (all used alike); ``sample_effective``, the mean over windows of ``exp(H(w_i))`` (``K``
    when every window mixes all prototypes equally, 1 when each picks one); ``hard_effective``,
    ``exp(H)`` of the share of windows whose largest weight is each prototype's; ``max_weight``,
    the mean largest weight."""
    if weights.ndim != 2 or weights.shape[0] == 0 or weights.shape[1] == 0:
        raise ValueError(
            f"`weights` must be a non-empty (B, K) tensor, got {tuple(weights.shape)}."
        )
    if not torch.isfinite(weights).all() or (weights < 0).any():
        raise ValueError("`weights` must be finite and non-negative.")
    totals = weights.sum(-1)
    if not torch.allclose(totals, torch.ones_like(totals), atol=1e-4):
        raise ValueError("every row of `weights` must sum to 1 (attention over the prototypes).")
    usage = weights.mean(0)
    hard = torch.bincount(weights.argmax(-1), minlength=weights.shape[1]).to(weights.dtype)
    entropy = _entropy(usage)
    return {
        "usage": usage,
        "entropy": entropy,
        "effective": entropy.exp(),
        "sample_effective": _entropy(weights).exp().mean(),
        "hard_effective": _entropy(hard / weights.shape[0]).exp(),
        "max_weight": weights.max(-1).values.mean(),
    }
