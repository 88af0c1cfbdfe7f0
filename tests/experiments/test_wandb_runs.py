"""A recipe's W&B runs read back from their offline logs (``tests/wandb_records.py``): each cell's
config, group, job type and tags; the summary run's numeric tables, charts and error-bar image;
no warning that our own settings cause; the threads and progress bars a recipe runs with."""

from __future__ import annotations

import statistics
import sys

import pytest

from lab import ComparisonCLI, Study, StudyResult
from lab.cli import hub_progress_bars_off, recipe_threads
from tests.tiny import TinyClassifier, TinyDataModule
from tests.wandb_records import offline_runs

TIMER = "lightning.pytorch.callbacks.ModelSummary"
ARMS = f"{{plain: {{}}, timed: {{trainer: {{callbacks+: [{{class_path: {TIMER}}}]}}}}}}"


class TableStudy(Study):
    """A study whose table has a title with spaces and a ``mean ± std`` column."""

    def run(self, cli) -> StudyResult:
        return StudyResult({"Accuracy (by hand)": (["arm", "acc"], [["a", "0.5000 ± 0.1000"]])})


def _run(tmp_path, monkeypatch, *extra):
    monkeypatch.setattr(sys, "argv", ["recipe"])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_MODE", "offline")
    args = [
        "--compare.name=tiny",
        f"--compare.arms={ARMS}",
        "--compare.grid_field=num_samples",
        "--compare.grid=[32, 48]",
        "--compare.seeds=[0, 1]",
        "--compare.threads=1",
        "--trainer.max_epochs=1",
        "--trainer.enable_progress_bar=false",
        "--trainer.enable_checkpointing=false",
        f"--compare.output_dir={tmp_path / 'results'}",
        f"--trainer.logger.init_args.save_dir={tmp_path}",
        *extra,
    ]
    cli = ComparisonCLI(TinyClassifier, TinyDataModule, args=args)
    cli.run()
    return cli, offline_runs(tmp_path)


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """One toy invocation: 2 grid values x 2 seeds x 2 arms, and a study."""
    tmp_path = tmp_path_factory.mktemp("wandb")
    with pytest.MonkeyPatch.context() as monkeypatch:
        study = f"--studies={{by_hand: {{class_path: {__name__}.TableStudy}}}}"
        cli, runs = _run(tmp_path, monkeypatch, study)
    return cli, runs, tmp_path


def _cells(runs):
    return [run for run in runs if run.job_type not in ("summary", "study")]


def test_every_cell_run_has_its_arm_seed_grid_value_and_resolved_config(grid):
    cli, runs, _ = grid
    cells = _cells(runs)
    assert len(cells) == 8
    seen = set()
    for run in cells:
        config = run.config
        grid_value, arm, seed = config["grid_value"], config["arm"], config["grid_seed"]
        assert run.name == f"num_samples={grid_value}-{arm}-seed{seed}"
        assert config["recipe"] == "tiny" and config["grid_field"] == "num_samples"
        assert config["cli"]["seed_everything"] == seed
        assert config["cli"]["data"]["num_samples"] == grid_value
        assert config["lightning_info"] == __import__("lightning_info").__version__
        assert run.job_type == arm
        assert run.tags == ["tiny", arm, f"num_samples={grid_value}", f"seed{seed}"]
        assert config["callbacks"] == ([TIMER] if arm == "timed" else [])
        expected = [
            r.value for r in cli.results if (r.arm, r.grid_value, r.seed) == (arm, grid_value, seed)
        ]
        assert run.summary["test/acc"] == pytest.approx(expected[0], abs=1e-7)
        seen.add((grid_value, arm, seed))
    assert seen == {(g, a, s) for g in (32, 48) for a in ("plain", "timed") for s in (0, 1)}


def test_one_invocation_is_one_group_and_the_next_is_another(grid, tmp_path, monkeypatch):
    _, runs, _ = grid
    groups = {run.group for run in runs}
    assert len(groups) == 1 and groups.pop().startswith("tiny-")
    assert sorted(run.job_type for run in runs if not run.tags) == ["study", "summary"]


def test_a_group_the_user_sets_is_kept(tmp_path, monkeypatch):
    _, runs = _run(
        tmp_path,
        monkeypatch,
        "--compare.arms={plain: {}, more: {trainer: {max_epochs: 2}}}",
        "--compare.grid=[32]",
        "--compare.seeds=[0]",
        "--trainer.logger.init_args.group=mine",
    )
    assert {run.group for run in runs} == {"mine"}


def test_the_summary_run_holds_the_results_as_numbers(grid):
    cli, runs, _ = grid
    (summary,) = [run for run in runs if run.job_type == "summary"]
    assert summary.config["recipe"] == "tiny" and summary.config["study"] == "summary"
    cells = summary.table("results/cells")
    assert cells["columns"] == ["arm", "num_samples", "seed", "test/acc"]
    logged = {(a, g, s): v for a, g, s, v in cells["data"]}
    assert logged == {(r.arm, r.grid_value, r.seed): pytest.approx(r.value) for r in cli.results}
    mean_std = summary.table("results/mean_std")
    assert mean_std["columns"] == ["arm", "num_samples", "seeds", "test/acc/mean", "test/acc/std"]
    for arm, grid_value, seeds, mean, std in mean_std["data"]:
        values = [r.value for r in cli.results if (r.arm, r.grid_value) == (arm, grid_value)]
        assert seeds == len(values) == 2
        assert mean == pytest.approx(statistics.fmean(values))
        assert std == pytest.approx(statistics.stdev(values))
    printed = summary.table("results")  # the printed table, its "mean ± std" cells as numbers
    assert "plain/mean" in printed["columns"] and "timed/std" in printed["columns"]
    assert all(isinstance(v, (int, float)) for row in printed["data"][:2] for v in row[1:5])


