"""Fragment-extraction audit (PRISM): score an attack set with target, shadow and world models.

:class:`FragmentAuditor` computes ``log p(y | prompt)`` of every query under the target, the
shadow and each world model
(:func:`~lightning_info.methods.prism.functional.fragment_log_probability`),
turns them into the four attacks of the paper and, from the same forward passes' per-token
statistics, the field's standard membership scores (loss, zlib, Min-K%, Min-K%++, the shadow as
reference model; :mod:`~lightning_info.methods.prism.attacks`), optionally the attacks that
need the target model again (gradient norm, ReCaLL, DC-PDD, neighbourhood comparison;
:data:`EXTRA_ATTACKS`), and reports for each the ROC-AUC with its bootstrap standard error, the
PR AUC and the TPR at 0.1%, 1%, 2% and 5% FPR under both conventions
(:mod:`~lightning_info.methods.prism.statistics`), beside a blind baseline that never sees the
model (:mod:`~lightning_info.methods.prism.blind`); :class:`FragmentAuditOptions` holds how.
The Lightning shell that audits a trained module at the end of ``fit`` is
:class:`~lightning_info.methods.prism.callback.FragmentExtractionAudit`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from lightning_info.core.logging import markdown_table, metric_key
from lightning_info.core.validation import (
    require_bool,
    require_equal_lengths,
    require_int,
    require_log_probabilities,
    require_string_sequence,
)
from lightning_info.measures.ranking import binary_auroc
from lightning_info.methods.prism.blind import (
    BOOTSTRAP_RESAMPLES,
    beats_blind,
    blind_baseline_scores,
    text_distribution,
)
from lightning_info.methods.prism.extra_attacks import extra_attack_scores
from lightning_info.methods.prism.fragments import AttackSet
from lightning_info.methods.prism.functional import (
    FragmentTokens,
    attack_metrics,
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
from lightning_info.methods.prism.options import (
    ATTACKS,
    AUDIT_FPR_LEVELS,
    BASELINE_ATTACKS,
    EXTRA_ATTACKS,
    NEIGHBOURS,
    PAPER_ATTACKS,
    RECALL_SHOTS,
    FragmentAuditOptions,
)
from lightning_info.methods.prism.statistics import (
    DEFAULT_AUDIT_FPR_LEVELS,
    bootstrap_auc,
    format_rate,
    membership_report,
    mimir_layout,
)

__all__ = [
    "ATTACKS",
    "AUDIT_FPR_LEVELS",
    "BASELINE_ATTACKS",
    "EXTRA_ATTACKS",
    "FragmentAuditOptions",
    "FragmentAuditReport",
    "FragmentAuditor",
    "NEIGHBOURS",
    "PAPER_ATTACKS",
    "RECALL_SHOTS",
    "check_attack_set",
    "extra_attack_scores",
    "sweep_attack_names",
]

BLIND = "blind baseline"
"""The blind baseline's row in a printed report."""

ModelSpec = Any  # a causal LM, a (model, tokenizer) pair, or a name/path for load_causal_lm


def sweep_attack_names(k: float) -> tuple[str, str]:
    """The names of Min-K% and Min-K%++ at fraction ``k`` of :attr:`FragmentAuditOptions.
    min_k_sweep`: ``("min_k_10pct", "min_k++_10pct")`` for 0.1."""
    return f"min_k_{100 * k:g}pct", f"min_k++_{100 * k:g}pct"


