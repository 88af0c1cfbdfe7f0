"""The Graph4MM recipe's study: Graph4MM against its ablations on the digit graphs, both tasks.

For each seed, the data module (``MultimodalGraphDataModule``, digit graphs) and a small GPT-2
(``lm.tiny_lm``) are built, and the GPT-2 is first trained as a language model of the domain on
*fully captioned* graphs (every neighbour's digit written in its text, so the LM learns to read
the linked nodes' words and list them in order; it never sees an image). That LM is then frozen
and shared by every arm, each of which trains its own parts (Q-Former, image encoder, node-label
head and, in the default config, LoRA adapters of the same rank) on the real graphs, where half
of the nodes show their digit only as an image and two-hop nodes hang off the neighbours:

- ``graph4mm``: the MM-QFormer with hop-diffused joint attention over the graph;
- ``agnostic``: the same Q-Former, plain joint attention (no graph);
- ``image_only``: a Q-Former over the images alone;
- ``text_only``: no queries, the LM reads the neighbours' texts in the prompt (every arm gets
  that prompt).

Each arm is tested on the held-out graphs (unseen images): generation of the neighbours' digit
words (teacher-forced token accuracy, ROUGE-L F1 and exact match of the greedy decoding) and the
centre's digit (accuracy). Every number is mean ± std over seeds; validation every
``val_every`` epochs gives the learning curves (W&B line plots).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch
from lightning.pytorch import Callback
from torch.utils.data import DataLoader

from lab.lm_training import fit_causal_lm
from lab.study import Study, StudyResult, run_jobs, seeded_trainer
from lightning_info.core.logging import mean_std
from lightning_info.core.options import AdamWOptions
from lightning_info.core.plotting import pyplot
from lightning_info.lm.features import pad_token_rows
from lightning_info.lm.tiny_lm import sized_causal_lm
from lightning_info.methods.graph4mm.datamodule import (
    DigitGraphOptions,
    MultimodalGraphDataModule,
)
from lightning_info.methods.graph4mm.encoders import SmallConvEncoder
from lightning_info.methods.graph4mm.graphs import DIGIT_WORDS
from lightning_info.methods.graph4mm.module import Graph4MM, variant_qformer

__all__ = [
    "ArmJob",
    "Graph4MMStudy",
    "ValidationCurves",
    "build_data",
    "build_model",
    "merge_settings",
    "model_options",
    "run_arm",
]

METRICS = {
    "test/token_accuracy": "token accuracy",
    "test/rougel": "ROUGE-L",
    "test/exact_match": "exact match",
    "test/accuracy": "node-label accuracy",
}
LABELS = {
    "graph4mm": "Graph4MM (hop-diffused Q-Former)",
    "series": "Graph4MM, the reference's series (no remainder)",
    "rescaled": "Graph4MM, rescaled series",
    "agnostic": "graph-agnostic Q-Former",
    "image_only": "image-only Q-Former",
    "text_only": "text-only LM",
}


def bayes_label_accuracy(graphs, captioned_only: bool = False) -> float:
    """Expected accuracy of the Bayes-optimal guess of each centre's digit from its neighbours'
    digits (all of them, or only those written in a caption): under ``digit_graphs`` a
    neighbour shares the centre's digit with probability ``h + (1 - h) / 10`` and shows any other
    with ``(1 - h) / 10``, so for ``h > 0`` the posterior's mode is the most frequent digit among
    the neighbours; ties are broken uniformly (1 / ties when the true digit is among them), and
    no visible neighbour leaves the uniform guess (1 / 10). The ceiling of the node-label
    accuracy for a model that reads every neighbour perfectly (or only the captions)."""
    total = 0.0
    for graph in graphs:
        if captioned_only:
            words = [
                w
                for v in graph.neighbours()
                if not bool(graph.has_image[v])
                for w in graph.texts[v].split()
                if w in DIGIT_WORDS
            ]
        else:
            words = graph.target.split()
        counts = Counter(DIGIT_WORDS.index(w) for w in words)
        if not counts:
            total += 1 / len(DIGIT_WORDS)
            continue
        top = max(counts.values())
        modes = [c for c, n in counts.items() if n == top]
        total += (graph.label in modes) / len(modes)
    return total / len(graphs)


def build_data(settings: dict[str, Any], seed: int):
    """The ``MultimodalGraphDataModule`` of ``settings`` (its arguments; ``digits`` as a dict of
    ``DigitGraphOptions`` fields)."""
    settings = dict(settings)
    if isinstance(settings.get("digits"), dict):
        settings["digits"] = DigitGraphOptions(**settings["digits"])
    return MultimodalGraphDataModule(seed=seed, **settings)


def merge_settings(shared: dict[str, Any], arm: dict[str, Any]) -> dict[str, Any]:
    """``shared`` updated by ``arm``; the groups (``qformer``, ``optimizer``, ``image_encoder``)
    given as dicts on both sides are merged key by key."""
    merged = dict(shared, **arm)
    for key in ("qformer", "optimizer", "image_encoder"):
        if isinstance(shared.get(key), dict) and isinstance(arm.get(key), dict):
            merged[key] = dict(shared[key], **arm[key])
    return merged


def model_options(settings: dict[str, Any]) -> dict[str, Any]:
    """``Graph4MM`` keyword arguments from a study's settings, where ``optimizer`` holds
    ``AdamWOptions`` fields and ``qformer`` the arguments of ``variant_qformer`` (sizes, and
    ``hop`` for the graph4mm variant), both as dicts; builds no parameters (an
    ``image_encoder`` dict is left to :func:`build_model`)."""
    settings = dict(settings)
    if isinstance(settings.get("optimizer"), dict):
        settings["optimizer"] = AdamWOptions(**settings["optimizer"])
    if isinstance(settings.get("qformer"), dict):
        settings["qformer"] = variant_qformer(
            settings.get("variant", "graph4mm"), **settings["qformer"]
        )
    return settings


def build_model(lm, data, settings: dict[str, Any]):
    """The ``Graph4MM`` of one arm over ``lm`` and ``data``'s tokenizer and classes:
    ``settings`` as for :func:`model_options`, plus ``image_encoder`` as a dict of
    ``SmallConvEncoder`` arguments (built only for variants that read images)."""
    settings = model_options(settings)
    encoder = settings.get("image_encoder")
    if isinstance(encoder, dict):
        reads_images = settings.get("variant", "graph4mm") != "text_only"
        settings["image_encoder"] = SmallConvEncoder(**encoder) if reads_images else None
    return Graph4MM(lm, data.tokenizer, num_classes=data.num_classes, **settings)


def domain_corpus(data, count: int, seed: int) -> list[tuple[str, str]]:
    """``(prompt, target)`` pairs of ``count`` fully captioned digit graphs (every non-centre
    node a text node), drawn with ``data``'s graph settings from its training images."""
    captioned = MultimodalGraphDataModule(
        tokenizer=data.tokenizer,
        num_train=count,
        num_val=1,
        num_test=0,
        digits=replace(data.digits, text_node_rate=1.0),
        prompt=data.prompt,
        seed=seed,
    )
    return [(captioned.prompt_text(g), " " + g.target) for g in captioned.train_graphs]


