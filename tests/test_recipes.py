"""Every recipe end to end at a toy config: its grid, its studies, its files and W&B runs."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from lightning_info import FisherConstraint
from lightning_info.methods.prism.auditor import ATTACKS
from tests.benchmark_scripts import RECIPES, load_recipe
from tests.wandb_records import read_offline_run

SMALL = [
    "--compare.grid=[GunPoint]",
    "--compare.seeds=[0, 1]",
    "--trainer.max_epochs=2",
    "--model.num_filters=4",
    "--model.depth=3",
    "--trainer.enable_progress_bar=false",
]


@pytest.fixture(autouse=True)
def _recipe_argv(monkeypatch):
    """Recipes parse ``args``; keep pytest's own command line out of LightningCLI's view."""
    monkeypatch.setattr(sys, "argv", ["recipe"])


def _recipe(name: str):
    return load_recipe(name)


def _mean_std(cell: str) -> tuple[float, float]:
    """A table cell ``"mean ± std"`` as two floats."""
    mean, std = (float(v) for v in cell.split(" ± "))
    return mean, std


def _wandb_table_keys(root: Path, study: str) -> set[str]:
    """The keys of the W&B tables (line plots) a study logged in the offline runs under ``root``."""
    return {
        p.name.split("_table")[0]
        for run in _wandb_runs(root)
        for p in run.glob(f"files/media/table/{study}/*_table_*.json")
    }


def _metric_columns(version_dir: Path) -> set[str]:
    with open(version_dir / "metrics.csv") as f:
        return set(next(csv.reader(f)))


def _results_logged_to_csv(name: str, args: list[str], tmp_path: Path) -> list:
    """The grid results of recipe ``name`` run with ``args``: its tables go to
    ``tmp_path / "results"``, each cell's metrics to a CSV log under ``tmp_path / "csv"``."""
    extra = [
        f"--compare.output_dir={tmp_path / 'results'}",
        "--trainer.logger=CSVLogger",
        f"--trainer.logger.save_dir={tmp_path}",
        "--trainer.logger.name=csv",
    ]
    return _recipe(name).main(args + extra).results


def _run_with_offline_wandb(name: str, args: list[str], tmp_path: Path, monkeypatch):
    """Recipe ``name`` run with ``args`` and its default W&B logger offline, its tables and its W&B
    runs under ``tmp_path``; returns the ComparisonCLI."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    extra = [f"--compare.output_dir={tmp_path}", f"--trainer.logger.init_args.save_dir={tmp_path}"]
    return _recipe(name).main(args + extra)


def _wandb_runs(root: Path) -> list[Path]:
    """The offline W&B run folders under ``root``, oldest first."""
    return sorted((root / "wandb").glob("offline-run-*"))


def test_fic_tsc_recipe_runs_both_arms_and_writes_the_table(tmp_path, capsys, lightning_messages):
    out = tmp_path / "results"
    results = _results_logged_to_csv("fic_tsc", SMALL, tmp_path)
    assert [(r.seed, r.arm) for r in results] == [
        (0, "baseline"),
        (0, "method"),
        (1, "baseline"),
        (1, "method"),
    ]
    assert all(0.0 <= r.value <= 1.0 for r in results)
    saved = json.loads((out / "fic_tsc.json").read_text())
    assert [r["value"] for r in saved] == [r.value for r in results]
    table = (out / "fic_tsc.md").read_text()
    assert "InceptionTime + FIC" in table and "GunPoint" in table
    printed = capsys.readouterr()
    assert table in printed.out
    # quiet: a progress line per cell, no Lightning notices, summaries or per-cell test tables
    assert "[4/4] name=GunPoint seed=1 InceptionTime + FIC: test/acc=" in printed.out
    for notice in ("Trainable params", "Test metric"):
        assert notice not in printed.out + printed.err, notice
    assert not [m for m in lightning_messages if "GPU available" in m or "Restoring" in m]
    # Only the method arm carries the constraint (runs are logged as version_0..3 in order).
    versions = sorted((tmp_path / "csv").iterdir())
    with_fisher = ["fisher/trace_before" in _metric_columns(v) for v in versions]
    assert with_fisher == [False, True, False, True]


def test_two_runs_of_the_main_recipe_print_the_same_table(tmp_path, capsys, monkeypatch):
    """Same config and seeds, the second run started at another torch thread count: the recipe
    runs at its default count (2; no ``OMP_NUM_THREADS``, which Lightning sets in the process when
    an earlier test launches DDP), so the values agree to the last bit and the tables match."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)

    def run(folder: Path, threads: int) -> tuple[list, str]:
        torch.set_num_threads(threads)
        arguments = SMALL + ["--trainer.max_epochs=3", "--compare.metrics=[test/acc, test/loss]"]
        arguments += ["--trainer.logger=false", f"--trainer.default_root_dir={folder}"]
        _recipe("fic_tsc").main(arguments + [f"--compare.output_dir={folder}"])
        saved = json.loads((folder / "fic_tsc.json").read_text())
        return saved, (folder / "fic_tsc.md").read_text()

    threads = torch.get_num_threads()
    try:
        first, second = run(tmp_path / "a", 1), run(tmp_path / "b", 3)
    finally:
        torch.set_num_threads(threads)
    assert first == second
    assert torch.get_num_threads() == threads
    assert first[1].startswith(f"torch {torch.__version__}, 2 threads, deterministic algorithms")
    assert first[1] in capsys.readouterr().out


def test_fic_tsc_full_config_trains_inside_lookahead_and_tests_over_data_sets(tmp_path, capsys):
    from lightning_info import Lookahead

    cli = _recipe("fic_tsc").main(
        ["--config", str(RECIPES / "fic_tsc_full.yaml")]
        + SMALL
        + [
            "--compare.grid=[GunPoint, ItalyPowerDemand]",
            "--compare.seeds=[0]",
            "--trainer.max_epochs=1",
            "--trainer.logger=false",
            f"--trainer.default_root_dir={tmp_path}",
            f"--compare.output_dir={tmp_path}",
        ]
    )
    assert any(isinstance(c, Lookahead) for c in cli.trainer.callbacks)
    table = (tmp_path / "fic_tsc_full.md").read_text()
    assert "all 2 (paired Wilcoxon)" in table and "p = " in table
    assert table in capsys.readouterr().out