@dataclass
class FragmentAuditReport:
    """Per-query log-probabilities and attack scores, and per-attack metrics.

    ``log_probs`` maps ``"target"``, ``"shadow"``, ``"world"`` to float64 vectors;
    ``scores`` maps each attack to its scores (higher = more likely a member; NaN for a query an
    attack does not score, such as ReCaLL's prefix queries); ``metrics`` maps each attack to
    ``{"auc", "tpr@0.1%fpr", ...}`` (one TPR per level of ``FragmentAuditOptions.fpr_levels``,
    interpolated on the ROC curve) and, when the queries' kinds are known, the AUC of members
    against each kind of negative alone (``"auc vs non-members"``, ``"auc vs unseen"``); then
    ``"auc_se"`` (the bootstrap standard error of the AUC), ``"pr_auc"``, ``"tpr@<x>%fpr at
    most"`` per level (the TPR of the best threshold whose FPR is at most the level, LiRA's
    convention) and, with the blind baseline, ``"beats_blind"`` (1.0 when the attack's AUC
    exceeds the blind AUC by more than its standard error,
    :func:`~lightning_info.methods.prism.blind.beats_blind`; else 0.0). ``statistics`` holds
    each attack's :func:`~lightning_info.methods.prism.statistics.membership_report` row (the
    same figures under logger-safe keys, with integer counts); ``blind`` the blind baseline's
    ``{"auc", "auc_se", "folds"}`` and ``distribution`` the rest of the distribution check
    (word 7- and 13-gram overlaps, the Mann-Whitney test on lengths), both empty when the blind
    baseline did not run. ``diagnostics``: the share of queries with ``p_w > p_s`` and the
    median ``log(p_w / p_s)`` over the seen fragments (members and non-members), the condition
    PRISM needs (:meth:`FragmentAuditor.score`), the number of negatives and, per FPR level,
    the negatives that level needs to be more than one sample
    (:func:`~lightning_info.methods.prism.attacks.negatives_for_fpr`; fewer, and the TPR there
    prints ``n/a``).
    """

    labels: np.ndarray
    log_probs: dict[str, np.ndarray]
    scores: dict[str, np.ndarray]
    metrics: dict[str, dict[str, float]]
    diagnostics: dict[str, float] = field(default_factory=dict)
    statistics: dict[str, dict[str, float | int]] = field(default_factory=dict)
    blind: dict[str, float | int] = field(default_factory=dict)
    distribution: dict[str, float] = field(default_factory=dict)

    def table(self) -> tuple[list[str], list[list]]:
        """``(columns, rows)``: one row per attack, one column per metric, then the blind
        baseline's row (its AUC and standard error) when it ran.

        Figures are rounded to 4 decimals; a TPR column holds strings, ``"n/a (needs >= N
        negatives)"`` where the attack was measured on fewer negatives than its level needs
        (:func:`~lightning_info.methods.prism.statistics.format_rate`); ``beats_blind`` reads
        ``yes``/``no``; ``members`` and ``negatives`` are integers; a cell an attack lacks is
        ``None``."""
        if not self.metrics:
            raise ValueError("The report has no metrics: it holds no attack to tabulate.")
        names: list[str] = []
        for metrics in self.metrics.values():
            names += [name for name in metrics if name not in names]
        counts = ["members", "negatives"] if self.statistics else []
        rows = []
        for attack, metrics in self.metrics.items():
            negatives = self._negatives(attack)
            row = [attack]
            for name in names:
                value = metrics.get(name)
                level = _tpr_level(name)
                if value is None:
                    row.append(None)
                elif level is not None:
                    row.append(format_rate(value, negatives, level))
                elif name.startswith("beats_blind"):
                    row.append("yes" if value else "no")
                else:
                    row.append(round(float(value), 4))
            if counts:
                statistics = self.statistics[attack]
                row += [int(statistics["members"]), int(statistics["non_members"])]
            rows.append(row)
        if self.blind:
            blind = {k: v for k, v in self.blind.items() if k.startswith("auc")}
            row = [BLIND, *(_rounded(blind.get(name)) for name in names)]
            if counts:
                row += [int((self.labels == 1).sum()), int((self.labels == 0).sum())]
            rows.append(row)
        return ["attack", *names, *counts], rows

    def scalars(self, prefix: str = "prism") -> dict[str, float]:
        """Flat ``{metric_key(prefix, attack, metric): value}`` for loggers (``prefix`` a
        string): ``prism/min_kplusplus/tpr_at_0.1pct_fpr`` for ``min_k++``'s ``tpr@0.1%fpr``,
        ``prism/loss/tpr_at_1pct_fpr_at_most`` for the LiRA-convention TPR; with the blind
        baseline also ``prism/blind/auc``, ``prism/blind/auc_se`` and
        ``prism/distribution/<check>`` (``overlap_7``, ``length_p_value``, ...). An attack not
        scored for a query (NaN score) is measured on the others; no logged value is NaN."""
        if not isinstance(prefix, str):
            raise TypeError(f"`prefix` must be a string, got {prefix!r}.")
        out = {
            metric_key(prefix, attack, name): float(value)
            for attack, metrics in self.metrics.items()
            for name, value in metrics.items()
        }
        for name, value in self.blind.items():
            if name.startswith("auc"):
                out[metric_key(prefix, "blind", name)] = float(value)
        for name, value in self.distribution.items():
            out[metric_key(prefix, "distribution", name)] = float(value)
        return out

    def mimir(self) -> dict[str, dict[str, Any]]:
        """The report in MIMIR's per-attack results layout
        (:func:`~lightning_info.methods.prism.statistics.mimir_layout` of :attr:`statistics`);
        JSON-ready once its float FPR keys are written as strings (``json.dumps`` does)."""
        if not self.statistics:
            raise ValueError(
                "The report has no membership statistics; build it with FragmentAuditor.score "
                "or FragmentAuditor.run."
            )
        return mimir_layout(self.statistics)

    def __str__(self) -> str:
        columns, rows = self.table()
        shown = [["" if cell is None else cell for cell in row] for row in rows]
        lines = [
            "TPR@x%fpr: interpolated on the ROC curve; 'at most': the best threshold whose FPR "
            "is at most x% (LiRA's convention); n/a where the attack has fewer negatives than "
            "the level needs.",
            "",
            markdown_table(columns, shown),
        ]
        if self.blind:
            losers = [a for a, m in self.metrics.items() if not m.get("beats_blind", 1.0)]
            lines += [
                "",
                f"blind baseline (texts alone, {int(self.blind['folds'])}-fold TF-IDF logistic "
                f"regression): AUC {self.blind['auc']:.4f} ± {self.blind['auc_se']:.4f}; "
                f"attacks that do not beat it by more than their s.e.: "
                f"{', '.join(losers) if losers else 'none'}",
            ]
        if self.distribution:
            d = self.distribution
            lines += [
                f"distribution check: shared word 7-grams {d['overlap_7']:.4f}, 13-grams "
                f"{d['overlap_13']:.4f} (share of negatives with one); lengths in words, "
                f"Mann-Whitney U {d['length_u']:.1f}, p = {d['length_p_value']:.4f}",
            ]
        for name, value in self.diagnostics.items():
            shown_value = f"{int(value)}" if _is_count(name) else f"{value:.4f}"
            lines.append(f"{name}: {shown_value}")
        return "\n".join(lines)

    def _negatives(self, attack: str) -> int:
        if attack in self.statistics:
            return int(self.statistics[attack]["non_members"])
        return int((self.labels == 0).sum())


