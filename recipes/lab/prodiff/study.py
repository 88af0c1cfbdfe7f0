"""The trajectory-imputation recipe's study: ProDiff, its no-prototype ablation and the two
interpolation baselines on the same synthetic-city windows, window lengths and seeds.

For every window length x seed one :class:`TrajectoryDataModule` generates the city (seeded by
the seed) and splits its windows 80/10/10; ProDiff and the ablation are trained on the training
windows (no validation during training) and generate each test window's interior from its two
endpoints with DDIM; linear and great-circle interpolation fill the same windows. Every method
is scored over the test windows' interior points in metres
(:func:`~lightning_info.methods.prodiff.metrics.trajectory_scores`). ``prodiff_sharp`` is
ProDiff whose endpoint query attends with temperature ``sharp_temperature`` instead of the
paper's ``sqrt(D)``. For every model with prototypes the study also records diagnostics
(:func:`prototype_diagnostics`): how the test windows' endpoint queries use the prototypes
(effective numbers, :func:`~lightning_info.methods.prodiff.prototypes.prototype_usage`) and the
gradient norms each loss sends to the prototypes on a training batch, before and after
training, plus the last epoch's mean total norm. Runs are independent, so
``workers`` processes share them. The figure draws, for the first seed, a few test windows on
the map: the true points, the linear fill and ProDiff's.
"""

from __future__ import annotations

import inspect
import logging
import time
import warnings
from dataclasses import dataclass, field, is_dataclass, replace
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch

from lab.study import Study, StudyResult, run_jobs
from lightning_info.core.logging import mean_std
from lightning_info.core.plotting import pyplot
from lightning_info.core.trainers import quiet_trainer
from lightning_info.methods.prodiff.datamodule import SyntheticCity, TrajectoryDataModule
from lightning_info.methods.prodiff.denoiser import EndpointCondition, TrajectoryUNet
from lightning_info.methods.prodiff.encoder import DEFAULT_EMBED_DIM, TrajectoryEncoder
from lightning_info.methods.prodiff.functional import (
    great_circle_interpolation,
    linear_interpolation,
)
from lightning_info.methods.prodiff.metrics import trajectory_scores
from lightning_info.methods.prodiff.module import ProDiff
from lightning_info.methods.prodiff.prototypes import prototype_usage

METHODS = {
    "linear": "linear interpolation",
    "great_circle": "great-circle interpolation",
    "prodiff": "ProDiff",
    "prodiff_no_prototypes": "ProDiff (no prototypes)",
    "prodiff_sharp": "ProDiff (sharp attention)",
}
PROTOTYPE_METHODS = ("prodiff", "prodiff_sharp")
BASELINES = {"linear": linear_interpolation, "great_circle": great_circle_interpolation}
METRICS = {
    "mtd": "mean deviation (m)",
    "maxtd": "max deviation (m)",
    "tc@1km": "TC@1km",
    "tc@2km": "TC@2km",
    "tc_mean": "TC mean (1-10 km)",
    "time_mae": "time MAE (h)",
}
#: the diagnostics' table: key of :func:`prototype_diagnostics` -> title
DIAGNOSTICS = {
    "effective": "prototypes used, exp(entropy) of the mean attention",
    "sample_effective": "prototypes mixed per window, mean exp(entropy)",
    "hard_effective": "prototypes chosen (arg-max), exp(entropy)",
    "max_weight": "largest attention weight, mean",
    "grad_start_diffusion": "grad norm to prototypes from L_diff, untrained",
    "grad_end_diffusion": "grad norm to prototypes from L_diff, trained",
    "grad_end_contrastive": "grad norm to prototypes from L_con, trained",
    "grad_train": "grad norm to prototypes, last epoch's mean",
}
EXAMPLES = 4


