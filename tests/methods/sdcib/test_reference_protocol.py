"""The reference's reporting protocol (the score at each run's least-loss epoch, then the best of
a group of runs) against hand-computed choices; the per-epoch recorder against the test loop; the
study's rows against its own records; and the recipe config at a toy size."""

from __future__ import annotations

import json
import statistics
import sys

import lightning.pytorch as pl
import pytest
import torch

from lab.sdcib.study import (
    KMEANS,
    EpochScores,
    ReferenceProtocolStudy,
    best_run,
    min_loss_epoch,
    reference_protocol,
)
from lightning_info.methods.sdcib import SDCIB, ClusteringViewsDataModule, SyntheticViewsOptions
from tests.benchmark_scripts import RECIPES, load_recipe

SYNTHETIC = "lightning_info.methods.sdcib.ClusteringViewsDataModule"
TOY_NOISY = {
    "name": "synthetic",
    "synthetic": {"num_samples": 48, "private_clusters": 5},
    "batch_size": 16,
}


def _epoch(epoch, last, mean, acc, nmi, ari):
    return dict(epoch=epoch, last_batch_loss=last, mean_loss=mean, acc=acc, nmi=nmi, ari=ari)


RUN_A = [
    _epoch(1, 3.0, 2.0, 0.5, 0.1, 0.2),
    _epoch(2, 1.0, 2.5, 0.6, 0.2, 0.3),
    _epoch(3, 2.0, 1.0, 0.9, 0.8, 0.7),
    _epoch(4, 1.0, 3.0, 0.4, 0.0, 0.1),
]
RUN_B = [_epoch(1, 0.5, 0.5, 0.7, 0.6, 0.5), _epoch(2, 0.9, 0.4, 0.3, 0.2, 0.1)]
RUN_C = [_epoch(1, 2.0, 2.0, 0.8, 0.1, 0.1), _epoch(2, 1.5, 1.5, 0.55, 0.9, 0.9)]
RUN_D = [_epoch(1, 0.1, 0.1, 0.2, 0.2, 0.2)]


def test_the_least_loss_epoch_is_the_first_of_ties_by_the_chosen_loss():
    assert min_loss_epoch(RUN_A) == RUN_A[1]  # last-batch losses 3, 1, 2, 1: epoch 2, not 4
    assert min_loss_epoch(RUN_A, "mean_loss") == RUN_A[2]
    with pytest.raises(ValueError, match="at least one epoch"):
        min_loss_epoch([])


def test_the_best_run_keeps_all_metrics_of_one_run():
    records = [{"acc": 0.5, "nmi": 0.9}, {"acc": 0.7, "nmi": 0.1}, {"acc": 0.7, "nmi": 0.8}]
    assert best_run(records) == {"acc": 0.7, "nmi": 0.1}  # first of the tied, its own NMI
    assert best_run(records, "nmi") == {"acc": 0.5, "nmi": 0.9}


def test_the_reference_protocol_by_hand():
    # least last-batch loss: A epoch 2 (acc 0.6), B epoch 1 (0.7), C epoch 2 (0.55), D epoch 1
    # groups of two: {A, B} -> B's epoch 1; {C, D} -> C's epoch 2
    assert reference_protocol([RUN_A, RUN_B, RUN_C, RUN_D], 2) == [RUN_B[0], RUN_C[1]]
    # by the epoch's mean loss: A epoch 3 (0.9) beats B epoch 2 (0.3)
    assert reference_protocol([RUN_A, RUN_B], 2, "mean_loss") == [RUN_A[2]]
    assert reference_protocol([RUN_A, RUN_B, RUN_C, RUN_D], 4) == [RUN_B[0]]
    with pytest.raises(ValueError, match="groups"):
        reference_protocol([RUN_A, RUN_B, RUN_C], 2)


def _toy_data():
    return ClusteringViewsDataModule(
        "synthetic",
        synthetic=SyntheticViewsOptions(num_samples=48, latent_clusters=3, private_clusters=2),
        batch_size=16,
    )


def _fit(recorder=None):
    data = _toy_data()
    pl.seed_everything(0, verbose=False)
    model = SDCIB(data.view_dims, data.num_classes, hidden=(8, 4), lr=1e-2, seed=0)
    trainer = pl.Trainer(
        max_epochs=3,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        callbacks=[recorder] if recorder else [],
    )
    trainer.fit(model, datamodule=data)
    return trainer, model, data


def test_the_recorder_scores_as_the_test_loop_and_changes_nothing():
    data = _toy_data()
    recorder = EpochScores(data.views, data.labels)
    trainer, model, data = _fit(recorder)
    assert [r["epoch"] for r in recorder.records] == [1, 2, 3]
    last = recorder.records[-1]
    assert last["last_batch_loss"] == pytest.approx(float(trainer.callback_metrics["train/loss"]))
    (tested,) = trainer.test(model, datamodule=data, verbose=False)
    for metric in ("acc", "nmi", "ari"):
        assert last[metric] == pytest.approx(tested[f"test/{metric}"], abs=1e-6)
    _, plain, _ = _fit()  # without the recorder: the same weights
    for (name, a), b in zip(model.state_dict().items(), plain.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)


