"""The shift study: its statistics by hand, the binding counts, and the recipe at toy size."""

from __future__ import annotations

import json
import statistics
import sys

import pytest
from scipy.stats import wilcoxon

from lab.fic_tsc.study import FisherShiftStudy, ShiftJob, paired_wilcoxon, run_arm
from lightning_info.methods.fic_tsc.shift import ShiftOptions

TOY_MODEL = {"num_filters": 4, "depth": 3, "optimizer": {"lr": 0.005}}


def test_paired_wilcoxon_counts_and_matches_scipy() -> None:
    base = [0.5, 0.6, 0.7, 0.8, 0.9, 0.4]
    fic = [0.6, 0.6, 0.9, 0.7, 1.0, 0.45]
    up, down, tie, p = paired_wilcoxon(base, fic)
    assert (up, down, tie) == (4, 1, 1)
    differences = [f - b for b, f in zip(base, fic)]
    assert p == f"{wilcoxon(differences).pvalue:.3g}"
    assert paired_wilcoxon([0.5, 0.6], [0.5, 0.6]) == (0, 0, 2, "n/a")
    with pytest.raises(ValueError):
        paired_wilcoxon([0.5], [0.5, 0.6])


def _record(dataset, seed, arm, none, scaled, fraction=None, over=0.0):
    return {
        "dataset": dataset,
        "seed": seed,
        "arm": arm,
        "accuracy": {"none": none, "scale x2": scaled},
        "steps": 10,
        "best_epoch": 3,
        "constrained_fraction": fraction,
        "over_bound": over,
        "over_bound_first_tenth": 1.0 if fraction else 0.0,
        "over_bound_last_tenth": 0.0,
        "seconds": 1.0,
    }


