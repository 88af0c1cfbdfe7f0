"""Fragment-extraction audit (PRISM): score an attack set with target, shadow and world models.

:class:`FragmentAuditor` computes ``log p(y | prompt)`` of every query under the target, the
shadow and each world model
(:func:`~lightning_info.methods.prism.functional.fragment_log_probability`),
turns them into the four attacks of the paper and, from the same forward passes' per-token
statistics, the field's standard membership scores (loss, zlib, Min-K%, Min-K%++, the shadow as
reference model; :mod:`~lightning_info.methods.prism.attacks`), and reports ROC-AUC and the TPR
at 0.1%, 1%, 2% and 5% FPR for each; :class:`FragmentAuditOptions` holds how. The Lightning
shell that audits a trained module at the end of ``fit`` is
:class:`~lightning_info.methods.prism.callback.FragmentExtractionAudit`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from lightning_info.core.logging import markdown_table, metric_key
from lightning_info.core.validation import (
    require_bool,
    require_choice,
    require_equal_lengths,
    require_finite,
    require_int,
    require_log_probabilities,
)
from lightning_info.methods.prism.fragments import AttackSet
from lightning_info.methods.prism.functional import (
    DATA_AWARE_CLASSIFIERS,
    FragmentTokens,
    attack_metrics,
    check_prior,
    data_aware_scores,
    encode_prompt_fragment,
    fragment_token_statistics,
    likelihood_ratio,
    loss_score,
    min_k_plus_plus_score,
    min_k_score,
    negatives_for_fpr,
    prism_score,
    reference_ratio_score,
    roc_auc,
    world_log_probability,
    zlib_score,
)

__all__ = [
    "ATTACKS",
    "AUDIT_FPR_LEVELS",
    "BASELINE_ATTACKS",
    "FragmentAuditOptions",
    "FragmentAuditReport",
    "FragmentAuditor",
    "PAPER_ATTACKS",
    "check_attack_set",
]

PAPER_ATTACKS = ("target", "lr", "prism", "data_aware")
"""The paper's attacks: raw target probability, likelihood ratio, PRISM, data-aware classifier."""
BASELINE_ATTACKS = ("loss", "zlib", "min_k", "min_k++", "reference")
"""The field's standard membership scores, from per-token statistics (:mod:`.attacks`)."""
ATTACKS = PAPER_ATTACKS + BASELINE_ATTACKS
AUDIT_FPR_LEVELS = (0.001, 0.01, 0.02, 0.05)
"""False-positive rates of the report: the field's 0.1% and 1%, and the paper's 2% and 5%."""

ModelSpec = Any  # a causal LM, a (model, tokenizer) pair, or a name/path for load_causal_lm


@dataclass(frozen=True)
class FragmentAuditOptions:
    """How :class:`FragmentAuditor` scores the attacks.

    Args:
        prior: PRISM's ``pi`` (:func:`~lightning_info.methods.prism.functional.prism_score`), in
            ``(0, 1)``.
        batch_size: queries per forward pass of each model.
        n_splits, seed: the data-aware classifier's stratified cross-validation folds, shuffled
            with ``seed``.
        fpr_levels: false-positive rates at which the true-positive rate is reported.
        data_aware: the data-aware classifier, ``"boosted_trees"`` (the reference's) or
            ``"logistic"``.
        min_k: the fraction of lowest-scoring tokens kept by Min-K% and Min-K%++ (their
            papers' default, 0.2).
    """

    prior: float = 0.9
    batch_size: int = 16
    n_splits: int = 5
    seed: int = 0
    fpr_levels: tuple[float, ...] = AUDIT_FPR_LEVELS
    data_aware: Literal["boosted_trees", "logistic"] = "boosted_trees"
    min_k: float = 0.2

    def __post_init__(self) -> None:
        require_choice(self.data_aware, "data_aware", DATA_AWARE_CLASSIFIERS)
        object.__setattr__(self, "prior", check_prior(self.prior))
        require_int(self.batch_size, "batch_size", 1)
        require_int(self.n_splits, "n_splits", 2)
        require_int(self.seed, "seed", 0)
        levels = self.fpr_levels
        if isinstance(levels, (str, bytes)) or not isinstance(levels, Sequence):
            raise TypeError(
                f"`fpr_levels` must be a sequence of rates in (0, 1], got {levels!r}; wrap one "
                "rate in a tuple: (0.05,)."
            )
        levels = tuple(require_finite(level, f"fpr_levels[{i}]") for i, level in enumerate(levels))
        object.__setattr__(self, "fpr_levels", levels)
        for level in self.fpr_levels:
            negatives_for_fpr(level)  # a rate in (0, 1]
        min_k = require_finite(self.min_k, "min_k")
        if not 0.0 < min_k <= 1.0:
            raise ValueError(f"`min_k` is a fraction of tokens in (0, 1], got {self.min_k!r}.")
        object.__setattr__(self, "min_k", min_k)