def _mean_std(values):
    return f"{statistics.fmean(values):.4f} ± {statistics.stdev(values):.4f}"


def test_the_study_rows_follow_from_its_records():
    source = {
        "class_path": SYNTHETIC,
        "init_args": {"name": "synthetic", "synthetic": {"num_samples": 48}, "batch_size": 16},
    }
    study = ReferenceProtocolStudy(
        sources={"toy": source},
        arms={"SDCIB": {}, "last": {"deep": False}},
        sdcib={"hidden": [8, 4], "lr": 0.01},
        seeds=[0, 1, 2, 3],
        runs_per_group=2,
        max_epochs=2,
    )
    result = study.run()
    ((columns, rows),) = result.tables.values()
    assert columns == ["data", "method", "protocol", "acc", "nmi", "ari", "runs"]
    assert [(r[1], r[2]) for r in rows] == [
        ("SDCIB", "last epoch, mean ± std"),
        ("SDCIB", "min-loss epoch, mean ± std"),
        ("SDCIB", "min-loss epoch, 2 groups' max over 2 runs"),
        ("last", "last epoch, mean ± std"),
        ("last", "min-loss epoch, mean ± std"),
        ("last", "min-loss epoch, 2 groups' max over 2 runs"),
        (KMEANS, "mean ± std"),
        (KMEANS, "2 groups' max over 2 runs"),
    ]
    for offset, method in ((0, "SDCIB"), (3, "last")):
        runs = [r["epochs"] for r in result.records if r["method"] == method]
        assert len(runs) == 4 and all(len(run) == 2 for run in runs)
        assert rows[offset][3] == _mean_std([run[-1]["acc"] for run in runs])
        least = [min(run, key=lambda e: e["last_batch_loss"]) for run in runs]
        assert rows[offset + 1][4] == _mean_std([e["nmi"] for e in least])
        best = [max(least[:2], key=lambda e: e["acc"]), max(least[2:], key=lambda e: e["acc"])]
        assert rows[offset + 2][5] == _mean_std([e["ari"] for e in best])
    kmeans = [r["epochs"][0]["acc"] for r in result.records if r["method"] == KMEANS]
    assert rows[7][3] == _mean_std([max(kmeans[:2]), max(kmeans[2:])])
    assert set(result.line_plots) == {"acc_toy"}


def test_bad_study_settings_are_refused():
    source = {"toy": {"class_path": SYNTHETIC}}
    with pytest.raises(ValueError, match="at least 1"):
        ReferenceProtocolStudy(sources=source, seeds=[0], runs_per_group=0)
    with pytest.raises(ValueError, match="multiple"):
        ReferenceProtocolStudy(sources=source, seeds=[0, 1, 2], runs_per_group=2)
    with pytest.raises(ValueError, match="loss"):
        ReferenceProtocolStudy(sources=source, seeds=[0], runs_per_group=1, loss="first")
    with pytest.raises(ValueError, match="sources"):
        ReferenceProtocolStudy()


@pytest.fixture
def _recipe_argv(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["recipe"])


def test_the_reference_configs_hold_the_reference_settings(_recipe_argv, monkeypatch):
    from lab import ComparisonCLI

    monkeypatch.setattr(ComparisonCLI, "run", lambda cli: [])
    recipe = load_recipe("clustering_reference")
    full = ["--config", str(RECIPES / "clustering_reference_full.yaml")]
    for extra, sources in (([], ["noisy"]), (full, ["digits", "noisy"])):
        (study,) = recipe.main(["--trainer.logger=false", *extra])._studies().values()
        assert isinstance(study, ReferenceProtocolStudy) and list(study.sources) == sources
        assert study.sdcib["hidden"] == [1024, 1024, 1024, 128] and study.sdcib["lr"] == 1e-4
        assert (study.max_epochs, study.runs_per_group, len(study.seeds)) == (40, 10, 10)
        assert study.arms == {"SDCIB": {}, "SDCIB (last layer only)": {"deep": False}}
        assert study.sources["noisy"]["init_args"]["synthetic"]["private_clusters"] == 5


def test_the_reference_recipe_runs_at_a_toy_size(_recipe_argv, tmp_path):
    threads = torch.get_num_threads()  # the recipe sets one thread
    cli = load_recipe("clustering_reference").main(
        [
            "--trainer.logger=false",
            f"--compare.output_dir={tmp_path}",
            "--studies.reference.sources="
            + json.dumps({"noisy": {"class_path": SYNTHETIC, "init_args": TOY_NOISY}}),
            "--studies.reference.sdcib={hidden: [8, 4]}",
            "--studies.reference.max_epochs=1",
            "--studies.reference.seeds=[0, 1]",
            "--studies.reference.runs_per_group=2",
            "--studies.reference.workers=1",
        ]
    )
    torch.set_num_threads(threads)
    ((columns, rows),) = cli.study_results["reference"].tables.values()
    assert len(rows) == 8 and {r[0] for r in rows} == {"noisy"} and rows[2][2].endswith("2 runs")
    assert (tmp_path / "clustering_reference_reference.md").read_text().count("noisy") == 8
