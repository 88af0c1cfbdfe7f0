import numpy as np
import pytest
import torch
from scipy.stats import bootstrap
from sklearn.metrics import average_precision_score, roc_auc_score, roc_curve

from lightning_info.core.logging import metric_key
from lightning_info.methods.prism.functional import tpr_at_fpr
from lightning_info.methods.prism.statistics import (
    bootstrap_auc,
    enough_negatives,
    format_rate,
    markdown_report,
    membership_report,
    mimir_layout,
    pr_auc,
    tpr_at_fpr_levels,
)


def _audit_data(seed, members=15, non_members=25, decimals=1):
    """Member scores shifted up, rounded so that members and non-members tie."""
    rng = np.random.default_rng(seed)
    labels = np.r_[np.ones(members, dtype=np.int64), np.zeros(non_members, dtype=np.int64)]
    scores = np.round(rng.normal(size=labels.size) + 0.8 * labels, decimals)
    return scores, labels


def _loop_bootstrap(scores, labels, resamples, seed):
    """Resample the pairs one row at a time with sklearn's AUC; single-class rows drawn again."""
    rng = np.random.default_rng(seed)
    n = scores.size
    rows = list(rng.integers(0, n, (resamples, n)))
    aucs = np.full(resamples, np.nan)
    pending = list(range(resamples))
    while pending:
        for r in pending:
            if 0 < labels[rows[r]].sum() < n:
                aucs[r] = roc_auc_score(labels[rows[r]], scores[rows[r]])
        pending = [r for r in pending if np.isnan(aucs[r])]
        for r, row in zip(pending, rng.integers(0, n, (len(pending), n))):
            rows[r] = row
    return aucs.mean(), aucs.std(ddof=1)


def test_bootstrap_equals_a_direct_resampling_loop():
    scores, labels = _audit_data(0)
    mean, se = bootstrap_auc(scores, labels, resamples=400, seed=7)
    expected_mean, expected_se = _loop_bootstrap(scores, labels, 400, 7)
    assert mean == pytest.approx(expected_mean, abs=1e-12)
    assert se == pytest.approx(expected_se, abs=1e-12)


def test_bootstrap_equals_scipy_paired_bootstrap_as_mimir_calls_it():
    scores, labels = _audit_data(1)
    result = bootstrap(
        (scores, labels),
        lambda s, y: roc_auc_score(y, s),
        paired=True,
        n_resamples=300,
        method="percentile",
        rng=np.random.default_rng(3),
    )
    mean, se = bootstrap_auc(scores, labels, resamples=300, seed=3)
    assert mean == pytest.approx(result.bootstrap_distribution.mean(), abs=1e-12)
    assert se == pytest.approx(result.standard_error, abs=1e-12)


def test_bootstrap_draws_single_class_resamples_again():
    scores = np.array([0.9, 0.2, 0.4, 0.1])
    labels = np.array([1, 0, 0, 0])  # a resample misses the member with probability 0.32
    mean, se = bootstrap_auc(scores, labels, resamples=200, seed=0)
    expected_mean, expected_se = _loop_bootstrap(scores, labels, 200, 0)
    assert np.isfinite([mean, se]).all()
    assert mean == pytest.approx(expected_mean, abs=1e-12)
    assert se == pytest.approx(expected_se, abs=1e-12)


def test_bootstrap_is_seeded_and_takes_tensors():
    scores, labels = _audit_data(2)
    first = bootstrap_auc(torch.from_numpy(scores), torch.from_numpy(labels), 100, seed=5)
    assert first == bootstrap_auc(scores, labels.astype(bool), 100, seed=5)
    assert first != bootstrap_auc(scores, labels, 100, seed=6)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pr_auc_equals_sklearn_average_precision(seed):
    scores, labels = _audit_data(seed)
    assert pr_auc(scores, labels) == pytest.approx(
        average_precision_score(labels, scores), abs=1e-12
    )


# members 0.9, 0.5; non-members 0.5, 0.5, 0.5, 0.1. ROC points (FPR, TPR): (0, 0), (0, 1/2)
# at 0.9, (3/4, 1) at the tie 0.5, (1, 1). At FPR 1/4 the line from (0, 1/2) to (3/4, 1) is at
# 1/2 + (1/4) / (3/4) * 1/2 = 2/3; the best threshold with FPR <= 1/4 is 0.9, TPR 1/2.
HAND_SCORES = np.array([0.9, 0.5, 0.5, 0.5, 0.5, 0.1])
HAND_LABELS = np.array([1, 1, 0, 0, 0, 0])


def test_tpr_conventions_by_hand_where_they_differ():
    rates = tpr_at_fpr_levels(HAND_SCORES, HAND_LABELS, levels=(0.25,))
    assert rates[0.25]["interpolated"] == pytest.approx(2 / 3, abs=1e-12)
    assert rates[0.25]["at_most"] == pytest.approx(1 / 2, abs=1e-12)