@dataclass
class FragmentAuditReport:
    """Per-query log-probabilities and attack scores, and per-attack metrics.

    ``log_probs`` maps ``"target"``, ``"shadow"``, ``"world"`` to float64 vectors;
    ``scores`` maps each of :data:`ATTACKS` to its scores (higher = more likely a member);
    ``metrics`` maps each attack to ``{"auc", "tpr@0.1%fpr", ...}`` (one TPR per level of
    ``FragmentAuditOptions.fpr_levels``) and, when the queries' kinds are known, the AUC of
    members against each kind of negative alone (``"auc vs non-members"``, ``"auc vs
    unseen"``). ``diagnostics``: the share of queries with ``p_w > p_s`` and the median
    ``log(p_w / p_s)`` over the seen fragments (members and non-members), the condition PRISM
    needs (:meth:`FragmentAuditor.score`), the number of negatives and, per FPR level, the
    negatives that level needs to be more than one sample
    (:func:`~lightning_info.methods.prism.attacks.negatives_for_fpr`; fewer, and the TPR there
    is read off the ROC curve's interpolated first step).
    """

    labels: np.ndarray
    log_probs: dict[str, np.ndarray]
    scores: dict[str, np.ndarray]
    metrics: dict[str, dict[str, float]]
    diagnostics: dict[str, float] = field(default_factory=dict)

    def table(self) -> tuple[list[str], list[list]]:
        """``(columns, rows)``: one row per attack, one column per metric."""
        if not self.metrics:
            raise ValueError("The report has no metrics: it holds no attack to tabulate.")
        names = list(next(iter(self.metrics.values())))
        rows = [[attack, *(round(m[n], 4) for n in names)] for attack, m in self.metrics.items()]
        return ["attack", *names], rows

    def scalars(self, prefix: str = "prism") -> dict[str, float]:
        """Flat ``{metric_key(prefix, attack, metric): value}`` for loggers (``prefix`` a
        string): ``prism/min_kplusplus/tpr_at_0.1pct_fpr`` for ``min_k++``'s ``tpr@0.1%fpr``."""
        if not isinstance(prefix, str):
            raise TypeError(f"`prefix` must be a string, got {prefix!r}.")
        return {
            metric_key(prefix, attack, name): float(value)
            for attack, metrics in self.metrics.items()
            for name, value in metrics.items()
        }

    def __str__(self) -> str:
        lines = [markdown_table(*self.table())]
        for name, value in self.diagnostics.items():
            shown = f"{int(value)}" if _is_count(name) else f"{value:.4f}"
            lines.append(f"{name}: {shown}")
        return "\n".join(lines)


