"""The clustering recipe's studies: baselines next to SDCIB on the same views and seeds.

:class:`ViewsClusteringStudy` clusters the views of any number of multi-view data modules, each
given by class path and arguments (so a recipe can feed it the hop views of a graph from another
method's data module without this code importing it), with k-means on the concatenated views
and/or SDCIB, over seeds, and reports ACC / NMI / ARI as mean ± std. With ``grid_arms`` it also
places the recipe grid's own SDCIB arms in the table (same data, same seeds), and it draws the
2-D embedding of the last SDCIB run of each source and of the grid's last cell (principal
components of the views' last-layer means, coloured by fused cluster).

:class:`ReferenceProtocolStudy` reports the same SDCIB runs under two protocols: this project's
(the last epoch's score, mean ± std over seeds) and the reference code's (every run scored after
every epoch, the score at its epoch of least training loss, then the maximum over a group of 10
runs: :func:`reference_protocol`), with k-means on the joined views beside them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch import Callback
from sklearn.cluster import KMeans

from lab.study import Study, StudyResult, run_jobs
from lightning_info.core.logging import mean_std
from lightning_info.core.optional import import_object
from lightning_info.core.plotting import pyplot
from lightning_info.core.trainers import quiet_trainer
from lightning_info.data.multiview import MultiViewDataModule
from lightning_info.measures.clustering import clustering_scores
from lightning_info.methods.sdcib.functional import aligned_vote
from lightning_info.methods.sdcib.module import SDCIB, SDCIBLossOptions

METRICS = ("acc", "nmi", "ari")
METHODS = ("kmeans", "sdcib")
PROTOCOL_LOSSES = ("last_batch_loss", "mean_loss")
KMEANS = "k-means (views joined)"


def build_data_module(spec: dict[str, Any]) -> MultiViewDataModule:
    """A data module from ``{"class_path": "pkg.Class", "init_args": {...}}``."""
    data = import_object(spec["class_path"])(**spec.get("init_args", {}))
    if not isinstance(data, MultiViewDataModule):
        raise TypeError(f"{spec['class_path']} is not a MultiViewDataModule.")
    return data


def kmeans_scores(data: MultiViewDataModule, seed: int) -> dict[str, float]:
    """sklearn's k-means (10 restarts) on the concatenated views, ``K`` = the number of classes."""
    joined = torch.cat(data.views, dim=1).numpy()
    labels = KMeans(n_clusters=data.num_classes, n_init=10, random_state=seed).fit_predict(joined)
    return clustering_scores(torch.from_numpy(labels), data.labels)


def fit_sdcib(
    data: MultiViewDataModule, seed: int, model_args: dict[str, Any], max_epochs: int
) -> tuple[dict[str, float], SDCIB]:
    """Train SDCIB on ``data`` (no logger, no checkpoints) and score its fused clustering."""
    model_args = dict(model_args)
    if isinstance(model_args.get("loss"), dict):
        model_args["loss"] = SDCIBLossOptions(**model_args["loss"])
    pl.seed_everything(seed, verbose=False)
    model = SDCIB(data.view_dims, data.num_classes, seed=seed, **model_args)
    trainer = quiet_trainer(max_epochs=max_epochs, accelerator="cpu", limit_val_batches=0)
    trainer.fit(model, datamodule=data)
    (scores,) = trainer.test(model, datamodule=data, verbose=False)
    return {m: scores[f"test/{m}"] for m in METRICS}, model


@torch.no_grad()
def embedding_figure(model: SDCIB, data: MultiViewDataModule, title: str):
    """The views' last-layer means joined, on their two principal components, coloured by the
    fused cluster."""
    model.eval()
    layers, assignments = model(data.views)
    labels, _ = aligned_vote(assignments, model.hparams.reference_view)
    embedding = torch.cat([view_layers[-1] for view_layers in layers], dim=1)
    centred = embedding - embedding.mean(0)
    _, _, components = torch.pca_lowrank(centred, q=2, center=False)
    points = (centred @ components[:, :2]).numpy()
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(5, 4.5))
    axis.scatter(points[:, 0], points[:, 1], c=labels.numpy(), cmap="tab10", s=6)
    axis.set(title=title, xlabel="PC 1", ylabel="PC 2")
    figure.tight_layout()
    return figure