def test_tpr_conventions_equal_sklearn_derived_values_on_the_hand_example():
    fpr, tpr, _ = roc_curve(HAND_LABELS, HAND_SCORES)
    full_fpr, full_tpr, _ = roc_curve(HAND_LABELS, HAND_SCORES, drop_intermediate=False)
    rates = tpr_at_fpr_levels(HAND_SCORES, HAND_LABELS, levels=(0.25,))[0.25]
    assert rates["interpolated"] == pytest.approx(np.interp(0.25, fpr, tpr), abs=1e-12)
    assert rates["interpolated"] == pytest.approx(tpr_at_fpr(HAND_SCORES, HAND_LABELS, 0.25))
    assert rates["at_most"] == pytest.approx(full_tpr[full_fpr <= 0.25].max(), abs=1e-12)


def test_at_most_counts_a_roc_point_exactly_on_the_level():
    # 100 non-members, one of them (4.0) between the two members: FPR 1% reaches TPR 1
    scores = np.r_[5.0, 3.0, 4.0, np.linspace(-1.0, 0.0, 99)]
    labels = np.r_[1, 1, np.zeros(100, dtype=np.int64)]
    rates = tpr_at_fpr_levels(scores, labels, levels=(0.01, 0.005))
    assert rates[0.01] == {"interpolated": 1.0, "at_most": 1.0}
    assert rates[0.005] == {"interpolated": 0.5, "at_most": 0.5}  # on the flat step


@pytest.mark.parametrize("seed", range(5))
def test_tpr_conventions_equal_sklearn_on_tied_scores(seed):
    scores, labels = _audit_data(seed, members=30, non_members=50, decimals=0)
    levels = (0.01, 0.05, 0.1, 0.3)
    fpr, tpr, _ = roc_curve(labels, scores)
    full_fpr, full_tpr, _ = roc_curve(labels, scores, drop_intermediate=False)
    for level, rates in tpr_at_fpr_levels(scores, labels, levels).items():
        assert rates["interpolated"] == pytest.approx(np.interp(level, fpr, tpr), abs=1e-12)
        assert rates["at_most"] == pytest.approx(full_tpr[full_fpr <= level].max(), abs=1e-12)
        assert rates["at_most"] <= rates["interpolated"]


def test_n_a_rule_at_99_and_100_negatives_for_one_percent():
    assert not enough_negatives(99, 0.01)
    assert enough_negatives(100, 0.01)
    assert format_rate(0.12345, 99, 0.01) == "n/a (needs >= 100 negatives)"
    assert format_rate(0.12345, 100, 0.01) == "0.1235"


def test_markdown_report_applies_the_n_a_rule_per_level():
    scores, labels = _audit_data(0, members=10, non_members=100)
    report = membership_report({"loss": scores}, labels, resamples=20)
    at_100 = markdown_report(report, 100)
    at_99 = markdown_report(report, 99)
    one_pct = f"{report['loss']['tpr_at_1pct_fpr_at_most']:.4f}"
    assert at_100.splitlines()[4].split("|")[5].strip() == one_pct
    assert "n/a (needs >= 100 negatives)" in at_99
    assert "n/a (needs >= 1000 negatives)" in at_100  # 0.1% needs 1,000
    assert markdown_report(report) == at_100  # defaults to the row's non-members


def test_markdown_report_layout():
    scores, labels = _audit_data(0)
    report = membership_report({"loss": scores, "zlib": -scores}, labels, resamples=50)
    lines = markdown_report(report, 25).splitlines()
    assert lines[0] == "TPR at FPR <= level, LiRA's convention; interpolated values in the JSON."
    assert [c.strip() for c in lines[2].strip("|").split("|")] == [
        "attack",
        "AUC ± s.e.",
        "PR AUC",
        "TPR@0.1%FPR",
        "TPR@1%FPR",
        "members",
        "non-members",
    ]
    row = [c.strip() for c in lines[4].strip("|").split("|")]
    loss = report["loss"]
    assert row[:3] == ["loss", f"{loss['auc']:.4f} ± {loss['auc_se']:.4f}", f"{loss['pr_auc']:.4f}"]
    assert row[5:] == ["15", "25"]
    assert len(lines) == 6


def test_markdown_report_refuses_more_negatives_than_measured():
    scores, labels = _audit_data(0)
    report = membership_report({"loss": scores}, labels, resamples=20)
    with pytest.raises(ValueError, match="measured on 25 non-members"):
        markdown_report(report, 100)


def test_membership_report_values_against_their_oracles():
    scores, labels = _audit_data(3)
    report = membership_report({"loss": scores}, labels, levels=(0.01, 0.1), resamples=100, seed=4)
    row = report["loss"]
    assert row["auc"] == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
    assert (row["auc_bootstrap_mean"], row["auc_se"]) == bootstrap_auc(scores, labels, 100, 4)
    assert row["pr_auc"] == pytest.approx(average_precision_score(labels, scores), abs=1e-12)
    rates = tpr_at_fpr_levels(scores, labels, (0.01, 0.1))
    assert row["tpr_at_10pct_fpr_interpolated"] == rates[0.1]["interpolated"]
    assert row["tpr_at_10pct_fpr_at_most"] == rates[0.1]["at_most"]
    assert row["tpr_at_1pct_fpr_at_most"] == rates[0.01]["at_most"]


