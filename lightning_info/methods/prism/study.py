"""The fragment-extraction study (PRISM) of the data-audit recipe: synthetic records of correlated
fragments are split into members (the target's fine-tuning set), non-members, the shadow model's
records and the world model's records; a BPE tokenizer and tiny GPT-2s are trained locally
(:func:`~lightning_info.lm.training.fit_causal_lm`): world and shadow once, the target at every
epoch count of the study. Each target is then attacked with
:class:`~lightning_info.methods.prism.auditor.FragmentAuditor`: raw target probability, likelihood
ratio, PRISM and the data-aware classifier, with AUC and TPR at 2% / 5% FPR. The study is the
``prism`` entry of ``recipes/data_audit.yaml``; the tiny models go to
``<output_dir>/prism_models``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from lightning.pytorch.utilities import rank_zero_info
from torch.utils.data import DataLoader

from lightning_info.experiments.study import Study, StudyResult
from lightning_info.lm.tiny_lm import tiny_causal_lm, train_bpe_tokenizer
from lightning_info.lm.training import fit_causal_lm
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


@dataclass
class PrismStudy(Study):
    """Sizes of the synthetic records and of the tiny models. ``world``: ``"prior"`` (the world
    model learns lists of the same conditions drawn without the records' profile structure, in
    another format, ``WORLD_TEMPLATE``: an external prior that knows the vocabulary but not how
    these records combine it) or ``"shadow"`` (the remaining records in the audit's own format:
    a second shadow with more data, under which PRISM falls as the target memorises)."""

    records: int = 200
    members: int = 40
    non_members: int = 40
    shadow_records: int = 40
    target_epochs: list[int] = field(default_factory=lambda: [1, 4, 16])
    reference_epochs: int = 16
    world: str = "prior"
    vocab_size: int = 500
    layers: int = 2
    width: int = 64
    lr: float = 3e-3
    batch_size: int = 32
    seed: int = 0

    def __post_init__(self) -> None:
        if self.world not in ("prior", "shadow"):
            raise ValueError(f"`world` must be 'prior' or 'shadow', got {self.world!r}.")

    def run(self, cli) -> StudyResult:
        table = prism_study(self, str(cli.output_dir / "prism_models"))
        title = "fragment extraction: attacks on targets fine-tuned for several epochs"
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
):
    """A tiny GPT-2 fine-tuned on ``record_texts`` of ``records`` (in ``template``) for
    ``epochs`` epochs."""
    texts = [text for record in records for text in record_texts(record, template)]
    model = tiny_causal_lm(
        tokenizer, n_layer=study.layers, n_embd=study.width, n_head=4, n_positions=128, seed=seed
    )
    loader = _loader(texts, tokenizer, study.batch_size, seed)
    return fit_causal_lm(model, loader, epochs=epochs, lr=study.lr, seed=seed, root=root)


def prism_study(study: PrismStudy, root: str) -> tuple[list[str], list[list]]:
    """Train world, shadow and one target per epoch count; the attack table."""
    records = synthetic_records(study.records, seed=study.seed)
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
            len(world_records), seed=study.seed + 1, profile_weight=1.0, second_profile=0.0
        )
        template = WORLD_TEMPLATE
    texts = [text for record in records for text in record_texts(record)]
    texts += [text for record in world_records for text in record_texts(record, template)]
    tokenizer = train_bpe_tokenizer(texts + list(UNSEEN_FRAGMENTS), vocab_size=study.vocab_size)
    world = train_tiny_lm(
        world_records, tokenizer, study.reference_epochs, study, 2, root, template
    )
    shadow = train_tiny_lm(shadow_records, tokenizer, study.reference_epochs, study, 1, root)
    attack = build_attack_set(members, non_members, seed=study.seed)
    columns = [
        "target epochs",
        "attack",
        "AUC",
        "AUC vs non-members",
        "AUC vs unseen",
        "TPR@0.1%FPR",
        "TPR@1%FPR",
        "TPR@2%FPR",
        "TPR@5%FPR",
        "p_w > p_s",
        "median log(p_w/p_s) seen",
    ]
    rows = []
    for epochs in study.target_epochs:
        target = train_tiny_lm(members, tokenizer, epochs, study, 0, root)
        options = FragmentAuditOptions(seed=study.seed)
        report = FragmentAuditor(target, shadow, [world], tokenizer, options).run(attack)
        share = report.diagnostics[SHARE_WORLD_ABOVE_SHADOW]
        median = report.diagnostics[MEDIAN_LOG_WORLD_OVER_SHADOW]
        for attack_name, metrics in report.metrics.items():
            rows.append(
                [epochs, attack_name]
                + [
                    f"{metrics[key]:.4f}"
                    for key in (
                        "auc",
                        "auc vs non-members",
                        "auc vs unseen",
                        "tpr@0.1%fpr",
                        "tpr@1%fpr",
                        "tpr@2%fpr",
                        "tpr@5%fpr",
                    )
                ]
                + [f"{share:.3f}", f"{median:.3f}"]
            )
        rank_zero_info(f"PRISM study: target trained {epochs} epochs audited")
    return columns, rows
