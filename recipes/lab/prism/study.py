"""The fragment-extraction study (PRISM) of the data-audit recipe: synthetic records of correlated
fragments are split into members (the target's fine-tuning set), non-members, the shadow model's
records and the world model's records; a BPE tokenizer and tiny GPT-2s are trained locally
(:func:`~lab.lm_training.fit_causal_lm`) for every seed: the world model (by default
the base, as the paper fine-tunes target and shadow from one pretrained model) and the shadow
once, the target at every epoch count of the study. Each target is then attacked with
:class:`~lightning_info.methods.prism.auditor.FragmentAuditor`: the paper's four attacks, the
field's five and the ``extra_attacks`` (gradnorm, ReCaLL, DC-PDD), reported as MIMIR reports
them (AUC with its bootstrap standard error, PR AUC, TPR at 0.1% and 1% FPR) beside the blind
baseline, a text-only classifier on the same split, mean ± std over seeds. The study is the
``prism`` entry of ``recipes/data_audit.yaml``; the tiny models go to
``<output_dir>/prism_models``."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from lightning.pytorch.utilities import rank_zero_info
from torch.utils.data import DataLoader

from lab.lm_training import fit_causal_lm
from lab.study import Study, StudyResult
from lightning_info.core.logging import mean_std
from lightning_info.lm.tiny_lm import tiny_causal_lm, train_bpe_tokenizer
from lightning_info.methods.prism.auditor import (
    MEDIAN_LOG_WORLD_OVER_SHADOW,
    SHARE_WORLD_ABOVE_SHADOW,
    FragmentAuditOptions,
    FragmentAuditor,
)
from lightning_info.methods.prism.fragments import (
    PROMPT_TEMPLATE,
    UNSEEN_FRAGMENTS,
    WORLD_TEMPLATE,
    build_attack_set,
    record_texts,
    synthetic_records,
)
from lightning_info.methods.prism.statistics import (
    DEFAULT_AUDIT_FPR_LEVELS,
    enough_negatives,
    format_rate,
)


@dataclass
class PrismStudy(Study):
    """Sizes of the synthetic records and of the tiny models, over ``seeds`` (each seed draws its
    own records, tokenizer and models; the table gives mean ± std over seeds).

    ``base``: ``"shared"`` (the paper's protocol: the world model is the pretrained base, and the
    shadow and every target are fine-tuned from a copy of it) or ``"scratch"`` (target, shadow and
    world each trained from a random initialisation). ``world``: ``"prior"`` (the world model
    learns lists of the same conditions drawn without the records' profile structure, in another
    format, ``WORLD_TEMPLATE``: an external prior that knows the vocabulary but not how these
    records combine it) or ``"shadow"`` (the remaining records in the audit's own format: a second
    shadow with more data, under which PRISM falls as the target memorises).

    The defaults give 1,000 non-member and 200 unseen queries: 1,200 negatives, enough for a TPR
    at 0.1% FPR (1,000; with fewer the table says ``n/a``). ``extra_attacks``: attacks of
    :data:`~lightning_info.methods.prism.options.EXTRA_ATTACKS` added to the audit (the
    neighbourhood attack needs a mask-filling model, which the study does not train);
    ``bootstrap_resamples``: the resamples behind each AUC's standard error."""

    records: int = 1800
    members: int = 200
    non_members: int = 1000
    shadow_records: int = 200
    target_epochs: list[int] = field(default_factory=lambda: [1, 4, 16])
    reference_epochs: int = 16
    world: str = "prior"
    base: str = "shared"
    vocab_size: int = 500
    layers: int = 2
    width: int = 64
    lr: float = 3e-3
    batch_size: int = 32
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    extra_attacks: list[str] = field(default_factory=lambda: ["gradnorm", "recall", "dc_pdd"])
    bootstrap_resamples: int = 1000

    def __post_init__(self) -> None:
        if self.world not in ("prior", "shadow"):
            raise ValueError(f"`world` must be 'prior' or 'shadow', got {self.world!r}.")
        if self.base not in ("shared", "scratch"):
            raise ValueError(f"`base` must be 'shared' or 'scratch', got {self.base!r}.")
        if not self.seeds:
            raise ValueError("`seeds` is empty: give at least one seed.")
        self.options(0)  # the audit's options, checked before any model is trained

    def options(self, seed: int) -> FragmentAuditOptions:
        """The audit's options for ``seed``: the bootstrap, the blind baseline's folds and the
        data-aware classifier's seeded by it; TPR at 0.1% and 1% FPR."""
        return FragmentAuditOptions(
            seed=seed,
            fpr_levels=DEFAULT_AUDIT_FPR_LEVELS,
            bootstrap_resamples=self.bootstrap_resamples,
            extra_attacks=tuple(self.extra_attacks),
        )

    def run(self, cli) -> StudyResult:
        table = prism_study(self, str(cli.output_dir / "prism_models"))
        title = (
            "fragment extraction: attacks on targets fine-tuned for several epochs, beside the "
            f"blind baseline (mean ± std over seeds {', '.join(map(str, self.seeds))})"
        )
        return StudyResult({title: table})


