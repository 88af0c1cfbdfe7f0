"""What a fragment-extraction audit computes: the attacks' names and
:class:`FragmentAuditOptions`, the settings :class:`~lightning_info.methods.prism.auditor.
FragmentAuditor` and the optional attacks (:mod:`.extra_attacks`) read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from lightning_info.core.validation import (
    require_bool,
    require_choice,
    require_finite,
    require_int,
    require_string_sequence,
)
from lightning_info.methods.prism.functional import (
    DATA_AWARE_CLASSIFIERS,
    check_prior,
    negatives_for_fpr,
)

EXTRA_ATTACKS = ("gradnorm", "recall", "dc_pdd", "neighbourhood")
"""The optional attacks of :attr:`FragmentAuditOptions.extra_attacks`, off by default: gradient
norm, ReCaLL, DC-PDD and the neighbourhood comparison (:func:`extra_attack_scores`)."""
RECALL_SHOTS = 5
"""Non-member queries that form ReCaLL's prefix (ReCaLL's few-shot setting); not scored by it."""
NEIGHBOURS = 25
"""Neighbours written per query by the neighbourhood attack (``make_neighbours``' default)."""


PAPER_ATTACKS = ("target", "lr", "prism", "data_aware")
"""The paper's attacks: raw target probability, likelihood ratio, PRISM, data-aware classifier."""
BASELINE_ATTACKS = ("loss", "zlib", "min_k", "min_k++", "reference")
"""The field's standard membership scores, from per-token statistics (:mod:`.attacks`)."""
ATTACKS = PAPER_ATTACKS + BASELINE_ATTACKS
AUDIT_FPR_LEVELS = (0.001, 0.01, 0.02, 0.05)
"""False-positive rates of the report: the field's 0.1% and 1%, and the paper's 2% and 5%."""


@dataclass(frozen=True)
class FragmentAuditOptions:
    """How :class:`FragmentAuditor` scores the attacks.

    Args:
        prior: PRISM's ``pi`` (:func:`~lightning_info.methods.prism.functional.prism_score`), in
            ``(0, 1)``.
        batch_size: queries per forward pass of each model.
        n_splits, seed: the data-aware classifier's stratified cross-validation folds, shuffled
            with ``seed`` (the blind baseline uses the same folds count and seed; ``seed`` also
            seeds the bootstrap, ReCaLL's choice of prefix queries and the neighbours).
        fpr_levels: false-positive rates at which the true-positive rate is reported.
        data_aware: the data-aware classifier, ``"boosted_trees"`` (the reference's) or
            ``"logistic"``.
        min_k: the fraction of lowest-scoring tokens kept by Min-K% and Min-K%++ (their
            papers' default, 0.2).
        bootstrap_resamples: resamples of the bootstrap behind each attack's ``auc_se``
            (:func:`~lightning_info.methods.prism.statistics.bootstrap_auc`; MIMIR's 1,000), at
            least 2.
        blind_baseline: fit the blind baseline and run the distribution check
            (:func:`~lightning_info.methods.prism.blind.distribution_check`) on the queries'
            texts. Its cost is ``n_splits`` fits of a TF-IDF (word 1-2-grams, character
            2-5-grams) logistic regression on the texts, on the CPU: a second or two for a few
            hundred short texts, growing with their number and length; ``False`` skips it (no
            ``beats_blind`` flags then).
        min_k_sweep: more fractions ``k`` in ``(0, 1]``, each adding Min-K% and Min-K%++ at
            that ``k`` as attacks named ``min_k_<100 k>pct`` and ``min_k++_<100 k>pct``
            (``min_k_10pct``, logged as ``min_kplusplus_10pct``), from the same token statistics.
        extra_attacks: attacks of :data:`EXTRA_ATTACKS` to add, each needing more passes of the
            target model (:func:`extra_attack_scores`): ``"gradnorm"``, ``"recall"``,
            ``"dc_pdd"``, ``"neighbourhood"`` (the last needs
            ``FragmentAuditor(..., mask_filler=...)``).
        reference_corpus: texts whose token frequencies calibrate DC-PDD; none: the attack
            set's non-member queries.
    """

    prior: float = 0.9
    batch_size: int = 16
    n_splits: int = 5
    seed: int = 0
    fpr_levels: tuple[float, ...] = AUDIT_FPR_LEVELS
    data_aware: Literal["boosted_trees", "logistic"] = "boosted_trees"
    min_k: float = 0.2
    bootstrap_resamples: int = 1000
    blind_baseline: bool = True
    min_k_sweep: tuple[float, ...] = ()
    extra_attacks: tuple[str, ...] = ()
    reference_corpus: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        require_choice(self.data_aware, "data_aware", DATA_AWARE_CLASSIFIERS)
        object.__setattr__(self, "prior", check_prior(self.prior))
        require_int(self.batch_size, "batch_size", 1)
        require_int(self.n_splits, "n_splits", 2)
        require_int(self.seed, "seed", 0)
        levels = _rates(self.fpr_levels, "fpr_levels", "rates in (0, 1]", "(0.05,)")
        object.__setattr__(self, "fpr_levels", levels)
        for level in self.fpr_levels:
            negatives_for_fpr(level)  # a rate in (0, 1]
        object.__setattr__(self, "min_k", _fraction(self.min_k, "min_k"))
        sweep = _rates(self.min_k_sweep, "min_k_sweep", "fractions in (0, 1]", "(0.1,)")
        sweep = tuple(_fraction(k, f"min_k_sweep[{i}]") for i, k in enumerate(sweep))
        if len(set(sweep)) < len(sweep):
            raise ValueError(f"`min_k_sweep` repeats a fraction: {sweep!r}; list each once.")
        object.__setattr__(self, "min_k_sweep", sweep)
        require_int(self.bootstrap_resamples, "bootstrap_resamples", 2)
        object.__setattr__(
            self, "blind_baseline", require_bool(self.blind_baseline, "blind_baseline")
        )
        extra = self.extra_attacks
        if isinstance(extra, str):
            raise TypeError(
                f"`extra_attacks` must be a sequence of names, got the string {extra!r}; wrap it: "
                f"({extra!r},)."
            )
        extra = tuple(require_string_sequence(extra, "extra_attacks"))
        unknown = [name for name in extra if name not in EXTRA_ATTACKS]
        if unknown:
            raise ValueError(
                f"`extra_attacks` names unknown attacks {unknown}; choose from {EXTRA_ATTACKS}."
            )
        if len(set(extra)) < len(extra):
            raise ValueError(f"`extra_attacks` repeats an attack: {extra!r}; list each once.")
        object.__setattr__(self, "extra_attacks", extra)
        if self.reference_corpus is not None:
            corpus = tuple(require_string_sequence(self.reference_corpus, "reference_corpus"))
            if not any(text.strip() for text in corpus):
                raise ValueError(
                    "`reference_corpus` holds no text; give reference texts for DC-PDD's token "
                    "frequencies, or None to use the attack set's non-members."
                )
            object.__setattr__(self, "reference_corpus", corpus)


def _rates(values: Any, name: str, what: str, example: str) -> tuple[float, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(
            f"`{name}` must be a sequence of {what}, got {values!r}; wrap one value in a tuple: "
            f"{example}."
        )
    return tuple(require_finite(value, f"{name}[{i}]") for i, value in enumerate(values))


def _fraction(value: Any, name: str) -> float:
    k = require_finite(value, name)
    if not 0.0 < k <= 1.0:
        raise ValueError(f"`{name}` is a fraction of tokens in (0, 1], got {value!r}.")
    return k