def build_prodiff(
    window_length: int, use_prototypes: bool, seed: int, model: dict[str, Any]
) -> ProDiff:
    """ProDiff for windows of ``window_length`` points from a study's ``model`` settings (a
    YAML mapping): ``denoiser`` and ``encoder`` hold the arguments of
    :class:`~lightning_info.methods.prodiff.denoiser.TrajectoryUNet` and
    :class:`~lightning_info.methods.prodiff.encoder.TrajectoryEncoder` besides the window
    length, an option group (``diffusion``, ``guidance``, ``prototype_options``, ``sampling``,
    ``optimizer``) the fields that differ from ProDiff's default, any other key is a ProDiff
    argument. The networks are built in ProDiff's order (denoiser, condition, encoder), so a
    seed gives the weights ProDiff would build itself."""
    settings = dict(model)
    unet = TrajectoryUNet(window_length, **settings.pop("denoiser", {}))
    encoder_args = settings.pop("encoder", {})
    width = encoder_args.get("embed_dim", DEFAULT_EMBED_DIM) if use_prototypes else None
    condition = EndpointCondition(3, unet.embed_dim, width)
    encoder = TrajectoryEncoder(window_length, **encoder_args) if use_prototypes else None
    defaults = inspect.signature(ProDiff).parameters
    for name, value in settings.items():
        default = defaults[name].default if name in defaults else None
        if isinstance(value, dict) and is_dataclass(default):
            settings[name] = replace(default, **value)
    return ProDiff(
        denoiser=unet,
        condition=condition,
        encoder=encoder,
        use_prototypes=use_prototypes,
        seed=seed,
        **settings,
    )


def train_prodiff(
    data: TrajectoryDataModule,
    use_prototypes: bool,
    seed: int,
    model: dict[str, Any],
    max_epochs: int,
    diagnostics: dict[str, float] | None = None,
) -> ProDiff:
    """ProDiff (:func:`build_prodiff`) fit on the training windows (no logger, no
    checkpoints, clipping 1). With prototypes and a ``diagnostics`` dict, the gradient norms
    of :func:`prototype_diagnostics` are written into it (the usage needs the trained model:
    call :func:`prototype_diagnostics` after)."""
    pl.seed_everything(seed, verbose=False)
    module = build_prodiff(data.window_length, use_prototypes, seed, model)
    trainer = quiet_trainer(
        max_epochs=max_epochs,
        accelerator="cpu",
        devices=1,
        gradient_clip_val=1.0,
        limit_val_batches=0,
    )
    track = use_prototypes and diagnostics is not None
    if track:
        # the first training windows, scaled (not through a DataLoader: its seed draw would
        # move the global random stream the training's dropout draws from)
        batch = data.scale(data.windows["train"][: data.batch_size]).float()
        for name, value in module.prototype_gradient_norms(batch).items():
            diagnostics[f"grad_start_{name}"] = value
    trainer.fit(module, datamodule=data)
    if track:
        for name, value in module.prototype_gradient_norms(batch).items():
            diagnostics[f"grad_end_{name}"] = value
        diagnostics["grad_train"] = float(trainer.callback_metrics["train/prototype_grad_norm"])
        diagnostics["encoder_grad_train"] = float(
            trainer.callback_metrics["train/encoder_grad_norm"]
        )
    return module.eval()


def prototype_diagnostics(module: ProDiff, data: TrajectoryDataModule) -> dict[str, float]:
    """How the test windows' endpoint queries use the trained model's prototypes: the keys of
    :func:`~lightning_info.methods.prodiff.prototypes.prototype_usage` (``usage`` as a list),
    plus ``num_prototypes``."""
    with torch.no_grad():
        weights = torch.cat(
            [module.prototype_weights(batch["window"]) for batch in data.test_dataloader()]
        )
    usage = prototype_usage(weights.double())
    out = {k: float(v) for k, v in usage.items() if k != "usage"}
    out["usage"] = usage["usage"].tolist()
    out["num_prototypes"] = weights.shape[1]
    return out