def _loader(texts: Sequence[str], tokenizer, batch_size: int, seed: int) -> DataLoader:
    encoded = tokenizer(list(texts), padding=True, return_tensors="pt")
    labels = encoded["input_ids"].masked_fill(encoded["attention_mask"] == 0, -100)
    rows = [
        {"input_ids": ids, "attention_mask": mask, "labels": label}
        for ids, mask, label in zip(encoded["input_ids"], encoded["attention_mask"], labels)
    ]
    generator = torch.Generator().manual_seed(seed)
    return DataLoader(rows, batch_size=batch_size, shuffle=True, generator=generator)


def train_tiny_lm(
    records,
    tokenizer,
    epochs: int,
    study: PrismStudy,
    seed: int,
    root: str,
    template: str = PROMPT_TEMPLATE,
    start: Any = None,
):
    """A tiny GPT-2 trained on ``record_texts`` of ``records`` (in ``template``) for ``epochs``
    epochs: from a copy of ``start`` (a model fine-tuned from a base), else from a random
    initialisation seeded by ``seed``."""
    texts = [text for record in records for text in record_texts(record, template)]
    if start is None:
        model = tiny_causal_lm(
            tokenizer,
            n_layer=study.layers,
            n_embd=study.width,
            n_head=4,
            n_positions=512,  # room for ReCaLL's non-member prefix before a query
            seed=seed,
        )
    else:
        model = copy.deepcopy(start)
    loader = _loader(texts, tokenizer, study.batch_size, seed)
    return fit_causal_lm(model, loader, epochs=epochs, lr=study.lr, seed=seed, root=root)


COLUMNS = [
    "target epochs",
    "attack",
    "AUC",
    "AUC s.e.",
    "AUC vs non-members",
    "s.e. vs non-members",
    "AUC vs unseen",
    "PR AUC",
    "TPR@0.1%FPR",
    "TPR@1%FPR",
    "blind AUC",
    "blind AUC vs non-members",
    "beats blind (seeds)",
    "beats blind vs non-members (seeds)",
    "p_w > p_s",
    "median log(p_w/p_s) seen",
]
"""The study table's columns. AUC s.e.: the bootstrap standard error (1,000 resamples), mean over
seeds; TPR: the best threshold whose FPR is at most the level (LiRA's convention); blind AUC: the
text-only classifier on the same split; beats blind: the seeds in which the attack's AUC exceeds
the blind AUC by more than its standard error."""
_FIGURES = (
    "auc",
    "auc_se",
    "auc vs non-members",
    "auc_se vs non-members",
    "auc vs unseen",
    "pr_auc",
)