def test_tables_by_hand() -> None:
    study = FisherShiftStudy(
        datasets=["A", "B"], seeds=[0, 1], shifts=[ShiftOptions(), ShiftOptions("scale", 2.0)]
    )
    records = [
        _record("A", 0, "baseline", 0.8, 0.5, over=0.3),
        _record("A", 0, "fic", 0.9, 0.6, fraction=0.2),
        _record("A", 1, "baseline", 0.7, 0.4, over=0.1),
        _record("A", 1, "fic", 0.7, 0.6, fraction=0.4),
        _record("B", 0, "baseline", 0.6, 0.2, over=0.5),
        _record("B", 0, "fic", 0.5, 0.3, fraction=0.6),
        _record("B", 1, "baseline", 0.9, 0.1, over=0.7),
        _record("B", 1, "fic", 0.95, 0.2, fraction=0.8),
    ]
    columns, rows = study.shift_table(records)
    assert columns[:3] == ["shift", "InceptionTime", "InceptionTime + FIC"]
    none, scaled = rows
    # per seed, the mean over the sets; then mean ± std over the seeds
    base_means = [(0.8 + 0.6) / 2, (0.7 + 0.9) / 2]
    fic_means = [(0.9 + 0.5) / 2, (0.7 + 0.95) / 2]
    assert none[1] == f"{statistics.fmean(base_means):.4f} ± {statistics.stdev(base_means):.4f}"
    assert none[2] == f"{statistics.fmean(fic_means):.4f} ± {statistics.stdev(fic_means):.4f}"
    assert none[3] == f"{(0.1 + 0.0 - 0.1 + 0.05) / 4:+.4f}"
    assert none[4] == "2 / 1 / 1" and none[6] == 4
    assert none[5] == f"{wilcoxon([0.9, 0.7, 0.5, 0.95], [0.8, 0.7, 0.6, 0.9]).pvalue:.3g}"
    assert scaled[4] == "4 / 0 / 0"
    _, per_set = study.per_set_table(records)
    assert (
        per_set[0][:2] == ["A", "none"] and per_set[0][4] == f"{(0.9 + 0.7 - 0.8 - 0.7) / 2:+.4f}"
    )
    assert len(per_set) == 4
    _, binding = study.binding_table(records)
    assert binding[0][0] == "A"
    assert binding[0][1] == f"{0.3:.4f} ± {statistics.stdev([0.2, 0.4]):.4f}"
    assert binding[0][4] == f"{0.2:.4f} ± {statistics.stdev([0.3, 0.1]):.4f}"
    assert binding[1][2] == "1.0000 ± 0.0000" and binding[1][5] == 10


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"datasets": []}, "non-empty"),
        ({"shifts": [ShiftOptions(), {"kind": "none"}]}, "same name"),
        ({"seeds": [0, 0]}, "repeat"),
        ({"data": {"seed": 3}}, "seed"),
        ({"max_fisher": 0.0}, "max_fisher"),
    ],
)
def test_bad_settings_are_refused(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        FisherShiftStudy(**kwargs)


def _job(arm: str, max_fisher: float, lookahead=None) -> ShiftJob:
    study = FisherShiftStudy(
        datasets=["UnitTest"],
        seeds=[0],
        shifts=[ShiftOptions(), ShiftOptions("offset", 1.0)],
        epochs=2,
        max_fisher=max_fisher,
        lookahead=lookahead,
        model=TOY_MODEL,
        data={"batch_size": 8},
    )
    return next(j for j in study.jobs() if j.arm == arm)


@pytest.mark.parametrize("max_fisher, expected", [(1e-8, 1.0), (1e8, 0.0)])
def test_binding_fraction_is_the_constraints_own_count(max_fisher, expected) -> None:
    pytest.importorskip("aeon.datasets")
    fic = run_arm(_job("fic", max_fisher, lookahead={"k": 2, "alpha": 0.5}))
    base = run_arm(_job("baseline", max_fisher))
    assert fic["steps"] == base["steps"] == 4  # 16 training series, batch 8, 2 epochs
    assert fic["constrained_fraction"] == expected  # FisherConstraint.constrained_fraction
    assert fic["over_bound"] == expected  # the traces recorded before it rescales
    assert base["constrained_fraction"] is None and base["over_bound"] == expected
    assert set(fic["accuracy"]) == {"none", "offset +1"}
    assert all(0.0 <= a <= 1.0 for a in fic["accuracy"].values())


def test_recipe_at_toy_size_prints_and_writes_the_tables(tmp_path, capsys, monkeypatch) -> None:
    pytest.importorskip("aeon.datasets")
    from tests.benchmark_scripts import load_recipe

    monkeypatch.setattr(sys, "argv", ["recipe"])
    cli = load_recipe("fic_tsc_shift").main(
        [
            "--trainer.logger=false",
            f"--compare.output_dir={tmp_path}",
            "--studies.shift.datasets=[UnitTest]",
            "--studies.shift.seeds=[0, 1]",
            "--studies.shift.epochs=1",
            "--studies.shift.model={num_filters: 4, depth: 3}",
            "--studies.shift.workers=1",
        ]
    )
    study = cli._studies()["shift"]
    assert [s.name for s in study.shifts][:2] == ["none", "scale x2"]
    assert study.lookahead == {"k": 5, "alpha": 0.5} and study.max_fisher == 2.0
    table = (tmp_path / "fic_tsc_shift_shift.md").read_text()
    assert "Wilcoxon p" in table and "how often the constraint binds" in table
    records = json.loads((tmp_path / "fic_tsc_shift_shift.json").read_text())
    printed = capsys.readouterr().out
    assert "| scale x2" in printed and "UnitTest" in printed
    assert records  # the per-run records are kept next to the tables


@pytest.mark.parametrize(
    "config, sets", [(None, 4), ("fic_tsc_shift_full.yaml", 7)], ids=["default", "full"]
)
def test_recipe_configs_train_the_papers_200_epochs(config, sets, monkeypatch) -> None:
    from lab import ComparisonCLI
    from tests.benchmark_scripts import RECIPES, load_recipe

    monkeypatch.setattr(sys, "argv", ["recipe"])
    monkeypatch.setattr(ComparisonCLI, "run", lambda cli: [])
    args = ["--trainer.logger=false"]
    if config:
        args = ["--config", str(RECIPES / config), *args]
    study = load_recipe("fic_tsc_shift").main(args)._studies()["shift"]
    assert study.epochs == 200 and study.max_fisher == 2.0 and len(study.datasets) == sets
    assert study.datasets[:4] == ["UnitTest", "ItalyPowerDemand", "BasicMotions", "GunPoint"]
    assert study.lookahead == {"k": 5, "alpha": 0.5} and study.seeds == [0, 1, 2]
    assert [s.kind for s in study.shifts] == [
        "none",
        "scale",
        "scale",
        "offset",
        "offset",
        "noise",
        "noise",
    ]
