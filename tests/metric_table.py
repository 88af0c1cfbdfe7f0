"""The metric table: every ``torchmetrics.Metric`` of the package with tiny batches of its input.

Each row inherits the generic tests in ``test_metric_table.py``: a state is never updated in place
(``ddp_spawn`` shares a CPU tensor's memory between the processes it starts, and Lightning unshares
only parameters and buffers, so an in-place ``+=`` on a state adds every process's updates into one
storage); and, updated and logged from a LightningModule as the suite's modules log them, under
``Trainer(strategy="ddp", devices=2)`` (torchrun) and ``"ddp_spawn"`` on uneven shards, the logged
values equal the metric computed once on all batches. Rows are checked for completeness by
discovery, as the plugin table's are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule
from torch import Tensor
from torch.utils.data import DataLoader
from torchmetrics import Metric, MetricCollection

from lightning_info.measures.clustering import ClusteringAccuracy, ClusteringARI, ClusteringNMI
from lightning_info.methods.cacti.metrics import (
    ImputationMAE,
    ImputationR2,
    ImputationRMSE,
    ImputationWasserstein,
    imputation_metrics,
)
from lightning_info.methods.docks_rag.metrics import DocREDScores
from lightning_info.methods.docks_rag.synthetic import synthetic_docred
from lightning_info.methods.ood_shaping.metrics import OODAUROC, OODFPRAt95TPR
from lightning_info.methods.pointwise_confidence.metrics import (
    AURC,
    EAURC,
    AdaptiveCalibrationError,
    AUPRError,
    AUPRSuccess,
    BrierScore,
    ExpectedCalibrationError,
    FailureAUROC,
    FailureFPRAt95TPR,
    NegativeLogLikelihood,
)
from lightning_info.methods.prodiff.metrics import (
    MaxTrajectoryDeviation,
    MeanTrajectoryDeviation,
    TimeMAE,
    TrajectoryCoverage,
    trajectory_metrics,
)
from lightning_info.methods.rome.metrics import ImprovedRobustnessRatio, RobustnessRatio
from lightning_info.methods.sdcib.metrics import AlignedVoteClustering
from lightning_info.methods.smoothed_information.functional import SmoothedEstimatorOptions
from lightning_info.methods.smoothed_information.metrics import (
    SampleReservoir,
    SmoothedEntropy,
    SmoothedFisherInformation,
    SmoothedMutualInformation,
)

NUM_BATCHES = 5
RANK_BATCHES = ((0, 1, 2), (3, 4))
"""Uneven contiguous shards: rank 0 updates on three batches, rank 1 on two, so a state gathered
in rank order lists the rows in the one-process order."""

Batches = list[tuple[Any, ...]]


@dataclass(frozen=True)
class MetricCase:
    id: str
    make: Callable[[], Metric | MetricCollection]
    batches: Callable[[], Batches]
    """``NUM_BATCHES`` argument tuples of ``update``, together the whole data."""
    log_object: bool = True
    """Also log the metric object itself each step (``compute()`` gives a scalar), as CACTI does;
    every row is logged as computed values at the epoch's end, as ProDiff and SDCIB do."""


def _generator() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def _split(*columns: Tensor) -> Batches:
    """Each column cut into ``NUM_BATCHES`` uneven consecutive batches."""
    sizes = [7, 5, 9, 4, 6][:NUM_BATCHES]
    pieces = [torch.split(column, sizes) for column in columns]
    return [tuple(piece[i] for piece in pieces) for i in range(NUM_BATCHES)]


def _labels(classes: int = 3) -> Batches:
    g = _generator()
    target = torch.randint(0, classes, (31,), generator=g)
    predicted = torch.where(torch.rand(31, generator=g) < 0.7, target, (target + 1) % classes)
    return _split(predicted, target)


def _scores_and_flags() -> Batches:
    g = _generator()
    flags = torch.rand(31, generator=g) < 0.6
    scores = torch.randn(31, generator=g, dtype=torch.float64) + flags.double()
    return _split(scores, flags)


def _confidences_and_correct() -> Batches:
    g = _generator()
    confidences = torch.rand(31, generator=g, dtype=torch.float64)
    return _split(confidences, torch.rand(31, generator=g, dtype=torch.float64) < confidences)


def _probabilities_and_labels() -> Batches:
    g = _generator()
    probs = torch.softmax(torch.randn(31, 4, generator=g, dtype=torch.float64), dim=1)
    return _split(probs, torch.randint(0, 4, (31,), generator=g))


def _samples() -> Batches:
    return _split(torch.randn(31, 2, generator=_generator(), dtype=torch.float64))


def _attacks() -> Batches:
    g = _generator()
    target = torch.randint(0, 3, (31,), generator=g)
    clean = torch.randn(31, 3, generator=g)
    attacked = torch.randint(0, 3, (31, 2), generator=g)
    return [(c, a.T, t) for c, a, t in _split(clean, attacked, target)]