def pretrain_language_model(
    data,
    *,
    lm: dict[str, int],
    corpus: int,
    epochs: int,
    lr: float,
    seed: int,
    root: str | None = None,
):
    """A GPT-2 of size ``lm`` (``layers``, ``width``, ``heads``) trained for ``epochs`` at
    ``lr`` on ``corpus`` graphs of the domain corpus (``domain_corpus``, drawn with seed
    ``1000 + seed``), in eval mode."""
    tokenizer = data.tokenizer
    rows = []
    for prompt, target in domain_corpus(data, corpus, seed=1000 + seed):
        p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        t = tokenizer(target, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        rows.append((p, t))

    def collate(batch):
        ids, mask = pad_token_rows([p + t for p, t in batch], tokenizer.pad_token_id)
        labels, _ = pad_token_rows([[-100] * len(p) + t for p, t in batch], -100)
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}

    model = sized_causal_lm(tokenizer, lm, seed=seed)
    loader = DataLoader(rows, batch_size=32, shuffle=True, collate_fn=collate)
    return fit_causal_lm(model, loader, epochs=epochs, lr=lr, seed=seed, root=root)


class ValidationCurves(Callback):
    """After every validation epoch (and after the module logged), ``(epoch, ROUGE-L,
    node-label accuracy)`` of the validation graphs (``points``)."""

    def __init__(self) -> None:
        self.points: list[tuple[int, float, float]] = []

    def on_validation_end(self, trainer, module) -> None:
        if not trainer.sanity_checking:
            m = trainer.callback_metrics
            self.points.append(
                (trainer.current_epoch + 1, float(m["val/rougel"]), float(m["val/accuracy"]))
            )


