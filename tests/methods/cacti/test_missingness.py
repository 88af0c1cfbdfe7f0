"""Simulated missingness hits its rate, MAR reads only observed columns, and the scores of an
imputation equal their definitions."""

from __future__ import annotations

import numpy as np
import pytest

from lightning_info.methods.cacti.functional import imputation_scores
from lightning_info.methods.cacti.missingness import simulate_missing, solve_intercepts


def _table(n=20000, d=6, seed=0):
    rng = np.random.default_rng(seed)
    latent = rng.standard_normal((n, 2))
    return latent @ rng.standard_normal((2, d)) + 0.5 * rng.standard_normal((n, d))


@pytest.mark.parametrize("mechanism", ["mcar", "mar", "mnar"])
@pytest.mark.parametrize("rate", [0.1, 0.3, 0.5])
def test_the_rate_is_hit_within_one_percent(mechanism, rate):
    x = _table()
    mask = simulate_missing(x, rate, mechanism, seed=1)
    can_be_missing = mask.any(0)  # MAR's observed columns never are
    assert abs(mask[:, can_be_missing].mean() - rate) < 0.01
    if mechanism == "mar":
        assert can_be_missing.sum() == 6 - round(0.3 * 6)


def test_intercepts_solve_the_mean_probability():
    scores = np.random.default_rng(0).standard_normal((500, 3)) * [1, 3, 0.1]
    b = solve_intercepts(scores, 0.27)
    mean = (1 / (1 + np.exp(-(scores + b)))).mean(0)
    np.testing.assert_allclose(mean, 0.27, atol=1e-9)


def test_mar_depends_only_on_observed_columns_and_mnar_on_masked_ones():
    x = _table(2000)
    mar = simulate_missing(x, 0.3, "mar", seed=2)
    observed = ~mar.any(0)
    changed = x.copy()
    changed[:, ~observed] = np.random.default_rng(9).standard_normal(changed[:, ~observed].shape)
    assert np.array_equal(simulate_missing(changed, 0.3, "mar", seed=2), mar)  # same draws
    moved = x.copy()
    moved[:, observed] *= -1  # the observed columns drive it
    assert not np.array_equal(simulate_missing(moved, 0.3, "mar", seed=2), mar)

    mnar = simulate_missing(x, 0.3, "mnar", seed=2)
    assert mnar.all(0).sum() == 0 and mnar.any(0).all()  # every column, its inputs too, misses
    inputs = observed  # same seed: the same columns drive the logistic model
    swapped = x.copy()
    swapped[:, inputs] *= -1
    assert not np.array_equal(simulate_missing(swapped, 0.3, "mnar", seed=2), mnar)


def test_the_table_is_not_modified_and_bad_input_is_refused():
    x = _table(100)
    before = x.copy()
    simulate_missing(x, 0.3, "mnar")
    assert np.array_equal(x, before)
    with pytest.raises(ValueError, match="mechanism"):
        simulate_missing(x, 0.3, "mnar-ish")
    with pytest.raises(ValueError, match="rate"):
        simulate_missing(x, 1.0)
    with pytest.raises(ValueError, match="complete"):
        simulate_missing(np.where(x > 2, np.nan, x), 0.3)
    with pytest.raises(ValueError, match="2 columns"):
        simulate_missing(x[:, :1], 0.3)


def test_scores_equal_their_definitions():
    from scipy.stats import wasserstein_distance

    rng = np.random.default_rng(3)
    truth = rng.standard_normal((50, 3))
    imputed = truth + 0.3 * rng.standard_normal((50, 3))
    missing = rng.random((50, 3)) < 0.4
    missing[:, 2] = False
    missing[0, 2] = True  # one missing entry: no correlation, still a distance
    scores = imputation_scores(truth, imputed, missing)
    r2 = [
        np.corrcoef(truth[missing[:, j], j], imputed[missing[:, j], j])[0, 1] ** 2 for j in (0, 1)
    ]
    assert scores["r2"] == pytest.approx(np.mean(r2), rel=1e-12)
    diff = (imputed - truth)[missing]
    assert scores["rmse"] == pytest.approx(np.sqrt((diff**2).mean()), rel=1e-12)
    assert scores["mae"] == pytest.approx(np.abs(diff).mean(), rel=1e-12)
    distances = [
        wasserstein_distance(truth[missing[:, j], j], imputed[missing[:, j], j]) for j in range(3)
    ]
    assert scores["wasserstein"] == pytest.approx(np.mean(distances), rel=1e-12)
    with pytest.raises(ValueError, match="nothing to score"):
        imputation_scores(truth, imputed, np.zeros_like(missing))
