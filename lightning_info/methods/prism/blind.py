"""Blind baselines and distribution checks for membership audits: what the texts alone give away.

A membership-inference attack scores a model on member (trained on) and non-member texts. When
the two sets differ in distribution (topic, date, length, format), a classifier that never looks
at the model separates them too: on several published evaluation sets such a *blind* classifier
beats the best attack (Das, Zhang & Tramer, 2024, "Blind baselines beat membership inference
attacks for foundation models"), so an attack's AUC says nothing about the model without the
blind AUC beside it. This module gives:

* :func:`blind_baseline_scores` / :func:`blind_baseline_auc`: out-of-fold member probabilities of
  a text-only classifier (word 1-2-gram and character 2-5-gram TF-IDF features, logistic
  regression; :func:`blind_pipeline`) and their ROC-AUC with a bootstrap standard error;
* :func:`beats_blind`: whether an attack's AUC clears the blind AUC by more than its standard
  error;
* :func:`ngram_overlap` / :func:`deduplicate_non_members`: shared word n-grams between the two
  sets, and the non-members that share none (MIMIR's deduplication, with a zero threshold);
* :func:`text_distribution`: the overlaps at 7 and 13 words and a Mann-Whitney U test on lengths
  in words; :func:`distribution_check`: those and the blind AUC in one dictionary.

Everything is seeded and deterministic; no model is loaded.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from lightning_info.core.validation import require_finite, require_int, require_string_sequence
from lightning_info.measures.ranking import binary_auroc
from lightning_info.methods.prism.statistics import bootstrap_auc

__all__ = [
    "BLIND_C",
    "BOOTSTRAP_RESAMPLES",
    "beats_blind",
    "blind_baseline_auc",
    "blind_baseline_scores",
    "blind_pipeline",
    "deduplicate_non_members",
    "distribution_check",
    "ngram_overlap",
    "text_distribution",
    "word_ngrams",
]

BLIND_C = 10.0
"""Inverse L2 penalty of the blind classifier's logistic regression (fixed, not tuned)."""

BOOTSTRAP_RESAMPLES = 1000
"""Bootstrap resamples behind the blind AUC's standard error."""


# --------------------------------------------------------------------------------------------
# The blind classifier
# --------------------------------------------------------------------------------------------


def blind_pipeline(seed: int = 0) -> Any:
    """The text-only classifier: an unfitted scikit-learn ``Pipeline``.

    Features: a ``FeatureUnion`` of TF-IDF on lower-cased word unigrams and bigrams
    (``TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)``) and on character 2- to 5-grams
    inside word boundaries (``analyzer="char_wb"``, ``ngram_range=(2, 5)``,
    ``sublinear_tf=True``); classifier: ``LogisticRegression(C=BLIND_C, max_iter=5000)``
    (lbfgs, deterministic; ``random_state=seed``). Vocabularies and IDF weights are fitted on the
    training texts only.
    """
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import FeatureUnion, Pipeline

    seed = require_int(seed, "seed", 0)
    features = FeatureUnion(
        [
            ("words", TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)),
            ("chars", TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True)),
        ]
    )
    classifier = LogisticRegression(C=BLIND_C, max_iter=5000, random_state=seed)
    return Pipeline([("features", features), ("classifier", classifier)])


def blind_baseline_scores(
    member_texts: Sequence[str], non_member_texts: Sequence[str], folds: int = 5, seed: int = 0
) -> np.ndarray:
    """Out-of-fold ``P(member | text)`` of the blind classifier (:func:`blind_pipeline`).

    The texts, labelled 1 (members) and 0 (non-members), are split into ``folds`` stratified
    folds (``StratifiedKFold(folds, shuffle=True, random_state=seed)``); each fold is scored by a
    pipeline fitted on the other folds only, features included, so no text is scored by a model
    that saw it or its words' document frequencies. Returns float64 scores of shape
    ``(len(member_texts) + len(non_member_texts),)``: members first, then non-members, each in
    the order given. Needs at least ``folds`` texts in each set.
    """
    from sklearn.model_selection import StratifiedKFold

    members, non_members = _check_sets(member_texts, non_member_texts)
    folds = require_int(folds, "folds", 2)
    seed = require_int(seed, "seed", 0)
    smallest = min(len(members), len(non_members))
    if smallest < folds:
        raise ValueError(
            f"{folds}-fold stratified cross-validation needs at least {folds} texts in each set; "
            f"got {len(members)} members and {len(non_members)} non-members. Give more texts or "
            f"lower `folds` (>= 2)."
        )
    texts = members + non_members
    if not any(text.strip() for text in texts):
        raise ValueError("Every text is empty or whitespace only; there is nothing to classify.")
    labels = np.r_[np.ones(len(members), np.int64), np.zeros(len(non_members), np.int64)]
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    scores = np.empty(len(texts), dtype=np.float64)
    for train, test in splitter.split(np.zeros((len(texts), 1)), labels):
        pipeline = blind_pipeline(seed).fit([texts[i] for i in train], labels[train])
        scores[test] = pipeline.predict_proba([texts[i] for i in test])[:, 1]
    return scores