@dataclass
class ViewsClusteringStudy(Study):
    """k-means and SDCIB on the views of several data modules (see the module docstring).

    Args:
        sources: name -> ``{"class_path": ..., "init_args": {...}}`` of a MultiViewDataModule.
        runs: ``[source, method]`` pairs, ``method`` in ``kmeans`` / ``sdcib``, in table order.
        seeds: seeds of every run; ``None``: the recipe grid's seeds (``compare.seeds``), or
            0-4 without a grid.
        sdcib: SDCIB's arguments (besides the views, clusters and seed); ``loss`` as a mapping
            of :class:`~lightning_info.methods.sdcib.module.SDCIBLossOptions` fields.
        max_epochs: SDCIB's epochs.
        grid_arms: grid arm id -> row label: the recipe grid's results on these sources (grid
            values named like the sources) join the table.
        title: the table's title.
    """

    sources: dict[str, dict[str, Any]] = field(default_factory=dict)
    runs: list[list[str]] = field(default_factory=list)
    seeds: list[int] | None = None
    sdcib: dict[str, Any] = field(default_factory=dict)
    max_epochs: int = 30
    grid_arms: dict[str, str] = field(default_factory=dict)
    title: str = "clustering"

    def __post_init__(self) -> None:
        for source, method in self.runs:
            if source not in self.sources:
                raise ValueError(f"run {source!r} names no entry of `sources`.")
            if method not in METHODS:
                raise ValueError(f"run method must be one of {METHODS}, got {method!r}.")
        if self.seeds is not None and not self.seeds:
            raise ValueError("`seeds` is empty: give at least one (or null for the grid's).")

    def _seeds(self, cli) -> list[int]:
        if self.seeds is not None:
            return list(self.seeds)
        grid_seeds = getattr(getattr(getattr(cli, "config", None), "compare", None), "seeds", None)
        return list(grid_seeds) if grid_seeds else [0, 1, 2, 3, 4]

    def run(self, cli=None) -> StudyResult:
        seeds = self._seeds(cli)
        scores: dict[tuple[str, str], list[dict[str, float]]] = {}
        figures, last_model = {}, None
        for source in dict.fromkeys(s for s, _ in self.runs):
            data = build_data_module(self.sources[source])
            for method in [m for s, m in self.runs if s == source]:
                for seed in seeds:
                    if method == "kmeans":
                        result = kmeans_scores(data, seed)
                    else:
                        result, last_model = fit_sdcib(data, seed, self.sdcib, self.max_epochs)
                    scores.setdefault((source, method), []).append(result)
            if last_model is not None and f"embedding_{source}" not in figures:
                figures[f"embedding_{source}"] = embedding_figure(
                    last_model, data, f"SDCIB on {source}"
                )
        rows = self._grid_rows(cli)
        last_grid_model = getattr(cli, "model", None) if self.grid_arms else None
        if isinstance(last_grid_model, SDCIB) and isinstance(cli.datamodule, MultiViewDataModule):
            name = getattr(cli.datamodule, "name", "grid")
            figures[f"embedding_grid_{name}"] = embedding_figure(
                last_grid_model, cli.datamodule, f"SDCIB on {name} (last grid cell)"
            )
        for (source, method), values in scores.items():
            label = "k-means (views joined)" if method == "kmeans" else "SDCIB"
            rows.append(
                [source, label, *(mean_std([v[m] for v in values]) for m in METRICS), len(values)]
            )
        rows.sort(key=lambda row: list(self.sources).index(row[0]))
        columns = ["data", "method", *METRICS, "seeds"]
        records = {f"{s}/{m}": v for (s, m), v in scores.items()}
        return StudyResult({self.title: (columns, rows)}, figures, records)

    def _grid_rows(self, cli) -> list[list]:
        """The grid's results of ``grid_arms`` on the study's sources."""
        if not self.grid_arms or cli is None:
            return []
        rows = []
        for arm, label in self.grid_arms.items():
            for source in self.sources:
                values = {
                    m: [
                        r.value
                        for r in cli.results
                        if r.arm == arm and str(r.grid_value) == source and r.metric == f"test/{m}"
                    ]
                    for m in METRICS
                }
                if values["acc"]:
                    rows.append(
                        [source, label, *(mean_std(values[m]) for m in METRICS), len(values["acc"])]
                    )
        return rows