def _rounded(value: Any) -> Any:
    return None if value is None else round(float(value), 4)


def _tpr_level(name: str) -> float | None:
    """The FPR level of a ``tpr@<x>%fpr`` metric name (either convention), else None."""
    if not name.startswith("tpr@"):
        return None
    return float(name[4:].split("%", 1)[0]) / 100


class FragmentAuditor:
    """Audits ``target`` for fragment extraction against ``shadow`` and ``world_models``.

    Each model is a causal LM (scored with ``tokenizer``), a ``(model, tokenizer)`` pair (for a
    world model from another family) or a Hugging Face name / local path loaded with
    :func:`~lightning_info.lm.tiny_lm.load_causal_lm` on first use. Every model is run on its own
    device. ``world_models`` is a single spec or a *list* of specs (a tuple is read as one
    ``(model, tokenizer)`` pair); ``p_w`` is the mean of their probabilities. ``options``: PRISM's
    prior, the batch size, the data-aware classifier and its cross-validation, the statistics,
    the blind baseline and the extra attacks (:class:`FragmentAuditOptions`). ``mask_filler``
    writes the neighbours of the ``"neighbourhood"`` extra attack: a ``transformers`` fill-mask
    pipeline or a callable, as :func:`~lightning_info.methods.prism.model_attacks.
    make_neighbours` takes it.
    """

    def __init__(
        self,
        target: ModelSpec,
        shadow: ModelSpec,
        world_models: ModelSpec | Sequence[ModelSpec],
        tokenizer: Any = None,
        options: FragmentAuditOptions = FragmentAuditOptions(),
        mask_filler: Any = None,
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
        if mask_filler is not None and not callable(mask_filler):
            raise TypeError(
                f"`mask_filler` must be a fill-mask pipeline or a callable, got "
                f"{type(mask_filler).__name__}."
            )
        self.mask_filler = mask_filler
        self._loaded: dict[str, tuple[Any, Any]] = {}
        for spec in (target, shadow, *self.world_models):
            if tokenizer is None and not isinstance(spec, (str, tuple)):
                raise ValueError("Give `tokenizer` for models passed without their tokenizer.")

    def token_statistics(
        self,
        attack_set: AttackSet,
        progress: bool = False,
        queries: Sequence[int] | None = None,
    ) -> dict[str, FragmentTokens]:
        """Per-token statistics of every query (one forward pass per batch and model): the
        target's with the vocabulary moments of Min-K%++, the shadow's and each world model's
        (``"world 0"``, ``"world 1"``, ...) log-probabilities only. ``progress`` shows a bar of
        the queries scored, over all the models (each batch as
        :func:`~lightning_info.methods.prism.functional.fragment_token_statistics` forms it,
        so the values are the same with and without it). ``queries``: the indices of the
        queries to score, in that order (default: all); a query's statistics do not depend on
        the others scored with it, so a shard's equal the whole set's at those indices."""
        check_attack_set(attack_set)
        progress = require_bool(progress, "progress")
        if queries is None:
            queries = range(len(attack_set))
        queries = [require_int(i, f"queries[{k}]", 0) for k, i in enumerate(queries)]
        if any(i >= len(attack_set) for i in queries):
            raise ValueError(
                f"`queries` holds an index past the attack set's {len(attack_set)} queries."
            )
        prompts = [attack_set.prompts[i] for i in queries]
        fragments = [attack_set.fragments[i] for i in queries]
        models = {"target": self.target, "shadow": self.shadow}
        models |= {f"world {k}": model for k, model in enumerate(self.world_models)}
        bar = tqdm(
            total=len(queries) * len(models),
            desc="fragment extraction audit",
            unit="query",
            disable=not progress,
        )
        try:
            return {
                name: self._tokens(model, prompts, fragments, name == "target", bar, name)
                for name, model in models.items()
            }
        finally:
            bar.close()

    def log_probabilities(self, attack_set: AttackSet, progress: bool = False) -> dict[str, Tensor]:
        """``log p(y | prompt)`` of every query under target, shadow and (the mean of) world;
        ``progress`` as for :meth:`token_statistics`."""
        return _sequence_log_probabilities(self.token_statistics(attack_set, progress))

    def run(
        self,
        attack_set: AttackSet,
        progress: bool = False,
        tokens: Mapping[str, FragmentTokens] | None = None,
    ) -> FragmentAuditReport:
        """Score ``attack_set`` with all models and attacks; see :meth:`score`. ``progress``
        shows a bar of the queries scored (:meth:`token_statistics`). The extra attacks of
        ``options.extra_attacks`` run on the target after it (:func:`extra_attack_scores`, fed
        the target's cached token log-probabilities). ``tokens``: the statistics
        :meth:`token_statistics` gives for the whole set, when they were computed elsewhere
        (shards scored on several processes, as :class:`FragmentExtractionAudit` does under
        DDP); no model then runs a forward pass here but the extra attacks'."""
        if tokens is None:
            tokens = self.token_statistics(attack_set, progress)
        else:
            check_attack_set(attack_set)
            names = ["target", "shadow", *(f"world {k}" for k in range(len(self.world_models)))]
            if sorted(tokens) != sorted(names) or any(
                len(tokens[name].log_probs) != len(attack_set) for name in names
            ):
                raise ValueError(
                    f"`tokens` must hold the statistics of {names} for each of the attack "
                    f"set's {len(attack_set)} queries (FragmentAuditor.token_statistics)."
                )
        log_probs = _sequence_log_probabilities(tokens)
        extra: dict[str, np.ndarray] = {}
        if self.options.extra_attacks:
            model, tokenizer = self._resolve(self.target)
            extra = extra_attack_scores(
                model,
                tokenizer,
                attack_set.prompts,
                attack_set.fragments,
                attack_set.labels,
                self.options,
                kinds=attack_set.kinds,
                target_log_probs=tokens["target"].log_probs,
                mask_filler=self.mask_filler,
            )
        return self.score(
            log_probs,
            attack_set.labels,
            attack_set.kinds,
            tokens,
            attack_set.fragments,
            prompts=attack_set.prompts,
            extra_scores=extra,
        )

    def score(
        self,
        log_probs: Mapping[str, Tensor | np.ndarray],
        labels: Sequence[int],
        kinds: Sequence[str] | None = None,
        tokens: Mapping[str, FragmentTokens] | None = None,
        fragments: Sequence[str] | None = None,
        prompts: Sequence[str] | None = None,
        extra_scores: Mapping[str, np.ndarray] | None = None,
    ) -> FragmentAuditReport:
        """The report from cached ``{"target", "shadow", "world"}`` log-probabilities.

        Attacks: ``target`` = ``log p_t`` (the raw target probability, a monotone transform);
        ``lr`` = ``p_t / (p_s + 1e-12)``; ``prism`` = :func:`prism_score`; ``data_aware`` =
        out-of-fold classifier on ``[log p_t, log p_w, log p_s]``. With the queries' ``kinds``
        (``"member"``, ``"non_member"``, ``"unseen"``) each attack's AUC is also reported
        against each kind of negative alone. With the per-token statistics ``tokens`` of
        :meth:`token_statistics` and the scored ``fragments`` (for zlib), the
        :data:`BASELINE_ATTACKS` too: ``loss``, ``zlib``, ``min_k``, ``min_k++`` (``k =
        options.min_k``) on the target's tokens, ``reference`` with the shadow as reference model,
        and Min-K% / Min-K%++ at each ``k`` of ``options.min_k_sweep``. ``extra_scores`` adds
        attacks scored elsewhere (:func:`extra_attack_scores`; NaN where a query is not scored).

        Every attack gets the figures of :class:`FragmentAuditReport` (AUC, its bootstrap
        standard error over ``options.bootstrap_resamples`` resamples seeded with
        ``options.seed``, PR AUC, TPRs under both conventions). With the ``prompts`` and the
        ``fragments`` and ``options.blind_baseline``, the blind baseline and the distribution
        check run on the members' against the negatives' texts, ``prompt + fragment``: the
        whole text the model read for the query. The scored fragment's probability is
        conditioned on the prompt, so a difference between the member and the negative
        prompts reaches the attacks' scores as surely as one between the fragments, and the
        blind classifier must see it too. Without them no blind baseline runs.

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
        if kinds is not None and len(kinds) != y.size:
            raise ValueError(f"`kinds` has {len(kinds)} entries for {y.size} queries.")
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
            scores.update(_sweep_scores(tokens, options.min_k_sweep))
        for name, values in (extra_scores or {}).items():
            values = np.asarray(values, dtype=np.float64).reshape(-1)
            if values.shape != y.shape:
                raise ValueError(
                    f"`extra_scores[{name!r}]` has {values.size} scores for {y.size} queries."
                )
            if name in scores:
                raise ValueError(f"`extra_scores` repeats the attack {name!r}; rename it.")
            scores[name] = values
        blind: dict[str, float | int] = {}
        distribution: dict[str, float] = {}
        if options.blind_baseline and prompts is not None and fragments is not None:
            blind, distribution = _blind_baseline(prompts, fragments, y, kinds, options)
        metrics, statistics = {}, {}
        for name, values in scores.items():
            metrics[name], statistics[name] = _attack_figures(
                name, values, y, kinds, options, blind
            )
        diagnostics = _world_shadow_diagnostics(lp["world"], lp["shadow"], kinds)
        diagnostics[NEGATIVES] = float((y == 0).sum())
        for level in options.fpr_levels:
            diagnostics[f"{NEGATIVES_NEEDED}tpr@{100 * level:g}%fpr"] = float(
                negatives_for_fpr(level)
            )
        return FragmentAuditReport(
            y,
            {k: v.numpy() for k, v in lp.items()},
            scores,
            metrics,
            diagnostics,
            statistics,
            blind,
            distribution,
        )

    def _tokens(
        self,
        spec: ModelSpec,
        prompts: Sequence[str],
        fragments: Sequence[str],
        moments: bool,
        bar: Any,
        name: str,
    ) -> FragmentTokens:
        """The statistics of ``spec``'s model, one batch at a time (the batches of
        :func:`fragment_token_statistics`: longest query first), ``bar`` advanced per batch."""
        model, tokenizer = self._resolve(spec)
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


def _sweep_scores(tokens: Mapping[str, FragmentTokens], ks: Sequence[float]) -> dict:
    target = tokens["target"]
    scores = {}
    for k in ks:
        plain, plus = sweep_attack_names(k)
        scores[plain] = min_k_score(target.log_probs, k).numpy()
        scores[plus] = min_k_plus_plus_score(target.log_probs, target.means, target.stds, k)
        scores[plus] = scores[plus].numpy()
    return scores


def _attack_figures(
    name: str,
    values: np.ndarray,
    y: np.ndarray,
    kinds: Sequence[str] | None,
    options: FragmentAuditOptions,
    blind: Mapping[str, float | int],
) -> tuple[dict[str, float], dict[str, float | int]]:
    """One attack's metrics (the report's keys) and its membership_report row, over the
    queries it scored (those whose score is not NaN)."""
    scored = ~np.isnan(values)
    s, labels = values[scored], y[scored]
    if len(set(labels.tolist())) < 2:
        raise ValueError(
            f"The attack {name!r} scored queries of one class only; it needs members and "
            f"negatives (ReCaLL: give more than {RECALL_SHOTS} non-members)."
        )
    interpolated = attack_metrics(s, labels, options.fpr_levels)
    levels = tuple(level for level in options.fpr_levels if level < 1.0)
    row = membership_report(
        {name: s},
        labels,
        levels or DEFAULT_AUDIT_FPR_LEVELS,
        options.bootstrap_resamples,
        options.seed,
    )[name]
    metrics = {"auc": interpolated.pop("auc")}
    metrics["auc_se"] = float(row["auc_se"])
    metrics["pr_auc"] = float(row["pr_auc"])
    metrics.update(interpolated)
    for level in options.fpr_levels:
        # at FPR <= 1 every threshold qualifies: the TPR is 1
        at_most = 1.0 if level >= 1.0 else row[f"tpr_at_{100 * level:g}pct_fpr_at_most"]
        metrics[f"tpr@{100 * level:g}%fpr at most"] = float(at_most)
    by_kind = {}
    if kinds is not None:
        resamples = options.bootstrap_resamples
        by_kind = _auc_by_negative_kind(
            s, labels, np.asarray(kinds)[scored], resamples, options.seed
        )
        metrics.update({key: value for key, value in by_kind.items() if key.startswith("auc ")})
    if blind:
        metrics["beats_blind"] = float(beats_blind(metrics["auc"], metrics["auc_se"], blind["auc"]))
    for auc_name in NEGATIVE_KINDS.values():
        split = auc_name.removeprefix("auc")  # " vs non-members"
        if auc_name in by_kind:
            metrics[f"auc_se{split}"] = by_kind[f"auc_se{split}"]
            if auc_name in blind:
                metrics[f"beats_blind{split}"] = float(
                    beats_blind(by_kind[auc_name], by_kind[f"auc_se{split}"], blind[auc_name])
                )
    return metrics, row


def _blind_baseline(
    prompts: Sequence[str],
    fragments: Sequence[str],
    y: np.ndarray,
    kinds: Sequence[str] | None,
    options: FragmentAuditOptions,
) -> tuple[dict[str, float | int], dict[str, float]]:
    """The blind baseline's ``{"auc", "auc_se", "folds"}`` (with the queries' kinds also its
    AUC and standard error against each kind of negative alone, ``"auc vs non-members"``,
    ``"auc_se vs non-members"``, ...) and the rest of the distribution check
    (:func:`~lightning_info.methods.prism.blind.text_distribution`), members' against
    negatives' ``prompt + fragment`` texts. The classifier is fitted once, on every negative:
    the AUC against one kind reads its out-of-fold scores on that kind's queries. Its standard
    errors use :data:`~lightning_info.methods.prism.blind.BOOTSTRAP_RESAMPLES` resamples,
    as :func:`~lightning_info.methods.prism.blind.blind_baseline_auc`'s."""
    prompts = require_string_sequence(prompts, "prompts")
    fragments = require_string_sequence(fragments, "fragments")
    require_equal_lengths({"prompts": len(prompts), "fragments": len(fragments), "labels": y.size})
    texts = [p + f for p, f in zip(prompts, fragments)]
    order = np.r_[np.flatnonzero(y == 1), np.flatnonzero(y == 0)]
    members = [texts[i] for i in order[: int((y == 1).sum())]]
    negatives = [texts[i] for i in order[len(members) :]]
    scores = np.empty(y.size)
    scores[order] = blind_baseline_scores(members, negatives, options.n_splits, options.seed)
    # members first, as blind_baseline_auc orders them: the same bootstrap draws
    auc = float(binary_auroc(scores[order], y[order]))
    se = bootstrap_auc(scores[order], y[order], BOOTSTRAP_RESAMPLES, options.seed)[1]
    blind: dict[str, float | int] = {"auc": auc, "auc_se": se, "folds": options.n_splits}
    if kinds is not None:
        blind.update(
            _auc_by_negative_kind(scores, y, np.asarray(kinds), BOOTSTRAP_RESAMPLES, options.seed)
        )
    return blind, text_distribution(members, negatives)


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


def _auc_by_negative_kind(
    scores: np.ndarray, labels: np.ndarray, kinds: np.ndarray, resamples: int, seed: int
) -> dict[str, float]:
    """Members against each kind of negative alone (kinds present in the attack set only): the
    AUC (``"auc vs non-members"``) and its bootstrap standard error over that split
    (``"auc_se vs non-members"``, :func:`bootstrap_auc` with ``resamples`` and ``seed``)."""
    if kinds.shape != labels.shape:
        raise ValueError(f"`kinds` has {kinds.shape[0]} entries for {labels.shape[0]} queries.")
    out = {}
    for kind, name in NEGATIVE_KINDS.items():
        keep = (kinds == "member") | (kinds == kind)
        if (kinds == kind).any() and (kinds == "member").any():
            out[name] = roc_auc(scores[keep], labels[keep])
            se_name = "auc_se" + name.removeprefix("auc")
            out[se_name] = bootstrap_auc(scores[keep], labels[keep], resamples, seed)[1]
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