@dataclass(frozen=True)
class ArmJob:
    """One arm and seed of a :class:`Graph4MMStudy`: the arm's name and ``Graph4MM`` arguments,
    and the study's data, model, language-model and training settings (``clip``: its
    ``gradient_clip_val``)."""

    arm: str
    arm_settings: dict[str, Any]
    seed: int
    data: dict[str, Any]
    model: dict[str, Any]
    lm: dict[str, int]
    lm_epochs: int
    lm_lr: float
    corpus: int
    epochs: int
    val_every: int
    clip: float | None
    threads: int
    root: str | None


def run_arm(job: ArmJob) -> dict[str, Any]:
    """One arm and seed: build the data and the domain LM, train the arm, test it."""
    torch.set_num_threads(job.threads)
    data = build_data(job.data, job.seed)
    lm = pretrain_language_model(
        data,
        lm=job.lm,
        corpus=job.corpus,
        epochs=job.lm_epochs,
        lr=job.lm_lr,
        seed=job.seed,
        root=job.root,
    )
    model = build_model(lm, data, merge_settings(job.model, job.arm_settings))
    curves = ValidationCurves()
    trainer = seeded_trainer(
        job,
        check_val_every_n_epoch=job.val_every,
        callbacks=[curves],
        gradient_clip_val=job.clip,
    )
    start = time.perf_counter()
    trainer.fit(model, datamodule=data)
    seconds = time.perf_counter() - start
    scores = trainer.test(model, datamodule=data, verbose=False)[0]
    generated = model.generate(data.collate(data.test_graphs[:1]))[0]
    bayes = {
        "all": bayes_label_accuracy(data.test_graphs),
        "captioned": bayes_label_accuracy(data.test_graphs, captioned_only=True),
    }
    return {
        "arm": job.arm,
        "seed": job.seed,
        "fit_seconds": seconds,
        "bayes": bayes,
        "scores": {k: float(v) for k, v in scores.items()},
        "curves": curves.points,
        "example": {"target": data.test_graphs[0].target, "generated": generated},
    }