class FragmentAuditor:
    """Audits ``target`` for fragment extraction against ``shadow`` and ``world_models``.

    Each model is a causal LM (scored with ``tokenizer``), a ``(model, tokenizer)`` pair (for a
    world model from another family) or a Hugging Face name / local path loaded with
    :func:`~lightning_info.lm.tiny_lm.load_causal_lm` on first use. Every model is run on its own
    device. ``world_models`` is a single spec or a *list* of specs (a tuple is read as one
    ``(model, tokenizer)`` pair); ``p_w`` is the mean of their probabilities. ``options``: PRISM's
    prior, the batch size, the data-aware classifier and its cross-validation
    (:class:`FragmentAuditOptions`).
    """

    def __init__(
        self,
        target: ModelSpec,
        shadow: ModelSpec,
        world_models: ModelSpec | Sequence[ModelSpec],
        tokenizer: Any = None,
        options: FragmentAuditOptions = FragmentAuditOptions(),
    ) -> None:
        if not isinstance(options, FragmentAuditOptions):
            raise TypeError(
                f"`options` must be a FragmentAuditOptions, got {type(options).__name__}."
            )
        self.options = options
        if isinstance(world_models, (str, tuple)) or not isinstance(world_models, Sequence):
            world_models = [world_models]
        if len(world_models) == 0:
            raise ValueError("Give at least one world model.")
        self.target, self.shadow, self.world_models = target, shadow, list(world_models)
        self.tokenizer = tokenizer
        self._loaded: dict[str, tuple[Any, Any]] = {}
        for spec in (target, shadow, *self.world_models):
            if tokenizer is None and not isinstance(spec, (str, tuple)):
                raise ValueError("Give `tokenizer` for models passed without their tokenizer.")

    def token_statistics(
        self, attack_set: AttackSet, progress: bool = False
    ) -> dict[str, FragmentTokens]:
        """Per-token statistics of every query (one forward pass per batch and model): the
        target's with the vocabulary moments of Min-K%++, the shadow's and each world model's
        (``"world 0"``, ``"world 1"``, ...) log-probabilities only. ``progress`` shows a bar of
        the queries scored, over all the models (each batch as
        :func:`~lightning_info.methods.prism.functional.fragment_token_statistics` forms it,
        so the values are the same with and without it)."""
        check_attack_set(attack_set)
        progress = require_bool(progress, "progress")
        models = {"target": self.target, "shadow": self.shadow}
        models |= {f"world {k}": model for k, model in enumerate(self.world_models)}
        bar = tqdm(
            total=len(attack_set) * len(models),
            desc="fragment extraction audit",
            unit="query",
            disable=not progress,
        )
        try:
            return {
                name: self._tokens(model, attack_set, name == "target", bar, name)
                for name, model in models.items()
            }
        finally:
            bar.close()

    def log_probabilities(self, attack_set: AttackSet, progress: bool = False) -> dict[str, Tensor]:
        """``log p(y | prompt)`` of every query under target, shadow and (the mean of) world;
        ``progress`` as for :meth:`token_statistics`."""
        return _sequence_log_probabilities(self.token_statistics(attack_set, progress))

    def run(self, attack_set: AttackSet, progress: bool = False) -> FragmentAuditReport:
        """Score ``attack_set`` with all models and attacks; see :meth:`score`. ``progress``
        shows a bar of the queries scored (:meth:`token_statistics`)."""
        tokens = self.token_statistics(attack_set, progress)
        log_probs = _sequence_log_probabilities(tokens)
        return self.score(
            log_probs, attack_set.labels, attack_set.kinds, tokens, attack_set.fragments
        )

    def score(
        self,
        log_probs: Mapping[str, Tensor | np.ndarray],
        labels: Sequence[int],
        kinds: Sequence[str] | None = None,
        tokens: Mapping[str, FragmentTokens] | None = None,
        fragments: Sequence[str] | None = None,
    ) -> FragmentAuditReport:
        """The report from cached ``{"target", "shadow", "world"}`` log-probabilities.

        Attacks: ``target`` = ``log p_t`` (the raw target probability, a monotone transform);
        ``lr`` = ``p_t / (p_s + 1e-12)``; ``prism`` = :func:`prism_score`; ``data_aware`` =
        out-of-fold classifier on ``[log p_t, log p_w, log p_s]``. With the queries' ``kinds``
        (``"member"``, ``"non_member"``, ``"unseen"``) each attack's AUC is also reported
        against each kind of negative alone. With the per-token statistics ``tokens`` of
        :meth:`token_statistics` and the scored ``fragments`` (for zlib), the
        :data:`BASELINE_ATTACKS` too: ``loss``, ``zlib``, ``min_k``, ``min_k++`` (``k =
        options.min_k``) on the target's tokens, ``reference`` with the shadow as reference model.

        PRISM ``= p_s + (p_w - p_s) / posterior`` rises with the target's memorisation (the
        posterior) only where ``p_w < p_s``: the world model must be an external prior that gives
        the record's fragments *less* probability than the shadow (another corpus or format),
        not a second shadow. When the median ``log(p_w / p_s)`` over the seen fragments is above
        0 a warning says so; both numbers are in ``diagnostics``.
        """
        missing = [k for k in MODELS if k not in log_probs]
        if missing:
            raise ValueError(f"`log_probs` lacks {missing}; give the keys {list(MODELS)}.")
        lp = {}
        for k in MODELS:
            values = log_probs[k]
            values = values.detach().cpu() if isinstance(values, Tensor) else np.asarray(values)
            lp[k] = require_log_probabilities(
                torch.as_tensor(values, dtype=torch.float64).reshape(-1), f"log_probs[{k!r}]"
            )
        require_equal_lengths(
            {f"log_probs[{k!r}]": v.numel() for k, v in lp.items()} | {"labels": len(labels)}
        )
        p = {k: torch.exp(v) for k, v in lp.items()}
        y = np.asarray(labels, dtype=np.int64)
        features = torch.stack([lp["target"], lp["world"], lp["shadow"]], 1)
        options = self.options
        data_aware, _ = data_aware_scores(
            features, y, options.n_splits, options.seed, classifier=options.data_aware
        )
        scores = {
            "target": lp["target"].numpy(),
            "lr": likelihood_ratio(p["target"], p["shadow"]).numpy(),
            "prism": prism_score(p["target"], p["shadow"], p["world"], options.prior).numpy(),
            "data_aware": data_aware,
        }
        if tokens is not None:
            scores.update(_baseline_scores(tokens, fragments, options.min_k))
        metrics = {name: attack_metrics(s, y, options.fpr_levels) for name, s in scores.items()}
        if kinds is not None:
            for name, values in scores.items():
                metrics[name].update(_auc_by_negative_kind(values, y, kinds))
        diagnostics = _world_shadow_diagnostics(lp["world"], lp["shadow"], kinds)
        diagnostics[NEGATIVES] = float((y == 0).sum())
        for level in options.fpr_levels:
            diagnostics[f"{NEGATIVES_NEEDED}tpr@{100 * level:g}%fpr"] = float(
                negatives_for_fpr(level)
            )
        return FragmentAuditReport(
            y, {k: v.numpy() for k, v in lp.items()}, scores, metrics, diagnostics
        )

    def _tokens(
        self, spec: ModelSpec, attack_set: AttackSet, moments: bool, bar: Any, name: str
    ) -> FragmentTokens:
        """The statistics of ``spec``'s model, one batch at a time (the batches of
        :func:`fragment_token_statistics`: longest query first), ``bar`` advanced per batch."""
        model, tokenizer = self._resolve(spec)
        prompts, fragments = attack_set.prompts, attack_set.fragments
        size = self.options.batch_size
        lengths = [
            len(encode_prompt_fragment(tokenizer, p, f)[0]) for p, f in zip(prompts, fragments)
        ]
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        count = len(order)
        log_probs: list[Tensor] = [torch.empty(0)] * count
        means: list[Tensor] = [torch.empty(0)] * count if moments else []
        stds: list[Tensor] = [torch.empty(0)] * count if moments else []
        bar.set_postfix_str(name, refresh=False)
        for first in range(0, count, size):
            batch = order[first : first + size]
            part = fragment_token_statistics(
                model,
                tokenizer,
                [prompts[i] for i in batch],
                [fragments[i] for i in batch],
                size,
                vocabulary_moments=moments,
            )
            for k, index in enumerate(batch):
                log_probs[index] = part.log_probs[k]
                if moments:
                    means[index], stds[index] = part.means[k], part.stds[k]
            bar.update(len(batch))
        return FragmentTokens(log_probs, means, stds)

    def _resolve(self, spec: ModelSpec) -> tuple[Any, Any]:
        if isinstance(spec, str):
            from lightning_info.lm.tiny_lm import load_causal_lm

            if spec not in self._loaded:  # loaded once, with its own tokenizer
                self._loaded[spec] = load_causal_lm(spec)
            return self._loaded[spec]
        if isinstance(spec, tuple):
            return spec
        return spec, self.tokenizer