def test_the_summary_run_charts_method_against_baseline(grid):
    _, runs, tmp_path = grid
    (summary,) = [run for run in runs if run.job_type == "summary"]
    charts = summary.config["_wandb"]["visualize"]
    bar, curve = charts["results/chart/test/acc"], charts["results/curve/test/acc"]
    assert bar["panel_config"]["panelDefId"] == "wandb/bar/v0"
    assert curve["panel_config"]["panelDefId"] == "wandb/lineseries/v0"
    bars = summary.table("results/chart/test/acc_table")
    assert len(bars["data"]) == 4  # 2 grid values x 2 arms
    image = summary.summary["results/error_bars/test/acc"]
    assert image["_type"] == "images/separated" and image["count"] == 1
    assert (tmp_path / "results" / "tiny_test_acc.png").stat().st_size > 0


def test_study_tables_are_named_by_their_title_and_logged_as_numbers(grid):
    _, runs, _ = grid
    (study,) = [run for run in runs if run.job_type == "study"]
    assert study.name == "tiny-by_hand" and study.config["study"] == "by_hand"
    table = study.table("by_hand/accuracy_by_hand")
    assert table == {"columns": ["arm", "acc/mean", "acc/std"], "data": [["a", 0.5, 0.1]]}


def test_no_wandb_warning_comes_from_our_settings(tmp_path, monkeypatch, capfd):
    monkeypatch.delenv("WANDB_SILENT", raising=False)
    monkeypatch.delenv("WANDB_QUIET", raising=False)
    _run(
        tmp_path,
        monkeypatch,
        "--compare.arms={plain: {}, more: {trainer: {max_epochs: 2}}}",
        "--compare.grid=[32]",
        "--compare.seeds=[0]",
    )
    printed = capfd.readouterr()
    assert "anonymous" not in printed.err + printed.out
    assert "git root" not in printed.err + printed.out
    assert "wandb: WARNING" not in printed.err + printed.out


@pytest.mark.parametrize(
    ("given", "environment", "expected"),
    [(3, "1", 3), (None, "1", 1), (None, " 4 ", 4), (None, None, 2), (0, None, 0)],
)
def test_recipe_threads_follow_the_flag_then_omp_num_threads_then_two(
    monkeypatch, given, environment, expected
):
    if environment is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", environment)
    assert recipe_threads(given) == expected


@pytest.mark.parametrize("bad", ["0", "two", "-1"])
def test_a_bad_omp_num_threads_is_refused_with_what_to_do(monkeypatch, bad):
    monkeypatch.setenv("OMP_NUM_THREADS", bad)
    with pytest.raises(ValueError, match="OMP_NUM_THREADS.*--compare.threads"):
        recipe_threads(None)


def test_hugging_face_progress_bars_are_off_inside_a_recipe_and_restored_after():
    import datasets
    from transformers.utils import logging as transformers_logging

    datasets.enable_progress_bars()
    transformers_logging.enable_progress_bar()
    with hub_progress_bars_off():
        assert datasets.are_progress_bars_disabled()
        assert not transformers_logging.is_progress_bar_enabled()
    assert not datasets.are_progress_bars_disabled()
    assert transformers_logging.is_progress_bar_enabled()


def test_many_metrics_print_as_one_row_per_arm_counts_as_integers_one_seed_without_std():
    from lab.cli import RunResult, wide_table

    metrics = ["test/loss", "test/negatives", "test/a", "test/b", "test/c"]
    results = [
        RunResult(64, 0, arm, metric, value)
        for arm, offset in (("base", 0.0), ("full", 1.0))
        for metric, value in zip(metrics, [2.5 + offset, 25.0, 0.125, 1.0, 0.0])
    ]
    columns, rows = wide_table(results, {"base": "random", "full": "full pipeline"}, "budget")
    assert columns == ["budget", "arm", *metrics, "seeds"]
    assert rows == [
        [64, "random", "2.5000", "25", "0.1250", "1", "0", 1],
        [64, "full pipeline", "3.5000", "25", "0.1250", "1", "0", 1],
    ]
    two_seeds = results + [RunResult(64, 1, r.arm, r.metric, r.value + 1) for r in results]
    _, rows = wide_table(two_seeds, {"base": "random", "full": "full pipeline"}, "budget")
    assert rows[0][2] == "3.0000 ± 0.7071" and rows[0][-1] == 2


def test_a_long_study_title_gets_a_short_key_that_keeps_two_titles_apart():
    from lab.cli import TABLE_KEY_LENGTH, table_key

    assert table_key("rates", "RMSE of J (Gaussian, 1-d)") == "rates/rmse_of_j_gaussian_1-d"
    long = "h error: KDE (Silverman h), t + h^2 against the smoothed estimator, per sample size"
    first, second = table_key("rates", long + " A"), table_key("rates", long + " B")
    assert len(first) <= TABLE_KEY_LENGTH and len(second) <= TABLE_KEY_LENGTH
    assert first != second and first.startswith("rates/h_error_kde_silverman_h")