def generate(module: ProDiff, data: TrajectoryDataModule, seed: int) -> torch.Tensor:
    """The test windows generated from their endpoints, in degrees (float64)."""
    generator = torch.Generator().manual_seed(seed)
    parts = [
        module.unscale(module.impute(batch["window"], generator=generator))
        for batch in data.test_dataloader()
    ]
    return torch.cat(parts)


@dataclass(frozen=True)
class TrajectoryJob:
    """One ``(window_length, seed)`` of a :class:`TrajectoryStudy`, with the study's methods,
    city and ProDiff settings."""

    window_length: int
    seed: int
    methods: list[str]
    num_trajectories: int
    synthetic: dict[str, Any]
    model: dict[str, Any]
    max_epochs: int
    batch_size: int
    sharp_temperature: float


def run_setting(job: TrajectoryJob) -> dict[str, Any]:
    """Every method on one ``(window_length, seed)``: scores, seconds and example windows."""
    torch.set_num_threads(1)
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=".*(no `val_dataloader`|LeafSpec).*")
    data = TrajectoryDataModule(
        "synthetic",
        window_length=job.window_length,
        synthetic=SyntheticCity(num_trajectories=job.num_trajectories, **job.synthetic),
        data_seed=job.seed,
        batch_size=job.batch_size,
    )
    truth = data.windows["test"]
    scores, seconds, examples = {}, {}, {"truth": truth[:EXAMPLES].tolist()}
    diagnostics: dict[str, dict[str, Any]] = {}
    for method in job.methods:
        start = time.perf_counter()
        if method in BASELINES:
            generated = BASELINES[method](truth)
        else:
            model = job.model
            if method == "prodiff_sharp":
                options = dict(model.get("prototype_options", {}))
                options["attention_temperature"] = job.sharp_temperature
                model = {**model, "prototype_options": options}
            prototypes = method in PROTOTYPE_METHODS
            found: dict[str, Any] = {}
            module = train_prodiff(data, prototypes, job.seed, model, job.max_epochs, found)
            generated = generate(module, data, job.seed)
            if prototypes:
                diagnostics[method] = {**found, **prototype_diagnostics(module, data)}
        seconds[method] = time.perf_counter() - start
        scores[method] = trajectory_scores(generated.numpy(), truth.numpy())
        examples[method] = generated[:EXAMPLES].tolist()
    return {
        "window_length": job.window_length,
        "seed": job.seed,
        "scores": scores,
        "seconds": seconds,
        "examples": examples,
        "diagnostics": diagnostics,
    }