def _imputations() -> Batches:
    g = _generator()
    truth = torch.randn(31, 4, generator=g, dtype=torch.float64)
    imputed = truth + 0.3 * torch.randn(31, 4, generator=g, dtype=torch.float64)
    return _split(imputed, truth, torch.rand(31, 4, generator=g) < 0.4)


def _trajectories() -> Batches:
    g = _generator()
    time = torch.arange(5, dtype=torch.float64).expand(31, 5)
    lat = 41.0 + 0.05 * torch.randn(31, 5, generator=g, dtype=torch.float64)
    lng = 2.0 + 0.05 * torch.randn(31, 5, generator=g, dtype=torch.float64)
    target = torch.stack([time, lat, lng], dim=2)
    pred = target + 0.02 * torch.randn(31, 5, 3, generator=g, dtype=torch.float64)
    return _split(pred, target)


def _view_probabilities() -> Batches:
    g = _generator()
    target = torch.randint(0, 3, (31,), generator=g)
    signal = 3.0 * torch.nn.functional.one_hot(target, 3)
    views = [torch.softmax(signal + torch.randn(31, 3, generator=g), 1) for _ in range(2)]
    return [([p0, p1], t) for p0, p1, t in _split(*views, target)]


def _documents() -> Batches:
    documents = synthetic_docred(10, seed=3)
    predictions = []
    for index, document in enumerate(documents):
        for number, label in enumerate(document["labels"]):
            relation = label["r"] if (index + number) % 3 else "P0"
            evidence = label.get("evidence", [])[: 1 + number % 2]
            predictions.append(
                dict(
                    title=document["title"],
                    h_idx=label["h"],
                    t_idx=label["t"],
                    r=relation,
                    evidence=evidence,
                )
            )
    cuts = [0, 2, 4, 7, 8, 10]
    return [(predictions, documents[a:b]) for a, b in zip(cuts, cuts[1:])]


METRICS = [
    MetricCase("ClusteringAccuracy", lambda: ClusteringAccuracy(3, 3), _labels),
    MetricCase("ClusteringNMI", lambda: ClusteringNMI(3, 3), _labels),
    MetricCase("ClusteringARI", lambda: ClusteringARI(3, 3), _labels),
    MetricCase("FailureAUROC", FailureAUROC, _scores_and_flags),
    MetricCase("AUPRSuccess", AUPRSuccess, _scores_and_flags),
    MetricCase("AUPRError", AUPRError, _scores_and_flags),
    MetricCase("FailureFPRAt95TPR", FailureFPRAt95TPR, _scores_and_flags),
    MetricCase("AURC", AURC, _scores_and_flags),
    MetricCase("EAURC", EAURC, _scores_and_flags),
    MetricCase("ExpectedCalibrationError", ExpectedCalibrationError, _confidences_and_correct),
    MetricCase("AdaptiveCalibrationError", AdaptiveCalibrationError, _confidences_and_correct),
    MetricCase("BrierScore", BrierScore, _probabilities_and_labels),
    MetricCase("NegativeLogLikelihood", NegativeLogLikelihood, _probabilities_and_labels),
    MetricCase("OODAUROC", OODAUROC, _scores_and_flags),
    MetricCase("OODFPRAt95TPR", OODFPRAt95TPR, _scores_and_flags),
    MetricCase("SampleReservoir", SampleReservoir, _samples, log_object=False),
    MetricCase(
        "SmoothedFisherInformation",
        lambda: SmoothedFisherInformation(0.5, SmoothedEstimatorOptions(num_mc=64)),
        _samples,
    ),
    MetricCase(
        "SmoothedEntropy",
        lambda: SmoothedEntropy(0.5, SmoothedEstimatorOptions(num_mc=64)),
        _samples,
    ),
    MetricCase(
        "SmoothedMutualInformation",
        lambda: SmoothedMutualInformation(0.5, SmoothedEstimatorOptions(num_mc=64)),
        _samples,
    ),
    MetricCase("RobustnessRatio", lambda: RobustnessRatio(2), _attacks),
    MetricCase("ImprovedRobustnessRatio", lambda: ImprovedRobustnessRatio(2), _attacks),
    MetricCase("MeanTrajectoryDeviation", MeanTrajectoryDeviation, _trajectories),
    MetricCase("MaxTrajectoryDeviation", MaxTrajectoryDeviation, _trajectories),
    MetricCase("MaxTrajectoryDeviation-max", lambda: MaxTrajectoryDeviation("max"), _trajectories),
    MetricCase("TimeMAE", TimeMAE, _trajectories),
    MetricCase("TrajectoryCoverage", TrajectoryCoverage, _trajectories, log_object=False),
    MetricCase(
        "trajectory_metrics",
        lambda: trajectory_metrics((1.0, 5.0)),
        _trajectories,
        log_object=False,
    ),
    MetricCase("DocREDScores", DocREDScores, _documents, log_object=False),
    MetricCase(
        "AlignedVoteClustering",
        lambda: AlignedVoteClustering(2),
        _view_probabilities,
        log_object=False,
    ),
    MetricCase("ImputationR2", lambda: ImputationR2(4), _imputations),
    MetricCase("ImputationRMSE", lambda: ImputationRMSE(4), _imputations),
    MetricCase("ImputationMAE", lambda: ImputationMAE(4), _imputations),
    MetricCase("ImputationWasserstein", lambda: ImputationWasserstein(4), _imputations),
    MetricCase("imputation_metrics", lambda: imputation_metrics(4), _imputations),
]

