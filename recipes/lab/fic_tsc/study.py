"""The FIC-TSC shift study: InceptionTime with and without the constraint, tested under shift.

For each bundled data set, seed and arm (``InceptionTime``; ``InceptionTime + FIC``, the same
with ``FisherConstraint(max_fisher)``) one model is trained on the unshifted training split,
the weights of its best validation accuracy are kept, and that model is tested on the test
split under every shift of ``shifts`` (:mod:`lightning_info.methods.fic_tsc.shift`: rescaled,
offset or noised copies of the test split; the training data are never altered). Both arms of
a (set, seed) start from the same initialisation, split and batch order (the seed sets all
three), so they are paired.

Reported, per shift: each arm's accuracy, mean ± std over seeds of the mean over the sets; the
mean paired difference; how many (set, seed) pairs the constraint raised, lowered or left
equal; the two-sided p-value of ``scipy.stats.wilcoxon`` over the (set, seed) pairs'
differences. Per set: how often the constraint binds, the fraction of optimizer steps it
rescaled (``FisherConstraint.constrained_fraction``), over all steps and over the first and
last tenth, and for the baseline the fraction of steps whose ``tr F = ||g||^2`` exceeded the
bound it would have had.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from lightning.pytorch import Callback
from scipy.stats import wilcoxon

from lab.study import Study, StudyResult, run_jobs, seeded_trainer
from lightning_info.core.logging import mean_std
from lightning_info.core.options import AdamWOptions
from lightning_info.core.trainers import lightning_notices_hidden
from lightning_info.methods.fic_tsc.callback import FisherConstraint, Lookahead
from lightning_info.methods.fic_tsc.datamodule import UCRUEADataModule
from lightning_info.methods.fic_tsc.functional import empirical_fisher_trace
from lightning_info.methods.fic_tsc.module import InceptionTimeClassifier
from lightning_info.methods.fic_tsc.shift import ShiftOptions

ARMS = {"baseline": "InceptionTime", "fic": "InceptionTime + FIC"}
"""arm id -> table name."""

DEFAULT_SHIFTS = (
    ShiftOptions("none"),
    ShiftOptions("scale", 2.0),
    ShiftOptions("scale", 0.5),
    ShiftOptions("offset", 0.5),
    ShiftOptions("offset", 1.0),
    ShiftOptions("noise", 0.25, seed=0),
    ShiftOptions("noise", 0.5, seed=0),
)


class TraceRecorder(Callback):
    """The empirical Fisher trace ``tr F = ||g||^2`` of every optimizer step, taken before any
    constraint rescales the gradients (``traces``: one per step)."""

    def __init__(self) -> None:
        self.traces: list[float] = []

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        params = [p for group in optimizer.param_groups for p in group["params"]]
        self.traces.append(float(empirical_fisher_trace(params)))


class BestValidationWeights(Callback):
    """In memory, as ``ModelCheckpoint(monitor="val/acc", mode="max")`` on disk: the first
    epoch of the highest validation accuracy."""

    def __init__(self) -> None:
        self.best = -float("inf")
        self.epoch = -1
        self.state: dict[str, torch.Tensor] | None = None

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking:
            return
        value = float(trainer.callback_metrics["val/acc"])
        if value > self.best:
            self.best, self.epoch = value, trainer.current_epoch
            self.state = {k: v.detach().clone() for k, v in pl_module.state_dict().items()}


@dataclass(frozen=True)
class ShiftJob:
    """One (data set, seed, arm) of a :class:`FisherShiftStudy`, with the study's settings
    (:func:`run_arm` trains in a temporary folder in place of ``root``, so that no run leaves
    files behind)."""

    dataset: str
    seed: int
    arm: str
    shifts: list[ShiftOptions]
    epochs: int
    max_fisher: float
    lookahead: dict[str, Any] | None
    model: dict[str, Any]
    data: dict[str, Any]
    threads: int
    root: str | None


def _fraction(flags: list[bool]) -> float:
    return sum(flags) / len(flags) if flags else float("nan")


def run_arm(job: ShiftJob) -> dict[str, Any]:
    """One (data set, seed, arm): train, keep the best-validation weights, test under each
    shift; the binding counts of the run."""
    torch.set_num_threads(job.threads)
    with lightning_notices_hidden():  # hidden in the parent already; spawned workers too
        return _run_arm(job)


def _run_arm(job: ShiftJob) -> dict[str, Any]:
    start = time.perf_counter()
    data_args = dict(job.data, seed=job.seed)
    recorder, best = TraceRecorder(), BestValidationWeights()
    callbacks = [recorder]
    constraint = None
    if job.arm == "fic":
        constraint = FisherConstraint(max_fisher=job.max_fisher)
        callbacks.append(constraint)
    if job.lookahead is not None:
        callbacks.append(Lookahead(**job.lookahead))
    callbacks.append(best)
    with tempfile.TemporaryDirectory() as root:
        trainer = seeded_trainer(replace(job, root=root), callbacks=callbacks, log_every_n_steps=1)
        data = UCRUEADataModule(job.dataset, **data_args)
        model_args = dict(job.model)
        optimizer = AdamWOptions(**model_args.pop("optimizer", {}))
        model = InceptionTimeClassifier(
            data.num_channels, data.num_classes, optimizer=optimizer, **model_args
        )
        trainer.fit(model, datamodule=data)
        if best.state is not None:
            model.load_state_dict(best.state)
        accuracy = {}
        for shift in job.shifts:
            shifted = UCRUEADataModule(job.dataset, test_shift=shift, **data_args)
            scores = trainer.test(model, datamodule=shifted, verbose=False)[0]
            accuracy[shift.name] = float(scores["test/acc"])
    over = [t > job.max_fisher for t in recorder.traces]
    tenth = max(1, len(over) // 10)
    return {
        "dataset": job.dataset,
        "seed": job.seed,
        "arm": job.arm,
        "accuracy": accuracy,
        "steps": len(over),
        "best_epoch": best.epoch,
        "constrained_fraction": None if constraint is None else constraint.constrained_fraction,
        "over_bound": _fraction(over),
        "over_bound_first_tenth": _fraction(over[:tenth]),
        "over_bound_last_tenth": _fraction(over[-tenth:]),
        "seconds": time.perf_counter() - start,
    }


def paired_wilcoxon(baseline: list[float], method: list[float]) -> tuple[int, int, int, str]:
    """``(raised, lowered, equal, p)``: of the paired differences ``method - baseline``, how many
    are positive, negative and zero, and the two-sided p-value of ``scipy.stats.wilcoxon`` (zero
    differences dropped; ``"n/a"`` when all are zero)."""
    differences = [m - b for b, m in zip(baseline, method, strict=True)]
    raised = sum(d > 0 for d in differences)
    lowered = sum(d < 0 for d in differences)
    p = "n/a"
    if raised + lowered:
        p = f"{wilcoxon(method, baseline).pvalue:.3g}"
    return raised, lowered, len(differences) - raised - lowered, p


@dataclass
class FisherShiftStudy(Study):
    """Both arms under a controlled train/test shift (module docstring).

    Args:
        datasets: bundled UCR/UEA sets (``UCRUEADataModule`` names).
        seeds: each seeds the model's initialisation, the train/validation split and the batch
            order; both arms of a seed share them.
        shifts: the test split's shifts (``ShiftOptions``), ``none`` first for the unshifted row.
        epochs: training epochs (the paper's 200).
        max_fisher: the constraint's bound (the paper's 2.0).
        lookahead: ``Lookahead`` arguments (``k``, ``alpha``) around AdamW in both arms, the
            paper's optimiser; ``None``: plain AdamW.
        model: ``InceptionTimeClassifier`` arguments, its ``optimizer`` as a dict.
        data: ``UCRUEADataModule`` arguments other than ``name``, ``seed`` and ``test_shift``.
        workers: processes running (set, seed, arm) jobs side by side; threads: torch threads
            in each.
    """

    datasets: list[str] = field(default_factory=lambda: ["GunPoint", "ItalyPowerDemand"])
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    shifts: list[ShiftOptions] = field(default_factory=lambda: list(DEFAULT_SHIFTS))
    epochs: int = 200
    max_fisher: float = 2.0
    lookahead: dict[str, Any] | None = field(default_factory=lambda: {"k": 5, "alpha": 0.5})
    model: dict[str, Any] = field(
        default_factory=lambda: {
            "num_filters": 32,
            "depth": 6,
            "optimizer": {"lr": 0.005, "weight_decay": 0.0001},
        }
    )
    data: dict[str, Any] = field(
        default_factory=lambda: {"batch_size": 64, "val_fraction": 0.2, "normalize": "channel"}
    )
    workers: int = 2
    threads: int = 1

    def __post_init__(self) -> None:
        if not self.datasets or not self.seeds or not self.shifts:
            raise ValueError("datasets, seeds and shifts must be non-empty")
        self.shifts = [s if isinstance(s, ShiftOptions) else ShiftOptions(**s) for s in self.shifts]
        names = [s.name for s in self.shifts]
        if len(set(names)) < len(names):
            raise ValueError(f"two shifts have the same name: {names}")
        if len(set(self.seeds)) < len(self.seeds) or len(set(self.datasets)) < len(self.datasets):
            raise ValueError("datasets and seeds must not repeat")
        if self.epochs < 1 or self.threads < 1:
            raise ValueError("epochs and threads must be at least 1")
        if not self.max_fisher > 0:
            raise ValueError(f"max_fisher must be > 0, got {self.max_fisher}")
        reserved = {"name", "seed", "test_shift"} & set(self.data)
        if reserved:
            raise ValueError(f"data sets {sorted(reserved)} itself; leave them out")

    def jobs(self, root: str | None = None) -> list[ShiftJob]:
        """One job per (data set, seed, arm), in the order of ``datasets`` and ``seeds``."""
        return [
            ShiftJob(
                dataset=d,
                seed=s,
                arm=arm,
                shifts=self.shifts,
                epochs=self.epochs,
                max_fisher=self.max_fisher,
                lookahead=self.lookahead,
                model=self.model,
                data=self.data,
                threads=self.threads,
                root=root,
            )
            for d in self.datasets
            for s in self.seeds
            for arm in ARMS
        ]

    def run(self, cli=None) -> StudyResult:
        def describe(r: dict[str, Any]) -> str:
            bound = r["constrained_fraction"]
            binding = "" if bound is None else f", constrained {bound:.0%} of steps"
            return (
                f"{r['dataset']} seed={r['seed']} {ARMS[r['arm']]}: unshifted "
                f"{r['accuracy'][self.shifts[0].name]:.4f}{binding}"
            )

        records = run_jobs(run_arm, self.jobs(), self.workers, describe)
        tables = {
            "accuracy under shift, paired Wilcoxon over (set, seed)": self.shift_table(records),
            "accuracy under shift, per set": self.per_set_table(records),
            "how often the constraint binds": self.binding_table(records),
        }
        return StudyResult(tables, records=records)

    def _accuracies(self, records, arm: str, shift: str) -> dict[tuple[str, int], float]:
        return {(r["dataset"], r["seed"]): r["accuracy"][shift] for r in records if r["arm"] == arm}

    def shift_table(self, records) -> tuple[list[str], list[list]]:
        """Per shift: each arm's mean over the sets, mean ± std over seeds; the mean paired
        difference; raised / lowered / equal pairs; Wilcoxon p over the (set, seed) pairs."""
        columns = ["shift", *ARMS.values(), "difference", "up / down / tie", "Wilcoxon p", "pairs"]
        rows = []
        for shift in (s.name for s in self.shifts):
            per_arm = {arm: self._accuracies(records, arm, shift) for arm in ARMS}
            pairs = sorted(set(per_arm["baseline"]) & set(per_arm["fic"]))
            cells = []
            for arm in ARMS:
                seeds = sorted({seed for _, seed in pairs})
                means = [
                    statistics.fmean(per_arm[arm][p] for p in pairs if p[1] == seed)
                    for seed in seeds
                ]
                cells.append(mean_std(means))
            base = [per_arm["baseline"][p] for p in pairs]
            fic = [per_arm["fic"][p] for p in pairs]
            up, down, tie, p = paired_wilcoxon(base, fic)
            difference = statistics.fmean(f - b for b, f in zip(base, fic))
            rows.append(
                [shift, *cells, f"{difference:+.4f}", f"{up} / {down} / {tie}", p, len(pairs)]
            )
        return columns, rows

    def per_set_table(self, records) -> tuple[list[str], list[list]]:
        """Per set and shift: each arm's accuracy, mean ± std over seeds, and the difference."""
        columns = ["set", "shift", *ARMS.values(), "difference"]
        rows = []
        for dataset in self.datasets:
            for shift in (s.name for s in self.shifts):
                values = {
                    arm: [
                        r["accuracy"][shift]
                        for r in records
                        if r["arm"] == arm and r["dataset"] == dataset
                    ]
                    for arm in ARMS
                }
                if not all(values.values()):
                    continue
                difference = statistics.fmean(values["fic"]) - statistics.fmean(values["baseline"])
                cells = [mean_std(v) for v in values.values()]
                rows.append([dataset, shift, *cells, f"{difference:+.4f}"])
        return columns, rows

    def binding_table(self, records) -> tuple[list[str], list[list]]:
        """Per set, mean ± std over seeds: the share of steps the constraint rescaled (all, first
        and last tenth of the steps), the baseline's share of steps over the bound, steps."""
        columns = [
            "set",
            "FIC: steps constrained",
            "first tenth",
            "last tenth",
            "baseline: steps over the bound",
            "steps per run",
        ]
        rows = []
        for dataset in self.datasets:
            fic = [r for r in records if r["arm"] == "fic" and r["dataset"] == dataset]
            base = [r for r in records if r["arm"] == "baseline" and r["dataset"] == dataset]
            if not fic and not base:
                continue
            rows.append(
                [
                    dataset,
                    mean_std([r["constrained_fraction"] for r in fic]),
                    mean_std([r["over_bound_first_tenth"] for r in fic]),
                    mean_std([r["over_bound_last_tenth"] for r in fic]),
                    mean_std([r["over_bound"] for r in base]),
                    max(r["steps"] for r in fic + base),
                ]
            )
        return columns, rows


__all__ = [
    "ARMS",
    "DEFAULT_SHIFTS",
    "BestValidationWeights",
    "FisherShiftStudy",
    "ShiftJob",
    "TraceRecorder",
    "paired_wilcoxon",
    "run_arm",
]