def blind_baseline_auc(
    member_texts: Sequence[str], non_member_texts: Sequence[str], folds: int = 5, seed: int = 0
) -> dict[str, float | int]:
    """``{"auc": ..., "auc_se": ..., "folds": folds}`` of :func:`blind_baseline_scores`.

    ``auc`` is the ROC-AUC of the out-of-fold scores (members positive, ties counted half;
    :func:`~lightning_info.measures.ranking.binary_auroc`); ``auc_se`` the standard deviation
    (``ddof=1``) of the AUC over ``BOOTSTRAP_RESAMPLES`` paired bootstrap resamples of the
    ``(score, label)`` pairs seeded with ``seed``
    (:func:`~lightning_info.methods.prism.statistics.bootstrap_auc`, MIMIR's bootstrap), the
    standard error an attack's AUC gets there. The bootstrap holds the out-of-fold scores fixed:
    it measures the uncertainty of the AUC on this many texts, not of refitting the classifier.
    An AUC near 0.5 means the texts alone do not tell the sets apart; near 1, that any attack's
    AUC on this split measures the split, not the model.
    """
    members, non_members = _check_sets(member_texts, non_member_texts)
    scores = blind_baseline_scores(members, non_members, folds=folds, seed=seed)
    labels = np.r_[np.ones(len(members)), np.zeros(len(non_members))]
    _, se = bootstrap_auc(scores, labels, BOOTSTRAP_RESAMPLES, seed)
    auc = float(binary_auroc(scores, labels))
    return {"auc": auc, "auc_se": float(se), "folds": folds}


def beats_blind(attack_auc: float, attack_se: float, blind_auc: float) -> bool:
    """Whether an attack's AUC beats the blind baseline's on the same split.

    The rule: ``attack_auc - blind_auc > attack_se``, i.e. the attack clears the blind AUC by
    more than one (bootstrap) standard error of its own AUC; a tie or a margin within one
    standard error is not a win. It is a screening rule, not a significance test: the blind AUC's
    own uncertainty is not counted, and one standard error is roughly an 84% one-sided level.
    AUCs must lie in ``[0, 1]`` and the standard error be finite and ``>= 0``.
    """
    attack = _auc_value(attack_auc, "attack_auc")
    blind = _auc_value(blind_auc, "blind_auc")
    se = require_finite(attack_se, "attack_se")
    if se < 0:
        raise ValueError(f"`attack_se` must be >= 0 (a standard error), got {attack_se!r}.")
    return bool(attack - blind > se)


# --------------------------------------------------------------------------------------------
# Shared n-grams and deduplication
# --------------------------------------------------------------------------------------------


def word_ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    """The set of word ``n``-grams of ``text``: lower-cased, split on runs of whitespace
    (``text.lower().split()``, HELM's light tokenizer after lower-casing). A text of fewer than
    ``n`` words has none."""
    if not isinstance(text, str):
        raise TypeError(f"`text` must be a string, got {type(text).__name__} {text!r}.")
    n = require_int(n, "n", 1)
    words = text.lower().split()
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def ngram_overlap(
    member_texts: Sequence[str], non_member_texts: Sequence[str], n: int = 7
) -> float:
    """The fraction of non-members that share at least one word ``n``-gram with any member.

    Words as in :func:`word_ngrams` (lower case, whitespace split). A non-member with fewer than
    ``n`` words has no ``n``-gram, shares none, and still counts in the denominator. 0 means no
    non-member repeats ``n`` consecutive words of a member.
    """
    members, non_members = _check_sets(member_texts, non_member_texts)
    n = require_int(n, "n", 1)
    shared = _sharing(members, non_members, n)
    return float(np.mean(shared))