def _sequence_log_probabilities(tokens: Mapping[str, FragmentTokens]) -> dict[str, Tensor]:
    """``log p(y | prompt)`` (the sum over tokens) of target, shadow and the world mean."""

    def total(t: FragmentTokens) -> Tensor:
        return torch.stack([row.sum() for row in t.log_probs])

    worlds = [total(t) for name, t in tokens.items() if name.startswith("world")]
    out = {"target": total(tokens["target"]), "shadow": total(tokens["shadow"])}
    out["world"] = world_log_probability(worlds)
    return out


def _baseline_scores(
    tokens: Mapping[str, FragmentTokens], fragments: Sequence[str] | None, k: float
) -> dict[str, np.ndarray]:
    if fragments is None:
        raise ValueError("Give the scored `fragments` with `tokens`: the zlib score needs them.")
    target = tokens["target"]
    if not target.means:
        raise ValueError("The target's token statistics lack the vocabulary moments (Min-K%++).")
    scores = {
        "loss": loss_score(target.log_probs),
        "zlib": zlib_score(target.log_probs, fragments),
        "min_k": min_k_score(target.log_probs, k),
        "min_k++": min_k_plus_plus_score(target.log_probs, target.means, target.stds, k),
        "reference": reference_ratio_score(target.log_probs, tokens["shadow"].log_probs),
    }
    return {name: value.numpy() for name, value in scores.items()}


