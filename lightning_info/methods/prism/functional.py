"""Fragment extraction scores (PRISM, "Fragments to Facts", ICML 2025): the functional core.

An attacker knows some fragments of a record (e.g. diagnoses) and asks whether another fragment
``y`` was in a record used to fine-tune a *target* model. Each candidate is scored from three
fragment probabilities given the prompt built from the known fragments:

* ``p_t = p_target(y | prompt)``, the fine-tuned model;
* ``p_s = p_shadow(y | prompt)``, the same base fine-tuned on disjoint records;
* ``p_w = p_world(y | prompt)``, the mean probability under several general models
  (:func:`world_log_probability`).

From these: the likelihood ratio ``LR = p_t / (p_s + eps)`` (:func:`likelihood_ratio`), the
posterior ``post = LR pi / (LR pi + (1 - pi) / LR)`` (:func:`posterior`), the PRISM score
``(p_w - p_s (1 - post)) / (post + 1e-12)`` (:func:`prism_score`) and the data-aware baseline, a
logistic regression on the three log-probabilities with cross-validated (out-of-fold)
predictions (:func:`data_aware_scores`). Attacks are compared by ROC-AUC and the TPR at low FPR,
interpolated on the ROC curve (:func:`attack_metrics`), beside the standard membership-inference
scores of :mod:`~lightning_info.methods.prism.attacks` (loss, zlib, Min-K%, Min-K%++, reference
model) on the per-token statistics of :func:`fragment_token_statistics`.

Re-exported here as the model-free part of the audit: ReCaLL, DC-PDD and the neighbourhood
comparison (:mod:`~lightning_info.methods.prism.attacks`), the audit statistics (bootstrap AUC
standard error, PR AUC, both TPR-at-FPR conventions, the n/a rule, MIMIR's layout;
:mod:`~lightning_info.methods.prism.statistics`) and the blind baseline with its distribution
check (:mod:`~lightning_info.methods.prism.blind`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from lightning_info.core.validation import (
    require_bool,
    require_finite,
    require_indices,
    require_int,
    require_log_probabilities,
    require_non_negative,
    require_string_sequence,
)
from lightning_info.lm.features import check_causal_lm, padded_batches
from lightning_info.measures.ranking import binary_auroc
from lightning_info.methods.prism.attacks import (
    dc_pdd_score,
    loss_score,
    min_k_plus_plus_score,
    min_k_score,
    negatives_for_fpr,
    neighbourhood_score,
    recall_score,
    reference_ratio_score,
    token_frequencies,
    zlib_score,
)
from lightning_info.methods.prism.attacks import vocabulary_moments as _vocabulary_moments
from lightning_info.methods.prism.blind import (
    beats_blind,
    blind_baseline_auc,
    blind_baseline_scores,
    deduplicate_non_members,
    distribution_check,
    ngram_overlap,
    text_distribution,
)
from lightning_info.methods.prism.statistics import (
    DEFAULT_AUDIT_FPR_LEVELS,
    bootstrap_auc,
    enough_negatives,
    format_rate,
    markdown_report,
    membership_report,
    mimir_layout,
    pr_auc,
    tpr_at_fpr_levels,
)

__all__ = [
    "DEFAULT_AUDIT_FPR_LEVELS",
    "DEFAULT_FPR_LEVELS",
    "attack_metrics",
    "beats_blind",
    "blind_baseline_auc",
    "blind_baseline_scores",
    "bootstrap_auc",
    "check_prior",
    "data_aware_scores",
    "dc_pdd_score",
    "deduplicate_non_members",
    "distribution_check",
    "encode_prompt_fragment",
    "enough_negatives",
    "format_rate",
    "fragment_log_probability",
    "fragment_token_statistics",
    "FragmentTokens",
    "likelihood_ratio",
    "loss_score",
    "markdown_report",
    "membership_report",
    "mimir_layout",
    "min_k_plus_plus_score",
    "min_k_score",
    "negatives_for_fpr",
    "neighbourhood_score",
    "ngram_overlap",
    "posterior",
    "pr_auc",
    "prism_score",
    "recall_score",
    "reference_ratio_score",
    "roc_auc",
    "token_frequencies",
    "tpr_at_fpr",
    "tpr_at_fpr_levels",
    "world_log_probability",
    "zlib_score",
    "text_distribution",
]

DEFAULT_FPR_LEVELS = (0.02, 0.05)
"""The false-positive rates at which PRISM reports the true-positive rate."""

ArrayLike = Tensor | np.ndarray | Sequence[float]


# --------------------------------------------------------------------------------------------
# Fragment probabilities under a causal LM
# --------------------------------------------------------------------------------------------


def encode_prompt_fragment(
    tokenizer: Any, prompt: str, fragment: str, move_trailing_space: bool = True
) -> tuple[list[int], int]:
    """Token ids of ``prompt`` followed by ``fragment``, and the index of the first fragment token.

    The prompt and the fragment are tokenised *separately* and the ids concatenated, so that the
    fragment's tokens are exactly identified: tokenising ``prompt + fragment`` as one string could
    merge a BPE token across the boundary, leaving no clean split. The prompt is encoded with the
    tokenizer's own special tokens (e.g. a leading bos, where it adds one), the fragment without.

    With ``move_trailing_space`` (default) whitespace at the end of the prompt is moved to the
    start of the fragment before encoding: the note's prompt ends in ``": "`` and byte-level BPE
    (GPT-2) normally spells a word after a space as one token with a leading space (``" asthma"``),
    so this keeps the fragment in the form the model sees in running text. A prompt that encodes
    to no token gets the tokenizer's bos (else eos) id as context; without either it raises.
    Train a target on texts encoded the same way (:func:`encode_prompt_fragment` of its
    prompt/fragment split) when the split matters.
    """
    if not isinstance(prompt, str) or not isinstance(fragment, str):
        raise TypeError("Prompts and fragments must be strings.")
    if move_trailing_space:
        stripped = prompt.rstrip()
        prompt, fragment = stripped, prompt[len(stripped) :] + fragment
    if not fragment.strip():
        raise ValueError("A fragment is empty or whitespace only; it has no probability to score.")
    prompt_ids = list(tokenizer(prompt, add_special_tokens=True)["input_ids"]) if prompt else []
    if not prompt_ids:
        start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else None
        start = tokenizer.eos_token_id if start is None else start
        if start is None:
            raise ValueError(
                "The prompt encodes to no token and the tokenizer has no bos or eos token to "
                "condition the fragment on; give a non-empty prompt."
            )
        prompt_ids = [int(start)]
    fragment_ids = list(tokenizer(fragment, add_special_tokens=False)["input_ids"])
    if not fragment_ids:
        raise ValueError(f"The fragment {fragment!r} has no tokens after tokenisation.")
    return prompt_ids + fragment_ids, len(prompt_ids)


def fragment_log_probability(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    fragments: Sequence[str],
    batch_size: int = 16,
    device: torch.device | str | None = None,
    move_trailing_space: bool = True,
) -> Tensor:
    """Teacher-forced ``log p(y | prompt) = sum_j log p(y_j | prompt, y_<j)`` for every pair.

    Each ``(prompt, fragment)`` pair is encoded by :func:`encode_prompt_fragment` (prompt and
    fragment tokenised separately, ids concatenated) and the log-softmax of the model's logits
    at the positions before the fragment tokens is summed over those tokens. Rows are batched
    longest first and padded on ``tokenizer.padding_side``; padding is masked out and position ids
    come from the attention mask, so the result does not depend on ``batch_size`` or the padding
    side (up to float rounding). Runs under :func:`torch.no_grad` in eval mode on ``device``
    (default: the device of the model's input embedding), restoring the train/eval mode.

    Returns a float64 CPU tensor of shape ``(len(prompts),)``; ``exp`` of it is ``p(y | prompt)``.
    """
    tokens = fragment_token_statistics(
        model, tokenizer, prompts, fragments, batch_size, device, move_trailing_space, False
    )
    return torch.stack([row.sum() for row in tokens.log_probs])


@dataclass
class FragmentTokens:
    """Per-token statistics of each fragment under a model (float64 CPU, one tensor per pair).

    ``log_probs[i][j] = log p(y_j | prompt, y_<j)``; ``means[i][j]`` and ``stds[i][j]`` are the
    mean and standard deviation of ``log p(z | prompt, y_<j)`` over the vocabulary ``z`` drawn
    from the same distribution (``mu = sum_z p(z) log p(z)``, ``sigma^2 = sum_z p(z) (log p(z) -
    mu)^2``, computed two-pass by
    :func:`~lightning_info.methods.prism.attacks.vocabulary_moments`), the normalisers of
    Min-K%++; empty lists when not asked for. The constructor raises unless every entry is a
    1-D tensor, ``log_probs`` hold log-probabilities (``<= 0``, no NaN) and ``means``/``stds``
    are both empty or hold one tensor of the same length per ``log_probs`` entry.
    """

    log_probs: list[Tensor]
    means: list[Tensor]
    stds: list[Tensor]

    def __post_init__(self) -> None:
        for field in ("log_probs", "means", "stds"):
            values = getattr(self, field)
            if not isinstance(values, list) or not all(
                isinstance(v, Tensor) and v.dim() == 1 for v in values
            ):
                raise TypeError(f"`{field}` must be a list of 1-D tensors, one per fragment.")
        for i, values in enumerate(self.log_probs):
            require_log_probabilities(values, f"log_probs[{i}]")
        if bool(self.means) != bool(self.stds) or (
            self.means and not len(self.means) == len(self.stds) == len(self.log_probs)
        ):
            raise ValueError(
                f"`means` and `stds` must both be empty or hold one entry per fragment: got "
                f"{len(self.log_probs)} log_probs, {len(self.means)} means, {len(self.stds)} stds."
            )
        for i, (m, s) in enumerate(zip(self.means, self.stds)):
            if not len(m) == len(s) == len(self.log_probs[i]):
                raise ValueError(
                    f"fragment {i} has {len(self.log_probs[i])} log_probs but {len(m)} means and "
                    f"{len(s)} stds; give one per token."
                )


def fragment_token_statistics(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    fragments: Sequence[str],
    batch_size: int = 16,
    device: torch.device | str | None = None,
    move_trailing_space: bool = True,
    vocabulary_moments: bool = True,
) -> FragmentTokens:
    """The teacher-forced log-probability of every fragment token (and, with
    ``vocabulary_moments``, the mean and std of the log-probabilities over the vocabulary at that
    position), in one forward pass per batch; the encoding, batching and padding of
    :func:`fragment_log_probability`, whose value is the sum of ``log_probs[i]``."""
    batch_size = require_int(batch_size, "batch_size", 1)
    move_trailing_space = require_bool(move_trailing_space, "move_trailing_space")
    prompts = require_string_sequence(prompts, "prompts")
    fragments = require_string_sequence(fragments, "fragments")
    if len(prompts) != len(fragments):
        raise ValueError(
            f"Got {len(prompts)} prompts but {len(fragments)} fragments; they must pair up."
        )
    if len(prompts) == 0:
        raise ValueError("There are no (prompt, fragment) pairs to score.")
    base = check_causal_lm(model, tokenizer)
    embedding = base.get_input_embeddings().weight
    device = embedding.device if device is None else torch.device(device)
    rows = []
    for prompt, fragment in zip(prompts, fragments):
        ids, start = encode_prompt_fragment(tokenizer, prompt, fragment, move_trailing_space)
        rows.append((ids, start, len(ids)))
    limit = getattr(base.config, "n_positions", None) or getattr(
        base.config, "max_position_embeddings", None
    )
    longest = max(len(ids) for ids, _, _ in rows)
    if limit is not None and longest > limit:
        raise ValueError(
            f"A prompt + fragment takes {longest} tokens, more than the model's {limit} positions."
        )
    count = len(rows)
    log_probs: list[Tensor] = [torch.empty(0)] * count
    means: list[Tensor] = [torch.empty(0)] * count if vocabulary_moments else []
    stds: list[Tensor] = [torch.empty(0)] * count if vocabulary_moments else []
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for chunk, batch in padded_batches(rows, tokenizer, batch_size):
                ids = batch["input_ids"].to(device)
                mask = batch["attention_mask"].to(device)
                logits = model(
                    input_ids=ids,
                    attention_mask=mask,
                    position_ids=(mask.cumsum(-1) - 1).clamp(min=0),
                    use_cache=False,
                ).logits
                # logits[:, t] predicts ids[:, t + 1]; keep the positions of fragment tokens.
                target = batch["response_mask"][:, 1:].bool().to(device)
                every = torch.log_softmax(logits[:, :-1].float(), dim=-1)
                picked = every.gather(-1, ids[:, 1:, None]).squeeze(-1).double()
                if vocabulary_moments:
                    mean, std = _vocabulary_moments(logits[:, :-1])
                for row, index in enumerate(chunk):
                    keep = target[row]
                    log_probs[index] = picked[row][keep].cpu()
                    if vocabulary_moments:
                        means[index] = mean[row][keep].cpu()
                        stds[index] = std[row][keep].cpu()
    finally:
        model.train(was_training)
    return FragmentTokens(log_probs, means, stds)


def world_log_probability(log_probs: Sequence[ArrayLike]) -> Tensor:
    """``log p_w = log((1/K) sum_k p_k)``: the log of the *mean probability* of ``K`` models.

    ``log_probs`` holds one vector of log-probabilities per world model (equal lengths); the mean
    is taken in probability space with ``logsumexp`` so that tiny probabilities do not underflow.
    """
    if len(log_probs) == 0:
        raise ValueError("Give at least one world model's log-probabilities.")
    if isinstance(log_probs, Tensor) and log_probs.dim() == 1:
        raise ValueError(
            "`log_probs` is one 1-D tensor; give one vector per world model, e.g. [log_probs]."
        )
    rows = [_vector(lp, "world log-probabilities", allow_inf=True) for lp in log_probs]
    for k, row in enumerate(rows):
        require_log_probabilities(row, f"log_probs[{k}]")
    if len({row.numel() for row in rows}) > 1:
        raise ValueError(
            f"Every world model must score the same queries, got lengths "
            f"{[row.numel() for row in rows]}."
        )
    stacked = torch.stack(rows)
    return torch.logsumexp(stacked, 0) - math.log(stacked.shape[0])


# --------------------------------------------------------------------------------------------
# Likelihood ratio, posterior and PRISM
# --------------------------------------------------------------------------------------------


def likelihood_ratio(p_target: ArrayLike, p_shadow: ArrayLike, eps: float = 1e-12) -> Tensor:
    """``LR = p_t / (p_s + eps)``, elementwise in float64 (``eps`` as in the reference, 1e-12).

    With ``eps = 0`` a zero ``p_shadow`` gives ``inf`` (posterior 1) where ``p_target > 0``;
    ``p_target = p_shadow = 0`` has no ratio and raises.
    """
    eps = require_non_negative(eps, "eps")
    p_t, p_s = _probabilities(p_target, "p_target"), _probabilities(p_shadow, "p_shadow")
    _same_length(p_t, p_s, "p_target", "p_shadow")
    if eps == 0 and ((p_t == 0) & (p_s == 0)).any():
        raise ValueError(
            "`p_target` and `p_shadow` are both 0 at some query and `eps` is 0: the ratio 0/0 is "
            "undefined; pass eps > 0 (the reference uses 1e-12)."
        )
    return p_t / (p_s + eps)


def posterior(lr: ArrayLike, prior: float = 0.9) -> Tensor:
    """``post = LR pi / (LR pi + (1 - pi) / LR)``, exactly as in the note (``pi = prior``).

    Note the ``/ LR`` in the second term of the denominator: the formula equals
    ``LR^2 pi / (LR^2 pi + 1 - pi) = sigmoid(2 log LR + logit(pi))``, which is how it is computed
    here so that ``LR = 0`` gives 0 and ``LR = inf`` gives 1 instead of NaN. ``LR = 1`` gives
    ``pi``. ``prior`` must lie in (0, 1).
    """
    prior = check_prior(prior)
    lr = _vector(lr, "lr", allow_inf=True)
    if (lr < 0).any():
        raise ValueError("`lr` must be >= 0: it is a ratio of probabilities.")
    logit = 2.0 * torch.log(lr) + math.log(prior / (1.0 - prior))
    return torch.sigmoid(logit)


def check_prior(prior: float, name: str = "prior") -> float:
    """Return ``prior`` as a float, or raise unless it is a real number in the open ``(0, 1)``."""
    prior = require_finite(prior, name)
    if not 0.0 < prior < 1.0:
        raise ValueError(f"`{name}` must lie in (0, 1), got {prior!r}.")
    return prior


def prism_score(
    p_target: ArrayLike,
    p_shadow: ArrayLike,
    p_world: ArrayLike,
    prior: float = 0.9,
    eps: float = 1e-12,
) -> Tensor:
    """``PRISM = (p_w - p_s (1 - post)) / (post + 1e-12)`` with ``post`` of ``LR = p_t/(p_s+eps)``.

    Solves ``p_w = post * PRISM + (1 - post) * p_s`` for ``PRISM``: the world probability with the
    shadow's share removed, weighted by the posterior that the fragment was in the target's
    training data. Identities: ``p_w = p_s`` gives ``PRISM = p_s`` (up to the 1e-12), and
    ``p_t = p_s`` (``LR = 1``) gives ``post = pi``. Float64, elementwise.
    """
    p_s, p_w = _probabilities(p_shadow, "p_shadow"), _probabilities(p_world, "p_world")
    _same_length(p_s, p_w, "p_shadow", "p_world")
    post = posterior(likelihood_ratio(p_target, p_s, eps), prior)
    return (p_w - p_s * (1.0 - post)) / (post + 1e-12)


# --------------------------------------------------------------------------------------------
# Data-aware baseline: logistic regression with out-of-fold predictions
# --------------------------------------------------------------------------------------------


DATA_AWARE_CLASSIFIERS = ("boosted_trees", "logistic")


def data_aware_scores(
    features: ArrayLike,
    labels: ArrayLike,
    n_splits: int = 5,
    seed: int = 0,
    folds: ArrayLike | None = None,
    classifier: str = "boosted_trees",
) -> tuple[np.ndarray, np.ndarray]:
    """Out-of-fold ``P(member | x)`` of a classifier on ``features``, and the fold ids.

    ``features`` is ``(n, d)``; PRISM's data-aware attack uses ``[log p_t, log p_w, log p_s]``
    (an infinite log is replaced by the column's finite extreme -/+ 1). ``classifier``:
    ``"boosted_trees"``, scikit-learn's ``HistGradientBoostingClassifier`` (seeded), the
    reference's gradient-boosted trees; trees split on the order of each feature only, so the
    logs give the same model as the reference's raw probabilities. ``"logistic"``: a
    standardise + ``LogisticRegression`` pipeline. Samples are split into ``n_splits``
    stratified folds (shuffled with ``seed``), or by the given integer ``folds`` ids; each fold
    is scored by a model fitted on the other folds only, so no sample is scored by a model that
    saw it. Returns float64 scores and int fold ids, both of shape ``(n,)``.
    """
    from sklearn.model_selection import StratifiedKFold

    if classifier not in DATA_AWARE_CLASSIFIERS:
        raise ValueError(
            f"`classifier` must be one of {DATA_AWARE_CLASSIFIERS}, got {classifier!r}."
        )

    seed = require_int(seed, "seed", 0)
    x = _numbers(features, "features")
    x = np.array(x, dtype=np.float64)  # a copy: the caller's array is not modified
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError(f"`features` must be a non-empty (n, d) array, got shape {x.shape}.")
    if np.isnan(x).any():
        raise ValueError("`features` contains NaN; score every fragment before the attack.")
    for column in x.T:  # an underflowed log-probability (+-inf) -> just past the finite range
        finite = column[np.isfinite(column)]
        low, high = (finite.min(), finite.max()) if finite.size else (0.0, 0.0)
        column[np.isneginf(column)] = low - 1.0
        column[np.isposinf(column)] = high + 1.0
    y = _labels(labels, x.shape[0])
    if folds is None:
        n_splits = require_int(n_splits, "n_splits", 2)
        smallest = int(min(y.sum(), (1 - y).sum()))
        if smallest < n_splits:
            raise ValueError(
                f"{n_splits}-fold stratified CV needs >= {n_splits} samples of each class; the "
                f"smaller class has {smallest}."
            )
        splitter = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=seed)
        fold_ids = np.empty(len(y), dtype=np.int64)
        for k, (_, test) in enumerate(splitter.split(x, y)):
            fold_ids[test] = k
    else:
        fold_ids = require_indices(folds, "folds").numpy()
        if fold_ids.shape[0] != len(y):
            raise ValueError(f"`folds` has {fold_ids.shape[0]} ids for {len(y)} samples.")
    scores = np.empty(len(y), dtype=np.float64)
    for k in np.unique(fold_ids):
        test = fold_ids == k
        train = ~test
        if len(np.unique(y[train])) < 2:
            raise ValueError(f"Fold {k}'s training part holds one class only; use fewer folds.")
        model = _data_aware_model(classifier, seed)
        model.fit(x[train], y[train])
        scores[test] = model.predict_proba(x[test])[:, 1]
    return scores, fold_ids


def _data_aware_model(classifier: str, seed: int):
    if classifier == "boosted_trees":
        from sklearn.ensemble import HistGradientBoostingClassifier

        return HistGradientBoostingClassifier(random_state=seed)
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))


# --------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------


def roc_auc(scores: ArrayLike, labels: ArrayLike) -> float:
    """ROC-AUC, ``P(s+ > s-) + 1/2 P(s+ = s-)`` (:func:`~lightning_info.scoring.binary_auroc`)."""
    s = _vector(scores, "scores", allow_inf=True)
    return float(binary_auroc(s, _vector(labels, "labels", allow_bool=True)))


def tpr_at_fpr(scores: ArrayLike, labels: ArrayLike, fpr_level: float) -> float:
    """TPR at FPR ``fpr_level``, linearly interpolated between the points of the ROC curve.

    Equal to ``np.interp(fpr_level, fpr, tpr)`` on ``sklearn.metrics.roc_curve(labels, scores)``
    (which starts at ``(0, 0)``); where the curve rises vertically at ``fpr_level`` this is the
    highest TPR reached there. Needs both classes.
    """
    from sklearn.metrics import roc_curve

    level = require_finite(fpr_level, "fpr_level")
    if not 0.0 <= level <= 1.0:
        raise ValueError(f"`fpr_level` must lie in [0, 1], got {fpr_level!r}.")
    s = _vector(scores, "scores", allow_inf=True).numpy()
    y = _labels(labels, s.shape[0])
    if y.min() == y.max():
        raise ValueError("TPR at FPR is undefined with only one class present in `labels`.")
    fpr, tpr, _ = roc_curve(y, s)
    return float(np.interp(level, fpr, tpr))


def attack_metrics(
    scores: ArrayLike, labels: ArrayLike, fpr_levels: Sequence[float] = DEFAULT_FPR_LEVELS
) -> dict[str, float]:
    """``{"auc": ROC-AUC, "tpr@2%fpr": ..., "tpr@5%fpr": ...}`` of one attack's scores;
    ``fpr_levels`` is a sequence of rates in ``[0, 1]`` (empty: the AUC alone)."""
    if isinstance(fpr_levels, (str, bytes)) or not isinstance(fpr_levels, Sequence):
        raise TypeError(
            f"`fpr_levels` must be a sequence of rates in [0, 1], got {fpr_levels!r}; wrap one "
            "rate in a tuple: (0.05,)."
        )
    metrics = {"auc": roc_auc(scores, labels)}
    for level in fpr_levels:
        metrics[f"tpr@{100 * float(level):g}%fpr"] = tpr_at_fpr(scores, labels, level)
    return metrics


# --------------------------------------------------------------------------------------------
# Internals
# --------------------------------------------------------------------------------------------


def _numbers(values: ArrayLike, name: str, allow_bool: bool = False) -> np.ndarray:
    """``values`` as a NumPy array of real numbers; strings, objects, complex numbers and (unless
    ``allow_bool``) bools are refused rather than cast."""
    array = np.asarray(values.detach().cpu() if isinstance(values, Tensor) else values)
    kind = array.dtype.kind
    if kind not in "iuf" + ("b" if allow_bool else ""):
        what = {"b": "bools", "c": "complex numbers"}.get(kind, f"{array.dtype} values")
        raise TypeError(f"`{name}` must hold real numbers, got {what}; convert them first.")
    return array


def _vector(
    values: ArrayLike, name: str, allow_inf: bool = False, allow_bool: bool = False
) -> Tensor:
    array = _numbers(values, name, allow_bool)
    if array.ndim > 1 and sorted(array.shape)[-2] > 1:
        raise ValueError(
            f"`{name}` must be 1-D (one value per query), got shape {array.shape}; flatten it "
            "yourself if that is what you mean."
        )
    tensor = torch.as_tensor(array, dtype=torch.float64).reshape(-1)
    if tensor.numel() == 0:
        raise ValueError(f"`{name}` is empty.")
    if torch.isnan(tensor).any() or (not allow_inf and torch.isinf(tensor).any()):
        raise ValueError(f"`{name}` contains NaN{'' if allow_inf else ' or inf'}.")
    return tensor


def _probabilities(values: ArrayLike, name: str) -> Tensor:
    tensor = _vector(values, name)
    if (tensor < 0).any() or (tensor > 1).any():
        raise ValueError(f"`{name}` must hold probabilities in [0, 1].")
    return tensor


def _same_length(a: Tensor, b: Tensor, name_a: str, name_b: str) -> None:
    if a.numel() != b.numel():
        raise ValueError(f"`{name_a}` has {a.numel()} values but `{name_b}` has {b.numel()}.")


def _labels(labels: ArrayLike, n: int) -> np.ndarray:
    y = _vector(labels, "labels", allow_bool=True).numpy()
    if y.shape[0] != n:
        raise ValueError(f"`labels` has {y.shape[0]} values for {n} samples.")
    if not np.isin(y, (0.0, 1.0)).all():
        raise ValueError("`labels` must hold only 0/1.")
    return y.astype(np.int64)
