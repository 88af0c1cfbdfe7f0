"""The DocKS-RAG recipe's study: the paper's ablation of the hybrid prompt.

For each prompt variant (``plain``: the document alone; ``docks_kg``: + the DocKG subgraph;
``set_rag``: + the SetRAG sentences; ``hybrid``: both) and each seed, a causal LM is tuned on
that variant's prompts of the training documents (``DocKSRAG`` on a ``DocREDDataModule``) and
tested on the held-out documents: official F1 and Ign F1, mean ± std over seeds. The DocKG
scorer's own triples on the held-out documents are scored too, as a reference line.

Without ``model`` the language model is built here: a byte-level BPE tokenizer and a small
GPT-2 (``lm.tiny_lm``), pretrained for ``pretrain_epochs`` on the training documents' text with
their facts written as triples (so that, like an LLM, it knows the words of the answers before
tuning); every variant and seed starts from that same pretrained model (pretrained once per
process). With ``model`` (a Hugging Face name or path, loaded with ``model_kwargs``) that model
and its tokenizer are tuned instead; ``trainer`` adds Trainer settings (``accelerator``,
``precision``), as ``recipes/docks_rag_gpu.yaml`` does.
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch.utils.data import DataLoader

from lab.lm_training import fit_causal_lm
from lab.study import Study, StudyResult, run_jobs, seeded_trainer
from lightning_info.core.logging import mean_std
from lightning_info.core.options import AdamWOptions
from lightning_info.core.plotting import pyplot
from lightning_info.lm.tiny_lm import load_causal_lm, sized_causal_lm, train_bpe_tokenizer
from lightning_info.methods.docks_rag.datamodule import (
    DocKGOptions,
    DocREDDataModule,
    DocREDSource,
    HybridPromptOptions,
)
from lightning_info.methods.docks_rag.functional import (
    docred_scores,
    document_text,
    serialise_triples,
)
from lightning_info.methods.docks_rag.module import DocKSRAG

VARIANTS = {
    "plain": ("plain document", False, False),
    "docks_kg": ("+ DocKG", True, False),
    "set_rag": ("+ SetRAG", False, True),
    "hybrid": ("+ DocKG + SetRAG (DocKS-RAG)", True, True),
}
"""variant -> (table name, use_kg, use_set_rag)."""

PROMPT_WORDS = ("Document:", "Graph:", "Related:", "Question:", "Relation:", "nothing", "none")


@dataclass(frozen=True)
class VariantJob:
    """One prompt variant and seed of a :class:`DocKSRAGStudy`, with the study's data, model,
    pretraining and tuning settings (``data`` holds ``max_length`` unless it sets its own)."""

    variant: str
    seed: int
    data: dict[str, Any]
    model: str
    model_kwargs: dict[str, Any]
    size: dict[str, int]
    vocab_size: int
    pretrain_epochs: int
    pretrain_lr: float
    lora: dict[str, Any] | None
    epochs: int
    lr: float
    max_length: int
    threads: int
    trainer: dict[str, Any]
    root: str | None


def _pretraining_texts(documents, relations) -> list[str]:
    texts = []
    for d in documents:
        facts = [(label["h"], label["r"], label["t"]) for label in d.get("labels", [])]
        texts.append(
            document_text(d) + " Facts: " + "; ".join(serialise_triples(d, facts, relations))
        )
    return texts


_PRETRAINED: dict[str, tuple[Any, Any]] = {}
"""The small GPT-2 pretrained in this process, by its settings (every job of a study shares it)."""

_PRETRAINING_KEYS = ("vocab_size", "size", "max_length", "pretrain_epochs", "pretrain_lr")


def _language_model(job: VariantJob) -> tuple[Any, Any]:
    """``(model, tokenizer)``: the named model (loaded with ``job.model_kwargs``), or a copy
    of the small GPT-2 pretrained on the training documents (module docstring), deterministic
    given the job's settings and pretrained once per process."""
    if job.model:
        return load_causal_lm(job.model, **job.model_kwargs)
    settings = {k: getattr(job, k) for k in _PRETRAINING_KEYS}
    settings["source"] = job.data.get("source", {})
    key = json.dumps(settings, sort_keys=True)
    if key not in _PRETRAINED:
        _PRETRAINED.clear()  # one study's model at a time
        _PRETRAINED[key] = _pretrained_model(job)
    return copy.deepcopy(_PRETRAINED[key])


