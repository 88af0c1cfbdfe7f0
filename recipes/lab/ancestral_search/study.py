"""The ancestral-search recipe's study: the search against FCI on pgmpy's networks with hidden
nodes, and the method note's toy graphs as the sample grows.

For every network x hidden fraction x N x seed one :class:`BayesianNetworkDataModule` draws the
data and the hidden nodes (a node sampled constant joins the hidden ones, ``constant_hidden``);
causal-learn's FCI (G^2, ``alpha``) runs on the observed columns and its PAG is the baseline;
the search starts from that PAG (its step 0; a PAG whose arrowheads are not ancestral starts
from its skeleton) and adds the node and edge steps. Both are scored
against the oracle PAG of the marginalised DAG by
:func:`~lightning_info.methods.ancestral_search.graphs.graph_scores` (orientation and skeleton
F1), with wall times (the search's includes its FCI skeleton). GFCI is not in the pinned
causal-learn (0.1.4.8), so it is not run. The toy table gives, per toy graph and N, the share of
seeds whose search result equals the toy's MAG exactly.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from lab.study import Study, StudyResult, run_jobs
from lightning_info.core.logging import mean_std
from lightning_info.core.plotting import pyplot
from lightning_info.methods.ancestral_search.datamodule import (
    TOY_GRAPHS,
    BayesianNetworkDataModule,
    monotone_binary_samples,
)
from lightning_info.methods.ancestral_search.functional import (
    edge_step,
    fci_pag,
    initial_graph,
    marks_from_types,
    node_step,
)
from lightning_info.methods.ancestral_search.graphs import graph_scores, mag_from_dag
from lightning_info.methods.ancestral_search.information import InformationCache

METHODS = {"fci": "FCI (G^2)", "search": "search and score"}


def search_from(skeleton: np.ndarray, codes: np.ndarray, method: str) -> np.ndarray:
    """The node and edge steps from a step-0 graph."""
    score = InformationCache(codes, method=method)
    return edge_step(node_step(skeleton, score), score)


@dataclass(frozen=True)
class SearchJob:
    """One (network, hidden fraction, N, seed) of an :class:`AncestralSearchStudy`, with FCI's
    ``alpha`` and the scores' ``method``."""

    network: str
    hidden_fraction: float
    num_samples: int
    seed: int
    alpha: float
    method: str


@dataclass(frozen=True)
class ToyJob:
    """One (toy graph, N, seed) of an :class:`AncestralSearchStudy`, with the skeleton's
    ``alpha`` and the scores' ``method``."""

    toy: str
    num_samples: int
    seed: int
    alpha: float
    method: str


def run_setting(job: SearchJob) -> dict[str, Any]:
    """FCI and the search on one (network, hidden fraction, N, seed)."""
    warnings.filterwarnings("ignore")
    data = BayesianNetworkDataModule(
        job.network,
        num_samples=job.num_samples,
        hidden_fraction=job.hidden_fraction,
        data_seed=job.seed,
        constant_columns="hide",
    )
    start = time.perf_counter()
    pag = fci_pag(data.codes, job.alpha)
    fci_seconds = time.perf_counter() - start
    found = search_from(initial_graph(data.codes, pag=pag), data.codes, job.method)
    search_seconds = time.perf_counter() - start
    scores = {
        "fci": graph_scores(pag, data.truth),
        "search": graph_scores(marks_from_types(found), data.truth),
    }
    return {
        "network": job.network,
        "hidden_fraction": job.hidden_fraction,
        "num_samples": job.num_samples,
        "seed": job.seed,
        "observed": len(data.names),
        "hidden": len(data.hidden),
        "constant_hidden": len(data.constant_hidden),
        "scores": scores,
        "seconds": {"fci": fci_seconds, "search": search_seconds},
    }


def run_toy(job: ToyJob) -> dict[str, Any]:
    """The search on one toy graph's samples: the job's fields and whether it finds the toy's
    MAG."""
    warnings.filterwarnings("ignore")
    dag, hidden = TOY_GRAPHS[job.toy]
    observed = [v for v in range(len(dag)) if v not in hidden]
    codes = monotone_binary_samples(dag, job.num_samples, job.seed)[:, observed]
    found = marks_from_types(search_from(initial_graph(codes, job.alpha), codes, job.method))
    return {**asdict(job), "recovered": bool(np.array_equal(found, mag_from_dag(dag, hidden)))}


