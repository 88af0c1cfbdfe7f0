"""The data-audit recipe: a train-test overlap report with planted contamination, and the
fragment-extraction study (PRISM) on synthetic records.

Overlap: the standard library's docstrings are split by module into a training corpus and two
held-out "benchmarks" (instances: a docstring's first line as input, the rest as reference); a
seeded fraction of one benchmark's instances is planted verbatim into the training corpus. The
HELM-style report (:func:`~lightning_info.methods.train_test_overlap.functional.compute_overlap`)
should flag every planted
instance and few others.

Synthetic records of correlated fragments are split into members (the target's fine-tuning set),
non-members, the shadow model's records and the world model's records; a BPE tokenizer and tiny
GPT-2s are trained locally with a Lightning ``Trainer`` (:class:`CausalLMFineTuner`): world and
shadow once, the target at every epoch count of the study. Each target is then attacked with
:class:`~lightning_info.methods.prism.audit.FragmentAuditor`: raw target probability, likelihood
ratio,
PRISM and the data-aware classifier, with AUC and TPR at 2% / 5% FPR.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.utils.data import DataLoader

from lightning_info.core.logging import log_wandb_tables, markdown_table
from lightning_info.lm.corpus import split_corpus, stdlib_docstrings
from lightning_info.lm.tiny_lm import tiny_causal_lm, train_bpe_tokenizer
from lightning_info.lm.training import fit_causal_lm
from lightning_info.methods.prism.audit import FragmentAuditor
from lightning_info.methods.prism.fragments import (
    UNSEEN_FRAGMENTS,
    build_attack_set,
    record_texts,
    synthetic_records,
)
from lightning_info.methods.train_test_overlap.functional import TestInstance, compute_overlap
from lightning_info.methods.train_test_overlap.report import OverlapReport, write_report


@dataclass
class OverlapStudy:
    """The overlap report (``enabled: false`` skips it)."""

    enabled: bool = True
    n: int = 13
    planted_fraction: float = 0.1
    tokenizer: str = "default"
    seed: int = 0


def _instances(pairs, benchmark: str) -> list[TestInstance]:
    instances = []
    for name, text in pairs:
        first, _, rest = text.partition("\n")
        if rest.strip():
            instances.append(TestInstance(name, first, (rest.strip(),), benchmark))
    return instances


def overlap_study(study: OverlapStudy) -> tuple[OverlapReport, tuple[list[str], list[list]]]:
    """The overlap report and a planted-contamination table (recall on planted instances,
    the overlap rate of the others)."""
    train, held_a, held_b = split_corpus(stdlib_docstrings(), (0.6, 0.2, 0.2), seed=study.seed)
    instances = _instances(held_a, "stdlib-A") + _instances(held_b, "stdlib-B")
    generator = torch.Generator().manual_seed(study.seed)
    candidates = [i for i in instances if i.benchmark == "stdlib-A"]
    count = round(study.planted_fraction * len(candidates))
    planted = [candidates[j] for j in torch.randperm(len(candidates), generator=generator)[:count]]
    documents = [text for _, text in train]
    documents += [f"{i.input}\n{i.references[0]}" for i in planted]
    report = compute_overlap(instances, documents, n=study.n, tokenizer=study.tokenizer)
    planted_ids = {(i.benchmark, i.id) for i in planted}
    columns = ["benchmark", "instances", "planted", "planted flagged", "others flagged"]
    rows = []
    for benchmark in ("stdlib-A", "stdlib-B"):
        mine = [r for r in report.rows if r["benchmark"] == benchmark]
        hit = [(r["benchmark"], r["id"]) in planted_ids for r in mine]
        flagged = [r["any_overlap"] > 0 for r in mine]
        n_planted = sum(hit)
        recall = (
            sum(f for f, h in zip(flagged, hit) if h) / n_planted if n_planted else float("nan")
        )
        others = [f for f, h in zip(flagged, hit) if not h]
        rows.append(
            [
                benchmark,
                len(mine),
                n_planted,
                f"{recall:.4f}",
                f"{sum(others) / len(others):.4f}",
            ]
        )
    return report, (columns, rows)


@dataclass
class PrismStudy:
    """Sizes of the synthetic records and of the tiny models (``enabled: false`` skips it)."""

    enabled: bool = True
    records: int = 200
    members: int = 40
    non_members: int = 40
    shadow_records: int = 40
    target_epochs: list[int] = field(default_factory=lambda: [1, 4, 16])
    reference_epochs: int = 4
    vocab_size: int = 500
    layers: int = 2
    width: int = 64
    lr: float = 3e-3
    batch_size: int = 32
    seed: int = 0


def _loader(texts: Sequence[str], tokenizer, batch_size: int, seed: int) -> DataLoader:
    encoded = tokenizer(list(texts), padding=True, return_tensors="pt")
    labels = encoded["input_ids"].masked_fill(encoded["attention_mask"] == 0, -100)
    rows = [
        {"input_ids": ids, "attention_mask": mask, "labels": label}
        for ids, mask, label in zip(encoded["input_ids"], encoded["attention_mask"], labels)
    ]
    generator = torch.Generator().manual_seed(seed)
    return DataLoader(rows, batch_size=batch_size, shuffle=True, generator=generator)


def train_tiny_lm(records, tokenizer, epochs: int, study: PrismStudy, seed: int, root: str):
    """A tiny GPT-2 fine-tuned on ``record_texts`` of ``records`` for ``epochs`` epochs."""
    texts = [text for record in records for text in record_texts(record)]
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
    texts = [text for record in records for text in record_texts(record)]
    tokenizer = train_bpe_tokenizer(texts + list(UNSEEN_FRAGMENTS), vocab_size=study.vocab_size)
    world = train_tiny_lm(world_records, tokenizer, study.reference_epochs, study, 2, root)
    shadow = train_tiny_lm(shadow_records, tokenizer, study.reference_epochs, study, 1, root)
    attack = build_attack_set(members, non_members, seed=study.seed)
    columns = ["target epochs", "attack", "AUC", "TPR@2%FPR", "TPR@5%FPR"]
    rows = []
    for epochs in study.target_epochs:
        target = train_tiny_lm(members, tokenizer, epochs, study, 0, root)
        report = FragmentAuditor(target, shadow, [world], tokenizer, seed=study.seed).run(attack)
        for attack_name, metrics in report.metrics.items():
            rows.append(
                [
                    epochs,
                    attack_name,
                    f"{metrics['auc']:.4f}",
                    f"{metrics['tpr@2%fpr']:.4f}",
                    f"{metrics['tpr@5%fpr']:.4f}",
                ]
            )
        print(f"PRISM study: target trained {epochs} epochs audited", flush=True)
    return columns, rows


def run_data_audit(overlap: OverlapStudy, prism: PrismStudy, output_dir: str, logger=None):
    """Both studies; prints the tables, writes ``output_dir/data_audit.{md,json}`` and the
    overlap report, and logs the tables to ``logger`` (a ``WandbLogger``) when given."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    tables: dict[str, tuple[list[str], list[list]]] = {}
    if overlap.enabled:
        print("data audit: train-test overlap ...", flush=True)
        report, planted = overlap_study(overlap)
        write_report(report, out / "overlap_report")
        tables[f"train-test overlap (N = {overlap.n}, HELM metrics, means)"] = (
            report.summary_table()
        )
        tables[f"planted contamination ({overlap.planted_fraction:.0%} of stdlib-A)"] = planted
    if prism.enabled:
        print("data audit: fragment extraction (PRISM) ...", flush=True)
        tables["fragment extraction: attacks on targets fine-tuned for several epochs"] = (
            prism_study(prism, str(out / "prism_models"))
        )
    text = "\n\n".join(f"{title}\n\n{markdown_table(*t)}" for title, t in tables.items())
    print(f"\n{text}\n", flush=True)
    (out / "data_audit.md").write_text(text + "\n")
    (out / "data_audit.json").write_text(
        json.dumps({title: {"columns": c, "rows": r} for title, (c, r) in tables.items()}) + "\n"
    )
    if logger is not None:
        keyed = {f"data_audit/table_{i}": table for i, table in enumerate(tables.values())}
        log_wandb_tables([logger], keyed)
    return tables