def test_membership_report_counts_are_ints():
    scores, labels = _audit_data(0)
    row = membership_report({"loss": torch.from_numpy(scores)}, labels, resamples=20)["loss"]
    assert type(row["members"]) is int and row["members"] == 15
    assert type(row["non_members"]) is int and row["non_members"] == 25


def test_membership_report_keys_are_logger_names():
    scores, labels = _audit_data(0)
    row = membership_report({"loss": scores}, labels, resamples=20)["loss"]
    assert {key: metric_key(key) for key in row} == {key: key for key in row}
    assert "tpr_at_1pct_fpr_at_most" in row and "tpr_at_0.1pct_fpr_interpolated" in row


def test_mimir_layout_keys():
    scores, labels = _audit_data(0)
    report = membership_report({"loss": scores}, labels, resamples=20)
    layout = mimir_layout(report)
    entry = layout["loss"]
    assert set(entry) == {"name", "info", "metrics", "pr_metrics", "loss"}
    assert entry["name"] == "loss_threshold"
    assert entry["info"] == {"n_samples": 25}
    assert set(entry["metrics"]) == {
        "roc_auc",
        "bootstrap_roc_auc_mean",
        "bootstrap_roc_auc_std",
        "tpr_at_low_fpr",
    }
    row = report["loss"]
    assert entry["metrics"]["roc_auc"] == row["auc"]
    assert entry["metrics"]["bootstrap_roc_auc_std"] == row["auc_se"]
    assert entry["metrics"]["tpr_at_low_fpr"] == {
        0.001: row["tpr_at_0.1pct_fpr_at_most"],
        0.01: row["tpr_at_1pct_fpr_at_most"],
    }
    assert entry["pr_metrics"] == {"pr_auc": row["pr_auc"]}
    assert entry["loss"] == pytest.approx(1 - row["pr_auc"])


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------

SCORES, LABELS = _audit_data(0)
ENTRY_POINTS = {
    "bootstrap_auc": lambda s, y: bootstrap_auc(s, y, 10),
    "pr_auc": pr_auc,
    "tpr_at_fpr_levels": tpr_at_fpr_levels,
    "membership_report": lambda s, y: membership_report({"loss": s}, y, resamples=10),
}


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_one_class_is_refused(entry):
    with pytest.raises(ValueError, match="only one class.*member"):
        ENTRY_POINTS[entry](SCORES, np.ones_like(LABELS))


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_nan_scores_are_refused(entry):
    scores = SCORES.copy()
    scores[3] = np.nan
    with pytest.raises(ValueError, match="1 NaN value"):
        ENTRY_POINTS[entry](scores, LABELS)


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_mismatched_lengths_are_refused(entry):
    with pytest.raises(ValueError, match="same length, got 40 and 39"):
        ENTRY_POINTS[entry](SCORES, LABELS[:-1])


@pytest.mark.parametrize("level", [0.0, 1.0, 1.5, -0.01])
def test_levels_outside_the_open_unit_interval_are_refused(level):
    with pytest.raises(ValueError, match=r"must lie in \(0, 1\)"):
        tpr_at_fpr_levels(SCORES, LABELS, levels=(level,))
    with pytest.raises(ValueError, match=r"must lie in \(0, 1\)"):
        membership_report({"loss": SCORES}, LABELS, levels=(0.01, level), resamples=10)


def test_a_bare_level_is_refused():
    with pytest.raises(TypeError, match=r"wrap one rate in a tuple"):
        tpr_at_fpr_levels(SCORES, LABELS, levels=0.01)


@pytest.mark.parametrize("resamples", [0, -5, 1])
def test_too_few_resamples_are_refused(resamples):
    with pytest.raises(ValueError, match=r"`resamples` must be >= (1|2)"):
        bootstrap_auc(SCORES, LABELS, resamples)


@pytest.mark.parametrize("resamples", [True, 100.0, "100"])
def test_bool_or_float_resamples_are_refused(resamples):
    with pytest.raises(TypeError, match="`resamples` must be an int"):
        bootstrap_auc(SCORES, LABELS, resamples)
    with pytest.raises(TypeError, match="`resamples` must be an int"):
        membership_report({"loss": SCORES}, LABELS, resamples=resamples)


def test_scores_not_keyed_by_attack_are_refused():
    with pytest.raises(TypeError, match="map each attack's name"):
        membership_report(SCORES, LABELS, resamples=10)
    with pytest.raises(ValueError, match="no attack"):
        membership_report({}, LABELS, resamples=10)


def test_a_report_without_its_rows_is_refused():
    with pytest.raises(ValueError, match="lacks"):
        mimir_layout({"loss": {"auc": 0.5}})
    with pytest.raises(TypeError, match="non-empty"):
        markdown_report({}, 10)