@dataclass
class AncestralSearchStudy(Study):
    """The search against FCI, and the toy graphs (see the module docstring).

    Args:
        networks: pgmpy example networks.
        hidden_fractions: shares of the nodes hidden.
        sample_sizes: ``N``.
        seeds: seeds of the samples and the hidden nodes.
        method: the information scores' complexity, ``"nml"`` or ``"bic"``.
        alpha: FCI's significance level (the skeleton and the baseline).
        toy_sample_sizes: the toy graphs' ``N`` (empty: no toy table).
        workers: processes running settings side by side.
    """

    networks: list[str] = field(default_factory=lambda: ["alarm", "insurance"])
    hidden_fractions: list[float] = field(default_factory=lambda: [0.0, 0.1, 0.2])
    sample_sizes: list[int] = field(default_factory=lambda: [1000, 5000])
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    method: str = "nml"
    alpha: float = 0.05
    toy_sample_sizes: list[int] = field(default_factory=lambda: [1000, 10_000, 100_000])
    workers: int = 1

    def __post_init__(self) -> None:
        if not (self.networks and self.hidden_fractions and self.sample_sizes and self.seeds):
            raise ValueError(
                "`networks`, `hidden_fractions`, `sample_sizes` and `seeds` must be non-empty."
            )
        if self.method not in ("nml", "bic"):
            raise ValueError(f"`method` must be 'nml' or 'bic', got {self.method!r}.")

    def _settings(self) -> list[tuple]:
        return [
            (network, fraction, n)
            for network in self.networks
            for fraction in self.hidden_fractions
            for n in self.sample_sizes
        ]

    def run(self, cli=None) -> StudyResult:
        jobs = [
            SearchJob(
                network=w,
                hidden_fraction=f,
                num_samples=n,
                seed=s,
                alpha=self.alpha,
                method=self.method,
            )
            for w, f, n in self._settings()
            for s in self.seeds
        ]

        def describe(r: dict[str, Any]) -> str:
            f1 = r["scores"]["search"]["orientation_f1"]
            return (
                f"{r['network']} {r['hidden_fraction']:.0%} hidden N={r['num_samples']} "
                f"seed={r['seed']}: search F1 {f1:.3f}, FCI "
                f"{r['scores']['fci']['orientation_f1']:.3f}"
            )

        records = run_jobs(run_setting, jobs, self.workers, describe)
        toy_jobs = [
            ToyJob(toy=toy, num_samples=n, seed=s, alpha=self.alpha, method=self.method)
            for toy in TOY_GRAPHS
            for n in self.toy_sample_sizes
            for s in self.seeds
        ]
        toys = run_jobs(
            run_toy,
            toy_jobs,
            self.workers,
            lambda r: f"toy {r['toy']} N={r['num_samples']} seed={r['seed']}: {r['recovered']}",
        )
        tables = {
            "orientation F1 against the oracle PAG": self._table(records, "orientation_f1"),
            "skeleton F1 against the oracle PAG": self._table(records, "skeleton_f1"),
            "seconds (the search's include its FCI skeleton)": self._table(records, "seconds"),
        }
        if toys:
            tables["toy graphs: share of seeds recovering the MAG exactly"] = self._toy_table(toys)
        return StudyResult(tables, {"f1": self._figure(records)}, {"runs": records, "toys": toys})

    def _values(self, records, setting, method, metric) -> list[float]:
        network, fraction, n = setting
        return [
            r["seconds"][method] if metric == "seconds" else r["scores"][method][metric]
            for r in records
            if (r["network"], r["hidden_fraction"], r["num_samples"]) == setting
        ]

    def _table(self, records, metric: str):
        columns = ["network", "hidden", "N", "hidden (sampled constant)", *METHODS.values()]
        rows = []
        for setting in self._settings():
            matching = [
                r
                for r in records
                if (r["network"], r["hidden_fraction"], r["num_samples"]) == setting
            ]
            constant = mean_std([r["constant_hidden"] for r in matching])
            cells = [mean_std(self._values(records, setting, m, metric)) for m in METHODS]
            rows.append([setting[0], f"{setting[1]:.0%}", setting[2], constant, *cells])
        return columns, rows

    def _toy_table(self, toys):
        columns = ["toy graph", *(f"N = {n:,}" for n in self.toy_sample_sizes)]
        rows = []
        for toy in TOY_GRAPHS:
            cells = []
            for n in self.toy_sample_sizes:
                hits = [t["recovered"] for t in toys if t["toy"] == toy and t["num_samples"] == n]
                cells.append(f"{sum(hits)}/{len(hits)}")
            rows.append([toy, *cells])
        return columns, rows

    def _figure(self, records):
        plt = pyplot()
        figure, axes = plt.subplots(
            1, len(self.networks), figsize=(4.8 * len(self.networks), 3.6), squeeze=False
        )
        for axis, network in zip(axes[0], self.networks):
            for fraction in self.hidden_fractions:
                for method, style in (("fci", "--"), ("search", "-")):
                    means = [
                        np.mean(
                            self._values(records, (network, fraction, n), method, "orientation_f1")
                        )
                        for n in self.sample_sizes
                    ]
                    label = f"{METHODS[method]}, {fraction:.0%} hidden"
                    axis.plot(self.sample_sizes, means, style, marker="o", label=label)
            axis.set(title=network, xlabel="N", ylabel="orientation F1", xscale="log")
        axes[0][0].legend(fontsize=7)
        figure.tight_layout()
        return figure