# ----------------------------------------------------------------- the reference's protocol


def min_loss_epoch(epochs: Sequence[Mapping[str, float]], loss: str = "last_batch_loss") -> dict:
    """The record of the epoch of least ``loss`` (the first of ties): the reference's choice of
    epoch in a run (its loss: that of the epoch's last batch)."""
    if not epochs:
        raise ValueError("a run needs at least one epoch's record to choose from.")
    best = min(range(len(epochs)), key=lambda i: epochs[i][loss])
    return dict(epochs[best])


def best_run(records: Sequence[Mapping[str, float]], key: str = "acc") -> dict:
    """The record of largest ``key`` (the first of ties), all its metrics from that one run:
    the reference's maximum over runs."""
    if not records:
        raise ValueError("the maximum over runs needs at least one run.")
    best = max(range(len(records)), key=lambda i: records[i][key])
    return dict(records[best])


def reference_protocol(
    runs: Sequence[Sequence[Mapping[str, float]]],
    runs_per_group: int = 10,
    loss: str = "last_batch_loss",
    key: str = "acc",
) -> list[dict]:
    """Per consecutive group of ``runs_per_group`` runs (each a list of per-epoch records), the
    :func:`best_run` of the runs' :func:`min_loss_epoch` records: one record per group."""
    if runs_per_group < 1 or not runs or len(runs) % runs_per_group:
        raise ValueError(
            f"{len(runs)} runs do not split into groups of `runs_per_group` = {runs_per_group}."
        )
    chosen = [min_loss_epoch(run, loss) for run in runs]
    return [
        best_run(chosen[start : start + runs_per_group], key)
        for start in range(0, len(chosen), runs_per_group)
    ]


@torch.no_grad()
def fused_scores(model: SDCIB, views: Sequence[torch.Tensor], labels: torch.Tensor) -> dict:
    """ACC / NMI / ARI of the fused clustering of ``views`` by ``model`` in evaluation mode (the
    layers' means, batch norm's running statistics), as its test step computes them."""
    was_training = model.training
    model.eval()
    _, assignments = model([view.to(model.device) for view in views])
    predicted, _ = aligned_vote([a.cpu() for a in assignments], model.hparams.reference_view)
    model.train(was_training)
    return clustering_scores(predicted, labels)


class EpochScores(Callback):
    """Records, after every training epoch, the last batch's and the mean training loss and the
    fused clustering's scores on the whole data (``records``: one dict per epoch). The scoring
    draws no random numbers, so the run trains exactly as without it."""

    def __init__(self, views: Sequence[torch.Tensor], labels: torch.Tensor) -> None:
        self.views, self.labels = list(views), labels
        self.records: list[dict[str, float]] = []
        self._losses: list[float] = []

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self._losses = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        loss = outputs["loss"] if isinstance(outputs, Mapping) else outputs
        self._losses.append(float(loss))

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self.records.append(
            {
                "epoch": trainer.current_epoch + 1,
                "last_batch_loss": self._losses[-1],
                "mean_loss": sum(self._losses) / len(self._losses),
                **fused_scores(pl_module, self.views, self.labels),
            }
        )


