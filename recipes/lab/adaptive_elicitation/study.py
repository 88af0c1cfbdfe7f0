"""The adaptive-elicitation recipe's study: target accuracy and NLL against the number of
questions asked, for each selection policy, on the latent-type world and on the digits.

For each world and seed a small GPT-2 (``lm.tiny_lm``) is meta-trained as ``ElicitationLM`` on
the training entities (``ElicitationDataModule``), then the held-out test entities are questioned
``steps`` times by each policy (``evaluation.elicitation_curves``): the LM chooses every question
(EIG, lookahead, answer entropy or at random) and predicts the target questions. The reference
model choosing by EIG and predicting itself is the upper reference line: on the latent-type world
the exact posterior (``ExactPosteriorModel``), on the digits the empirical conditional of the
training entities (``EmpiricalPredictiveModel``). With the digits' ``shifts`` those are the
training images' shifted copies the LM trains on, and a second line gives the empirical
predictive of the unshifted training images alone. The LM's predictive is compared with the
reference's: the mean ``KL(reference || LM)`` over the test entities' targets after
``0 .. steps`` random questions.
Every number is a mean over the test entities, then mean ± std over seeds.
With ``model`` (a Hugging Face causal LM name or local folder) that pretrained model and its
tokenizer are meta-trained instead of the small GPT-2 (``lora`` for adapters only; ``trainer``
for ``accelerator`` and ``precision``), as ``recipes/adaptive_elicitation_gpu.yaml`` does.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import torch

from lab.study import Study, StudyResult, run_jobs, seeded_trainer
from lightning_info.core.logging import mean_std
from lightning_info.core.options import AdamWOptions
from lightning_info.core.plotting import pyplot
from lightning_info.lm.tiny_lm import load_causal_lm, sized_causal_lm, train_bpe_tokenizer
from lightning_info.methods.adaptive_elicitation.datamodule import (
    DigitQuestionOptions,
    ElicitationDataModule,
    LatentWorldOptions,
)
from lightning_info.methods.adaptive_elicitation.entities import latent_world_questions
from lightning_info.methods.adaptive_elicitation.evaluation import elicitation_curves
from lightning_info.methods.adaptive_elicitation.functional import POLICIES
from lightning_info.methods.adaptive_elicitation.module import ElicitationLM
from lightning_info.methods.adaptive_elicitation.sequences import LMPredictive
from lightning_info.methods.adaptive_elicitation.world import (
    EmpiricalPredictiveModel,
    ExactPosteriorModel,
)

__all__ = ["ElicitationStudy", "WorldJob", "run_world"]

LABELS = {
    "eig": "EIG (LM)",
    "lookahead": "lookahead (LM)",
    "max_entropy": "max answer entropy (LM)",
    "random": "random (LM)",
    "reference": "reference EIG (exact / empirical)",
    "reference_unshifted": "reference EIG (empirical, unshifted images)",
}


@dataclass(frozen=True)
class WorldJob:
    """One world and seed of an :class:`ElicitationStudy`: the world's data-module arguments,
    targets and candidates (empty: all but the targets), and the study's questioning, model and
    meta-training settings (``epochs``: the world's)."""

    world: str
    seed: int
    data: dict[str, Any]
    targets: list[int]
    candidates: list[int]
    policies: list[str]
    steps: int
    entities: int
    depth: int
    size: dict[str, int]
    epochs: int
    lr: float
    optimizer: dict[str, Any]
    model: str
    model_kwargs: dict[str, Any]
    lora: dict[str, Any] | None
    trainer: dict[str, Any]
    predictive_batch: int
    threads: int
    root: str | None


def _train(job: WorldJob):
    """The data module, the meta-trained LM of one world and seed (on the device it trained on)
    and its test scores."""
    torch.set_num_threads(job.threads)
    settings = dict(job.data, source=job.world, seed=job.seed)
    latent = settings["latent"] = LatentWorldOptions(**settings.get("latent", {}))
    digits = settings["digits"] = DigitQuestionOptions(**settings.get("digits", {}))
    if job.world == "latent":
        texts = latent_world_questions(latent.num_questions)
    else:
        texts = digits.questions()
    if job.model:  # a pretrained LM: the data module adds its tokens to the tokenizer
        model, tokenizer = load_causal_lm(job.model, **job.model_kwargs)
        data = ElicitationDataModule(tokenizer, **settings)
        model.resize_token_embeddings(len(tokenizer))
    else:
        tokenizer = train_bpe_tokenizer(texts * 5, vocab_size=300)
        data = ElicitationDataModule(tokenizer, **settings)
        model = sized_causal_lm(tokenizer, job.size, seed=job.seed)
    optimizer = AdamWOptions(**{"lr": job.lr, "warmup_fraction": 0.05, **job.optimizer})
    module = ElicitationLM(model, data.bank.answer_ids, optimizer=optimizer, lora=job.lora)
    trainer = seeded_trainer(job, check_val_every_n_epoch=job.epochs, **job.trainer)
    trainer.fit(module, datamodule=data)
    scores = trainer.test(module, datamodule=data, verbose=False)[0]
    # the trainer hands the model back on the CPU; the questioning runs where it trained
    return data, module.model.to(trainer.strategy.root_device).eval(), scores


def _predictive_kl(exact, lm, answers, targets, candidates, steps, seed) -> list[float]:
    """Mean ``KL(exact || LM)`` of the targets' predictive after ``0 .. steps`` random answered
    candidates per entity."""
    rng = random.Random(seed)
    orders = [rng.sample(candidates, len(candidates)) for _ in range(answers.shape[0])]
    out = []
    for n in range(steps + 1):
        contexts = [[(q, int(row[q])) for q in order[:n]] for row, order in zip(answers, orders)]
        p, q = exact.predictive(contexts, targets), lm.predictive(contexts, targets)
        kl = torch.where(p > 0, p * (torch.log(p) - torch.log(q)), torch.zeros_like(p)).sum(-1)
        out.append(float(kl.mean()))
    return out


def run_world(job: WorldJob) -> dict[str, Any]:
    """One world and seed: meta-train, then every policy's curves on the test entities."""
    data, model, scores = _train(job)
    lm = LMPredictive(model, data.bank, batch_size=job.predictive_batch)
    entities = data.test_entities[: job.entities]
    answers = data.table.answers[entities]
    targets = list(job.targets)
    candidates = list(job.candidates) or [
        q for q in range(len(data.table.questions)) if q not in targets
    ]
    out = {
        "world": job.world,
        "seed": job.seed,
        "test_nll": scores["test/loss"],
        "test_accuracy": scores["test/accuracy"],
        "curves": {},
    }
    for policy in job.policies:
        curves = elicitation_curves(
            policy,
            lm,
            answers,
            candidates,
            targets,
            job.steps,
            rng=random.Random(job.seed),
            depth=job.depth,
        )
        out["curves"][policy] = {k: v.mean(0).tolist() for k, v in curves.items()}
    if data.world is not None:
        reference = ExactPosteriorModel(data.world)
    else:
        training = data.table.answers[data.train_entities]
        reference = EmpiricalPredictiveModel(training, data.table.num_answers)
    curves = elicitation_curves("eig", reference, answers, candidates, targets, job.steps)
    out["curves"]["reference"] = {k: v.mean(0).tolist() for k, v in curves.items()}
    if not torch.equal(data.train_entities, data.train_originals):  # shifted digits
        unshifted = EmpiricalPredictiveModel(
            data.table.answers[data.train_originals], data.table.num_answers
        )
        curves = elicitation_curves("eig", unshifted, answers, candidates, targets, job.steps)
        out["curves"]["reference_unshifted"] = {k: v.mean(0).tolist() for k, v in curves.items()}
    out["kl"] = _predictive_kl(reference, lm, answers, targets, candidates, job.steps, job.seed)
    return out


@dataclass
class ElicitationStudy(Study):
    """Elicitation curves of every policy on each world (module docstring).

    Args:
        worlds: ``latent`` and/or ``digits``.
        seeds: each trains its own LM (initialisation, split and block orders).
        policies: of ``functional.POLICIES``, run with the LM.
        steps: questions asked per entity; report_at: the table's columns.
        entities: test entities questioned per seed; depth: the lookahead's.
        targets: per world, the target question indices.
        candidates: per world, the candidate question indices (default: all but the targets).
        latent, digits: ``ElicitationDataModule`` arguments of each world, the world's options
            as a dict under its own name (``latent: {latent: {num_types: 3, ...}, num_val:
            200}``, ``digits: {digits: {region: 2, shift: 1}, ...}``: ``LatentWorldOptions``
            and ``DigitQuestionOptions`` fields).
        size: ``layers``, ``width``, ``heads`` of the GPT-2; epochs (per world), lr: its
            meta-training (AdamW, 5% warmup, cosine decay); optimizer: more
            ``AdamWOptions`` fields (``weight_decay``, ``betas``).
        model: a Hugging Face causal LM name or local folder meta-trained instead of the GPT-2
            (its tokenizer with it); model_kwargs: its ``from_pretrained`` arguments; lora:
            ``peft.LoraConfig`` arguments (``None``: every weight trains).
        trainer: more ``Trainer`` settings of the meta-training (``{accelerator: gpu,
            precision: bf16-mixed, gradient_clip_val: 1.0}``).
        predictive_batch: rows per forward pass when the LM predicts.
        workers: processes running (world, seed) jobs side by side; threads: torch threads each.
    """

    worlds: list[str] = field(default_factory=lambda: ["latent", "digits"])
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    policies: list[str] = field(
        default_factory=lambda: ["eig", "lookahead", "max_entropy", "random"]
    )
    steps: int = 5
    report_at: list[int] = field(default_factory=lambda: [0, 1, 3, 5])
    entities: int = 40
    depth: int = 2
    targets: dict[str, list[int]] = field(default_factory=dict)
    candidates: dict[str, list[int]] = field(default_factory=dict)
    latent: dict[str, Any] = field(default_factory=dict)
    digits: dict[str, Any] = field(default_factory=dict)
    size: dict[str, int] = field(default_factory=lambda: {"layers": 2, "width": 64, "heads": 4})
    epochs: dict[str, int] = field(default_factory=lambda: {"latent": 16, "digits": 5})
    lr: float = 3e-3
    optimizer: dict[str, Any] = field(default_factory=dict)
    model: str = ""
    model_kwargs: dict[str, Any] = field(default_factory=dict)
    lora: dict[str, Any] | None = None
    trainer: dict[str, Any] = field(default_factory=dict)
    predictive_batch: int = 512
    workers: int = 2
    threads: int = 1

    def __post_init__(self) -> None:
        if not self.worlds or any(w not in ("latent", "digits") for w in self.worlds):
            raise ValueError(f"worlds must be some of ['latent', 'digits'], got {self.worlds}")
        if not self.policies or any(p not in POLICIES for p in self.policies):
            raise ValueError(f"policies must be some of {list(POLICIES)}, got {self.policies}")
        if not self.seeds:
            raise ValueError("seeds must be non-empty")
        if self.steps < 1 or any(not 0 <= n <= self.steps for n in self.report_at):
            raise ValueError("steps must be >= 1 and report_at within 0..steps")
        missing = [w for w in self.worlds if not self.targets.get(w) or w not in self.epochs]
        if missing:
            raise ValueError(f"targets and epochs must be given for the worlds {missing}")

    def run(self, cli=None) -> StudyResult:
        root = str(cli.output_dir) if cli is not None else None
        jobs = [
            WorldJob(
                world=w,
                seed=s,
                data=getattr(self, w),
                targets=self.targets[w],
                candidates=self.candidates.get(w, []),
                policies=self.policies,
                steps=self.steps,
                entities=self.entities,
                depth=self.depth,
                size=self.size,
                epochs=self.epochs[w],
                lr=self.lr,
                optimizer=self.optimizer,
                model=self.model,
                model_kwargs=self.model_kwargs,
                lora=self.lora,
                trainer=self.trainer,
                predictive_batch=self.predictive_batch,
                threads=self.threads,
                root=root,
            )
            for w in self.worlds
            for s in self.seeds
        ]

        def describe(r: dict[str, Any]) -> str:
            curves = r["curves"]
            last = ", ".join(f"{p} {curves[p]['accuracy'][-1]:.3f}" for p in curves)
            return (
                f"{r['world']} seed={r['seed']}: LM test NLL {r['test_nll']:.4f}; "
                f"target accuracy after {self.steps}: {last}"
            )

        records = run_jobs(run_world, jobs, self.workers, describe)
        tables = {}
        for world in self.worlds:
            runs = [r for r in records if r["world"] == world]
            tables[f"{world}: target accuracy and NLL after n questions"] = self._curves(runs)
        title = "meta-trained LM: answer NLL and accuracy on test entities; KL(reference || LM)"
        tables[title] = self._fit(records)
        return StudyResult(
            tables, {"curves": self._figure(records)}, records, self._line_plots(records)
        )

    def _mean_curve(self, runs, policy, key) -> list[float]:
        return [
            sum(r["curves"][policy][key][n] for r in runs) / len(runs)
            for n in range(self.steps + 1)
        ]

    def _curves(self, runs):
        columns = [
            "policy",
            *(f"acc@{n}" for n in self.report_at),
            *(f"NLL@{n}" for n in self.report_at),
        ]
        rows = []
        for policy in runs[0]["curves"]:
            rows.append(
                [
                    LABELS[policy],
                    *(
                        mean_std([r["curves"][policy]["accuracy"][n] for r in runs])
                        for n in self.report_at
                    ),
                    *(
                        mean_std([r["curves"][policy]["nll"][n] for r in runs])
                        for n in self.report_at
                    ),
                ]
            )
        return columns, rows

    def _fit(self, records):
        columns = [
            "world",
            "test answer NLL",
            "test answer accuracy",
            *(f"KL@{n}" for n in self.report_at),
        ]
        rows = []
        for world in self.worlds:
            runs = [r for r in records if r["world"] == world]
            kl = [mean_std([r["kl"][n] for r in runs]) for n in self.report_at]
            rows.append(
                [
                    world,
                    mean_std([r["test_nll"] for r in runs]),
                    mean_std([r["test_accuracy"] for r in runs]),
                    *kl,
                ]
            )
        return columns, rows

    def _line_plots(self, records):
        plots = {}
        for world in self.worlds:
            runs = [r for r in records if r["world"] == world]
            for key in ("accuracy", "nll"):
                series = {LABELS[p]: self._mean_curve(runs, p, key) for p in runs[0]["curves"]}
                plots[f"{world}_{key}"] = ("questions asked", list(range(self.steps + 1)), series)
        return plots

    def _figure(self, records):
        plt = pyplot()
        figure, axes = plt.subplots(
            2, len(self.worlds), figsize=(5 * len(self.worlds), 6), squeeze=False
        )
        for column, world in enumerate(self.worlds):
            runs = [r for r in records if r["world"] == world]
            for row, (key, name) in enumerate(
                (("accuracy", "target accuracy"), ("nll", "target NLL (nats)"))
            ):
                axis = axes[row][column]
                for policy in runs[0]["curves"]:
                    axis.plot(
                        range(self.steps + 1),
                        self._mean_curve(runs, policy, key),
                        marker="o",
                        label=LABELS[policy],
                    )
                axis.set(xlabel="questions asked", ylabel=name, title=world)
        axes[0][0].legend(fontsize=7)
        figure.tight_layout()
        return figure