EXEMPT = {
    "ContingencyMetric": "base of the three clustering metrics, which have rows; no compute",
    "PooledScores": "base of the failure-prediction and OOD metrics, which have rows; no compute",
    "DtypeKeepingMetric": "base of PooledScores, SampleReservoir and ImputationWasserstein",
}
"""Public Metric classes of the package without a row, and why; private (``_``) bases are
covered by their subclasses' rows."""


def computed_values(key: str, value: Tensor | dict[str, Tensor]) -> dict[str, Tensor]:
    """``compute()``'s result as flat ``{key[/name]: tensor}``."""
    if isinstance(value, dict):
        return {f"{key}/{name}": v for name, v in value.items()}
    return {key: value}


def one_process_values(case: MetricCase) -> dict[str, Tensor]:
    """The oracle: one metric updated with every batch in order, computed once."""
    metric = case.make()
    for args in case.batches():
        metric.update(*args)
    return computed_values(f"computed/{case.id}", metric.compute())


class MetricLogger(LightningModule):
    """Updates every row's metrics with its batches of this rank's shard and logs them.

    Each row has two instances: one logged as the metric object every step (``log_dict`` of the
    metric or collection, Lightning computes it at the epoch's end), one computed, logged with
    ``log_dict`` and reset in ``on_test_epoch_end``. The computed values of every shape are kept
    in ``computed`` (non-scalar ones cannot be logged).
    """

    def __init__(self, cases: list[MetricCase]) -> None:
        super().__init__()
        self.anchor = torch.nn.Parameter(torch.zeros(1))
        self.ids = [case.id for case in cases]  # not the cases: ddp_spawn pickles the module
        self.batches = {case.id: case.batches() for case in cases}
        self.objects = torch.nn.ModuleDict({c.id: c.make() for c in cases if c.log_object})
        self.computed_metrics = torch.nn.ModuleDict({c.id: c.make() for c in cases})
        self.computed: dict[str, Tensor] = {}

    def test_dataloader(self) -> DataLoader:
        shard = list(range(NUM_BATCHES))
        if self.trainer.world_size > 1:
            shard = list(RANK_BATCHES[self.trainer.global_rank])
        return DataLoader(shard, batch_size=None)

    def test_step(self, batch_index: Tensor, _: int) -> None:
        index = int(batch_index)
        for key in self.ids:
            args = self.batches[key][index]
            self.computed_metrics[key].update(*args)
            if key in self.objects:
                metric = self.objects[key]
                metric.update(*args)
                if isinstance(metric, MetricCollection):
                    self.log_dict(metric, batch_size=1)
                else:
                    self.log_dict({f"object/{key}": metric}, batch_size=1)

    def on_test_epoch_end(self) -> None:
        for key in self.ids:
            metric = self.computed_metrics[key]
            values = computed_values(f"computed/{key}", metric.compute())
            self.computed.update({k: v.detach().clone() for k, v in values.items()})
            self.log_dict({k: v for k, v in values.items() if v.numel() == 1})
            metric.reset()


class SaveLoggedValues(Callback):
    """Every rank writes what it logged and computed to ``out/{prefix}rank{r}.pt``."""

    def __init__(self, out: str, prefix: str = "") -> None:
        self.out, self.prefix = out, prefix

    def on_test_end(self, trainer, pl_module: MetricLogger) -> None:
        logged = {k: v.detach().clone() for k, v in trainer.callback_metrics.items()}
        result = {"logged": logged, "computed": pl_module.computed}
        torch.save(result, f"{self.out}/{self.prefix}rank{trainer.global_rank}.pt")


def object_keys(case: MetricCase) -> dict[str, str]:
    """``{logged name: oracle name}`` of a row's metric object (a collection logs its members)."""
    if not case.log_object:
        return {}
    made = case.make()
    if isinstance(made, MetricCollection):
        return {key: f"computed/{case.id}/{key}" for key in made}
    return {f"object/{case.id}": f"computed/{case.id}"}