@dataclass(frozen=True)
class ReferenceJob:
    """One run of a :class:`ReferenceProtocolStudy`: the data set's name and spec, the row
    label, SDCIB's arguments (``None``: k-means), the seed and the training settings."""

    data: str
    source: dict[str, Any]
    method: str
    model: dict[str, Any] | None
    seed: int
    epochs: int
    threads: int
    root: str


def reference_run(job: ReferenceJob) -> dict[str, Any]:
    """One run of :class:`ReferenceProtocolStudy`: k-means (one record) or SDCIB with the
    per-epoch records of :class:`EpochScores`."""
    torch.set_num_threads(job.threads)
    data = build_data_module(job.source)
    outcome = {"data": job.data, "method": job.method, "seed": job.seed}
    if job.model is None:
        return {**outcome, "epochs": [{"epoch": 0, **kmeans_scores(data, job.seed)}]}
    model_args = dict(job.model)
    if isinstance(model_args.get("loss"), Mapping):
        model_args["loss"] = SDCIBLossOptions(**model_args["loss"])
    pl.seed_everything(job.seed, verbose=False)
    model = SDCIB(data.view_dims, data.num_classes, seed=job.seed, **model_args)
    recorder = EpochScores(data.views, data.labels)
    trainer = quiet_trainer(
        max_epochs=job.epochs,
        accelerator="cpu",
        limit_val_batches=0,
        callbacks=[recorder],
        default_root_dir=job.root,
    )
    trainer.fit(model, datamodule=data)
    return {**outcome, "epochs": recorder.records}


def _scores(name: str, record: Mapping[str, float]) -> str:
    return f"{name} " + " ".join(f"{m} {record[m]:.4f}" for m in METRICS)


