"""The smoothed-information recipe at a toy config: the rate study's error shrinking with n, its
tables recomputed from the functional, the quadrature oracle against the tests' own, and the
monitor study's logged values against the functional on the trained features."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from lab.smoothed_information.study import (
    draw,
    fitted_slope,
    job_seed,
    silverman_bandwidth,
    true_information,
    uniform_mixture_information,
)
from lightning_info.methods.smoothed_information.functional import (
    SmoothedEstimatorOptions,
    smoothed_information,
)
from tests.methods.smoothed_information.test_functional import _uniform_truth

RECIPE = Path(__file__).resolve().parents[3] / "recipes" / "smoothed_information.py"
SIZES = [100, 400, 1600]
SEEDS = list(range(10))
TOY = [
    "--studies.rates.dims=[1]",
    "--studies.rates.times=[1.0]",
    f"--studies.rates.sizes={SIZES}",
    f"--studies.rates.seeds={SEEDS}",
    "--studies.rates.bootstrap=20",
    "--studies.rates.workers=1",
    "--studies.monitor.seeds=[0]",
    "--studies.monitor.epochs=2",
    "--studies.monitor.hidden=[16, 8]",
    "--studies.monitor.num_mc=128",
    "--studies.monitor.report_every=1",
    "--studies.monitor.workers=1",
]


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_torch_thread): ...


def _mean_std(cell: str) -> tuple[float, float]:
    mean, std = (float(v) for v in cell.split(" ± "))
    return mean, std


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    """The recipe run once at the toy config, logging to an offline W&B run in a temp folder."""
    out = tmp_path_factory.mktemp("smoothed_information")
    spec = importlib.util.spec_from_file_location("smoothed_information_recipe", RECIPE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    patch = pytest.MonkeyPatch()
    patch.setattr(sys, "argv", ["recipe"])
    patch.setenv("WANDB_MODE", "offline")
    try:
        cli = module.main(
            TOY + [f"--compare.output_dir={out}", f"--trainer.logger.init_args.save_dir={out}"]
        )
    finally:
        patch.undo()
    cli.out = out
    return cli


@pytest.mark.parametrize("t", [0.05, 1.0])
def test_quadrature_oracle_matches_the_functional_tests_uniform_truth(t):
    fisher, entropy = _uniform_truth(t)  # scipy, survival functions, trapezoid on [0, 1 + 12 sd]
    assert uniform_mixture_information(((-1.0, 1.0),), t) == pytest.approx(
        (fisher, entropy), rel=1e-9
    )
    # one interval cut in two is the same density
    assert uniform_mixture_information(((-1.0, 0.0), (0.0, 1.0)), t) == pytest.approx(
        (fisher, entropy), rel=1e-9
    )


def test_mixture_truth_adds_over_independent_coordinates():
    one = true_information("mixture", 1, 0.25)
    assert true_information("mixture", 2, 0.25) == pytest.approx((2 * one[0], 2 * one[1]))
    assert true_information("gaussian", 2, 0.25) == pytest.approx(
        (2 / 1.25, math.log(2 * math.pi * math.e * 1.25))
    )


def test_rate_tables_have_every_cell_and_the_plug_in_error_shrinks_with_n(cli):
    result = cli.study_results["rates"]
    (errors_title, (columns, rows)), (_, (slope_columns, slope_rows)) = result.tables.items()
    assert columns[:5] == ["distribution", "d", "t", "n", "J truth"]
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        (dist, 1, "1", n) for dist in ("gaussian", "mixture") for n in SIZES
    ]
    assert [(r[0], r[3]) for r in slope_rows] == [
        (dist, q) for dist in ("gaussian", "mixture") for q in ("J", "h")
    ]
    runs = result.records["runs"]
    assert len(runs) == 2 * len(SIZES) * len(SEEDS)
    for dist in ("gaussian", "mixture"):
        for q in ("J", "h"):
            rmse = [
                math.sqrt(
                    np.mean(
                        [
                            r["errors"]["plug_in"][q][0] ** 2
                            for r in runs
                            if (r["distribution"], r["size"]) == (dist, n)
                        ]
                    )
                )
                for n in SIZES
            ]
            assert all(np.isfinite(rmse))
            assert rmse[-1] < rmse[0] / 2, (dist, q, rmse)  # 16x the samples: 1/4 expected
            row = next(r for r in slope_rows if (r[0], r[3]) == (dist, q))
            slope = float(row[4].split(" ± ")[0])
            assert slope == pytest.approx(fitted_slope(SIZES, rmse), abs=0.006)
    # the compactly supported mixture: the KDE's extra smoothing leaves a bias the plug-in has not
    mixture_j = next(r for r in slope_rows if (r[0], r[3]) == ("mixture", "J"))
    ours, kde = (float(v) for v in mixture_j[-1].split(" / "))
    assert ours < kde / 5


def test_rate_table_cells_are_the_functional_on_the_seeded_samples(cli):
    result = cli.study_results["rates"]
    (_, (columns, rows)), _ = result.tables.items()
    runs = result.records["runs"]
    run = next(r for r in runs if (r["distribution"], r["size"], r["seed"]) == ("mixture", 400, 2))
    seed = job_seed(2, 400, 1)
    x = draw("mixture", 400, 1, torch.Generator().manual_seed(seed))
    assert float(x.min()) >= -2 and float(x.max()) <= 2 and float(x.abs().min()) >= 0.5
    h = silverman_bandwidth(x)
    for name, t in (("plug_in", 1.0), ("kde", 1.0 + h**2)):
        info = smoothed_information(
            x,
            [t],
            SmoothedEstimatorOptions(num_mc=1024),
            generator=torch.Generator().manual_seed(seed),
        )
        assert run["values"][name]["J"][0] == pytest.approx(float(info.fisher[0]), rel=1e-12)
        assert run["values"][name]["h"][0] == pytest.approx(float(info.entropy[0]), rel=1e-12)
    truth = true_information("mixture", 1, 1.0)
    assert run["errors"]["plug_in"]["J"][0] == pytest.approx(
        run["values"]["plug_in"]["J"][0] - truth[0]
    )
    # a table cell is the mean ± std of the recorded errors
    row = next(r for r in rows if (r[0], r[3]) == ("mixture", 400))
    errors = [
        r["errors"]["kde"]["h"][0]
        for r in runs
        if (r["distribution"], r["size"]) == ("mixture", 400)
    ]
    mean, std = _mean_std(row[columns.index("h error: KDE (Silverman h), t + h^2")])
    assert mean == pytest.approx(np.mean(errors), abs=1e-4)
    assert std == pytest.approx(np.std(errors, ddof=1), abs=1e-4)


def test_monitor_study_reports_what_the_monitor_logged(cli):
    result = cli.study_results["monitor"]
    (logged_title, (columns, rows)), (_, (check_columns, check_rows)) = result.tables.items()
    assert [r[0] for r in rows] == [1, 2]
    assert columns[:2] == ["epoch", "val acc"] and "I_t=0.1" in columns and "J_t=1" in columns
    (record,) = result.records
    n, dim = record["features"]
    assert dim == 8 and n > 500  # the validation split's penultimate features
    last = record["epochs"][-1]
    for t in (0.1, 1.0):
        mutual = last[f"info/input_of_head/i_t_{t:g}"]
        fisher = last[f"info/input_of_head/j_t_{t:g}"]
        assert 0 <= mutual <= math.log(n) and 0 < fisher <= dim / t
        entropy = last[f"info/input_of_head/h_t_{t:g}"]
        assert entropy == pytest.approx(mutual + 0.5 * dim * math.log(2 * math.pi * math.e * t))
    # the logged values are the functional on the trained network's features
    gap = check_columns.index("max |logged - functional| / |functional|")
    assert float(check_rows[0][gap]) < 1e-6
    variance = float(check_rows[0][check_columns.index("feature variance per coordinate")])
    assert variance == pytest.approx(record["feature_variance"], rel=1e-2) and variance > 0
    for key, value in record["recomputed"].items():
        assert last[key] == pytest.approx(value, rel=1e-6)
    assert float(rows[-1][columns.index("I_t=1")].split(" ± ")[0]) == pytest.approx(
        last["info/input_of_head/i_t_1"], abs=1e-4
    )


def test_recipe_writes_the_tables_figures_and_wandb_runs(cli):
    out = cli.out
    for study in ("rates", "monitor"):
        assert (out / f"smoothed_information_{study}.md").exists()
        assert (out / f"smoothed_information_{study}.json").exists()
    assert (out / "smoothed_information_rates_rates.png").exists()
    assert (out / "smoothed_information_monitor_monitor.png").exists()
    runs = sorted((out / "wandb").glob("offline-run-*"))
    assert len(runs) == 2  # one per study
    tables = {p.parent.name for run in runs for p in run.glob("files/media/table/*/*.json")}
    assert {"rates", "monitor"} <= tables