def test_default_logger_is_offline_wandb_with_one_run_per_cell(tmp_path, monkeypatch, capfd):
    import wandb

    monkeypatch.delenv("WANDB_QUIET", raising=False)  # as a user runs it: W&B would talk
    # a W&B session already started in this process ignores later environment variables
    wandb.init(project="earlier", dir=tmp_path / "earlier", mode="offline").finish()
    capfd.readouterr()
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    monkeypatch.delenv("WANDB_MODE", raising=False)
    module = _recipe("fic_tsc")
    results = module.main(
        SMALL
        + [
            "--compare.seeds=[0]",
            f"--compare.output_dir={tmp_path}",
            f"--trainer.logger.init_args.save_dir={tmp_path}",
        ]
    ).results
    assert len(results) == 2
    runs = _wandb_runs(tmp_path)
    assert len(runs) == 3, runs  # baseline, method, summary table
    tables = [list(run.glob("files/media/table/results_*.table.json")) for run in runs]
    assert sorted(map(len, tables)) == [0, 0, 1]  # the summary run holds the results table
    # read back as W&B would: each cell's arm, seed and config; one group; numbers and a chart
    cells, summaries = [], []
    for run in map(read_offline_run, runs):
        (summaries if run.job_type == "summary" else cells).append(run)
    assert {run.config["arm"] for run in cells} == {"InceptionTime", "InceptionTime + FIC"}
    seeds = {(run.config["grid_seed"], run.config["cli"]["seed_everything"]) for run in cells}
    assert seeds == {(0, 0)}
    assert len({run.group for run in cells + summaries}) == 1
    fic = [run for run in cells if run.config["arm"] == "InceptionTime + FIC"]
    assert fic[0].config["callbacks"][-1].endswith("FisherConstraint")
    (summary,) = summaries
    names = {"baseline": "InceptionTime", "method": "InceptionTime + FIC"}
    logged = {row[0]: row[3] for row in summary.table("results/cells")["data"]}
    assert logged == {names[r.arm]: pytest.approx(r.value) for r in results}
    assert {run.config["arm"]: run.summary["test/acc"] for run in cells} == logged
    assert "results/chart/test/acc" in summary.config["_wandb"]["visualize"]
    printed = capfd.readouterr()
    assert printed.out.count(f"W&B: one run per cell, offline, under {tmp_path / 'wandb'}") == 1
    for banner in ("Tracking run with wandb", "Run history", "Run data is saved locally"):
        assert banner not in printed.out + printed.err, banner  # W&B's warnings still show


def test_the_results_table_is_printed_after_the_last_wandb_run_closes(tmp_path, monkeypatch):
    from lab import cli

    events = []
    finish = cli.finish_wandb_runs
    monkeypatch.setattr(
        cli, "finish_wandb_runs", lambda loggers: (finish(loggers), events.append("finish"))
    )
    monkeypatch.setattr(cli, "print", lambda *a, **k: events.append(" ".join(map(str, a))), False)
    _recipe("fic_tsc").main(
        SMALL
        + [
            "--compare.seeds=[0]",
            f"--compare.output_dir={tmp_path}",
            "--trainer.logger.init_args.offline=true",
            f"--trainer.logger.init_args.save_dir={tmp_path}",
        ]
    )
    assert events.count("finish") == 3  # two cells and the summary run
    table = (tmp_path / "fic_tsc.md").read_text().strip()
    assert events[-1] == table and "finish" not in events[events.index(table) :]


def test_method_arm_must_differ_from_the_baseline(tmp_path):
    with pytest.raises(ValueError, match="arms are identical"):
        _recipe("fic_tsc").main(
            SMALL + ["--compare.method_callbacks=[]", f"--compare.output_dir={tmp_path}"]
        )


def test_unknown_data_set_fails_before_any_training(tmp_path, capsys):
    args = SMALL + ["--compare.grid=[GunPoint, NoSuchSet]", f"--compare.output_dir={tmp_path}"]
    with pytest.raises(ValueError, match="NoSuchSet.*Available: .*GunPoint"):
        _recipe("fic_tsc").main(args)
    assert "[1/" not in capsys.readouterr().out


def test_recipe_config_attaches_the_papers_default_bound():
    import yaml

    config = yaml.safe_load((RECIPES / "fic_tsc.yaml").read_text())
    (callback,) = config["compare"]["method_callbacks"]
    assert callback["class_path"] == f"lightning_info.{FisherConstraint.__name__}"
    assert callback["init_args"]["max_fisher"] == 2.0
    assert len(config["compare"]["grid"]) >= 3


ROME_SMALL = [
    "--compare.seeds=[0]",
    "--trainer.max_steps=2",
    "--trainer.log_every_n_steps=1",
    "--trainer.enable_progress_bar=false",
    "--model.distillation.real_batch=8",
    "--model.attack.steps=1",
    "--model.pool.train_steps=1",
    "--model.net.init_args.width=4",
    "--model.evaluation.epochs=2",
    "--data.classes=3",
]


def test_rome_recipe_compares_five_arms_untargeted_and_targeted(tmp_path, capsys):
    out = tmp_path / "results"
    results = _results_logged_to_csv("rome", ROME_SMALL, tmp_path)
    arms = ["random real", "DM", "ROME", "ROME, untargeted", "ROME, rotating map"]
    metrics = [
        "test/clean",
        "test/fgsm",
        "test/pgd",
        "test/pgd_l2",
        "test/i_rr",
        "test/targetedplus1/pgd",
        "test/targetedplus1/i_rr",
        "test/targetedplus2/pgd",
        "test/targeted-1/pgd",
    ]
    assert [(r.arm, r.metric) for r in results] == [(a, m) for a in arms for m in metrics]
    for r in results:
        if not r.metric.endswith("i_rr"):
            assert 0.0 <= r.value <= 1.0
    table = (out / "rome.md").read_text()
    assert all(arm in table for arm in arms) and "test/pgd_l2" in table
    assert table in capsys.readouterr().out
    # the random-real arm takes no distillation step; the others take two
    versions = sorted((tmp_path / "csv").iterdir())
    trained = ["rome/l_rob" in _metric_columns(v) for v in versions]
    assert trained == [False, True, True, True, True]
    import yaml

    # the arms change single fields of the option groups and keep the config's others
    hparams = [yaml.safe_load((v / "hparams.yaml").read_text()) for v in versions]
    attacks = [h["attack"] for h in hparams]
    assert [a["target"] for a in attacks] == ["next"] * 3 + ["untargeted", "rotating"]
    assert [a["robust"] for a in attacks] == [True, False, True, True, True]
    assert {(a["eps"], a["steps"]) for a in attacks} == {(0.1, 1)}
    assert [h["distillation"]["alpha"] for h in hparams] == [0.2, 1.0, 0.2, 0.2, 0.2]
    assert {h["distillation"]["real_batch"] for h in hparams} == {8}