@dataclass
class ReferenceProtocolStudy(Study):
    """SDCIB arms and k-means on the same data and seeds, reported under two protocols.

    Every SDCIB run is scored after every epoch (fused clustering of the whole data, evaluation
    mode) and its per-epoch training loss recorded. Rows per data set and method:

    - ``last epoch, mean ± std``: this project's protocol;
    - ``min-loss epoch, mean ± std``: each run's score at its epoch of least ``loss``;
    - ``min-loss epoch, max over n runs``: the reference's: per group of ``runs_per_group``
      consecutive seeds, the run of largest ACC (its NMI and ARI with it) among the min-loss
      epochs' scores; with several groups, mean ± std over the groups' maxima.

    k-means (10 restarts, on the joined views) gets the mean ± std and the max over the same
    groups of seeds.

    Args:
        sources: name -> ``{"class_path": ..., "init_args": {...}}`` of a MultiViewDataModule.
        arms: row label -> SDCIB arguments overriding ``sdcib`` (``{}``: ``sdcib`` itself).
        sdcib: SDCIB's arguments (besides the views, clusters and seed); ``loss`` a mapping.
        kmeans: add the k-means rows.
        seeds: the runs' seeds; their count a multiple of ``runs_per_group``.
        runs_per_group: runs the maximum is taken over (the reference: 10).
        max_epochs: epochs of every SDCIB run (the reference: 40).
        loss: the loss choosing the epoch: ``last_batch_loss`` (the reference's) or
            ``mean_loss`` (the epoch's mean).
        workers, threads: processes running runs side by side; torch threads in each.
        title: the table's title.
    """

    sources: dict[str, dict[str, Any]] = field(default_factory=dict)
    arms: dict[str, dict[str, Any]] = field(default_factory=lambda: {"SDCIB": {}})
    sdcib: dict[str, Any] = field(default_factory=dict)
    kmeans: bool = True
    seeds: list[int] = field(default_factory=lambda: list(range(10)))
    runs_per_group: int = 10
    max_epochs: int = 40
    loss: str = "last_batch_loss"
    workers: int = 1
    threads: int = 1
    title: str = "the reference's protocol next to this project's"

    def __post_init__(self) -> None:
        if not self.sources:
            raise ValueError("`sources` is empty: name at least one multi-view data module.")
        if self.runs_per_group < 1:
            raise ValueError(f"`runs_per_group` must be at least 1, got {self.runs_per_group}.")
        if not self.seeds or len(self.seeds) % self.runs_per_group:
            raise ValueError(
                f"{len(self.seeds)} seeds do not split into groups of `runs_per_group` = "
                f"{self.runs_per_group}: give a multiple of it."
            )
        if self.loss not in PROTOCOL_LOSSES:
            raise ValueError(f"`loss` must be one of {PROTOCOL_LOSSES}, got {self.loss!r}.")
        if self.max_epochs < 1:
            raise ValueError(f"`max_epochs` must be at least 1, got {self.max_epochs}.")

    def run(self, cli=None) -> StudyResult:
        root = str(getattr(cli, "output_dir", ".")) if cli is not None else "."
        methods = {label: {**self.sdcib, **args} for label, args in self.arms.items()}
        if self.kmeans:
            methods[KMEANS] = None
        jobs = [
            ReferenceJob(
                data=source,
                source=spec,
                method=label,
                model=model,
                seed=seed,
                epochs=self.max_epochs,
                threads=self.threads,
                root=root,
            )
            for source, spec in self.sources.items()
            for seed in self.seeds
            for label, model in methods.items()
        ]

        def describe(r: dict[str, Any]) -> str:
            last = r["epochs"][-1]
            shown = f"{r['data']} {r['method']} seed={r['seed']}: " + _scores("last", last)
            if r["method"] == KMEANS:
                return shown
            least = min_loss_epoch(r["epochs"], self.loss)
            return shown + "; " + _scores(f"min-loss epoch {least['epoch']}", least)

        records = run_jobs(reference_run, jobs, self.workers, describe)
        rows, plots = [], {}
        for source in self.sources:
            curves = {}
            for label in methods:
                runs = [
                    r["epochs"] for r in records if r["data"] == source and r["method"] == label
                ]
                rows += self._rows(source, label, runs)
                if label != KMEANS:
                    curves[label] = [
                        sum(run[e]["acc"] for run in runs) / len(runs)
                        for e in range(self.max_epochs)
                    ]
            if curves:
                epochs = list(range(1, self.max_epochs + 1))
                plots[f"acc_{source}"] = ("epoch", epochs, curves)
        columns = ["data", "method", "protocol", *METRICS, "runs"]
        return StudyResult({self.title: (columns, rows)}, {}, records, plots)

    def _rows(self, source: str, label: str, runs: list[list[dict]]) -> list[list]:
        n = self.runs_per_group

        def row(protocol: str, chosen: list[dict]) -> list:
            cells = [[c[m] for c in chosen] for m in METRICS]
            shown = [f"{v[0]:.4f}" if len(v) == 1 else mean_std(v) for v in cells]
            return [source, label, protocol, *shown]

        if label == KMEANS:  # one record per run: the maximum over each group's runs
            maxima = [best_run([r[-1] for r in runs[i : i + n]]) for i in range(0, len(runs), n)]
        else:
            maxima = reference_protocol(runs, n, self.loss)
        groups = len(maxima)
        kind = "max over" if groups == 1 else f"{groups} groups' max over"
        if label == KMEANS:
            return [
                [*row("mean ± std", [run[-1] for run in runs]), len(runs)],
                [*row(f"{kind} {n} runs", maxima), len(runs)],
            ]
        return [
            [*row("last epoch, mean ± std", [run[-1] for run in runs]), len(runs)],
            [
                *row("min-loss epoch, mean ± std", [min_loss_epoch(r, self.loss) for r in runs]),
                len(runs),
            ],
            [*row(f"min-loss epoch, {kind} {n} runs", maxima), len(runs)],
        ]
