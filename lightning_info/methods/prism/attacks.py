"""Standard membership-inference scores, computed from per-token log-probabilities.

The baselines that membership-inference and extraction work (MIMIR, LiRA, the extraction
benchmarks) reports beside any new attack. Every score is oriented so that a *higher* score
means "more likely a member" (seen in training), and takes the per-token statistics of
:func:`~lightning_info.methods.prism.functional.fragment_token_statistics`: one 1-D tensor of
token log-probabilities ``log p(y_j | prompt, y_<j)`` per scored text.

- Loss (Yeom et al., 2018): ``-L(y) = (1/T) sum_j log p(y_j | .)`` (:func:`loss_score`).
- zlib ratio (Carlini et al., 2021): the loss divided by the zlib entropy of the text,
  ``-L(y) / |zlib(y)|`` with ``|zlib(y)|`` the byte length of ``zlib.compress`` of its UTF-8
  bytes (:func:`zlib_score`): a text that is easy to compress is also easy to predict, members
  or not.
- Min-K% (Shi et al., 2024): the mean of the ``k`` fraction of lowest token log-probabilities,
  ``(1/|K|) sum_{j in K} log p(y_j | .)``, ``|K| = max(1, floor(k T))`` (:func:`min_k_score`).
- Min-K%++ (Zhang et al., 2024): the same over the standardised token scores
  ``(log p(y_j | .) - mu_j) / sigma_j``, ``mu_j`` and ``sigma_j`` the mean and standard
  deviation of ``log p(z | .)`` for ``z`` drawn from the model at position ``j``
  (:func:`min_k_plus_plus_score`).
- Reference model, as MIMIR implements it (Duan et al., 2024, "Do membership inference attacks
  work on large language models?"): ``-L_target(y) + L_reference(y)``, the target's mean
  log-probability above a reference model's, a *difference* of losses
  (:func:`reference_ratio_score`). Carlini et al. (2021) rank by the *ratio* of the two
  log-perplexities instead, ``L_target(y) / L_reference(y)``, which orders texts differently
  when the reference loss varies between them.

:func:`negatives_for_fpr` gives the number of non-members a TPR at a false-positive rate needs
to be more than one sample's worth of ROC curve.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence

import torch
from torch import Tensor

from lightning_info.core.validation import (
    require_finite,
    require_log_probabilities,
    require_string_sequence,
)

__all__ = [
    "loss_score",
    "min_k_plus_plus_score",
    "min_k_score",
    "negatives_for_fpr",
    "reference_ratio_score",
    "vocabulary_moments",
    "zlib_score",
]


def _token_rows(
    values: Sequence[Tensor], name: str, log_probabilities: bool = True
) -> list[Tensor]:
    """One float64 CPU row per text; with ``log_probabilities`` each row must hold values
    ``<= 0`` (``-inf`` allowed): a probability or a logit passed instead is refused."""
    if isinstance(values, Tensor) and values.dim() == 1:
        raise ValueError(
            f"`{name}` is one 1-D tensor; give a list with one tensor of token values per text "
            f"(e.g. [{name}] for a single text)."
        )
    if len(values) == 0:
        raise ValueError(f"`{name}` is empty: give one tensor of token values per text.")
    rows = []
    for i, row in enumerate(values):
        row = torch.as_tensor(row, dtype=torch.float64).detach().cpu()
        if row.dim() != 1 or row.numel() == 0:
            raise ValueError(
                f"`{name}[{i}]` must be a non-empty 1-D tensor of per-token values, got shape "
                f"{tuple(row.shape)}."
            )
        if torch.isnan(row).any():
            raise ValueError(f"`{name}[{i}]` contains NaN.")
        if log_probabilities:
            require_log_probabilities(row, f"{name}[{i}]")
        elif torch.isinf(row).any():
            raise ValueError(f"`{name}[{i}]` contains inf.")
        rows.append(row)
    return rows


def _check_fraction(k: float) -> float:
    k = float(k)
    if not 0.0 < k <= 1.0:
        raise ValueError(f"`k` is the fraction of tokens kept and must lie in (0, 1], got {k!r}.")
    return k


def _same_shapes(a: list[Tensor], b: list[Tensor], name_a: str, name_b: str) -> None:
    if len(a) != len(b):
        raise ValueError(f"`{name_a}` holds {len(a)} texts but `{name_b}` holds {len(b)}.")
    for i, (x, y) in enumerate(zip(a, b)):
        if x.shape != y.shape:
            raise ValueError(
                f"Text {i}: `{name_a}` has {x.numel()} tokens but `{name_b}` has {y.numel()}."
            )


def loss_score(log_probs: Sequence[Tensor]) -> Tensor:
    """``-L(y)``, the mean token log-probability of each text (float64, ``(n,)``)."""
    return torch.stack([row.mean() for row in _token_rows(log_probs, "log_probs")])


def zlib_score(log_probs: Sequence[Tensor], texts: Sequence[str]) -> Tensor:
    """``-L(y) / |zlib(y)|``: the loss attack normalised by the compressed size of the text."""
    rows = _token_rows(log_probs, "log_probs")
    texts = require_string_sequence(texts, "texts")
    if len(texts) != len(rows):
        raise ValueError(f"Got {len(texts)} texts for {len(rows)} rows of log-probabilities.")
    sizes = torch.tensor(
        [len(zlib.compress(str(text).encode("utf-8"))) for text in texts], dtype=torch.float64
    )
    return torch.stack([row.mean() for row in rows]) / sizes


def _lowest_mean(rows: list[Tensor], k: float) -> Tensor:
    """Mean of the ``max(1, floor(k T))`` smallest values of each row."""
    return torch.stack(
        [row.sort().values[: max(1, math.floor(k * row.numel()))].mean() for row in rows]
    )


def min_k_score(log_probs: Sequence[Tensor], k: float = 0.2) -> Tensor:
    """Min-K%: the mean of the lowest ``k`` fraction of each text's token log-probabilities."""
    return _lowest_mean(_token_rows(log_probs, "log_probs"), _check_fraction(k))


