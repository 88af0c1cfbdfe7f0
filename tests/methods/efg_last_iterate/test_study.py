"""The recipe's study: every method is tuned over a grid of the same size on a seed that is not
reported; the slope fit recovers a synthetic power law's exponent; the crossing of two power
laws is found where it is known; the figure's fitted line has the mean of the seeds' slopes."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyspiel")

from lab.efg_last_iterate.study import (  # noqa: E402
    LastIterateStudy,
    LearnerJob,
    _final,
    crossing,
    evaluation_points,
    fitted_line,
    fitted_slope,
    run_learner,
)
from lightning_info.methods.efg_last_iterate.solver import DEFAULT_RATES  # noqa: E402

POINTS = evaluation_points(10_000_000, 1024, 25)


def _study(**kwargs) -> LastIterateStudy:
    settings = {
        "games": ["kuhn_poker"],
        "episodes": {"kuhn_poker": 1024},
        "batch_size": 64,
        "evaluations": 5,
        "cfr_iterations": {},
    }
    return LastIterateStudy(**{**settings, **kwargs})


def test_every_method_sees_the_same_number_of_settings():
    study = _study(multipliers=[0.1, 1.0, 10.0], taus=[0.01, 0.1], gamma_factors=[1.0, 10.0])
    grids = {m: study.grid(m) for m in ("virtual_transition", "ix_omd", "balanced_omd")}
    assert {len(g) for g in grids.values()} == {study.grid_size} == {6}
    for method, grid in grids.items():
        assert len(set(grid)) == 6  # distinct settings
        assert sorted({x for x, _, _ in grid}) == [0.1, 1.0, 10.0]  # the same multipliers
        if method == "virtual_transition":
            assert {(tau, g) for _, tau, g in grid} == {(0.01, 1.0), (0.1, 1.0)}
        else:  # no tau: the second axis is a factor on gamma alone
            assert {(tau, g) for _, tau, g in grid} == {(0.0, 1.0), (0.0, 10.0)}
    # the baselines take as many gamma factors as there are taus
    short = _study(multipliers=[1.0, 2.0], taus=[0.1], gamma_factors=[1.0, 10.0])
    assert [len(short.grid(m)) for m in grids] == [2, 2, 2]
    assert short.grid("ix_omd") == [(1.0, 0.0, 1.0), (2.0, 0.0, 1.0)]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"taus": [0.01, 0.1], "gamma_factors": [1.0]}, "at least as many positive"),
        ({"gamma_factors": [0.0, 1.0]}, "at least as many positive"),
        ({"seeds": [0, 1000]}, "tune on another seed"),
        ({"batch_size": {"leduc_poker": 64}}, "no batch size for"),
        ({"batch_size": 1024}, "at least two"),
    ],
)
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _study(**kwargs)


def test_one_setting_needs_no_tuning_seed():
    study = _study(seeds=[1000], multipliers=[1.0], taus=[0.1])
    assert study.grid_size == 1


def test_tuning_runs_every_setting_on_the_tuning_seed_and_picks_the_lowest():
    study = _study(
        seeds=[0, 1],
        batch_size={"kuhn_poker": 128},
        multipliers=[0.1, 1.0],
        taus=[0.01, 0.1],
        gamma_factors=[1.0, 10.0],
    )
    result = study.run()
    tuning, runs = result.records["tuning"], result.records["runs"]
    for method in DEFAULT_RATES:
        tried = [r for r in tuning if r["method"] == method]
        assert len(tried) == 4 and {r["seed"] for r in tried} == {1000}
        assert {(r["multiplier"], r["tau"], r["gamma_factor"]) for r in tried} == set(
            study.grid(method)
        )
        best = min(tried, key=lambda r: r["nash_conv"][-1])
        reported = [r for r in runs if r["method"] == method]
        assert {r["seed"] for r in reported} == {0, 1}
        assert {(r["multiplier"], r["tau"], r["gamma_factor"]) for r in reported} == {
            (best["multiplier"], best["tau"], best["gamma_factor"])
        }
        assert all(r["batch_size"] == 128 and r["points"][-1] == 1024 for r in reported)
    columns, rows = result.tables["tuning: final NashConv on the tuning seed per rate multiplier"]
    assert columns == ["game", "method", "second axis", "x0.1", "x1"] and len(rows) == 6
    assert sum("(chosen)" in cell for row in rows for cell in row) == 3
    assert [row[2] for row in rows[2:4]] == ["gamma x1", "gamma x10"]
    assert set(result.line_plots) == {"log10_nash_conv_kuhn_poker"}


@pytest.mark.parametrize("slope", [-0.125, -0.3897, -1.0])
def test_fitted_slope_recovers_a_power_law(slope):
    curve = [3.0 * e**slope for e in POINTS]
    start = 0.01 * POINTS[-1]
    # points before the fit's start are left out: spoil them
    spoiled = [v if e >= start else 50.0 for e, v in zip(POINTS, curve)]
    assert fitted_slope(POINTS, spoiled, start) == pytest.approx(slope, abs=1e-12)
    fit, intercept = fitted_line(POINTS, curve, POINTS[0])
    assert fit == pytest.approx(slope, abs=1e-12)
    assert intercept == pytest.approx(np.log(3.0), abs=1e-9)
    with pytest.raises(ValueError, match="two evaluations"):
        fitted_line(POINTS, curve, POINTS[-1])


def test_the_mean_curves_slope_is_the_mean_of_the_seeds_slopes():
    rng = np.random.default_rng(0)
    curves = [
        np.exp(rng.normal(0, 0.1, len(POINTS))) * 2.0 * np.array(POINTS, float) ** s
        for s in (-0.2, -0.3, -0.4)
    ]
    start = 0.01 * POINTS[-1]
    geometric_mean = np.exp(np.log(curves).mean(0))
    mean_slope = np.mean([fitted_slope(POINTS, c, start) for c in curves])
    assert fitted_slope(POINTS, geometric_mean, start) == pytest.approx(mean_slope, abs=1e-12)


def test_crossing_of_two_power_laws():
    # 2 e^(-1/2) falls below e^(-1/4) for good at e = 16; the points do not hold 16
    points = [3**k for k in range(8)]
    ours = [2.0 * e**-0.5 for e in points]
    theirs = [e**-0.25 for e in points]
    assert crossing(points, ours, theirs) == pytest.approx(16.0, rel=1e-12)
    assert crossing(points, theirs, ours) is None  # above at the last evaluation
    assert crossing(points, [0.5 * v for v in theirs], theirs) == 1.0  # below throughout
    # a dip below that does not last is not the crossing
    wobbly = [v if e != 3 else 0.1 for e, v in zip(points, ours)]
    assert crossing(points, wobbly, theirs) == pytest.approx(16.0, rel=1e-12)


def test_a_setting_whose_steps_leave_the_simplex_is_recorded_as_diverged():
    # ten times the default rates in batches of 1024 on Leduc: float64 rows stop summing to 1
    job = LearnerJob(
        game="leduc_poker",
        method="virtual_transition",
        seed=0,
        multiplier=10.0,
        tau=0.1,
        gamma_factor=1.0,
        batch_size=1024,
        points=[4096, 16384, 32768],
    )
    run = run_learner(job)
    assert run["diverged"] == 16384
    assert np.isfinite(run["nash_conv"][0]) and run["nash_conv"][1:] == [np.inf, np.inf]
    assert _final(run) == "diverged at 16,384"