MODELS = ("target", "shadow", "world")
"""The scored models, in the order of a report's ``log_probs``."""
NEGATIVE_KINDS = {"non_member": "auc vs non-members", "unseen": "auc vs unseen"}
NEGATIVES = "negatives"
NEGATIVES_NEEDED = "negatives needed for "
SHARE_WORLD_ABOVE_SHADOW = "share of queries with p_w > p_s"
MEDIAN_LOG_WORLD_OVER_SHADOW = "median log(p_w / p_s), seen fragments"


def _is_count(diagnostic: str) -> bool:
    """Whether a diagnostic of the report counts queries (printed as an integer)."""
    return diagnostic == NEGATIVES or diagnostic.startswith(NEGATIVES_NEEDED)


def _auc_by_negative_kind(scores: np.ndarray, labels: np.ndarray, kinds: Sequence[str]):
    """Members against each kind of negative alone (kinds present in the attack set only)."""
    kinds = np.asarray(kinds)
    if kinds.shape != labels.shape:
        raise ValueError(f"`kinds` has {kinds.shape[0]} entries for {labels.shape[0]} queries.")
    out = {}
    for kind, name in NEGATIVE_KINDS.items():
        keep = (kinds == "member") | (kinds == kind)
        if (kinds == kind).any() and (kinds == "member").any():
            out[name] = roc_auc(scores[keep], labels[keep])
    return out


def _world_shadow_diagnostics(
    log_world: Tensor, log_shadow: Tensor, kinds: Sequence[str] | None
) -> dict[str, float]:
    """The share of queries with ``p_w > p_s`` and the median ``log(p_w / p_s)`` over the seen
    fragments (every query when the kinds are not known); warns when that median is above 0."""
    log_ratio = (log_world - log_shadow).numpy()
    seen = np.ones_like(log_ratio, dtype=bool)
    if kinds is not None:
        seen = np.isin(np.asarray(kinds), ["member", "non_member"])
    median = float(np.median(log_ratio[seen]))
    if median > 0:
        warnings.warn(
            f"The world model gives the seen fragments more probability than the shadow "
            f"(median log(p_w / p_s) = {median:.3f} > 0): PRISM then falls as the target "
            "memorises. Use a world model that is an external prior (another corpus or format), "
            "not more of the shadow's data.",
            stacklevel=3,
        )
    return {
        SHARE_WORLD_ABOVE_SHADOW: float((log_ratio > 0).mean()),
        MEDIAN_LOG_WORLD_OVER_SHADOW: median,
    }


def check_attack_set(attack_set: Any) -> None:
    """Raise unless ``attack_set`` is an :class:`AttackSet` with members and non-members."""
    if not isinstance(attack_set, AttackSet):
        raise TypeError(f"Expected an AttackSet, got {type(attack_set).__name__}.")
    if len(set(attack_set.labels)) < 2:
        raise ValueError("The attack set needs both member (1) and non-member (0) queries.")
