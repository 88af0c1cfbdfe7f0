"""One-GPU check of the suite: the Fisher constraint under bf16 and FSDP, FisherSFT, the
diffusion Fisher and one training step of every LightningModule, on CUDA against the CPU.

Rows (one per check; see ``scripts/README.md``):

1. ``fisher_constraint/<mode>``: an ``InceptionTimeClassifier`` trained for a few steps with
   :class:`~lightning_info.FisherConstraint` (``32-true`` on the device, ``bf16-mixed``, and
   ``strategy="fsdp"`` on one device), and the same model on the same batches with Lightning's
   ``gradient_clip_val = sqrt(max_fisher)`` (``torch.nn.utils.clip_grad_norm_``). Passes when
   every step's rescaling ``||g_after|| / ||g_before||`` equals the closed form
   ``min(1, sqrt(max_fisher) / (||g_before|| + 1e-6))`` (to ``1e-4``) and the run stays finite;
   reports that difference, the largest parameter difference to the clipped run and the
   fraction of constrained steps.
2. ``fisher_sft/features``: response features of a tiny GPT-2 on the device against the CPU and
   the greedy selection on each (the library's path: features come back on the CPU). Passes
   when the picks are equal; where they part, only a near-tie passes: ``F(S)`` of the device's
   picks on the CPU features within ``1e-6`` (relative) of the CPU's.
   ``fisher_sft/selection-on-device``: ``fisher_greedy_select`` on features held on the device
   (the core allocates on its input's device; the CPU test runs it under a ``meta`` default
   device to prove it); passes on the CPU's picks.
3. ``diffusion_fisher/trace`` and ``/mvp``: ``diffusion_fisher_trace`` / ``diffusion_fisher_mvp``
   on the device against the CPU, float32; passes when ``max|a - b| / max|b| <= 1e-4``.
4. ``module/<name>``: one ``fast_dev_run`` training step of each LightningModule of the suite,
   built small here, on the device and on the CPU.

The time columns are seconds on the device and on the CPU; the ratio is CPU / device.
``--device cpu`` runs every check on the CPU against the CPU (rows that need CUDA are
skipped); ``--quick`` uses toy sizes. Exit code 1 when a check fails (skipped rows do not).

Usage::

    python scripts/gpu_check.py [--device cuda|cpu] [--quick] [--json PATH] [--out PATH]
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # every model here is built locally
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from harness import benchmark_parser, header, header_line, timed, write_json  # noqa: E402
from lightning.pytorch import Callback, Trainer  # noqa: E402
from lightning.pytorch.strategies import FSDPStrategy  # noqa: E402

from lightning_info.core.logging import markdown_table  # noqa: E402
from lightning_info.core.threads import torch_threads  # noqa: E402

FACTOR_TOLERANCE = 1e-4
RELATIVE_TOLERANCE = 1e-4
TIE_TOLERANCE = 1e-6
NEEDS_CUDA = "skipped: needs CUDA"


@dataclass
class Row:
    """One check: ``status`` is ``pass``, ``fail`` or ``skipped`` (needs CUDA); ``values`` its
    numbers."""

    check: str
    status: str = "pass"
    device_s: float | None = None
    cpu_s: float | None = None
    values: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.device_s is None or self.cpu_s is None or self.device_s <= 0:
            return None
        return self.cpu_s / self.device_s


def quiet_trainer(accelerator: str, **kwargs: Any) -> Trainer:
    return Trainer(
        accelerator=accelerator,
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        **kwargs,
    )


def accelerator_of(device: str) -> str:
    return "gpu" if device == "cuda" else "cpu"


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def finite(*numbers: float | None) -> bool:
    return all(n is not None and math.isfinite(n) for n in numbers)


# ------------------------------------------------------------------ 1. FisherConstraint
class GradientNorm(Callback):
    """Records ``||g||`` at ``on_before_optimizer_step`` (FSDP's own reduction under FSDP)."""

    def __init__(self) -> None:
        self.norms: list[float] = []

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        if isinstance(trainer.strategy, FSDPStrategy):
            norm = trainer.strategy.model.clip_grad_norm_(float("inf"))
        else:
            grads = [
                p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None
            ]
            norm = torch.nn.utils.get_total_norm(grads)
        self.norms.append(float(norm))


def constraint_setup(quick: bool):
    """The model factory, the loader and a bound that the first step exceeds."""
    from torch.utils.data import DataLoader, TensorDataset

    from lightning_info import InceptionTimeClassifier

    channels, classes = 6, 4
    length, samples, batch = (32, 24, 8) if quick else (256, 1280, 64)
    width, depth = (4, 3) if quick else (32, 6)
    steps = 3 if quick else 20
    g = torch.Generator().manual_seed(0)
    x = torch.randn(samples, channels, length, generator=g)
    y = torch.randint(0, classes, (samples,), generator=g)

    def model():
        torch.manual_seed(0)
        return InceptionTimeClassifier(
            channels, classes, num_filters=width, depth=depth, kernel_size=8, dropout=0.0
        )

    def loader():
        return DataLoader(TensorDataset(x, y), batch_size=batch, shuffle=False)

    probe = model()
    loss = torch.nn.functional.cross_entropy(probe(x[:batch]), y[:batch])
    loss.backward()
    first = float(torch.nn.utils.get_total_norm([p.grad for p in probe.parameters()]))
    return model, loader, (0.5 * first) ** 2, steps


def check_fisher_constraint(device: str, mode: str, quick: bool) -> Row:
    from lightning_info import FisherConstraint

    row = Row(f"fisher_constraint/{mode}")
    if mode != "32-true" and device != "cuda":
        row.status, row.note = "skipped", NEEDS_CUDA
        return row
    precision = "bf16-mixed" if mode == "bf16-mixed" else "32-true"
    strategy = "fsdp" if mode == "fsdp" else "auto"
    make_model, loader, max_fisher, steps = constraint_setup(quick)
    accelerator = accelerator_of(device)
    fit = dict(max_steps=steps, max_epochs=-1, limit_val_batches=0, num_sanity_val_steps=0)

    constrained = make_model()
    constraint = FisherConstraint(max_fisher=max_fisher)
    before, after = GradientNorm(), GradientNorm()
    trainer = quiet_trainer(
        accelerator,
        precision=precision,
        strategy=strategy,
        callbacks=[before, constraint, after],
        **fit,
    )
    try:
        seconds, _ = timed(lambda: trainer.fit(constrained, train_dataloaders=loader()))
    finally:
        # FSDP leaves a one-process group behind: the later rows must not see a distributed run
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
    row.device_s = seconds

    clipped = make_model()
    reference = quiet_trainer(
        accelerator,
        precision=precision,
        gradient_clip_val=math.sqrt(max_fisher),
        gradient_clip_algorithm="norm",
        **fit,
    )
    reference.fit(clipped, train_dataloaders=loader())

    bound = math.sqrt(max_fisher)
    diffs = [abs(a / b - min(1.0, bound / (b + 1e-6))) for b, a in zip(before.norms, after.norms)]
    ours = [p.detach().float().cpu() for p in constrained.parameters()]
    theirs = [p.detach().float().cpu() for p in clipped.parameters()]
    same_shapes = [a.shape for a in ours] == [b.shape for b in theirs]
    param_diff = (
        max(float((a - b).abs().max()) for a, b in zip(ours, theirs)) if same_shapes else None
    )
    all_finite = all(bool(torch.isfinite(p).all()) for p in ours) and finite(
        *before.norms, *after.norms
    )
    row.values = {
        "steps": len(before.norms),
        "max_fisher": max_fisher,
        "factor_max_abs_diff": max(diffs) if diffs else None,
        "param_max_abs_diff_vs_clip": param_diff,
        "constrained_fraction": constraint.constrained_fraction,
        "finite": all_finite,
    }
    problems = []
    if len(diffs) != steps:
        problems.append(f"{len(diffs)} of {steps} steps recorded")
    if not diffs or max(diffs) > FACTOR_TOLERANCE:
        problems.append("rescaling differs from the closed form")
    if not all_finite:
        problems.append("non-finite gradients or parameters")
    if not same_shapes:
        row.note = "parameters not comparable (sharded shapes)"
    if problems:
        row.status, row.note = "fail", "; ".join(problems)
    return row


# -------------------------------------------------------------------------- 2. FisherSFT
def sft_pool(quick: bool):
    from datasets import Dataset

    from lightning_info.lm import tiny_causal_lm, train_bpe_tokenizer

    size = 24 if quick else 512
    questions = [f"Explain item {i} of list {i % 7}." for i in range(size)]
    answers = [
        f"Item {i} is {'odd' if i % 2 else 'even'}, {'small' if i < size // 2 else 'large'}"
        f" and {'prime' if all(i % k for k in range(2, i)) and i > 1 else 'composite'}."
        for i in range(size)
    ]
    tokenizer = train_bpe_tokenizer(questions + answers, vocab_size=300)
    layers, width, heads = (1, 16, 2) if quick else (4, 256, 4)
    lm = tiny_causal_lm(tokenizer, n_layer=layers, n_embd=width, n_head=heads, n_positions=64)
    pool = Dataset.from_dict({"prompt": questions, "response": answers})
    return lm, tokenizer, pool, (8 if quick else 64)


def check_fisher_sft_features(device: str, quick: bool) -> Row:
    from lightning_info.lm.features import response_features
    from lightning_info.methods.fisher_sft.functional import (
        fisher_greedy_select,
        log_det_objective,
    )

    row = Row("fisher_sft/features")
    lm, tokenizer, pool, budget = sft_pool(quick)
    runs = []
    for where in (device, "cpu"):
        model = lm.to(where)

        def extract_and_select(model=model, where=where):
            features = response_features(
                model, tokenizer, pool, batch_size=32, progress=False, device=where
            )
            synchronize(where)
            return features, fisher_greedy_select(features, budget)

        extract_and_select()  # warm-up (kernels, allocator)
        runs.append(timed(extract_and_select))
        lm = lm.to("cpu")
    (device_s, (device_features, device_pick)), (cpu_s, (cpu_features, cpu_pick)) = runs
    row.device_s, row.cpu_s = device_s, cpu_s
    feature_diff = float(
        (device_features.values - cpu_features.values).abs().max() / cpu_features.values.abs().max()
    )
    same = device_pick.indices == cpu_pick.indices
    # F(S) of the device's picks, evaluated on the CPU features: equal to the CPU's F(S) up to a
    # near-tie when the picks differ.
    objective = log_det_objective(cpu_features, device_pick.indices, cpu_pick.lam)
    objective_diff = abs(objective - cpu_pick.objective) / abs(cpu_pick.objective)
    row.values = {
        "pool": len(pool),
        "budget": budget,
        "feature_max_rel_diff": feature_diff,
        "same_picks": same,
        "objective_rel_diff": objective_diff,
    }
    if not finite(feature_diff, objective_diff):
        row.status, row.note = "fail", "non-finite features"
    elif not same:
        first = next(
            i for i, (a, b) in enumerate(zip(device_pick.indices, cpu_pick.indices)) if a != b
        )
        if objective_diff <= TIE_TOLERANCE:
            row.note = f"picks differ from pick {first} on, within the tie tolerance"
        else:
            row.status, row.note = "fail", f"picks differ from pick {first} on"
    return row


def check_fisher_sft_selection(device: str, quick: bool) -> Row:
    from lightning_info.core.blocks import TokenBlocks
    from lightning_info.methods.fisher_sft.functional import fisher_greedy_select

    row = Row("fisher_sft/selection-on-device")
    size, tokens, dim, budget = (40, 3, 6, 8) if quick else (4000, 16, 256, 150)
    g = torch.Generator().manual_seed(0)
    scales = torch.exp(0.5 * torch.randn(size, 1, 1, generator=g))
    values = (scales * torch.randn(size, tokens, dim, generator=g)).reshape(-1, dim)
    offsets = torch.arange(0, size * tokens + 1, tokens)
    picks = []
    for where in (device, "cpu"):
        blocks = TokenBlocks(values.to(where), offsets.to(where))

        def select(blocks=blocks, where=where):
            selection = fisher_greedy_select(blocks, budget)
            synchronize(where)
            return selection

        picks.append(timed(select))
    (row.device_s, ours), (row.cpu_s, theirs) = picks
    same = ours.indices == theirs.indices
    row.values = {"pool": size, "dim": dim, "budget": budget, "same_picks": same}
    if not same:
        row.status, row.note = "fail", "picks differ"
    return row


# -------------------------------------------------------------------- 3. diffusion Fisher
def check_diffusion_fisher(device: str, which: str, quick: bool) -> Row:
    from lightning_info.methods.diffusion_fisher.functional import (
        diffusion_fisher_mvp,
        diffusion_fisher_trace,
    )

    row = Row(f"diffusion_fisher/{which}")
    points, data_size, dim = (16, 256, 8) if quick else (4096, 131072, 64)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(points, dim, generator=g)
    v = torch.randn(points, dim, generator=g)
    data = torch.randn(data_size, dim, generator=g)
    alpha, sigma = 0.8, 0.6
    outputs = []
    for where in (device, "cpu"):
        xs, vs, ds = x.to(where), v.to(where), data.to(where)

        def run(xs=xs, vs=vs, ds=ds, where=where):
            if which == "trace":
                out = diffusion_fisher_trace(xs, ds, alpha, sigma)
            else:
                out = diffusion_fisher_mvp(xs, vs, ds, alpha, sigma)
            synchronize(where)
            return out

        run()  # warm-up
        outputs.append(timed(run))
    (row.device_s, ours), (row.cpu_s, theirs) = outputs
    rel = float((ours.cpu() - theirs).abs().max() / theirs.abs().max())
    row.values = {"points": points, "data": data_size, "dim": dim, "max_rel_diff": rel}
    if not finite(rel) or rel > RELATIVE_TOLERANCE:
        row.status, row.note = "fail", f"relative difference above {RELATIVE_TOLERANCE:g}"
    return row


# ----------------------------------------------------------------- 4. the LightningModules
def _digits(batch_size: int):
    from lightning_info import DigitsDataModule

    return DigitsDataModule(classes=3, batch_size=batch_size)


def _classifier():
    from lightning_info import InceptionTimeClassifier, UCRUEADataModule

    model = InceptionTimeClassifier(6, 4, num_filters=4, depth=3, kernel_size=8, dropout=0.0)
    return model, UCRUEADataModule("BasicMotions", batch_size=8, val_fraction=0.0)


def _mlp():
    from lightning_info import MLPClassifier

    return MLPClassifier(64, 3, hidden=[8]), _digits(8)


def _fine_tuner():
    from lightning_info import AdamWOptions, CausalLMFineTuner

    lm, tokenizer, pool, _ = sft_pool(quick=True)
    from lightning_info import FisherSubsetDataModule

    data = FisherSubsetDataModule(pool, tokenizer, budget=8, batch_size=4, progress=False)
    lora = {"r": 2, "lora_alpha": 4, "target_modules": ["c_attn"]}
    return CausalLMFineTuner(lm, optimizer=AdamWOptions(lr=1e-2), lora=lora), data


def _diffusion():
    from lightning_info.data.synthetic import GaussianMixtureDataModule
    from lightning_info.methods.diffusion_fisher.module import DiffusionModel

    data = GaussianMixtureDataModule(
        num_samples=80, batch_size=8, val_fraction=0.1, test_fraction=0.1
    )
    return DiffusionModel(hidden=16, layers=2), data


def _rome():
    from lightning_info import ROMEDistillation
    from lightning_info.methods.rome import (
        AttackOptions,
        DistillationOptions,
        NetworkPoolOptions,
        RobustEvaluationOptions,
        SmallConvNet,
    )

    data = _digits(8)
    model = ROMEDistillation(
        data.train_images,
        data.train_labels,
        images_per_class=2,
        net=partial(SmallConvNet, width=4),
        distillation=DistillationOptions(real_batch=8),
        attack=AttackOptions(eps=0.1, steps=1),
        pool=NetworkPoolOptions(
            num_nets=2, max_nets=3, add_every=2, refresh_every=1, train_steps=1
        ),
        evaluation=RobustEvaluationOptions(epochs=2),
    )
    return model, data


def _sdcib():
    from lightning_info.methods.sdcib import SDCIB, ClusteringViewsDataModule, SyntheticViewsOptions

    data = ClusteringViewsDataModule(
        "synthetic",
        synthetic=SyntheticViewsOptions(num_samples=48, latent_clusters=3),
        batch_size=8,
    )
    return SDCIB([32, 32, 32], 3, hidden=(8, 4)), data


def _cacti():
    from lightning_info.methods.cacti import (
        CACTI,
        CACTI_OPTIMIZER,
        CACTINetwork,
        SplitOptions,
        TabularImputationDataModule,
    )

    data = TabularImputationDataModule(
        "wine", context="tfidf", context_dim=6, split=SplitOptions(val_fraction=0.1), batch_size=8
    )
    network = CACTINetwork(13, 6, embed_dim=8, encoder_depth=1, decoder_depth=1, num_heads=2)
    optimizer = replace(CACTI_OPTIMIZER, schedule_steps=40)
    return CACTI(13, data.context_embeddings, network=network, optimizer=optimizer), data


def _prodiff():
    from lightning_info.methods.prodiff import (
        PRODIFF_OPTIMIZER,
        DiffusionOptions,
        EndpointCondition,
        ProDiff,
        PrototypeOptions,
        SamplingOptions,
        SyntheticCity,
        TrajectoryDataModule,
        TrajectoryEncoder,
        TrajectoryUNet,
    )

    unet = TrajectoryUNet(
        6, base_channels=4, multipliers=(1, 2), res_blocks=1, attention_lengths=(), dropout=0.0
    )
    model = ProDiff(
        denoiser=unet,
        condition=EndpointCondition(3, unet.embed_dim, 8),
        encoder=TrajectoryEncoder(
            6, embed_dim=8, num_layers=1, num_heads=2, feedforward_dim=8, dropout=0.0
        ),
        diffusion=DiffusionOptions(num_steps=20),
        prototype_options=PrototypeOptions(num_prototypes=4),
        sampling=SamplingOptions(steps=4),
        optimizer=replace(PRODIFF_OPTIMIZER, schedule_steps=40),
    )
    data = TrajectoryDataModule(
        window_length=6, synthetic=SyntheticCity(num_trajectories=48), batch_size=8
    )
    return model, data


def _ancestral():
    from lightning_info.methods.ancestral_search import (
        AncestralGraphSearch,
        BayesianNetworkDataModule,
    )

    data = BayesianNetworkDataModule(
        "asia", num_samples=2000, hidden=["either"], data_seed=1, moves=1
    )
    return AncestralGraphSearch(), data


def _last_iterate():
    from lightning_info.methods.efg_last_iterate import GameEpisodesDataModule, LastIterateSolver

    data = GameEpisodesDataModule("kuhn_poker", batch_size=8, episodes_per_epoch=32)
    return LastIterateSolver(nash_conv_every=2), data


def _tiny_lm(tokenizer, positions: int = 256):
    from lightning_info.lm.tiny_lm import tiny_causal_lm

    return tiny_causal_lm(tokenizer, n_layer=1, n_embd=16, n_head=2, n_positions=positions)


def _docks_rag():
    from lab.docks_rag.study import PROMPT_WORDS
    from lightning_info import AdamWOptions
    from lightning_info.lm.tiny_lm import train_bpe_tokenizer
    from lightning_info.methods.docks_rag.datamodule import (
        DocKGOptions,
        DocREDDataModule,
        DocREDSource,
        HybridPromptOptions,
    )
    from lightning_info.methods.docks_rag.functional import document_text
    from lightning_info.methods.docks_rag.module import DocKSRAG
    from lightning_info.methods.docks_rag.synthetic import RELATIONS, synthetic_docred

    texts = [document_text(d) for d in synthetic_docred(20, seed=0, world_seed=0)]
    texts += [" | ".join([*PROMPT_WORDS, *RELATIONS.values()])] * 5
    tokenizer = train_bpe_tokenizer(texts, vocab_size=500)
    data = DocREDDataModule(
        tokenizer,
        batch_size=8,
        source=DocREDSource(num_train=4, num_dev=2),
        prompt=HybridPromptOptions(top_k=2),
        knowledge=DocKGOptions(encoder="tfidf", encoder_dim=8, kg_steps=10),
        max_length=384,
    )
    lora = {"r": 2, "lora_alpha": 4, "lora_dropout": 0.0}
    model = DocKSRAG(_tiny_lm(tokenizer, 384), lora=lora, optimizer=AdamWOptions(lr=1e-2))
    return model, data


def _elicitation():
    from lightning_info import AdamWOptions
    from lightning_info.lm.tiny_lm import train_bpe_tokenizer
    from lightning_info.methods.adaptive_elicitation.datamodule import (
        ElicitationDataModule,
        LatentWorldOptions,
    )
    from lightning_info.methods.adaptive_elicitation.entities import latent_world_questions
    from lightning_info.methods.adaptive_elicitation.module import ElicitationLM

    tokenizer = train_bpe_tokenizer(latent_world_questions(6) * 5, vocab_size=300)
    latent = LatentWorldOptions(num_questions=6, num_entities=48)
    data = ElicitationDataModule(tokenizer, batch_size=8, latent=latent, num_val=8, num_test=8)
    bank = data.bank  # adds the block tokens to the tokenizer before the model is built
    optimizer = AdamWOptions(lr=1e-2, warmup_fraction=0.0, schedule_steps=20)
    return ElicitationLM(_tiny_lm(tokenizer), bank.answer_ids, optimizer=optimizer), data


def _graph4mm():
    from lightning_info import AdamWOptions
    from lightning_info.methods.graph4mm.datamodule import MultimodalGraphDataModule
    from lightning_info.methods.graph4mm.encoders import SmallConvEncoder
    from lightning_info.methods.graph4mm.module import Graph4MM, variant_qformer

    sizes = {"num_train": 24, "num_val": 8, "num_test": 8}
    tokenizer = MultimodalGraphDataModule(vocab_size=300, **sizes).tokenizer
    data = MultimodalGraphDataModule(tokenizer, batch_size=8, **sizes)
    model = Graph4MM(
        _tiny_lm(tokenizer),
        tokenizer,
        variant="graph4mm",
        image_encoder=SmallConvEncoder(dim=8),
        qformer=variant_qformer("graph4mm", dim=16, num_queries=3, layers=1, heads=2),
        optimizer=AdamWOptions(lr=1e-2, warmup_fraction=0.0, schedule_steps=20),
        max_new_tokens=6,
    )
    return model, data


def _deep_actor_critic():
    from lightning_info import AsymmetricActorCritic
    from lightning_info.methods.asymmetric_ac import A2COptions

    model = AsymmetricActorCritic(
        "CartPole-v1",
        keep=[0, 2],
        window=2,
        max_episode_steps=20,
        hidden=8,
        a2c=A2COptions(num_envs=2),
        steps_per_epoch=2,
        eval_episodes=2,
    )
    return model, None


def _linear_actor_critic():
    from lightning_info import LinearAsymmetricActorCritic
    from lightning_info.methods.asymmetric_ac import SGDSettings

    model = LinearAsymmetricActorCritic(
        window=2, critic=SGDSettings(num_steps=50, batch_size=16), steps_per_epoch=2
    )
    return model, None


MODULES: dict[str, Callable[[], tuple[Any, Any]]] = {
    "InceptionTimeClassifier": _classifier,
    "MLPClassifier": _mlp,
    "CausalLMFineTuner": _fine_tuner,
    "DiffusionModel": _diffusion,
    "ROMEDistillation": _rome,
    "SDCIB": _sdcib,
    "CACTI": _cacti,
    "ProDiff": _prodiff,
    "AncestralGraphSearch": _ancestral,
    "LastIterateSolver": _last_iterate,
    "DocKSRAG": _docks_rag,
    "ElicitationLM": _elicitation,
    "Graph4MM": _graph4mm,
    "AsymmetricActorCritic": _deep_actor_critic,
    "LinearAsymmetricActorCritic": _linear_actor_critic,
}
"""Every LightningModule of the suite, built at toy size (as in the test suite's plugin table)."""


def one_step(factory: Callable[[], tuple[Any, Any]], device: str) -> float:
    """Seconds of a ``fast_dev_run`` fit of a freshly built module on ``device``."""
    torch.manual_seed(0)
    model, data = factory()
    trainer = quiet_trainer(accelerator_of(device), fast_dev_run=True)
    seconds, _ = timed(lambda: trainer.fit(model, datamodule=data))
    bad = [n for n, p in model.named_parameters() if not bool(torch.isfinite(p).all())]
    if bad:
        raise FloatingPointError(f"non-finite parameters after the step: {bad[:3]}")
    return seconds


def check_module(name: str, device: str) -> Row:
    row = Row(f"module/{name}")
    row.device_s = one_step(MODULES[name], device)
    if device != "cpu":
        row.cpu_s = one_step(MODULES[name], "cpu")
    return row


# -------------------------------------------------------------------------------- driver
def checks(device: str, quick: bool) -> list[tuple[str, Callable[[], Row]]]:
    rows: list[tuple[str, Callable[[], Row]]] = [
        (f"fisher_constraint/{mode}", partial(check_fisher_constraint, device, mode, quick))
        for mode in ("32-true", "bf16-mixed", "fsdp")
    ]
    rows += [
        ("fisher_sft/features", partial(check_fisher_sft_features, device, quick)),
        ("fisher_sft/selection-on-device", partial(check_fisher_sft_selection, device, quick)),
        ("diffusion_fisher/trace", partial(check_diffusion_fisher, device, "trace", quick)),
        ("diffusion_fisher/mvp", partial(check_diffusion_fisher, device, "mvp", quick)),
    ]
    rows += [(f"module/{name}", partial(check_module, name, device)) for name in MODULES]
    return rows


def run_isolated(name: str, check: Callable[[], Row]) -> Row:
    try:
        return check()
    except Exception as error:  # noqa: BLE001 - one failing check must not stop the others
        message = str(error).strip().splitlines()
        text = f"{type(error).__name__}: {message[0] if message else ''}"[:200]
        traceback.print_exc(file=sys.stderr)
        return Row(name, status="fail", note=text)
    finally:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def _number(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def table(rows: Sequence[Row], device: str) -> str:
    def seconds(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    body = [
        (
            r.check,
            r.status,
            ", ".join(f"{k} {_number(v)}" for k, v in r.values.items()),
            seconds(r.device_s),
            seconds(r.cpu_s),
            "-" if r.ratio is None else f"{r.ratio:.3g}x",
            r.note,
        )
        for r in rows
    ]
    names = ["check", "status", "result", "device s", "cpu s", "cpu / device", "note"]
    return markdown_table(names, body)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = benchmark_parser(
        __doc__.split("\n\n")[0],
        threads=0,
        quick_help="toy sizes: every check in seconds on a CPU",
    )
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--out", metavar="PATH", default=None, help="also write the markdown")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda needs a CUDA GPU; --device cpu runs the CPU-only checks")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with torch_threads(args.threads):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    import lightning

    head = header(args)
    gpu = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    head.update(gpu=gpu, lightning=lightning.__version__)
    line = header_line(head, f"device {gpu}", f"lightning {lightning.__version__}")
    size = "quick (toy sizes)" if args.quick else "full sizes"
    print(line, "|", size, flush=True)
    start = time.perf_counter()
    rows = []
    for name, check in checks(args.device, args.quick):
        row = run_isolated(name, check)
        note = "" if row.status == "skipped" else row.note
        print(f"  {row.check}: {row.status} {note}".rstrip(), file=sys.stderr, flush=True)
        rows.append(row)
    text = f"{line} | {size}\n\n{table(rows, args.device)}\n"
    print()
    print(table(rows, args.device))
    failed = [r.check for r in rows if r.status == "fail"]
    total = time.perf_counter() - start
    print(f"\n{len(rows)} checks, {len(failed)} failed, {total:.0f} s")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    if args.json:
        write_json(
            args.json,
            head,
            {
                "seconds": total,
                "checks": {
                    r.check: {
                        "status": r.status,
                        "device_s": r.device_s,
                        "cpu_s": r.cpu_s,
                        "ratio": r.ratio,
                        "values": r.values,
                        "note": r.note,
                    }
                    for r in rows
                },
            },
        )
    return 1 if failed else 0


if __name__ == "__main__":
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    logging.getLogger("lightning.fabric").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    sys.exit(main())
