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
    require_indices,
    require_int,
    require_log_probabilities,
    require_string_sequence,
)

__all__ = [
    "dc_pdd_score",
    "loss_score",
    "min_k_plus_plus_score",
    "min_k_score",
    "negatives_for_fpr",
    "neighbourhood_score",
    "recall_score",
    "reference_ratio_score",
    "token_frequencies",
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


# --------------------------------------------------------------------------------------------
# ReCaLL, DC-PDD and the neighbourhood comparison
# --------------------------------------------------------------------------------------------


def recall_score(log_probs: Sequence[Tensor], conditional_log_probs: Sequence[Tensor]) -> Tensor:
    """ReCaLL (Xie et al., 2024, "ReCaLL: Membership Inference via Relative Conditional
    Log-Likelihoods", Sec. 3): ``ReCaLL(x) = LL(x | P) / LL(x)``, ``LL`` the mean token
    log-probability of the text ``x`` and ``P`` a prefix of non-member texts.

    ``log_probs[i]`` and ``conditional_log_probs[i]`` score the *same* tokens of text ``i``,
    without and with the prefix (:func:`~lightning_info.methods.prism.model_attacks.
    recall_token_log_probs` computes both). A non-member prefix lowers the log-likelihood of a
    member more than that of a non-member, so ``LL(x | P)`` is more negative than ``LL(x)`` and
    the ratio exceeds 1 further for members: a higher score means "more likely a member", the
    orientation MIMIR reaches after its sign flip (it divides ``-NLL(x | P)`` by ``NLL(x)`` and
    negates before ranking). Float64, ``(n,)``. A text whose ``LL(x)`` is 0 (every token
    certain) or ``-inf`` (a token of probability 0) has no ratio and is refused.
    """
    plain = _token_rows(log_probs, "log_probs")
    conditional = _token_rows(conditional_log_probs, "conditional_log_probs")
    _same_shapes(plain, conditional, "log_probs", "conditional_log_probs")
    unconditional_ll = torch.stack([row.mean() for row in plain])
    conditional_ll = torch.stack([row.mean() for row in conditional])
    for name, ll in (("log_probs", unconditional_ll), ("conditional_log_probs", conditional_ll)):
        if torch.isinf(ll).any():
            i = int(torch.isinf(ll).nonzero()[0])
            raise ValueError(
                f"`{name}[{i}]` holds a token of probability 0 (-inf): its log-likelihood is "
                "-inf and ReCaLL's ratio is undefined; drop the text or score it in float32+."
            )
    if (unconditional_ll == 0).any():
        i = int((unconditional_ll == 0).nonzero()[0])
        raise ValueError(
            f"Text {i} has LL(x) = 0 (every token has probability 1): ReCaLL divides by it; "
            "drop the text."
        )
    return conditional_ll / unconditional_ll


def token_frequencies(token_id_rows: Sequence[Sequence[int] | Tensor], vocab_size: int) -> Tensor:
    """The Laplace-smoothed token frequency distribution of a reference corpus, as DC-PDD
    (Zhang et al., 2024, Sec. 3.2) estimates it: ``f(v) = (c(v) + 1) / (N + |V|)``, ``c(v)`` the
    number of occurrences of token ``v`` in the corpus, ``N`` the corpus' number of tokens and
    ``|V| = vocab_size``. Float64, ``(vocab_size,)``, sums to 1; no token has frequency 0.

    Every occurrence counts: MIMIR's ``fre_dis[input_ids] += 1`` adds 1 once per text however
    often a token repeats in it (an indexed ``+=`` does not accumulate duplicates), a document
    frequency rather than the paper's token count. The corpus is the user's reference texts or
    the non-member set, tokenised with the target's tokenizer; a row may be empty.
    """
    vocab_size = require_int(vocab_size, "vocab_size", 1)
    if isinstance(token_id_rows, Tensor) and token_id_rows.dim() == 1:
        raise ValueError(
            "`token_id_rows` is one 1-D tensor; give a list with one row of token ids per text "
            "(e.g. [ids] for a single text)."
        )
    if len(token_id_rows) == 0:
        raise ValueError("`token_id_rows` is empty: give the token ids of the reference texts.")
    counts = torch.zeros(vocab_size, dtype=torch.float64)
    for i, row in enumerate(token_id_rows):
        ids = require_indices(row, f"token_id_rows[{i}]", vocab_size)
        counts += torch.bincount(ids, minlength=vocab_size).to(torch.float64)
    return (counts + 1.0) / (counts.sum() + vocab_size)


def dc_pdd_score(
    token_ids: Sequence[Sequence[int] | Tensor],
    log_probs: Sequence[Tensor],
    frequencies: Tensor,
    a: float = 0.01,
) -> Tensor:
    """DC-PDD (Zhang et al., 2024, "Pretraining Data Detection for Large Language Models: A
    Divergence-based Calibration Method", Sec. 3): token probabilities calibrated by the token
    frequencies of a reference corpus.

    For text ``x`` with tokens ``x_1..x_T``, ``p_i = exp(log_probs[i])`` the model's probability
    of ``x_i`` given ``x_<i`` and ``f(x_i)`` its frequency (:func:`token_frequencies`):

    - ``alpha_i = p_i * log(1 / f(x_i))``, the cross-entropy term of token ``i``;
    - ``alpha_i <- min(alpha_i, a)``, the upper bound ``a`` (default 0.01, the paper's and
      MIMIR's), so that no single token dominates;
    - ``beta(x) = (1 / |FOS(x)|) sum_{i in FOS(x)} alpha_i``, ``FOS(x)`` the first occurrence
      of each distinct token of ``x`` (a repeated token is counted once, at its first position).

    A higher ``beta`` means "more likely a member" (the paper's orientation; MIMIR returns
    ``-beta`` because its raw scores are lower-is-member). ``token_ids[i]`` and ``log_probs[i]``
    align token by token (``log_probs`` as every score here takes them: log-probabilities
    ``<= 0``, not probabilities). Float64, ``(n,)``.
    """
    a = require_finite(a, "a")
    if a <= 0:
        raise ValueError(
            f"`a` is the upper bound on each token's score and must be > 0, got {a!r}."
        )
    rows = _token_rows(log_probs, "log_probs")
    freq = torch.as_tensor(frequencies).detach().cpu()
    if freq.dim() != 1 or freq.numel() == 0 or not freq.is_floating_point():
        raise ValueError(
            "`frequencies` must be a non-empty 1-D float tensor over the vocabulary; build it "
            "with token_frequencies(reference_token_ids, vocab_size)."
        )
    freq = freq.to(torch.float64)
    if torch.isnan(freq).any() or (freq <= 0).any() or (freq > 1).any():
        raise ValueError(
            "`frequencies` must hold relative frequencies in (0, 1]: a token of frequency 0 has "
            "log(1/f) = inf; Laplace-smooth the counts (token_frequencies does)."
        )
    if isinstance(token_ids, Tensor) and token_ids.dim() == 1:
        raise ValueError(
            "`token_ids` is one 1-D tensor; give a list with one row of token ids per text."
        )
    if len(token_ids) != len(rows):
        raise ValueError(f"`token_ids` holds {len(token_ids)} texts but `log_probs` {len(rows)}.")
    scores = []
    for i, (row_ids, lp) in enumerate(zip(token_ids, rows)):
        ids = require_indices(row_ids, f"token_ids[{i}]", freq.numel())
        if ids.numel() != lp.numel():
            raise ValueError(
                f"Text {i}: `token_ids` has {ids.numel()} tokens but `log_probs` has {lp.numel()}."
            )
        unique, inverse = torch.unique(ids, return_inverse=True)
        positions = torch.arange(ids.numel())
        first = torch.full((unique.numel(),), ids.numel(), dtype=torch.int64)
        first = first.scatter_reduce(0, inverse, positions, reduce="amin")
        alpha = lp[first].exp() * -torch.log(freq[ids[first]])
        scores.append(alpha.clamp(max=a).mean())
    return torch.stack(scores)


def neighbourhood_score(
    loss_of_text: Tensor | Sequence[float], losses_of_neighbours: Sequence[Tensor] | Tensor
) -> Tensor:
    """The neighbourhood comparison (Mattern et al., 2023, "Membership Inference Attacks against
    Language Models via Neighbourhood Comparison", whose test calls ``x`` a member when
    ``L(x) - (1/n) sum_i L(x~_i) < gamma``): ``(1/n) sum_i L(x~_i) - L(x)``, the mean loss of
    the text's neighbours minus its own loss, so that a higher score means "more likely a
    member" (a member's loss sits below that of its close rewordings; MIMIR returns
    ``L(x) - mean`` as a lower-is-member raw score).

    ``loss_of_text`` is ``(n,)``, the mean negative log-likelihood of each text (``-loss_score``
    of its token log-probabilities, ``>= 0``); ``losses_of_neighbours[i]`` the 1-D losses of text
    ``i``'s neighbours (any number >= 1 per text; an ``(n, m)`` tensor works too). Float64.
    """
    loss = torch.as_tensor(loss_of_text, dtype=torch.float64).detach().cpu()
    if loss.dim() != 1 or loss.numel() == 0:
        raise ValueError(
            f"`loss_of_text` must be a non-empty 1-D tensor, one loss per text, got shape "
            f"{tuple(loss.shape)}."
        )
    neighbours = _token_rows(losses_of_neighbours, "losses_of_neighbours", log_probabilities=False)
    if len(neighbours) != loss.numel():
        raise ValueError(
            f"`loss_of_text` holds {loss.numel()} texts but `losses_of_neighbours` "
            f"{len(neighbours)}; give one row of neighbour losses per text."
        )
    if not torch.isfinite(loss).all():
        raise ValueError("`loss_of_text` contains NaN or inf.")
    named = [("loss_of_text", loss)]
    named += [(f"losses_of_neighbours[{i}]", row) for i, row in enumerate(neighbours)]
    for name, values in named:
        if (values < 0).any():
            raise ValueError(
                f"`{name}` holds a negative value: losses are mean negative log-likelihoods "
                "(>= 0); pass -loss_score(log_probs), not the mean log-probability."
            )
    return torch.stack([row.mean() for row in neighbours]) - loss