def min_k_plus_plus_score(
    log_probs: Sequence[Tensor], means: Sequence[Tensor], stds: Sequence[Tensor], k: float = 0.2
) -> Tensor:
    """Min-K%++: Min-K% over ``(log p(y_j) - mu_j) / sigma_j``. A position whose distribution is
    a point mass (``sigma_j = 0``) carries no evidence and scores 0 there."""
    rows = _token_rows(log_probs, "log_probs")
    mu, sigma = _token_rows(means, "means"), _token_rows(stds, "stds", log_probabilities=False)
    _same_shapes(rows, mu, "log_probs", "means")
    _same_shapes(rows, sigma, "log_probs", "stds")
    if any((s < 0).any() for s in sigma):
        raise ValueError("`stds` must be >= 0: they are standard deviations.")
    standardised = [
        torch.where(s > 0, (lp - m) / s.clamp(min=torch.finfo(s.dtype).tiny), 0.0)
        for lp, m, s in zip(rows, mu, sigma)
    ]
    return _lowest_mean(standardised, _check_fraction(k))


def reference_ratio_score(
    target_log_probs: Sequence[Tensor], reference_log_probs: Sequence[Tensor]
) -> Tensor:
    """``-L_target(y) + L_reference(y)``: how much better the target predicts the text than a
    reference model (a shadow or world model) that did not train on it."""
    target = _token_rows(target_log_probs, "target_log_probs")
    reference = _token_rows(reference_log_probs, "reference_log_probs")
    _same_shapes(target, reference, "target_log_probs", "reference_log_probs")
    return loss_score(target) - loss_score(reference)


def negatives_for_fpr(fpr_level: float) -> int:
    """Non-members needed before a false-positive rate of ``fpr_level`` is more than a single
    sample: ``ceil(1 / fpr_level)`` (1% needs 100, 0.1% needs 1,000). With fewer, a TPR at that
    rate is read off the interpolated first step of the ROC curve, not measured."""
    level = require_finite(fpr_level, "fpr_level")
    if not 0.0 < level <= 1.0:
        raise ValueError(f"`fpr_level` must lie in (0, 1], got {fpr_level!r}.")
    return math.ceil(1.0 / level - 1e-9)


def vocabulary_moments(logits: Tensor) -> tuple[Tensor, Tensor]:
    """The normalisers of Min-K%++ at every position: the mean ``mu = sum_z p(z) log p(z)`` and
    the standard deviation ``sigma`` of ``log p(z)`` over the vocabulary ``z`` (last axis of
    ``logits``, ``p = softmax(logits)``), both float64 with ``logits``' leading shape.

    ``sigma`` is computed two-pass from the logits themselves, ``sigma^2 = sum_z p(z) (l_z -
    E_p[l])^2`` (``log p`` and ``l`` differ by a constant per position), in the logits' float
    dtype (float32 for half-precision logits): the one-pass ``E[log^2 p] - mu^2`` cancels
    catastrophically on a nearly flat distribution (a 50k vocabulary, ``mu ~ -10.8``, spread
    ``~1e-2``) and returns 0 there. No float64 copy of the logits is made.
    """
    work = logits if logits.dtype in (torch.float32, torch.float64) else logits.float()
    log_p = torch.log_softmax(work, dim=-1)
    p = log_p.exp()
    possible = p > 0  # a -inf logit (a masked token) adds nothing, not 0 * inf = NaN
    mean = torch.where(possible, p * log_p, 0.0).sum(-1)
    centred = work - torch.where(possible, p * work, 0.0).sum(-1, keepdim=True)
    variance = torch.where(possible, p * centred.square(), 0.0).sum(-1)
    return mean.double(), variance.double().sqrt()
