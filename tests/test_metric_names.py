"""Every name the package logs is one a logger can sort, filter and plot.

Each row of the plugin table trains briefly (a short fit with validation, then ``test`` where the
model has a test step) with a recording Logger attached: every key of ``trainer.logged_metrics``,
of ``trainer.callback_metrics`` and of every ``log_metrics`` call matches
:data:`~lightning_info.core.logging.METRIC_NAME`. The post-hoc reports log each cell of their
tables under ``metric_key("posthoc", table, row, column)``; names built from a user's prefix or a
non-default option go through the same rule, and names that the rule would merge are refused.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import NamedTuple

import pytest
import torch
from lightning.pytorch import Trainer, seed_everything
from lightning.pytorch.loggers import Logger
from lightning.pytorch.utilities.model_helpers import is_overridden

from lightning_info import (
    DigitsDataModule,
    FisherConstraint,
    MLPClassifier,
    MSPScorer,
    OODShapingReport,
    PosthocScoring,
    ROMEDistillation,
    SmoothedInformationMonitor,
)
from lightning_info.core.logging import METRIC_NAME, metric_key
from lightning_info.methods.rome import SmallConvNet
from lightning_info.methods.smoothed_information.functional import SmoothedEstimatorOptions
from lightning_info.scoring.report import table_scalars
from tests.plugin_table import PLUGINS, tiny_digits, tiny_rome
from tests.tiny import QUIET, TinyClassifier, TinyDataModule


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_torch_thread): ...


class RecordingLogger(Logger):
    """Keeps every key and the last value passed to ``log_metrics``."""

    def __init__(self) -> None:
        super().__init__()
        self.metrics: dict[str, float] = {}

    @property
    def name(self) -> str:
        return "recording"

    @property
    def version(self) -> int:
        return 0

    def log_hyperparams(self, params, *args, **kwargs) -> None:
        pass

    def log_metrics(self, metrics, step=None) -> None:
        self.metrics.update(metrics)


class Run(NamedTuple):
    trainer: Trainer
    names: set[str]
    """Every key ``trainer.logged_metrics`` and ``trainer.callback_metrics`` held after the fit
    and after the test."""
    logger: RecordingLogger


def fit_and_test(model, callbacks, data, **trainer_kwargs) -> Run:
    """Two training batches, two validation batches, then two test batches when the model has
    a test step; every name logged on the way is kept."""
    seed_everything(0)
    logger = RecordingLogger()
    settings = {"limit_train_batches": 2, **trainer_kwargs}
    trainer = Trainer(
        max_epochs=1,
        limit_val_batches=2,
        limit_test_batches=2,
        num_sanity_val_steps=0,
        log_every_n_steps=1,
        callbacks=callbacks,
        **{**QUIET, "logger": logger, **settings},
    )
    trainer.fit(model, datamodule=data)
    names = set(trainer.logged_metrics) | set(trainer.callback_metrics)
    if is_overridden("test_step", model):
        trainer.test(model, datamodule=data, verbose=False)
    names |= set(trainer.logged_metrics) | set(trainer.callback_metrics)
    return Run(trainer, names, logger)


def unfit_names(names) -> list[str]:
    return sorted(name for name in names if not METRIC_NAME.fullmatch(name))


@pytest.mark.parametrize("case", [pytest.param(case, id=case.id) for case in PLUGINS])
def test_every_row_logs_only_logger_friendly_names(case):
    data = None if case.make_data is None else case.make_data(8)
    run = fit_and_test(case.make_model(), case.make_callbacks(), data, **case.trainer_kwargs)
    assert run.logger.metrics, f"{case.id} logged nothing"
    assert unfit_names(run.names) == []
    assert unfit_names(run.logger.metrics) == []


def _failure_report():
    return PosthocScoring(scorers=[MSPScorer(), MSPScorer(temperature_scaled=True)])


def _ood_report():
    return OODShapingReport(shapers=["identity", "react"], tune_trials=2)


@pytest.mark.parametrize(
    ("make_report", "table", "spelled_out"),
    [
        pytest.param(
            _failure_report,
            "failure",
            {
                # row "MSP (temperature)", column "AUROC"; "MSP", "FPR@95TPR"; "AUPR-success"
                "posthoc/failure/msp_temperature/auroc",
                "posthoc/failure/msp/fpr_at_95tpr",
                "posthoc/failure/msp_temperature/aupr-success",
            },
            id="failure",
        ),
        pytest.param(
            _ood_report,
            "ood",
            {
                # row "energy" (the identity shaper), columns "<OOD set> AUROC", "... FPR@95"
                "posthoc/ood/energy/digits_auroc",
                "posthoc/ood/react/noise_fpr_at_95",
                "posthoc/ood/react/shuffled_auroc",
            },
            id="ood",
        ),
    ],
)
def test_posthoc_report_logs_each_cell_under_metric_key_of_its_row_and_column(
    make_report, table, spelled_out
):
    report = make_report()
    data = DigitsDataModule(classes=3, batch_size=32, val_fraction=0.3)
    logger = fit_and_test(MLPClassifier(64, 3, hidden=[8]), [report], data).logger
    columns, rows = report.tables[table]
    expected = {
        metric_key("posthoc", table, row[0], column): float(value)
        for row in rows
        for column, value in zip(columns[1:], row[1:])
    }
    logged = {k: v for k, v in logger.metrics.items() if k.startswith("posthoc/")}
    assert len(expected) == len(rows) * (len(columns) - 1) == len(logged)
    assert logged == pytest.approx(expected, nan_ok=True)
    assert spelled_out <= set(logged)
    assert unfit_names(logged) == []


def test_table_cells_the_rule_would_merge_are_refused():
    tables = {"failure": (["scorer", "AUROC"], [["MSP", "0.5"], ["msp", "0.6"]])}
    with pytest.raises(ValueError, match="both be logged as 'posthoc/failure/msp/auroc'"):
        table_scalars(tables)


def test_scorers_whose_logged_names_would_merge_are_refused():
    other = MSPScorer()
    other.name = "msp"
    with pytest.raises(ValueError, match=r"several scorers named \['MSP', 'msp'\]"):
        PosthocScoring(scorers=[MSPScorer(), other])


class _CollidingOODSets(DigitsDataModule):
    def ood_dataloaders(self, split: str = "test"):
        loaders = super().ood_dataloaders(split)
        return {"Noise": loaders["noise"], "noise": loaders["noise"]}


def test_ood_sets_whose_logged_names_would_merge_are_refused_before_training():
    model = MLPClassifier(64, 3, hidden=[8])
    trainer = Trainer(max_epochs=1, callbacks=[_ood_report()], **QUIET)
    with pytest.raises(ValueError, match=r"OOD sets \['Noise', 'noise'\].*name them apart"):
        trainer.fit(model, datamodule=_CollidingOODSets(classes=3, val_fraction=0.3))
    assert trainer.global_step == 0


def test_user_prefixes_are_logged_through_metric_key():
    callbacks = [
        FisherConstraint(max_fisher=1e-2, log_prefix="Fisher Bound"),
        SmoothedInformationMonitor(
            "net.1", t=[0.5], options=SmoothedEstimatorOptions(num_mc=64), log_prefix="Info (val)"
        ),
    ]
    run = fit_and_test(TinyClassifier(), callbacks, TinyDataModule())
    names = run.names | set(run.logger.metrics)
    assert {"fisher_bound/trace_before", "fisher_bound/constrained_fraction"} <= names
    assert {"info_val/net.1/j_t_0.5", "info_val/net.1/h_t_0.5", "info_val/net.1/i_t_0.5"} <= names
    assert unfit_names(names) == []


@pytest.mark.parametrize(
    "make_callback",
    [
        pytest.param(lambda: FisherConstraint(log_prefix="()"), id="fisher-constraint"),
        pytest.param(lambda: SmoothedInformationMonitor(log_prefix=" / "), id="smoothed-info"),
    ],
)
def test_a_prefix_with_nothing_to_log_is_refused(make_callback):
    with pytest.raises(ValueError, match="names nothing a logger can show"):
        make_callback()


def test_a_prefix_that_is_no_string_is_refused():
    with pytest.raises(TypeError, match="`log_prefix` must be a str, got 3"):
        SmoothedInformationMonitor(log_prefix=3)


def test_rome_target_shifts_are_logged_through_metric_key():
    """``targeted+1/pgd`` of the evaluation is logged as ``test/targetedplus1/pgd``."""
    row = tiny_rome()
    data = tiny_digits(8)
    settings = {**row.hparams, "evaluation": replace(row.hparams.evaluation, target_shifts=(1, -1))}
    model = ROMEDistillation(
        data.train_images, data.train_labels, net=partial(SmallConvNet, width=4), **settings
    )
    run = fit_and_test(model, [], data, limit_train_batches=3)
    shifted = {name for name in run.names if name.startswith("test/targeted")}
    assert shifted == {
        metric_key("test", f"targeted{shift}/{name}")
        for shift in ("+1", "-1")
        for name in ("fgsm", "pgd", "pgd_l2", "rr", "i_rr")
    }
    assert {"test/targetedplus1/pgd", "test/targeted-1/i_rr"} <= shifted
    assert unfit_names(run.names) == []
    assert all(torch.isfinite(run.trainer.callback_metrics[name]) for name in shifted)