def deduplicate_non_members(
    member_texts: Sequence[str], non_member_texts: Sequence[str], ns: Iterable[int] = (7, 13)
) -> list[int]:
    """Indices (ascending) of the non-members that share no word ``n``-gram with any member, for
    every ``n`` in ``ns``.

    This follows MIMIR (Duan et al., 2024, ``iamgroot42/mimir``), whose evaluation splits are
    named ``ngram_<n>_<threshold>``: for each non-member it measures the fraction of its
    whitespace-token ``n``-grams found in the member (training) data and keeps the non-members
    below the threshold (0.2 at 7 and 13 words; 0.8 at 13 in its lenient split). Here the
    threshold is zero: a single shared ``n``-gram drops the text, so what remains has no run of
    ``n`` words in common with a member. With a zero threshold a shared ``n``-gram implies a
    shared ``m``-gram for every ``m < n``, so the smallest ``n`` decides; the others cost little
    and keep MIMIR's two lengths visible. Words as in :func:`word_ngrams`; texts shorter than
    ``n`` words are kept. The texts themselves are not modified.
    """
    members, non_members = _check_sets(member_texts, non_member_texts)
    if isinstance(ns, (str, bytes)) or not isinstance(ns, Iterable):
        raise TypeError(f"`ns` must be a sequence of ints >= 1, such as (7, 13); got {ns!r}.")
    ns = [require_int(n, "ns[]", 1) for n in ns]
    if not ns:
        raise ValueError("`ns` is empty; give at least one n-gram length, such as (7, 13).")
    shared = np.zeros(len(non_members), dtype=bool)
    for n in sorted(set(ns)):
        shared |= _sharing(members, non_members, n)
    return [int(i) for i in np.flatnonzero(~shared)]


# --------------------------------------------------------------------------------------------
# The distribution check
# --------------------------------------------------------------------------------------------


def text_distribution(
    member_texts: Sequence[str], non_member_texts: Sequence[str]
) -> dict[str, float]:
    """The model-free signs of a distribution shift that need no classifier: ``overlap_7`` and
    ``overlap_13`` (:func:`ngram_overlap` at 7 and 13 words), ``length_u`` and
    ``length_p_value`` (a two-sided Mann-Whitney U test,
    ``scipy.stats.mannwhitneyu(member_lengths, non_member_lengths)``, on lengths in whitespace
    words; ``length_u`` is the members' U)."""
    from scipy.stats import mannwhitneyu

    members, non_members = _check_sets(member_texts, non_member_texts)
    lengths = [[len(text.split()) for text in texts] for texts in (members, non_members)]
    test = mannwhitneyu(*lengths, alternative="two-sided")
    return {
        "overlap_7": ngram_overlap(members, non_members, 7),
        "overlap_13": ngram_overlap(members, non_members, 13),
        "length_u": float(test.statistic),
        "length_p_value": float(test.pvalue),
    }


def distribution_check(
    member_texts: Sequence[str], non_member_texts: Sequence[str], seed: int = 0, folds: int = 5
) -> dict[str, float | int]:
    """Signs that the member and non-member texts differ in distribution: a check, not a proof.

    Returns :func:`text_distribution`'s ``overlap_7``, ``overlap_13``, ``length_u`` and
    ``length_p_value`` and ``blind_auc``, ``blind_auc_se`` and ``folds``
    (:func:`blind_baseline_auc`). A blind AUC well above 0.5 or a small length p-value says the
    split can be told apart without the model; passing both does not show that the sets come
    from one distribution (other differences, such as dates or formats, may go unseen). High
    overlaps say the non-members repeat member text, which makes them partly members.
    """
    members, non_members = _check_sets(member_texts, non_member_texts)
    blind = blind_baseline_auc(members, non_members, folds=folds, seed=seed)
    return {
        **text_distribution(members, non_members),
        "blind_auc": blind["auc"],
        "blind_auc_se": blind["auc_se"],
        "folds": blind["folds"],
    }


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def _check_sets(member_texts: Any, non_member_texts: Any) -> tuple[list[str], list[str]]:
    members = require_string_sequence(member_texts, "member_texts")
    non_members = require_string_sequence(non_member_texts, "non_member_texts")
    for name, texts in (("member_texts", members), ("non_member_texts", non_members)):
        if not texts:
            raise ValueError(f"`{name}` is empty; give at least one text in each set.")
    return members, non_members


def _sharing(members: list[str], non_members: list[str], n: int) -> np.ndarray:
    seen: set[tuple[str, ...]] = set()
    for text in members:
        seen |= word_ngrams(text, n)
    return np.array([not seen.isdisjoint(word_ngrams(t, n)) for t in non_members], dtype=bool)


def _auc_value(value: float, name: str) -> float:
    value = require_finite(value, name)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"`{name}` must be an AUC in [0, 1], got {value!r}.")
    return value
