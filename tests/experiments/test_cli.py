"""``ComparisonCLI``'s study hook on tiny classes: studies run after the grid, see its fitted
model and results, and are printed, written and logged the same way for every recipe."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

import pytest
import torch

from lab import ComparisonCLI, Study, StudyResult
from lightning_info.core.plotting import pyplot
from tests.tiny import TinyClassifier, TinyDataModule


@dataclass
class AccuracyStudy(Study):
    """Re-measures the last cell's test accuracy by hand and scales it (an oracle for the hook)."""

    scale: float = 1.0

    def run(self, cli) -> StudyResult:
        x, y = cli.datamodule.dataset.tensors
        with torch.no_grad():
            accuracy = (cli.model(x).argmax(-1) == y).float().mean().item()
        figure, axis = pyplot().subplots()
        axis.plot([0, 1], [0, accuracy])
        return StudyResult(
            {"scaled accuracy": (["grid", "value"], [["tiny", self.scale * accuracy]])},
            figures={"curve": figure},
            records={"accuracy": accuracy, "cells": len(cli.results)},
        )


STUDY = f"{{class_path: {__name__}.AccuracyStudy, init_args: {{scale: 2.0}}}}"
GRID = [
    "--compare.name=tiny",
    "--compare.arms={tiny: {}}",
    "--compare.seeds=[0]",
    "--trainer.max_epochs=1",
    "--trainer.enable_progress_bar=false",
    "--trainer.enable_model_summary=false",
    "--trainer.enable_checkpointing=false",
]


@pytest.fixture(autouse=True)
def _argv(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["recipe"])


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # LightningCLI saves each cell's config.yaml to the run's folder


def _cli(args):
    return ComparisonCLI(TinyClassifier, TinyDataModule, args=args)


def test_a_study_runs_after_the_grid_on_its_fitted_model_and_is_reported(tmp_path, capsys):
    cli = _cli(GRID + ["--trainer.logger=false", f"--compare.output_dir={tmp_path}"])
    cli.run()
    (result,) = cli.results
    records = json.loads((tmp_path / "tiny_study.json").read_text())["records"]
    # the study saw the fitted, tested model: its own accuracy is the grid's test/acc
    assert records == {"accuracy": pytest.approx(result.value), "cells": 1}
    (row,) = cli.study_results["study"].tables["scaled accuracy"][1]
    assert row[1] == pytest.approx(2.0 * result.value)
    assert (tmp_path / "tiny_study_curve.png").stat().st_size > 0
    text = (tmp_path / "tiny_study.md").read_text().strip()
    printed = capsys.readouterr().out
    assert text.startswith("scaled accuracy") and text in printed
    assert printed.index((tmp_path / "tiny.md").read_text().strip()) < printed.index(text)


GRID += [f"--studies.study={STUDY}"]


def test_null_switches_a_study_off(tmp_path):
    args = ["--studies.study=null", "--trainer.logger=false", f"--compare.output_dir={tmp_path}"]
    cli = _cli(GRID + args)
    cli.run()
    assert cli.study_results == {} and not (tmp_path / "tiny_study.md").exists()


def test_a_study_logs_its_tables_and_figures_to_its_own_wandb_run(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    _cli(
        GRID
        + [f"--compare.output_dir={tmp_path}", f"--trainer.logger.init_args.save_dir={tmp_path}"]
    ).run()
    runs = sorted((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 3  # the cell, the results summary, the study
    study_runs = [run for run in runs if list(run.glob("files/media/images/study/curve_*.png"))]
    assert len(study_runs) == 1
    assert list(study_runs[0].glob("files/media/table/study/scaled_accuracy_*.table.json"))


def test_a_recipe_without_a_model_class_runs_only_its_studies(tmp_path, capsys):
    class_path = f"{__name__}.ConstantStudy"
    cli = ComparisonCLI(
        None,
        None,
        args=[
            f"--studies.constant={{class_path: {class_path}, init_args: {{value: 3}}}}",
            f"--compare.output_dir={tmp_path}",
            "--trainer.logger=false",
        ],
    )
    assert cli.run() == []
    assert cli.study_results["constant"].tables == {"constant": (["value"], [[3]])}
    assert "[1/" not in capsys.readouterr().out  # no grid cell ran


@dataclass
class ConstantStudy(Study):
    value: int = 0

    def run(self, cli) -> StudyResult:
        return StudyResult({"constant": (["value"], [[self.value]])})


def test_a_recipe_without_a_model_class_needs_a_study():
    with pytest.raises(ValueError, match="at least one study"):
        ComparisonCLI(None, None, args=["--trainer.logger=false"])


def test_a_study_must_be_a_study_subclass(capsys):
    with pytest.raises(SystemExit):
        _cli(GRID + ["--studies.study={class_path: collections.OrderedDict}"])
    assert "studies" in capsys.readouterr().err


def test_a_grid_field_that_is_no_argument_fails_before_training(tmp_path, capsys):
    with pytest.raises(ValueError, match="not an argument of the data section.*num_samples"):
        _cli(GRID + ["--compare.grid_field=size", "--trainer.logger=false"]).run()
    assert "[1/" not in capsys.readouterr().out


def test_two_arms_over_several_data_sets_get_a_paired_wilcoxon_row():
    from scipy.stats import wilcoxon

    from lab.cli import RunResult, summarize

    values = {"A": (0.5, 0.6), "B": (0.7, 0.9), "C": (0.2, 0.5)}  # differences +0.1, +0.2, +0.3
    results = [
        RunResult(grid, seed, arm, "test/acc", value + 0.01 * seed)
        for grid, pair in values.items()
        for seed in (0, 1)
        for arm, value in zip(("baseline", "method"), pair)
    ]
    columns, rows = summarize(results, {"baseline": "plain", "method": "with it"})
    assert columns == ["dataset", "plain", "with it", "difference", "seeds"]
    assert [r[0] for r in rows] == ["A", "B", "C", "all 3 (paired Wilcoxon)"]
    pooled = rows[-1]
    # exact two-sided test, all three differences positive: p = 2 / 2^3
    assert wilcoxon([0.1, 0.2, 0.3]).pvalue == pytest.approx(0.25)
    assert pooled[3] == "+0.2000 (3/3 up, p = 0.25)" and pooled[4] == 3
    mean, std = (float(x) for x in pooled[1].split(" ± "))
    assert mean == pytest.approx((0.505 + 0.705 + 0.205) / 3, abs=1e-4)
    tied = [RunResult(r.grid_value, r.seed, r.arm, r.metric, 0.5) for r in results]
    assert summarize(tied, {"baseline": "a", "method": "b"})[1][-1][3].endswith("p = n/a)")
    one_grid = [r for r in results if r.grid_value == "A"]
    assert len(summarize(one_grid, {"baseline": "a", "method": "b"})[1]) == 1