def prism_study(study: PrismStudy, root: str) -> tuple[list[str], list[list]]:
    """Every seed's audits, then one row per target epoch count and attack: each figure's
    mean ± std over the seeds, a TPR as ``n/a (needs >= N negatives)`` where the audit has too
    few negatives for its level, and the seeds in which the attack beats the blind baseline."""
    runs = [_audit_one_seed(study, seed, root) for seed in study.seeds]
    rows = []
    for key in runs[0]:  # (epochs, attack), in the order audited
        seeds = [run[key] for run in runs]
        row = [*key, *(mean_std([s[name] for s in seeds]) for name in _FIGURES)]
        for level in DEFAULT_AUDIT_FPR_LEVELS:
            negatives = min(s["negatives"] for s in seeds)
            rates = [s[f"tpr@{100 * level:g}%fpr at most"] for s in seeds]
            enough = enough_negatives(negatives, level)
            row.append(mean_std(rates) if enough else format_rate(rates[0], negatives, level))
        row += [mean_std([s["blind auc"] for s in seeds])]
        row += [mean_std([s["blind auc vs non-members"] for s in seeds])]
        row += [sum(int(s["beats_blind"]) for s in seeds)]
        row += [sum(int(s["beats_blind vs non-members"]) for s in seeds)]
        row += [mean_std([s[SHARE_WORLD_ABOVE_SHADOW] for s in seeds])]
        row += [mean_std([s[MEDIAN_LOG_WORLD_OVER_SHADOW] for s in seeds])]
        rows.append(row)
    return COLUMNS, rows


def _audit_one_seed(study: PrismStudy, seed: int, root: str) -> dict[tuple[int, str], dict]:
    """Records, tokenizer, world, shadow and targets of one seed; each (epochs, attack)'s
    figures, the blind baseline's and the two world/shadow diagnostics."""
    records = synthetic_records(study.records, seed=seed)
    cut = [study.members, study.non_members, study.shadow_records]
    if sum(cut) >= len(records):
        raise ValueError("`records` must exceed members + non_members + shadow_records.")
    members = records[: cut[0]]
    non_members = records[cut[0] : cut[0] + cut[1]]
    shadow_records = records[cut[0] + cut[1] : sum(cut)]
    world_records = records[sum(cut) :]
    template = PROMPT_TEMPLATE
    if study.world == "prior":
        # the same conditions, no profile structure (uniform draws), another note format
        world_records = synthetic_records(
            len(world_records), seed=seed + 1, profile_weight=1.0, second_profile=0.0
        )
        template = WORLD_TEMPLATE
    texts = [text for record in records for text in record_texts(record)]
    texts += [text for record in world_records for text in record_texts(record, template)]
    tokenizer = train_bpe_tokenizer(texts + list(UNSEEN_FRAGMENTS), vocab_size=study.vocab_size)
    # model seeds 3 s (targets), 3 s + 1 (shadow), 3 s + 2 (world): seed 0 keeps 0, 1, 2
    epochs = study.reference_epochs
    world = train_tiny_lm(world_records, tokenizer, epochs, study, 3 * seed + 2, root, template)
    base = world if study.base == "shared" else None
    shadow = train_tiny_lm(shadow_records, tokenizer, epochs, study, 3 * seed + 1, root, start=base)
    attack = build_attack_set(members, non_members, seed=seed)
    out: dict[tuple[int, str], dict] = {}
    for target_epochs in study.target_epochs:
        target = train_tiny_lm(members, tokenizer, target_epochs, study, 3 * seed, root, start=base)
        auditor = FragmentAuditor(target, shadow, [world], tokenizer, study.options(seed))
        report = auditor.run(attack)
        shared = {
            "blind auc": report.blind["auc"],
            "blind auc vs non-members": report.blind["auc vs non-members"],
            **report.diagnostics,
        }
        for attack_name, metrics in report.metrics.items():
            negatives = int(report.statistics[attack_name]["non_members"])
            out[(target_epochs, attack_name)] = {**metrics, **shared, "negatives": negatives}
        rank_zero_info(f"PRISM study, seed {seed}: target trained {target_epochs} epochs audited")
    return out