def _pretrained_model(job: VariantJob) -> tuple[Any, Any]:
    train, _, relations = DocREDSource(**job.data.get("source", {})).load()
    texts = _pretraining_texts(train, relations)
    words = " | ".join([*PROMPT_WORDS, *relations.values()])
    tokenizer = train_bpe_tokenizer(texts + [words] * 20, vocab_size=job.vocab_size)
    model = sized_causal_lm(tokenizer, job.size, n_positions=job.max_length, seed=0)
    encoded = tokenizer(
        texts, padding=True, truncation=True, max_length=job.max_length, return_tensors="pt"
    )
    labels = encoded["input_ids"].masked_fill(encoded["attention_mask"] == 0, -100)
    rows = [
        {"input_ids": i, "attention_mask": a, "labels": y}
        for i, a, y in zip(encoded["input_ids"], encoded["attention_mask"], labels)
    ]
    loader = DataLoader(rows, batch_size=8, shuffle=True)
    model = fit_causal_lm(model, loader, epochs=job.pretrain_epochs, lr=job.pretrain_lr, seed=0)
    return model, tokenizer


def run_variant(job: VariantJob) -> dict[str, Any]:
    """One prompt variant and seed: tune, then the held-out F1 and Ign F1 (and, for the hybrid
    variant, the DocKG scorer's own scores); the job's fields with them."""
    torch.set_num_threads(job.threads)
    _, use_kg, use_set_rag = VARIANTS[job.variant]
    settings = dict(job.data, seed=job.seed)
    settings["source"] = DocREDSource(**settings.get("source", {}))
    parts = {**settings.get("prompt", {}), "use_kg": use_kg, "use_set_rag": use_set_rag}
    settings["prompt"] = HybridPromptOptions(**parts)
    settings["knowledge"] = DocKGOptions(**settings.get("knowledge", {}))
    model, tokenizer = _language_model(job)
    data = DocREDDataModule(tokenizer, **settings)
    module = DocKSRAG(model, tokenizer, lora=job.lora, optimizer=AdamWOptions(lr=job.lr))
    trainer = seeded_trainer(job, limit_val_batches=0, **job.trainer)
    trainer.fit(module, datamodule=data)
    scores = trainer.test(module, datamodule=data, verbose=False)[0]
    out = {
        **asdict(job),
        "f1": scores["test/f1"],
        "ign_f1": scores["test/ign_f1"],
        "precision": scores["test/precision"],
        "recall": scores["test/recall"],
    }
    if use_kg:
        held_out = data.knowledge.triples[len(data.train_documents) :]
        predictions = [
            {"title": d["title"], "h_idx": h, "t_idx": t, "r": r}
            for d, triples in zip(data.dev_documents, held_out)
            for h, r, t in triples
        ]
        kg = docred_scores(predictions, data.dev_documents, data.train_facts)
        out["kg_f1"], out["kg_ign_f1"] = kg["f1"], kg["ign_f1"]
    return out