@dataclass
class TrajectoryStudy(Study):
    """ProDiff and baselines over window lengths x seeds (see the module docstring).

    Args:
        window_lengths: ``k`` of the windows (each a whole synthetic trajectory).
        seeds: seeds of the city, the split and the models.
        methods: of ``linear``, ``great_circle``, ``prodiff``, ``prodiff_no_prototypes``,
            ``prodiff_sharp``.
        num_trajectories: trajectories in the synthetic city.
        synthetic: further :class:`~lightning_info.methods.prodiff.datamodule.SyntheticCity`
            options (e.g. ``left_side_probability``).
        model: ProDiff's settings besides the window length, prototypes switch and seed: the
            networks' arguments under ``denoiser`` and ``encoder``, the option groups' changed
            fields (see :func:`build_prodiff`).
        max_epochs, batch_size: ProDiff's epochs and batch size.
        workers: processes running settings side by side (1: in this process).
        sharp_temperature: ``prodiff_sharp``'s attention temperature (the paper: ``sqrt(D)``).
    """

    window_lengths: list[int] = field(default_factory=lambda: [8, 16])
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    num_trajectories: int = 2048
    synthetic: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)
    max_epochs: int = 60
    batch_size: int = 128
    workers: int = 1
    sharp_temperature: float = 0.1

    def __post_init__(self) -> None:
        for method in self.methods:
            if method not in METHODS:
                raise ValueError(f"unknown method {method!r}: choose from {list(METHODS)}.")
        if not (self.window_lengths and self.seeds and self.methods):
            raise ValueError("`window_lengths`, `seeds` and `methods` must be non-empty.")
        if self.workers < 1:
            raise ValueError(f"`workers` must be at least 1, got {self.workers}.")

    def _jobs(self) -> list[TrajectoryJob]:
        return [
            TrajectoryJob(
                window_length=length,
                seed=seed,
                methods=self.methods,
                num_trajectories=self.num_trajectories,
                synthetic=self.synthetic,
                model=self.model,
                max_epochs=self.max_epochs,
                batch_size=self.batch_size,
                sharp_temperature=self.sharp_temperature,
            )
            for length in self.window_lengths
            for seed in self.seeds
        ]

    def run(self, cli=None) -> StudyResult:
        def describe(outcome: dict[str, Any]) -> str:
            prodiff = outcome["scores"].get("prodiff", {}).get("mtd", float("nan"))
            return (
                f"k={outcome['window_length']} seed={outcome['seed']}: ProDiff mean deviation "
                f"{prodiff:.0f} m"
            )

        records = run_jobs(run_setting, self._jobs(), self.workers, describe)
        tables = {
            f"{title}, test windows' interior points": self._table(records, metric)
            for metric, title in METRICS.items()
        }
        tables["seconds per fit and imputation"] = self._table(records, "seconds")
        shown = [m for m in PROTOTYPE_METHODS if m in self.methods]
        if shown:
            tables["prototype diagnostics (test windows' endpoint queries; gradients)"] = (
                self._diagnostics_table(records, shown)
            )
        return StudyResult(tables, {"map": self._figure(records)}, records)

    def _diagnostics_table(self, records, methods: list[str]):
        columns = ["k", "diagnostic", *(METHODS[m] for m in methods)]
        rows = []
        for length in self.window_lengths:
            for key, title in DIAGNOSTICS.items():
                cells = []
                for method in methods:
                    values = [
                        r["diagnostics"][method][key]
                        for r in records
                        if r["window_length"] == length and method in r.get("diagnostics", {})
                    ]
                    cells.append(mean_std(values))
                rows.append([length, title, *cells])
        return columns, rows

    def _values(self, records, length, method, metric) -> list[float]:
        return [
            r["seconds"][method] if metric == "seconds" else r["scores"][method][metric]
            for r in records
            if r["window_length"] == length and method in r["scores"]
        ]

    def _table(self, records, metric: str):
        columns = ["k", *(METHODS[m] for m in self.methods)]
        rows = [
            [length, *(mean_std(self._values(records, length, m, metric)) for m in self.methods)]
            for length in self.window_lengths
        ]
        return columns, rows

    def _figure(self, records):
        plt = pyplot()
        first = [r for r in records if r["seed"] == self.seeds[0]]
        figure, axes = plt.subplots(
            len(first), EXAMPLES, figsize=(3.2 * EXAMPLES, 3.2 * len(first)), squeeze=False
        )
        shown = [m for m in ("linear", "prodiff", "prodiff_no_prototypes") if m in self.methods]
        for row, record in zip(axes, first):
            truth = np.asarray(record["examples"]["truth"])
            for index, axis in enumerate(row):
                axis.plot(truth[index, :, 2], truth[index, :, 1], "k.-", label="true")
                for method in shown:
                    points = np.asarray(record["examples"][method])[index]
                    axis.plot(points[:, 2], points[:, 1], ".-", label=METHODS[method], alpha=0.8)
                axis.plot(truth[index, [0, -1], 2], truth[index, [0, -1], 1], "ko", ms=7)
                axis.set(title=f"k={record['window_length']}, test window {index}")
                axis.set_xlabel("longitude")
                axis.set_ylabel("latitude")
                axis.tick_params(labelsize=6)
        axes[0][0].legend(fontsize=7)
        figure.tight_layout()
        return figure
