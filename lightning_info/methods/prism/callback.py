"""``FragmentExtractionAudit``: the Lightning shell of the PRISM audit. At the end of ``fit`` it
audits the trained module's model as the target with
:class:`~lightning_info.methods.prism.auditor.FragmentAuditor` and logs the report."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.loggers import WandbLogger
from lightning.pytorch.utilities import rank_zero_info

from lightning_info.core.distributed import strided_shard
from lightning_info.core.logging import metric_key
from lightning_info.core.validation import require_bool
from lightning_info.lm.features import check_causal_lm
from lightning_info.methods.prism.auditor import (
    MODELS,
    FragmentAuditor,
    FragmentAuditReport,
    ModelSpec,
    check_attack_set,
)
from lightning_info.methods.prism.fragments import AttackSet
from lightning_info.methods.prism.functional import FragmentTokens
from lightning_info.methods.prism.options import FragmentAuditOptions

__all__ = ["FragmentExtractionAudit"]


class FragmentExtractionAudit(pl.Callback):
    """At the end of ``fit``, audit the trained model for fragment extraction and log the report.

    The target is ``pl_module.model`` (e.g.
    :class:`~lightning_info.lm.fine_tuner.CausalLMFineTuner`'s
    wrapped LM), else ``pl_module`` itself. ``attack_set`` is an :class:`AttackSet` or the path of
    one saved with :meth:`AttackSet.save`. ``shadow`` and ``world_models`` are models, ``(model,
    tokenizer)`` pairs or names/paths, as for :class:`FragmentAuditor`; ``tokenizer`` is a
    tokenizer or a name/path for ``AutoTokenizer``, and defaults to
    ``trainer.datamodule.tokenizer``. So a YAML config can name everything on disk.
    ``options`` are the auditor's (:class:`FragmentAuditOptions`: prior, batch size, data-aware
    classifier); ``prefix`` starts the logged names. ``progress`` shows a bar of the queries
    scored (the audit runs at fit end, about one forward pass per batch of queries and model) on
    global rank zero, unless the trainer shows no progress bar (``enable_progress_bar=False``).
    ``mask_filler`` enables the ``"neighbourhood"`` extra attack (:class:`FragmentAuditor`);
    ``mimir_path``, a file path, receives the report in MIMIR's results layout
    (:meth:`FragmentAuditReport.mimir`) as JSON.

    ``setup`` checks, before training, that there is a tokenizer and that the target is a causal
    LM whose embedding covers it. Under DDP every rank scores its share of the queries
    (every ``world_size``-th, :func:`~lightning_info.core.distributed.strided_shard`) with every
    model, one forward pass per batch, and the shares travel by
    Lightning's ``trainer.strategy.broadcast``; global rank zero then runs the attacks (and the
    extra attacks' passes, such as gradnorm's backward) on the whole set: the report
    (``self.report``, on global rank zero only) equals one process's up to float32 noise (the
    shards are batched and padded apart). It is printed, its
    scalars ``metric_key(prefix, attack, metric)``
    (``prism/min_kplusplus/tpr_at_1pct_fpr``, ``prism/loss/auc_se``,
    ``prism/loss/tpr_at_1pct_fpr_at_most``, ``prism/loss/beats_blind``) with the blind
    baseline's ``prism/blind/auc`` and the distribution check's ``prism/distribution/...`` go to
    every logger and, with a ``WandbLogger``, the metrics table and per-query scores go to W&B
    tables.
    """

    def __init__(
        self,
        attack_set: AttackSet | str,
        shadow: ModelSpec,
        world_models: ModelSpec | Sequence[ModelSpec],
        tokenizer: Any = None,
        options: FragmentAuditOptions = FragmentAuditOptions(),
        prefix: str = "prism",
        progress: bool = True,
        mask_filler: Any = None,
        mimir_path: str | Path | None = None,
    ) -> None:
        if isinstance(attack_set, (str, Path)):
            attack_set = AttackSet.load(attack_set)
        check_attack_set(attack_set)
        if not isinstance(options, FragmentAuditOptions):
            raise TypeError(
                f"`options` must be a FragmentAuditOptions, got {type(options).__name__}."
            )
        if not isinstance(prefix, str):
            raise TypeError(f"`prefix` must be a non-empty string, got {prefix!r}.")
        if not prefix:
            raise ValueError("`prefix` must be a non-empty string (it starts the logged names).")
        worlds = world_models
        if not isinstance(worlds, (str, tuple)) and isinstance(worlds, Sequence) and not worlds:
            raise ValueError("Give at least one world model in `world_models`.")
        self.attack_set = attack_set
        self.shadow, self.world_models, self.tokenizer = shadow, world_models, tokenizer
        self.options, self.prefix = options, prefix
        self.progress = require_bool(progress, "progress")
        if mask_filler is not None and not callable(mask_filler):
            raise TypeError(
                f"`mask_filler` must be a fill-mask pipeline or a callable, got "
                f"{type(mask_filler).__name__}."
            )
        if mimir_path is not None and not isinstance(mimir_path, (str, Path)):
            raise TypeError(f"`mimir_path` must be a file path, got {mimir_path!r}.")
        self.mask_filler = mask_filler
        self.mimir_path = None if mimir_path is None else Path(mimir_path)
        self.report: FragmentAuditReport | None = None
        self.scored_queries: list[int] = []  # the queries this process ran forward passes on

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage == "fit":
            check_causal_lm(_target(pl_module), self._tokenizer(trainer))

    def _tokenizer(self, trainer: pl.Trainer) -> Any:
        tokenizer = self.tokenizer
        if tokenizer is None:
            tokenizer = getattr(getattr(trainer, "datamodule", None), "tokenizer", None)
        if tokenizer is None:
            raise ValueError(
                "FragmentExtractionAudit needs a tokenizer: pass `tokenizer=` (a tokenizer or its "
                "name/path) or use a datamodule with a `tokenizer` attribute."
            )
        if isinstance(tokenizer, (str, Path)):
            from transformers import AutoTokenizer

            self.tokenizer = tokenizer = AutoTokenizer.from_pretrained(str(tokenizer))
        return tokenizer

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        auditor = FragmentAuditor(
            _target(pl_module),
            self.shadow,
            self.world_models,
            self._tokenizer(trainer),
            self.options,
            self.mask_filler,
        )
        shown = self.progress and trainer.progress_bar_callback is not None
        n = len(self.attack_set)
        self.scored_queries = strided_shard(n, trainer.global_rank, trainer.world_size)
        tokens = None
        if trainer.world_size > 1:
            tokens = _token_statistics_on_every_rank(
                auditor, self.attack_set, self.scored_queries, trainer
            )
        if not trainer.is_global_zero:
            return
        self.report = auditor.run(self.attack_set, progress=shown, tokens=tokens)
        rank_zero_info(f"\nfragment extraction audit (PRISM)\n\n{self.report}\n")
        if self.mimir_path is not None:
            from lightning_info.core.files import atomic_write_text

            self.mimir_path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.mimir_path, json.dumps(self.report.mimir(), indent=1) + "\n")
        scalars = self.report.scalars(self.prefix)
        for logger in trainer.loggers:
            logger.log_metrics(scalars, step=trainer.global_step)
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger):
                logger.log_table(
                    key=metric_key(self.prefix, "metrics"),
                    columns=self.report.table()[0],
                    data=self.report.table()[1],
                )
                logger.log_table(key=metric_key(self.prefix, "queries"), **_query_table(self))


def _token_statistics_on_every_rank(
    auditor: FragmentAuditor, attack_set: AttackSet, mine: list[int], trainer: pl.Trainer
) -> dict[str, FragmentTokens]:
    """Every rank scores its strided shard of the queries
    (:func:`~lightning_info.core.distributed.strided_shard`; one forward pass per batch and
    model, :meth:`FragmentAuditor.token_statistics`); the shards travel to every rank by
    Lightning's ``trainer.strategy.broadcast``, once from each rank (``mine``: this rank's
    queries), and are put back in the attack set's order: the statistics one process computes
    for the whole set."""
    world, n = trainer.world_size, len(attack_set)
    part = auditor.token_statistics(attack_set, queries=mine) if mine else None
    parts = [trainer.strategy.broadcast(part, src=source) for source in range(world)]
    merged = {}
    for name in next(p for p in parts if p is not None):
        log_probs, means, stds = [None] * n, [None] * n, [None] * n
        for source, shard in enumerate(parts):
            if shard is None:
                continue
            tokens = shard[name]
            for k, index in enumerate(strided_shard(n, source, world)):
                log_probs[index] = tokens.log_probs[k]
                if tokens.means:
                    means[index], stds[index] = tokens.means[k], tokens.stds[k]
        has_moments = means[0] is not None
        merged[name] = FragmentTokens(
            log_probs, means if has_moments else [], stds if has_moments else []
        )
    return merged


def _target(pl_module: pl.LightningModule) -> Any:
    return getattr(pl_module, "model", pl_module)


def _query_table(callback: FragmentExtractionAudit) -> dict[str, Any]:
    report, attacks = callback.report, callback.attack_set
    attack_names = list(report.scores)
    columns = ["prompt", "fragment", "kind", "label", *(f"log_p_{m}" for m in MODELS)]
    columns += attack_names
    data = [
        [
            attacks.prompts[i],
            attacks.fragments[i],
            attacks.kinds[i],
            int(attacks.labels[i]),
            *(float(report.log_probs[m][i]) for m in MODELS),
            *(float(report.scores[a][i]) for a in attack_names),
        ]
        for i in range(len(attacks))
    ]
    return {"columns": columns, "data": data}