def test_rome_logs_the_distilled_grid_to_wandb(tmp_path, monkeypatch):
    arms = "--compare.arms={DM: {model: {attack.robust: false, distillation.alpha: 1.0}}, ROME: {}}"
    _run_with_offline_wandb("rome", ROME_SMALL + [arms], tmp_path, monkeypatch)
    runs = _wandb_runs(tmp_path)
    grids = [list(run.glob("files/media/images/rome/distilled*.png")) for run in runs]
    assert sum(len(g) == 1 for g in grids) == 2, grids  # one per arm, none in the summary run
    from PIL import Image

    for (path,) in filter(None, grids):
        pixels = torch.tensor(list(Image.open(path).getdata()), dtype=torch.float32)
        images = _recipe("rome").DigitsDataModule(classes=3).train_images
        # the grid's white padding and the digits' ink: as bright as the data, not all black
        assert pixels.max() == 255 and pixels.mean() > 255 * images.mean() * 0.5


@pytest.mark.parametrize(
    "arms, match",
    [
        ("{a: {model: {distillation.lr: 0.1}}, b: {optimizer: {}}}", "unknown sections"),
        ("{a: {model: {attack.eps: 0.1}}, b: {model: {attack.eps: 0.1}}}", "same overrides"),
    ],
)
def test_bad_arms_fail_before_training(arms, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        _recipe("rome").main(
            ROME_SMALL + [f"--compare.arms={arms}", f"--compare.output_dir={tmp_path}"]
        )


def test_seed_field_reaches_the_model(tmp_path):
    _recipe("rome").main(
        ROME_SMALL
        + [
            "--compare.seeds=[3, 4]",
            "--compare.arms={random: {trainer: {max_steps: 0}}, "
            "DM: {model: {attack.robust: false}}}",
            f"--compare.output_dir={tmp_path}",
            "--trainer.logger=CSVLogger",
            f"--trainer.logger.save_dir={tmp_path}",
            "--trainer.logger.name=csv",
        ]
    )
    import yaml

    versions = sorted((tmp_path / "csv").iterdir())
    seeds = [yaml.safe_load((v / "hparams.yaml").read_text())["seed"] for v in versions]
    assert seeds == [3, 3, 4, 4]


AC_SMALL = [
    "--studies.tabular.seeds=[0]",
    "--studies.tabular.critic_windows=[1]",
    "--studies.tabular.td_steps=[1]",
    "--studies.tabular.updates=[50, 800]",
    "--studies.tabular.actor_critic_windows=[1]",
    "--studies.tabular.iterations=2",
    "--studies.tabular.critic_updates=100",
    "--studies.tabular.actor_updates=50",
    "--compare.seeds=[0]",
    "--compare.grid=[1]",
    "--trainer.max_steps=3",
    "--trainer.enable_progress_bar=false",
    "--model.a2c.num_envs=2",
    "--model.max_episode_steps=20",
    "--model.eval_episodes=2",
    "--model.hidden=8",
]


def test_asymmetric_ac_recipe_runs_the_tabular_study_and_both_critics(tmp_path, capsys):
    out = tmp_path / "results"
    results = _results_logged_to_csv("asymmetric_ac", AC_SMALL, tmp_path)
    assert [r.arm for r in results] == ["symmetric critic", "asymmetric critic"]
    assert all(1.0 <= r.value <= 20.0 for r in results)  # CartPole: 1 point per step, 20 max
    tabular = json.loads((out / "asymmetric_ac_tabular.json").read_text())["records"]
    final = {r["kind"]: r for r in tabular["critic"] if r["updates"] == 800}
    # k = 1 aliases the junction: only the asymmetric critic gets below the floor
    assert final["asymmetric"]["error"] < 0.2 * final["asymmetric"]["floor"]
    assert final["symmetric"]["error"] >= 0.95 * final["symmetric"]["floor"]
    assert {len(r["values"]) for r in tabular["actor_critic"]} == {3}
    for plot in ("critic_error", "actor_critic"):
        assert (out / f"asymmetric_ac_tabular_{plot}.png").stat().st_size > 0
    printed = capsys.readouterr().out
    assert (out / "asymmetric_ac_tabular.md").read_text().strip() in printed
    assert (out / "asymmetric_ac.md").read_text().strip() in printed


def test_asymmetric_ac_logs_the_tabular_plots_to_wandb(tmp_path, monkeypatch):
    _run_with_offline_wandb("asymmetric_ac", AC_SMALL, tmp_path, monkeypatch)
    runs = _wandb_runs(tmp_path)
    assert len(runs) == 4  # tabular, two cells, summary
    images = [p.name for run in runs for p in run.glob("files/media/images/tabular/*.png")]
    assert sorted(n.split("_")[0] for n in images) == ["actor", "critic"]


def _by_hand(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation of two per-seed values, by hand: |a - b| / sqrt(2)."""
    a, b = values
    return (a + b) / 2, abs(a - b) / 2**0.5


def _assert_cell_is(cell: str, values: list[float]) -> None:
    """A printed ``mean ± std`` cell (4 decimals) against the hand computation of ``values``."""
    (mean, std), (hand_mean, hand_std) = _mean_std(cell), _by_hand(values)
    assert mean == pytest.approx(hand_mean, abs=5.1e-5)
    assert std == pytest.approx(hand_std, abs=5.1e-5)


def test_posthoc_scoring_recipe_tables_both_reports_over_seeds(tmp_path, capsys):
    cli = _recipe("posthoc_scoring").main(
        [
            "--studies.failure.seeds=[0, 1]",
            "--studies.failure.epochs=2",
            "--studies.ood.seeds=[0, 1]",
            "--studies.ood.epochs=2",
            "--studies.ood.tune_trials=3",
            "--trainer.logger=false",
            f"--compare.output_dir={tmp_path}",
        ]
    )
    failure, ood = cli.study_results["failure"], cli.study_results["ood"]
    assert [r["seed"] for r in failure.records] == [0, 1] == [r["seed"] for r in ood.records]
    # the same seed trains the same classifier in both studies; seed 1 another split and model
    assert [r["test_acc"] for r in failure.records] == [r["test_acc"] for r in ood.records]
    assert failure.records[0]["rows"] != failure.records[1]["rows"]
    accuracy, table = failure.tables.values()
    _assert_cell_is(accuracy[1][0][1], [r["test_acc"] for r in failure.records])
    columns, rows = table
    assert [r[0] for r in rows] == ["MSP", "MSP (temperature)", "PMI", "PVI", "PSI"]
    assert columns[1:4] == ["AUROC", "AUPR-success", "AUPR-error"]
    for row in rows:  # every cell: mean ± std of the callback's two per-seed cells
        for column, cell in zip(columns[1:], row[1:]):
            _assert_cell_is(cell, [r["rows"][row[0]][column] for r in failure.records])
    ((columns, rows),) = ood.tables.values()
    assert [r[0] for r in rows] == ["energy", "react", "vra", "plf"]
    assert columns[1:] == [
        f"{s} {m}" for s in ("digits", "noise", "shuffled") for m in ("AUROC", "FPR@95")
    ]
    for row in rows:
        for column, cell in zip(columns[1:], row[1:]):
            _assert_cell_is(cell, [r["rows"][row[0]][column] for r in ood.records])
    printed = capsys.readouterr().out
    for study in ("failure", "ood"):
        assert (tmp_path / f"posthoc_scoring_{study}.md").read_text().strip() in printed


def test_diffusion_fisher_recipe_tables_the_likelihoods_over_seeds(tmp_path, capsys):
    cli = _recipe("diffusion_fisher").main(
        [
            "--studies.likelihoods.seeds=[0, 1]",
            "--studies.likelihoods.max_steps=20",
            "--studies.likelihoods.model={hidden: 16}",
            "--studies.likelihoods.data={num_samples: 400}",
            "--studies.likelihoods.test_points=16",
            "--studies.likelihoods.steps=8",
            "--studies.likelihoods.probes=2",
            "--studies.likelihoods.reference_probes=4",
            "--studies.likelihoods.ot_schedules=[vp, edm]",
            "--studies.likelihoods.ot_points=2",
            "--studies.likelihoods.ot_data_points=50",
            "--studies.likelihoods.samples=50",
            "--trainer.logger=false",
            f"--compare.output_dir={tmp_path}",
        ]
    )
    result = cli.study_results["likelihoods"]
    records = result.records
    assert [r["seed"] for r in records] == [0, 1]
    assert records[0]["test_denoising"] != records[1]["test_denoising"]  # two models
    losses, exact, network, ot = result.tables.values()
    _assert_cell_is(losses[1][0][1], [r["test_denoising"] for r in records])
    _assert_cell_is(losses[1][0][2], [r["test_trace_matching"] for r in records])
    names = ["DF trace", "Hutchinson 1", "Hutchinson 2"]
    assert [r[0] for r in exact[1]] == names
    for name, row in zip(names, exact[1]):  # error in 1e-3 nats, seconds, ratio to the DF trace
        _assert_cell_is(row[1], [1e3 * r["exact"][name]["error"] for r in records])
        _assert_cell_is(row[2], [r["exact"][name]["seconds"] for r in records])
        ratios = [r["exact"][name]["seconds"] / r["exact"]["DF trace"]["seconds"] for r in records]
        _assert_cell_is(row[3], ratios)
    # the DF-trace PF-ODE of the exact data model is far closer to the closed form, every seed
    assert all(
        r["exact"]["DF trace"]["error"] < r["exact"]["Hutchinson 1"]["error"] for r in records
    )
    assert [r[0] for r in network[1]] == ["DF-TM trace", *names[1:], "Hutchinson 4 (reference)"]
    for row in network[1][:-1]:
        for column, key in zip(row[1:4], ("nll", "gap", "seconds")):
            _assert_cell_is(column, [r["network"][row[0]][key] for r in records])
    _assert_cell_is(network[1][-1][1], [r["reference_nll"] for r in records])
    assert [r[0] for r in ot[1]] == ["vp", "edm"]
    for row in ot[1]:
        _assert_cell_is(row[1], [r["ot"][row[0]]["mean"] for r in records])
        _assert_cell_is(row[2], [r["ot"][row[0]]["max"] for r in records])
    assert (tmp_path / "diffusion_fisher_likelihoods_plots.png").stat().st_size > 0
    printed = capsys.readouterr().out
    assert (tmp_path / "diffusion_fisher_likelihoods.md").read_text().strip() in printed


def test_data_audit_recipe_flags_planted_text_and_scores_attacks(tmp_path, capsys):
    cli = _recipe("data_audit").main(
        [
            f"--compare.output_dir={tmp_path}",
            "--trainer.logger=false",
            "--studies.prism.records=60",
            "--studies.prism.members=10",
            "--studies.prism.non_members=10",
            "--studies.prism.shadow_records=10",
            "--studies.prism.target_epochs=[1]",
            "--studies.prism.reference_epochs=1",
            "--studies.prism.width=32",
            "--studies.prism.seeds=[0, 1]",
        ]
    )
    assert cli.results == []  # no grid: the recipe is its two studies
    summary, planted = cli.study_results["overlap"].tables.values()
    (attacks,) = cli.study_results["prism"].tables.values()
    assert [r[0] for r in summary[1]] == ["stdlib-A", "stdlib-B"]
    row = planted[1][0]
    assert row[2] == 14 and float(row[3]) > 0.8  # planted instances are found
    assert float(row[4]) < 0.05  # few other instances overlap
    from lab.prism.study import COLUMNS

    extra = ["gradnorm", "recall", "dc_pdd"]  # the study's default extra attacks
    assert [r[1] for r in attacks[1]] == [*ATTACKS, *extra]  # the paper's four, the field's
    assert attacks[0] == COLUMNS
    column = {name: i for i, name in enumerate(COLUMNS)}
    figures = ("AUC", "AUC s.e.", "AUC vs non-members", "s.e. vs non-members", "PR AUC")
    for row in attacks[1]:
        for name in figures:  # mean ± std over the two seeds
            assert 0.0 <= float(row[column[name]].split(" ± ")[0]) <= 1.0, (row[1], name)
        # 20 negatives (15 for ReCaLL, whose prefix takes 5 non-members) measure neither rate
        assert row[column["TPR@0.1%FPR"]] == "n/a (needs >= 1000 negatives)"
        assert row[column["TPR@1%FPR"]] == "n/a (needs >= 100 negatives)"
        assert row[column["beats blind (seeds)"]] in (0, 1, 2)
        assert row[column["beats blind vs non-members (seeds)"]] in (0, 1, 2)
    blind = {(r[column["blind AUC"]], r[column["blind AUC vs non-members"]]) for r in attacks[1]}
    assert len(blind) == 1  # the blind baseline sees no model: one value for every target
    assert len({(r[-2], r[-1]) for r in attacks[1]}) == 1  # one diagnosis per target
    assert (tmp_path / "overlap_report.json").exists()
    printed = capsys.readouterr().out
    for study in ("overlap", "prism"):
        assert (tmp_path / f"data_audit_{study}.md").read_text().strip() in printed


RECIPE_NAMES = sorted(p.stem for p in RECIPES.glob("*.py"))


@pytest.mark.parametrize("name", RECIPE_NAMES)
def test_every_recipe_is_a_comparison_cli_whose_config_resolves(name, monkeypatch):
    from lab import ComparisonCLI, Study

    studies = {}

    def resolve_only(cli):
        studies.update(cli._studies())
        return []

    monkeypatch.setattr(ComparisonCLI, "run", resolve_only)
    args = ["--trainer.logger=false"]
    # skip the base model's pretraining: nothing is instantiated here
    if name in ("fisher_sft", "sft_pipeline"):
        args.append("--model.model=a-local-model")
    cli = _recipe(name).main(args)
    assert type(cli) is ComparisonCLI
    assert all(isinstance(study, Study) for study in studies.values())
    assert cli.has_grid or studies  # a recipe without a grid is its studies
    if cli.has_grid:
        assert cli._arms and cli.config.compare.seeds


def test_clustering_recipe_puts_sdcib_next_to_kmeans_on_views_and_graph_views(tmp_path, capsys):
    threads = torch.get_num_threads()  # the recipe sets one thread
    graph = "lightning_info.methods.cmv_nd.AttributeMissingGraphDataModule"
    sources = {
        name: {
            "class_path": graph,
            "init_args": {
                "sbm": {"num_nodes": 120, "num_classes": 3},
                "views": name,
                "batch_size": 16,
                "features": {"feature_dim": 8},
            },
        }
        for name in ("imputed", "sign", "cmv_nd")
    }
    cli = _recipe("clustering").main(
        [
            "--compare.grid=[synthetic]",
            "--compare.seeds=[0, 1]",
            "--trainer.max_epochs=1",
            "--trainer.logger=false",
            "--trainer.enable_progress_bar=false",
            f"--trainer.default_root_dir={tmp_path}",
            "--model.hidden=[8, 4]",
            "--data.synthetic.num_samples=96",
            "--data.batch_size=16",
            "--studies.views.runs=[[synthetic, kmeans]]",
            "--studies.views.sources="
            + json.dumps(
                {
                    "synthetic": {
                        "class_path": "lightning_info.methods.sdcib.ClusteringViewsDataModule",
                        "init_args": {
                            "name": "synthetic",
                            "synthetic": {"num_samples": 96},
                            "batch_size": 16,
                        },
                    }
                }
            ),
            f"--studies.graph.sources={json.dumps(sources)}",
            "--studies.graph.sdcib={hidden: [8, 4]}",
            "--studies.graph.max_epochs=1",
            f"--compare.output_dir={tmp_path}",
        ]
    )
    torch.set_num_threads(threads)
    assert {r.metric for r in cli.results} == {"test/acc", "test/nmi", "test/ari"}
    ((columns, rows),) = cli.study_results["views"].tables.values()
    assert [r[1] for r in rows] == ["SDCIB", "SDCIB (last layer only)", "k-means (views joined)"]
    assert all(r[-1] == 2 for r in rows)  # the grid's two seeds, also in the study
    ((columns, rows),) = cli.study_results["graph"].tables.values()
    assert [(r[0], r[1]) for r in rows] == [
        ("imputed", "k-means (views joined)"),
        ("sign", "k-means (views joined)"),
        ("cmv_nd", "k-means (views joined)"),
        ("cmv_nd", "SDCIB"),
    ]
    assert (tmp_path / "clustering_graph_embedding_cmv_nd.png").stat().st_size > 0
    assert (tmp_path / "clustering_views_embedding_grid_synthetic.png").stat().st_size > 0
    assert "attribute-missing SBM graph" in capsys.readouterr().out


def test_cacti_recipe_puts_cacti_next_to_baselines_on_the_same_masks(tmp_path, capsys):
    from sklearn.experimental import enable_iterative_imputer  # noqa: F401
    from sklearn.impute import IterativeImputer

    from lightning_info.methods.cacti import TabularImputationDataModule, imputation_scores

    threads = torch.get_num_threads()  # the recipe sets one thread
    cli = _recipe("cacti").main(
        [
            f"--compare.output_dir={tmp_path}",
            "--trainer.logger=false",
            "--studies.imputation.tables=[wine]",
            "--studies.imputation.mechanisms=[mcar, mnar]",
            "--studies.imputation.seeds=[0, 1]",
            "--studies.imputation.max_epochs=1",
            "--studies.imputation.context=tfidf",
            "--studies.imputation.workers=1",
            '--studies.imputation.model={"embed_dim": 8, "encoder_depth": 1, "decoder_depth": 1}',
        ]
    )
    torch.set_num_threads(threads)
    r2, rmse, seconds = cli.study_results["imputation"].tables.values()
    columns, rows = r2
    assert columns[2:] == [
        "mean",
        "KNN (5)",
        "IterativeImputer",
        "CACTI",
        "CACTI (no context)",
        "CACTI - best baseline",
    ]
    assert [row[:2] for row in rows] == [["wine", "mcar"], ["wine", "mnar"]]
    assert rows[0][6] == "-" and rows[1][6] != "-"  # the ablation runs under MNAR only
    assert rows[0][2] == "-"  # a constant fill has no correlation
    # the baselines' cells are the oracle's: IterativeImputer fit on the training rows
    expected = []
    for seed in (0, 1):
        data = TabularImputationDataModule("wine", mechanism="mnar", data_seed=seed, context="none")
        train, _, _ = data.arrays("train")
        test, truth, target = data.arrays("test")
        imputed = IterativeImputer(max_iter=10, random_state=seed).fit(train).transform(test)
        expected.append(imputation_scores(truth, imputed, target)["r2"])
    mean, std = _mean_std(rows[1][4])
    assert mean == pytest.approx(np.mean(expected), abs=1e-4)
    assert std == pytest.approx(np.std(expected, ddof=1), abs=1e-4)
    records = cli.study_results["imputation"].records
    assert len(records) == 4 and all(np.isfinite(r["scores"]["cacti"]["rmse"]) for r in records)
    assert (tmp_path / "cacti_imputation_r2.png").exists()
    assert (tmp_path / "cacti_imputation.md").read_text().strip() in capsys.readouterr().out


def test_prodiff_recipe_puts_prodiff_next_to_interpolation_on_the_same_windows(tmp_path, capsys):
    from lightning_info.methods.prodiff import (
        SyntheticCity,
        TrajectoryDataModule,
        linear_interpolation,
        trajectory_scores,
    )

    threads = torch.get_num_threads()  # the recipe sets one thread
    model = (
        '{"encoder": {"embed_dim": 8, "num_layers": 1, "num_heads": 2, "feedforward_dim": 8}, '
        '"denoiser": {"base_channels": 4, "multipliers": [1], "res_blocks": 1, '
        '"attention_lengths": []}, "diffusion": {"num_steps": 20}, "sampling": {"steps": 4}, '
        '"prototype_options": {"num_prototypes": 4}}'
    )
    cli = _recipe("prodiff").main(
        [
            f"--compare.output_dir={tmp_path}",
            "--trainer.logger=false",
            "--studies.trajectories.window_lengths=[5, 6]",
            "--studies.trajectories.seeds=[0, 1]",
            "--studies.trajectories.num_trajectories=64",
            "--studies.trajectories.max_epochs=1",
            "--studies.trajectories.batch_size=16",
            "--studies.trajectories.workers=1",
            f"--studies.trajectories.model={model}",
        ]
    )
    torch.set_num_threads(threads)
    tables = cli.study_results["trajectories"].tables
    columns, rows = next(iter(tables.values()))  # mean deviation
    assert columns == [
        "k",
        "linear interpolation",
        "great-circle interpolation",
        "ProDiff",
        "ProDiff (no prototypes)",
    ]
    assert [row[0] for row in rows] == [5, 6]
    # the linear cell is the oracle's: linear interpolation of the same test windows
    expected = []
    for seed in (0, 1):
        data = TrajectoryDataModule(
            window_length=6,
            synthetic=SyntheticCity(num_trajectories=64, left_side_probability=1.0),
            data_seed=seed,
        )
        truth = data.windows["test"]
        expected.append(
            trajectory_scores(linear_interpolation(truth).numpy(), truth.numpy())["mtd"]
        )
    mean, std = _mean_std(rows[1][1])
    assert mean == pytest.approx(np.mean(expected), abs=1e-3)
    assert std == pytest.approx(np.std(expected, ddof=1), abs=1e-3)
    records = cli.study_results["trajectories"].records
    assert len(records) == 4 and all(np.isfinite(r["scores"]["prodiff"]["mtd"]) for r in records)
    assert (tmp_path / "prodiff_trajectories_map.png").exists()
    assert (tmp_path / "prodiff_trajectories.md").read_text().strip() in capsys.readouterr().out


def test_ancestral_search_recipe_puts_the_search_next_to_fci_on_the_same_samples(tmp_path):
    pytest.importorskip("pgmpy")
    from lightning_info.methods.ancestral_search import BayesianNetworkDataModule, graph_scores
    from lightning_info.methods.ancestral_search.functional import fci_pag

    cli = _recipe("ancestral_search").main(
        [
            f"--compare.output_dir={tmp_path}",
            "--trainer.logger=false",
            "--studies.search.networks=[asia]",
            "--studies.search.hidden_fractions=[0.0, 0.2]",
            "--studies.search.sample_sizes=[2000]",
            "--studies.search.seeds=[0, 1]",
            "--studies.search.toy_sample_sizes=[20000]",
            "--studies.search.workers=1",
        ]
    )
    result = cli.study_results["search"]
    columns, rows = result.tables["orientation F1 against the oracle PAG"]
    assert columns[-2:] == ["FCI (G^2)", "search and score"]
    assert [row[:3] for row in rows] == [["asia", "0%", 2000], ["asia", "20%", 2000]]
    # the FCI cell is the oracle's: FCI's PAG of the same samples against the same truth
    expected = []
    for seed in (0, 1):
        data = BayesianNetworkDataModule(
            "asia", num_samples=2000, hidden_fraction=0.2, data_seed=seed, constant_columns="hide"
        )
        expected.append(graph_scores(fci_pag(data.codes), data.truth)["orientation_f1"])
    mean, std = _mean_std(rows[1][4])
    assert mean == pytest.approx(np.mean(expected), abs=1e-4)
    assert std == pytest.approx(np.std(expected, ddof=1), abs=1e-4)
    toys = result.tables["toy graphs: share of seeds recovering the MAG exactly"][1]
    assert toys[1] == ["confounded_pair", "2/2"]  # recovered from 20,000 samples
    assert (tmp_path / "ancestral_search_search_f1.png").exists()


def test_efg_last_iterate_recipe_tunes_then_compares_the_learners_at_one_budget(tmp_path):
    pytest.importorskip("pyspiel")
    from lab.efg_last_iterate.study import evaluation_points, fitted_slope
    from lightning_info.methods.efg_last_iterate import DEFAULT_RATES, TabularSolver, game_tree

    cli = _recipe("efg_last_iterate").main(
        [
            f"--compare.output_dir={tmp_path}",
            "--trainer.logger=false",
            "--studies.games.games=[kuhn_poker]",
            "--studies.games.seeds=[0, 1]",
            "--studies.games.episodes={kuhn_poker: 4096}",
            "--studies.games.batch_size=128",
            "--studies.games.evaluations=6",
            "--studies.games.multipliers=[0.1, 1.0]",
            "--studies.games.taus=[0.1]",
            "--studies.games.cfr_iterations={kuhn_poker: 20}",
            "--studies.games.workers=1",
        ]
    )
    result = cli.study_results["games"]
    records = result.records
    columns, rows = result.tables["last-iterate NashConv at the final budget"]
    assert columns[2:5] == ["virtual-transition OMD (ours)", "IX-OMD", "Balanced OMD"]
    # the tuned multiplier is the one with the lowest final NashConv on the tuning seed
    for method in DEFAULT_RATES:
        tried = [r for r in records["tuning"] if r["method"] == method]
        assert {r["seed"] for r in tried} == {1000} and len(tried) == 2
        best = min(tried, key=lambda r: r["nash_conv"][-1])["multiplier"]
        runs = [r for r in records["runs"] if r["method"] == method]
        assert {r["multiplier"] for r in runs} == {best}
        assert {r["tau"] for r in tried} == {0.1 if method == "virtual_transition" else 0.0}
    # a table cell is a solver's NashConv recomputed here, and the slope its fit
    run = next(r for r in records["runs"] if r["method"] == "ix_omd" and r["seed"] == 1)
    rates = DEFAULT_RATES["ix_omd"]
    solver = TabularSolver(
        game_tree("kuhn_poker"),
        "ix_omd",
        eta=rates["eta"] * run["multiplier"],
        gamma=rates["gamma"] * run["multiplier"],
        tau=0.0,
        seed=1,
    )
    points = evaluation_points(4096, 128, 6)
    assert run["points"] == points and points[-1] == 4096
    curve = []
    for target in points:
        while solver.episodes < target:
            solver.step(128)
        curve.append(solver.nash_conv())
    assert run["nash_conv"] == pytest.approx(curve, abs=1e-12)
    assert run["slope"] == pytest.approx(fitted_slope(points, curve, 0.01 * 4096))
    finals = [r["nash_conv"][-1] for r in records["runs"] if r["method"] == "ix_omd"]
    mean, std = _mean_std(rows[0][3])
    assert mean == pytest.approx(np.mean(finals), abs=1e-4)
    assert std == pytest.approx(np.std(finals, ddof=1), abs=1e-4)
    assert records["cfr"][0]["average"] < 0.1  # CFR's average policy after 20 iterations
    assert (tmp_path / "efg_last_iterate_games_nash_conv.png").exists()


def test_docks_rag_recipe_tables_every_prompt_variant_over_seeds(tmp_path):
    cli = _recipe("docks_rag").main(
        [
            f"--compare.output_dir={tmp_path}",
            "--trainer.logger=false",
            "--studies.docred.variants=[plain, hybrid]",
            "--studies.docred.seeds=[0, 1]",
            "--studies.docred.data={source: {num_train: 6, num_dev: 2}, prompt: {top_k: 2}, "
            "knowledge: {kg_steps: 20, encoder: tfidf, encoder_dim: 8}}",
            "--studies.docred.size={layers: 1, width: 16, heads: 2}",
            "--studies.docred.vocab_size=400",
            "--studies.docred.pretrain_epochs=1",
            "--studies.docred.epochs=1",
            "--studies.docred.max_length=384",
            "--studies.docred.workers=1",
        ]
    )
    result = cli.study_results["docred"]
    columns, rows = result.tables["held-out relation extraction (official DocRED scores)"]
    assert columns[:3] == ["prompt", "F1", "Ign F1"]
    assert [r[0] for r in rows] == [
        "plain document",
        "+ DocKG + SetRAG (DocKS-RAG)",
        "DocKG scorer alone (its kept triples)",
    ]
    records = result.records
    assert sorted((r["variant"], r["seed"]) for r in records) == [
        ("hybrid", 0),
        ("hybrid", 1),
        ("plain", 0),
        ("plain", 1),
    ]
    hybrid = [r["f1"] for r in records if r["variant"] == "hybrid"]
    mean, std = _mean_std(rows[1][1])
    assert mean == pytest.approx(np.mean(hybrid), abs=1e-4)
    assert std == pytest.approx(np.std(hybrid, ddof=1), abs=1e-4)
    assert all(0.0 <= r["ign_f1"] <= r["f1"] + 1e-9 <= 1.0 + 1e-9 for r in records)
    assert (tmp_path / "docks_rag_docred_f1.png").exists()


ELICITATION_SMALL = [
    "--studies.elicitation.seeds=[0, 1]",
    "--studies.elicitation.steps=2",
    "--studies.elicitation.report_at=[0, 2]",
    "--studies.elicitation.entities=4",
    "--studies.elicitation.latent={latent: {num_types: 2, num_questions: 6, num_answers: 3, "
    "concentration: 0.1, uninformative: 2, world_seed: 3, num_entities: 40}, num_val: 4, "
    "num_test: 4, batch_size: 16}",
    "--studies.elicitation.digits={digits: {threshold: 0.5}, num_val: 4, num_test: 4, "
    "batch_size: 64}",
    "--studies.elicitation.targets={latent: [2, 3], digits: [16, 17, 18]}",
    "--studies.elicitation.candidates={digits: [1, 2, 5, 6]}",
    "--studies.elicitation.epochs={latent: 1, digits: 1}",
    "--studies.elicitation.size={layers: 1, width: 16, heads: 2}",
    "--studies.elicitation.workers=1",
]


def test_adaptive_elicitation_recipe_tables_every_policy_and_the_reference(tmp_path, monkeypatch):
    from lightning_info.lm.tiny_lm import train_bpe_tokenizer
    from lightning_info.methods.adaptive_elicitation import (
        ElicitationDataModule,
        ExactPosteriorModel,
        LatentWorldOptions,
    )
    from lightning_info.methods.adaptive_elicitation.entities import latent_world_questions
    from lightning_info.methods.adaptive_elicitation.evaluation import elicitation_curves

    cli = _run_with_offline_wandb("adaptive_elicitation", ELICITATION_SMALL, tmp_path, monkeypatch)
    result = cli.study_results["elicitation"]
    columns, rows = result.tables["latent: target accuracy and NLL after n questions"]
    assert columns == ["policy", "acc@0", "acc@2", "NLL@0", "NLL@2"]
    assert [r[0] for r in rows] == [
        "EIG (LM)",
        "lookahead (LM)",
        "max answer entropy (LM)",
        "random (LM)",
        "reference EIG (exact / empirical)",
    ]
    records = result.records
    assert sorted((r["world"], r["seed"]) for r in records) == [
        ("digits", 0),
        ("digits", 1),
        ("latent", 0),
        ("latent", 1),
    ]
    # the reference line is exact-posterior EIG on the same test entities, computed here afresh
    for record in (r for r in records if r["world"] == "latent"):
        tokenizer = train_bpe_tokenizer(latent_world_questions(6), vocab_size=300)
        latent = LatentWorldOptions(
            num_types=2,
            num_questions=6,
            concentration=0.1,
            uninformative=2,
            world_seed=3,
            num_entities=40,
        )
        data = ElicitationDataModule(
            tokenizer, latent=latent, num_val=4, num_test=4, seed=record["seed"]
        )
        answers = data.table.answers[data.test_entities[:4]]
        curves = elicitation_curves(
            "eig", ExactPosteriorModel(data.world), answers, [0, 1, 4, 5], [2, 3], 2
        )
        expected = curves["nll"].mean(0).tolist()
        assert record["curves"]["reference"]["nll"] == pytest.approx(expected, abs=1e-12)
        assert all(kl >= -1e-9 for kl in record["kl"])
    eig = [r["curves"]["eig"]["accuracy"][2] for r in records if r["world"] == "digits"]
    digits = result.tables["digits: target accuracy and NLL after n questions"]
    mean, std = _mean_std(digits[1][0][2])
    assert mean == pytest.approx(np.mean(eig), abs=1e-4)
    assert std == pytest.approx(np.std(eig, ddof=1), abs=1e-4)
    assert (tmp_path / "adaptive_elicitation_elicitation_curves.png").stat().st_size > 0
    charts = _wandb_table_keys(tmp_path, "elicitation")
    assert charts == {"latent_accuracy", "latent_nll", "digits_accuracy", "digits_nll"}
    runs = _wandb_runs(tmp_path)
    assert any(run.glob("files/media/images/elicitation/curves_*.png") for run in runs)


GRAPH4MM_SMALL = [
    "--studies.graph4mm.arms={graph4mm: {variant: graph4mm}, text_only: {variant: text_only}}",
    "--studies.graph4mm.seeds=[0, 1]",
    "--studies.graph4mm.data={num_train: 24, num_val: 8, num_test: 8, batch_size: 8}",
    "--studies.graph4mm.model={qformer: {dim: 16, num_queries: 2, layers: 1, heads: 2}, "
    "image_encoder: {dim: 8}, optimizer: {lr: 0.003, warmup_fraction: 0.1}, max_new_tokens: 4}",
    "--studies.graph4mm.lm={layers: 1, width: 16, heads: 2}",
    "--studies.graph4mm.corpus=32",
    "--studies.graph4mm.lm_epochs=1",
    "--studies.graph4mm.epochs=2",
    "--studies.graph4mm.val_every=1",
    "--studies.graph4mm.workers=1",
]


def test_graph4mm_recipe_tables_every_arm_from_its_runs(tmp_path, monkeypatch):
    from lightning.pytorch import Trainer, seed_everything

    from lab.graph4mm.study import (
        bayes_label_accuracy,
        pretrain_language_model,
    )
    from lightning_info.core.options import AdamWOptions
    from lightning_info.methods.graph4mm import Graph4MM, MultimodalGraphDataModule

    cli = _run_with_offline_wandb("graph4mm", GRAPH4MM_SMALL, tmp_path, monkeypatch)
    result = cli.study_results["graph4mm"]
    ((title, (columns, rows)),) = result.tables.items()
    assert columns == [
        "arm",
        "token accuracy",
        "ROUGE-L",
        "exact match",
        "node-label accuracy",
        "fit seconds",
    ]
    assert [r[0] for r in rows] == [
        "Graph4MM (hop-diffused Q-Former)",
        "text-only LM",
        "Bayes from every neighbour's digit (reference)",
        "Bayes from the captioned neighbours (reference)",
    ]
    records = result.records
    assert sorted((r["arm"], r["seed"]) for r in records) == [
        ("graph4mm", 0),
        ("graph4mm", 1),
        ("text_only", 0),
        ("text_only", 1),
    ]
    rouge = [r["scores"]["test/rougel"] for r in records if r["arm"] == "graph4mm"]
    mean, std = _mean_std(rows[0][2])
    assert mean == pytest.approx(np.mean(rouge), abs=1e-4)
    assert std == pytest.approx(np.std(rouge, ddof=1), abs=1e-4)
    assert all([p[0] for p in r["curves"]] == [1, 2] for r in records)
    # the text-only arm of seed 1, rebuilt here from the components, scores what was recorded
    data = MultimodalGraphDataModule(seed=1, num_train=24, num_val=8, num_test=8, batch_size=8)
    lm = pretrain_language_model(
        data,
        seed=1,
        corpus=32,
        epochs=1,
        lr=0.003,
        lm={"layers": 1, "width": 16, "heads": 2},
        root=str(tmp_path),
    )
    model = Graph4MM(
        lm,
        data.tokenizer,
        num_classes=10,
        variant="text_only",
        optimizer=AdamWOptions(lr=0.003, warmup_fraction=0.1),
        max_new_tokens=4,
    )
    seed_everything(1, verbose=False)
    trainer = Trainer(
        max_epochs=2,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        gradient_clip_val=1.0,
        default_root_dir=tmp_path,
    )
    trainer.fit(model, datamodule=data)
    expected = trainer.test(model, datamodule=data, verbose=False)[0]
    recorded = next(r for r in records if r["arm"] == "text_only" and r["seed"] == 1)
    assert recorded["scores"] == pytest.approx(expected, abs=1e-6)
    assert recorded["bayes"]["all"] == pytest.approx(bayes_label_accuracy(data.test_graphs))
    assert (tmp_path / "graph4mm_graph4mm_scores.png").stat().st_size > 0
    assert _wandb_table_keys(tmp_path, "graph4mm") == {"val_rougel", "val_accuracy"}


def test_fisher_sft_reselect_study_tables_six_arms_and_the_reselecting_arms_select_again(
    tmp_path, capsys
):
    """``recipes/fisher_sft_reselect.yaml`` at toy size, on a tiny local base model: six arms,
    one table; the two re-selecting arms carry FisherReselection and reload the loader."""
    from tests.pipelines.toy import base_model

    base = str(base_model(tmp_path / "base"))
    recipe = _recipe("fisher_sft")
    config = Path(recipe.__file__).with_name("fisher_sft_reselect.yaml")
    args = [
        f"--config={config}",
        f"--model.model={base}",
        f"--data.tokenizer={base}",
        "--model.lora={r: 2, lora_alpha: 4, target_modules: [c_attn]}",
        "--data.pool_size=24",
        "--data.held_out_size=4",
        "--data.max_length=96",
        "--data.progress=false",
        "--compare.grid=[4]",
        "--compare.seeds=[0]",
        "--trainer.max_epochs=2",
        "--trainer.check_val_every_n_epoch=2",
        "--trainer.logger=false",
        "--trainer.enable_progress_bar=false",
        f"--compare.output_dir={tmp_path}",
    ]
    cli = recipe.main(args)
    arms = {arm.name: arm for arm in cli._arms}
    assert len(arms) == 6
    for name in ("re-select every epoch", "re-select every 3 epochs"):
        trainer = arms[name].overrides["trainer"]
        assert trainer["reload_dataloaders_every_n_epochs"] == 1
        (callback,) = trainer["callbacks+"]
        assert callback["class_path"] == "lightning_info.FisherReselection"
    table = (tmp_path / "fisher_sft_reselect.md").read_text()
    assert all(name in table for name in arms) and table.strip() in capsys.readouterr().out


def test_a_study_run_again_with_resume_reads_its_saved_jobs(tmp_path, capsys):
    """``--compare.resume=true``: the second run reads every job back (a study's timings
    included, so the tables are the same) and runs none."""
    args = [
        "--studies.likelihoods.seeds=[0, 1]",
        "--studies.likelihoods.max_steps=5",
        "--studies.likelihoods.model={hidden: 8}",
        "--studies.likelihoods.data={num_samples: 100}",
        "--studies.likelihoods.test_points=4",
        "--studies.likelihoods.steps=4",
        "--studies.likelihoods.probes=1",
        "--studies.likelihoods.reference_probes=2",
        "--studies.likelihoods.ot_schedules=[vp]",
        "--studies.likelihoods.ot_points=2",
        "--studies.likelihoods.ot_data_points=20",
        "--studies.likelihoods.samples=20",
        "--trainer.logger=false",
        "--compare.resume=true",
        f"--compare.output_dir={tmp_path}",
    ]
    first = _recipe("diffusion_fisher").main(args).study_results["likelihoods"].tables
    assert len(list((tmp_path / "diffusion_fisher_jobs").glob("*.pkl"))) == 2
    capsys.readouterr()
    second = _recipe("diffusion_fisher").main(args).study_results["likelihoods"].tables
    printed = capsys.readouterr().out
    assert printed.count("(saved)") == 2 and second == first
