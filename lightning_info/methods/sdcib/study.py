"""The clustering recipe's studies: baselines next to SDCIB on the same views and seeds.

:class:`ViewsClusteringStudy` clusters the views of any number of multi-view data modules, each
given by class path and arguments (so a recipe can feed it the hop views of a graph from another
method's data module without this code importing it), with k-means on the concatenated views
and/or SDCIB, over seeds, and reports ACC / NMI / ARI as mean ± std. With ``grid_arms`` it also
places the recipe grid's own SDCIB arms in the table (same data, same seeds), and it draws the
2-D embedding of the last SDCIB run of each source and of the grid's last cell (principal
components of the views' last-layer means, coloured by fused cluster).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import lightning.pytorch as pl
import torch

from lightning_info.core.logging import mean_std
from lightning_info.core.optional import import_object
from lightning_info.core.plotting import pyplot
from lightning_info.core.trainers import quiet_trainer
from lightning_info.data.multiview import MultiViewDataModule
from lightning_info.experiments.study import Study, StudyResult
from lightning_info.measures.clustering import clustering_scores
from lightning_info.methods.sdcib.functional import aligned_vote
from lightning_info.methods.sdcib.module import SDCIB, SDCIBLossOptions

METRICS = ("acc", "nmi", "ari")
METHODS = ("kmeans", "sdcib")


def build_data_module(spec: dict[str, Any]) -> MultiViewDataModule:
    """A data module from ``{"class_path": "pkg.Class", "init_args": {...}}``."""
    data = import_object(spec["class_path"])(**spec.get("init_args", {}))
    if not isinstance(data, MultiViewDataModule):
        raise TypeError(f"{spec['class_path']} is not a MultiViewDataModule.")
    return data


def kmeans_scores(data: MultiViewDataModule, seed: int) -> dict[str, float]:
    """sklearn's k-means (10 restarts) on the concatenated views, ``K`` = the number of classes."""
    from sklearn.cluster import KMeans

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