@dataclass
class DocKSRAGStudy(Study):
    """The prompt variants side by side (module docstring).

    Args:
        variants: of :data:`VARIANTS`.
        seeds: tuning seeds (the data and the pretrained model are shared).
        data: ``DocREDDataModule`` arguments, its option groups as dicts: ``source``
            (``DocREDSource``: files, sizes), ``prompt`` (``HybridPromptOptions``: ``top_k``;
            each variant sets ``use_kg`` and ``use_set_rag``), ``knowledge`` (``DocKGOptions``:
            ``tau``, folds, steps, encoder).
        model: a Hugging Face causal LM name or path; empty: the small GPT-2 of ``size``.
        model_kwargs: ``from_pretrained`` arguments of a named model (``{dtype: bfloat16}``).
        size: ``layers``, ``width``, ``heads`` of the small GPT-2; vocab_size its tokenizer's.
        pretrain_epochs, pretrain_lr: its pretraining.
        lora: ``peft.LoraConfig`` arguments, or ``None`` to tune every weight.
        epochs, lr: the tuning.
        max_length: the model's context.
        workers: processes running variants side by side; threads: torch threads in each.
        trainer: more ``Trainer`` settings of each tuning run (``{accelerator: gpu,
            precision: bf16-mixed}``); by default one device, ``accelerator="auto"``.
    """

    variants: list[str] = field(default_factory=lambda: list(VARIANTS))
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    data: dict[str, Any] = field(default_factory=dict)
    model: str = ""
    model_kwargs: dict[str, Any] = field(default_factory=dict)
    size: dict[str, int] = field(default_factory=lambda: {"layers": 2, "width": 64, "heads": 4})
    vocab_size: int = 2000
    pretrain_epochs: int = 20
    pretrain_lr: float = 3e-3
    lora: dict[str, Any] | None = None
    epochs: int = 3
    lr: float = 3e-3
    max_length: int = 512
    workers: int = 2
    threads: int = 1
    trainer: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = [v for v in self.variants if v not in VARIANTS]
        if unknown or not self.variants:
            raise ValueError(f"variants must be some of {list(VARIANTS)}, got {self.variants}")
        if not self.seeds:
            raise ValueError("seeds must be non-empty")
        if self.epochs < 1 or self.pretrain_epochs < 0:
            raise ValueError("epochs must be >= 1 and pretrain_epochs >= 0")

    def run(self, cli=None) -> StudyResult:
        root = str(cli.output_dir) if cli is not None else None
        data = {"max_length": self.max_length, **self.data}
        jobs = [
            VariantJob(
                variant=v,
                seed=s,
                data=data,
                model=self.model,
                model_kwargs=self.model_kwargs,
                size=self.size,
                vocab_size=self.vocab_size,
                pretrain_epochs=self.pretrain_epochs,
                pretrain_lr=self.pretrain_lr,
                lora=self.lora,
                epochs=self.epochs,
                lr=self.lr,
                max_length=self.max_length,
                threads=self.threads,
                trainer=self.trainer,
                root=root,
            )
            for v in self.variants
            for s in self.seeds
        ]

        def describe(r: dict[str, Any]) -> str:
            return (
                f"{VARIANTS[r['variant']][0]} seed={r['seed']}: F1 {r['f1']:.4f}, "
                f"Ign F1 {r['ign_f1']:.4f}"
            )

        records = run_jobs(run_variant, jobs, self.workers, describe)
        tables = {"held-out relation extraction (official DocRED scores)": self._table(records)}
        return StudyResult(tables, {"f1": self._figure(records)}, records)

    def _table(self, records):
        columns = ["prompt", "F1", "Ign F1", "precision", "recall"]
        rows = []
        for variant in self.variants:
            runs = [r for r in records if r["variant"] == variant]
            rows.append(
                [
                    VARIANTS[variant][0],
                    *(
                        mean_std([r[k] for r in runs])
                        for k in ("f1", "ign_f1", "precision", "recall")
                    ),
                ]
            )
        with_kg = [v for v in self.variants if VARIANTS[v][1]]
        if with_kg:  # the DocKG of a seed is the same in every variant that uses it
            kg = [r for r in records if r["variant"] == with_kg[0]]
            rows.append(
                [
                    "DocKG scorer alone (its kept triples)",
                    mean_std([r["kg_f1"] for r in kg]),
                    mean_std([r["kg_ign_f1"] for r in kg]),
                    "-",
                    "-",
                ]
            )
        return columns, rows

    def _figure(self, records):
        plt = pyplot()
        figure, axis = plt.subplots(figsize=(6.4, 3.6))
        names = [VARIANTS[v][0] for v in self.variants]
        for offset, (key, label) in enumerate((("f1", "F1"), ("ign_f1", "Ign F1"))):
            values = [[r[key] for r in records if r["variant"] == v] for v in self.variants]
            means = [sum(v) / len(v) for v in values]
            spread = [max(v) - min(v) for v in values]
            axis.bar(
                [i + 0.4 * offset for i in range(len(names))],
                means,
                width=0.4,
                yerr=[s / 2 for s in spread],
                label=label,
            )
        axis.set_xticks([i + 0.2 for i in range(len(names))], names, rotation=15, fontsize=7)
        axis.set(ylabel="held-out score", ylim=(0, 1))
        axis.legend()
        figure.tight_layout()
        return figure


__all__ = ["VARIANTS", "DocKSRAGStudy", "VariantJob", "run_variant"]