@dataclass
class Graph4MMStudy(Study):
    """Graph4MM and its ablations (module docstring).

    Args:
        arms: name -> ``Graph4MM`` arguments of that arm (e.g. ``{variant: agnostic}``, or
            ``{variant: graph4mm, qformer: {hop: {remainder: false}}}``); names in ``LABELS``
            get readable table rows.
        seeds: each builds its own graphs, LM and arm weights.
        data: ``MultimodalGraphDataModule`` arguments (``source`` stays ``digits``;
            ``digits``: ``DigitGraphOptions`` fields).
        model: ``Graph4MM`` arguments shared by every arm, updated by each arm's (groups merged
            key by key): ``qformer``: ``variant_qformer`` arguments (``dim``,
            ``num_queries``, ``layers``, ``heads``, ``ffn_mult``, and ``hop``, used by the
            graph4mm arms only); ``image_encoder``: ``SmallConvEncoder`` arguments;
            ``optimizer``: ``AdamWOptions`` fields; ``lora``, ``task``, ``max_new_tokens``...
        lm: ``layers``, ``width``, ``heads`` of the GPT-2; lm_epochs, lm_lr, corpus: its
            training on ``corpus`` fully captioned graphs.
        epochs: each arm's training; val_every: epochs between validations (learning curves);
            gradient_clip_val: the trainer's gradient-norm clipping (``None``: off).
        workers: processes running (arm, seed) jobs side by side; threads: torch threads each.
    """

    arms: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {
            name: {"variant": name} for name in ("graph4mm", "agnostic", "image_only", "text_only")
        }
    )
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    data: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)
    lm: dict[str, int] = field(default_factory=lambda: {"layers": 2, "width": 64, "heads": 4})
    lm_epochs: int = 3
    lm_lr: float = 3e-3
    corpus: int = 4000
    epochs: int = 10
    val_every: int = 2
    gradient_clip_val: float | None = 1.0
    workers: int = 2
    threads: int = 1

    def __post_init__(self) -> None:
        if not self.arms or not self.seeds:
            raise ValueError("arms and seeds must be non-empty")
        if self.data.get("source", "digits") != "digits":
            raise ValueError("the study builds its domain corpus from the digit graphs")
        if self.epochs < 1 or self.val_every < 1 or self.lm_epochs < 1 or self.corpus < 1:
            raise ValueError("epochs, val_every, lm_epochs and corpus must be at least 1")
        for settings in self.arms.values():  # bad options fail here, before any training
            model_options(merge_settings(self.model, settings))

    def run(self, cli=None) -> StudyResult:
        root = str(cli.output_dir) if cli is not None else None
        jobs = [
            ArmJob(
                arm=name,
                arm_settings=settings,
                seed=seed,
                data=self.data,
                model=self.model,
                lm=self.lm,
                lm_epochs=self.lm_epochs,
                lm_lr=self.lm_lr,
                corpus=self.corpus,
                epochs=self.epochs,
                val_every=self.val_every,
                clip=self.gradient_clip_val,
                threads=self.threads,
                root=root,
            )
            for seed in self.seeds
            for name, settings in self.arms.items()
        ]

        def describe(r: dict[str, Any]) -> str:
            s = r["scores"]
            return (
                f"{r['arm']} seed={r['seed']}: ROUGE-L {s['test/rougel']:.3f}, exact "
                f"{s['test/exact_match']:.3f}, label accuracy {s['test/accuracy']:.3f}; "
                f"'{r['example']['generated']}' for '{r['example']['target']}'"
            )

        records = run_jobs(run_arm, jobs, self.workers, describe)
        title = "neighbours' digit words (generation) and the centre's digit (classification)"
        return StudyResult(
            {title: self._table(records)},
            {"scores": self._figure(records)},
            records,
            self._line_plots(records),
        )

    def _runs(self, records, arm):
        return [r for r in records if r["arm"] == arm]

    def _table(self, records):
        columns = ["arm", *METRICS.values(), "fit seconds"]
        rows = []
        for arm in self.arms:
            runs = self._runs(records, arm)
            rows.append(
                [
                    LABELS.get(arm, arm),
                    *(mean_std([r["scores"][key] for r in runs]) for key in METRICS),
                    f"{sum(r['fit_seconds'] for r in runs) / len(runs):.0f}",
                ]
            )
        first = [r for r in records if r["arm"] == next(iter(self.arms))]  # one per seed
        for key, name in (
            ("all", "Bayes from every neighbour's digit (reference)"),
            ("captioned", "Bayes from the captioned neighbours (reference)"),
        ):
            rows.append([name, "-", "-", "-", mean_std([r["bayes"][key] for r in first]), "-"])
        return columns, rows

    def _line_plots(self, records):
        plots = {}
        for index, key in ((1, "val_rougel"), (2, "val_accuracy")):
            series, epochs = {}, []
            for arm in self.arms:
                runs = self._runs(records, arm)
                epochs = [p[0] for p in runs[0]["curves"]]
                series[LABELS.get(arm, arm)] = [
                    sum(r["curves"][i][index] for r in runs) / len(runs) for i in range(len(epochs))
                ]
            plots[key] = ("epoch", epochs, series)
        return plots

    def _figure(self, records):
        plt = pyplot()
        figure, axis = plt.subplots(figsize=(8, 3.5))
        width = 0.8 / len(self.arms)
        for i, arm in enumerate(self.arms):
            runs = self._runs(records, arm)
            values = np.array([[r["scores"][key] for key in METRICS] for r in runs])
            std = values.std(0, ddof=1) if len(runs) > 1 else np.zeros(len(METRICS))
            axis.bar(
                np.arange(len(METRICS)) + i * width,
                values.mean(0),
                width,
                yerr=std,
                label=LABELS.get(arm, arm),
                capsize=2,
            )
        axis.set_xticks(
            np.arange(len(METRICS)) + width * (len(self.arms) - 1) / 2, list(METRICS.values())
        )
        axis.set(ylim=(0, 1), ylabel="test score (mean ± std over seeds)")
        axis.legend(fontsize=7)
        figure.tight_layout()
        return figure
