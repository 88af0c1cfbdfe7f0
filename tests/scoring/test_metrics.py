"""Failure-prediction, OOD and calibration metrics against sklearn, torchmetrics and brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score, log_loss, roc_auc_score, roc_curve
from torchmetrics.classification import MulticlassCalibrationError

from lightning_info.measures.ranking import average_precision, binary_auroc, fpr_at_tpr
from lightning_info.methods.ood_shaping.metrics import (
    OODAUROC,
    OODFPRAt95TPR,
    fpr_at_95_tpr,
    ood_auroc,
)
from lightning_info.methods.pointwise_confidence.functional import (
    adaptive_calibration_error,
    aupr_error,
    aupr_success,
    aurc,
    brier_score,
    e_aurc,
    expected_calibration_error,
    failure_auroc,
    failure_fpr_at_95_tpr,
    negative_log_likelihood,
    optimal_aurc,
    top_label_confidence,
)
from lightning_info.methods.pointwise_confidence.metrics import (
    AURC,
    EAURC,
    AdaptiveCalibrationError,
    AUPRError,
    AUPRSuccess,
    BrierScore,
    ExpectedCalibrationError,
    FailureAUROC,
    FailureFPRAt95TPR,
    NegativeLogLikelihood,
)

EXACT = {"rtol": 0.0, "atol": 1e-12}

# (seed, N, decimals used to round the scores: None keeps them continuous, 1 or 0 makes ties)
CASES = [(0, 300, None), (1, 500, 1), (2, 200, 0), (3, 1000, 1), (4, 57, None), (5, 40, 0)]


def _failure_data(seed: int, n: int, decimals: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores that carry some signal about correctness (accuracy about 70%), optionally rounded."""
    g = torch.Generator().manual_seed(seed)
    correct = torch.rand(n, generator=g) < 0.7
    scores = torch.randn(n, generator=g, dtype=torch.float64) + 0.8 * correct
    if decimals is not None:
        scores = scores.round(decimals=decimals)
    correct[0], correct[1] = True, False  # both classes always present
    return scores, correct


def _probs(
    seed: int, n: int, k: int, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(k, (n,), generator=g)
    logits = 2.0 * torch.randn(n, k, generator=g, dtype=dtype)
    return (logits + 2.0 * torch.nn.functional.one_hot(labels, k)).softmax(dim=1), labels


# -- brute-force oracles ------------------------------------------------------------------------


def _brute_fpr_at_tpr(scores, positive, level=0.95) -> float:
    """Every threshold t among the scores (and above them): min FPR over TPR(t) >= level."""
    s, y = np.asarray(scores, dtype=float), np.asarray(positive, dtype=bool)
    best = math.inf
    for t in [*np.unique(s), math.inf]:
        accepted = s >= t
        tpr = accepted[y].sum() / y.sum()
        if tpr >= level:
            best = min(best, accepted[~y].sum() / (~y).sum())
    return best


def _aurc_of_order(correct_in_order) -> float:
    """Plain definition: mean over i of (errors among the first i) / i."""
    errors, total = 0, 0.0
    for i, ok in enumerate(correct_in_order, start=1):
        errors += not ok
        total += errors / i
    return total / len(correct_in_order)


def _brute_aurc(scores, correct) -> float:
    """Mean AURC over every order of the tied samples (scores sorted descending)."""
    s, c = np.asarray(scores, dtype=float), np.asarray(correct, dtype=bool)
    groups = [c[s == value] for value in sorted(np.unique(s), reverse=True)]
    values = [
        _aurc_of_order(np.concatenate(orders))
        for orders in itertools.product(*(list(itertools.permutations(g)) for g in groups))
    ]
    return float(np.mean(values))


def _brute_adaptive_ece(confidences, correct, n_bins) -> float:
    """Sort by confidence, cut into n_bins runs with numpy's array_split (no ties)."""
    order = np.argsort(confidences, kind="stable")
    conf, acc = np.asarray(confidences)[order], np.asarray(correct, dtype=float)[order]
    total = 0.0
    for c_bin, a_bin in zip(np.array_split(conf, n_bins), np.array_split(acc, n_bins)):
        if len(c_bin):
            total += len(c_bin) / len(conf) * abs(a_bin.mean() - c_bin.mean())
    return total


# -- ranking metrics vs sklearn ----------------------------------------------------------------


@pytest.mark.parametrize(("seed", "n", "decimals"), CASES)
def test_auroc_and_aupr_match_sklearn(seed, n, decimals):
    scores, correct = _failure_data(seed, n, decimals)
    s, c = scores.numpy(), correct.numpy()
    torch.testing.assert_close(failure_auroc(scores, correct).item(), roc_auc_score(c, s), **EXACT)
    torch.testing.assert_close(
        aupr_success(scores, correct).item(), average_precision_score(c, s), **EXACT
    )
    torch.testing.assert_close(
        aupr_error(scores, correct).item(), average_precision_score(~c, -s), **EXACT
    )
    torch.testing.assert_close(binary_auroc(scores, correct.long()).item(), roc_auc_score(c, s))
    torch.testing.assert_close(
        average_precision(scores, correct.double()).item(), average_precision_score(c, s)
    )


def test_auroc_counts_ties_as_one_half():
    assert failure_auroc([1.0, 1.0, 1.0], [1, 0, 0]).item() == 0.5
    assert failure_auroc([2.0, 1.0, 1.0, 0.0], [1, 1, 0, 0]).item() == pytest.approx(
        (1 + 1 + 0.5 + 1) / 4
    )


@pytest.mark.parametrize(("seed", "n", "decimals"), CASES)
@pytest.mark.parametrize("level", [0.95, 0.9, 1.0])
def test_fpr_at_tpr_matches_roc_curve_and_brute_force(seed, n, decimals, level):
    scores, correct = _failure_data(seed, n, decimals)
    fpr, tpr, _ = roc_curve(correct.numpy(), scores.numpy(), drop_intermediate=False)
    expected = fpr[np.argmax(tpr >= level)]
    value = failure_fpr_at_95_tpr(scores, correct, tpr_level=level).item()
    assert value == pytest.approx(expected, abs=1e-15)
    assert value == pytest.approx(_brute_fpr_at_tpr(scores, correct, level), abs=1e-15)
    assert fpr_at_tpr(scores, correct, tpr_level=level).item() == value


def test_fpr_at_95_tpr_keeps_the_collinear_point_roc_curve_drops():
    # ROC points (FP, TP): (0, 18), (1, 19), (2, 20), ... ; (1, 19) reaches TPR 0.95 first but is
    # collinear with its neighbours, so roc_curve's default drop_intermediate=True removes it
    s = np.r_[np.full(18, 10.0), 5, 5, 4, 4, 3, 2, 1]
    y = np.r_[np.ones(18), 1, 0, 1, 0, 0, 0, 0]
    fpr, tpr, _ = roc_curve(y, s)
    assert fpr[np.argmax(tpr >= 0.95)] == 0.4
    assert failure_fpr_at_95_tpr(s, y).item() == 0.2 == _brute_fpr_at_tpr(s, y)


def test_ood_metrics_put_in_distribution_first():
    g = torch.Generator().manual_seed(7)
    s_in = (torch.randn(400, generator=g, dtype=torch.float64) + 1.0).round(decimals=1)
    s_out = torch.randn(250, generator=g, dtype=torch.float64).round(decimals=1)
    labels = np.r_[np.ones(400), np.zeros(250)]
    s = np.r_[s_in.numpy(), s_out.numpy()]
    torch.testing.assert_close(ood_auroc(s_in, s_out).item(), roc_auc_score(labels, s), **EXACT)
    value = fpr_at_95_tpr(s_in, s_out).item()
    assert value == pytest.approx(_brute_fpr_at_tpr(s, labels.astype(bool)), abs=1e-15)
    fpr, tpr, _ = roc_curve(labels, s, drop_intermediate=False)
    assert value == pytest.approx(fpr[np.argmax(tpr >= 0.95)], abs=1e-15)
    # flipping the roles gives 1 - AUROC
    torch.testing.assert_close(ood_auroc(s_out, s_in).item(), 1 - ood_auroc(s_in, s_out).item())


def test_infinite_scores_rank_beyond_every_finite_one():
    scores = torch.tensor([math.inf, 3.0, -math.inf, 0.5, 2.0, -math.inf])
    finite = torch.tensor([1e9, 3.0, -1e9, 0.5, 2.0, -1e9])
    correct = torch.tensor([1, 1, 0, 0, 1, 1])
    for fn in (failure_auroc, aupr_success, aupr_error, aurc, failure_fpr_at_95_tpr):
        assert fn(scores, correct).item() == fn(finite, correct).item()


# -- risk-coverage -------------------------------------------------------------------------------


@pytest.mark.parametrize(("seed", "n", "decimals"), [c for c in CASES if c[2] is None])
def test_aurc_without_ties_is_the_plain_definition(seed, n, decimals):
    scores, correct = _failure_data(seed, n, decimals)
    order = torch.argsort(scores, descending=True)
    expected = _aurc_of_order(correct[order].tolist())
    torch.testing.assert_close(aurc(scores, correct).item(), expected, **EXACT)
    assert AURC().higher_is_better is False


@pytest.mark.parametrize("seed", range(6))
def test_aurc_with_ties_is_the_mean_over_tie_breaking_orders(seed):
    g = torch.Generator().manual_seed(100 + seed)
    scores = torch.randint(3, (9,), generator=g).double()
    correct = torch.rand(9, generator=g) < 0.6
    torch.testing.assert_close(aurc(scores, correct).item(), _brute_aurc(scores, correct), **EXACT)


@pytest.mark.parametrize(("n", "n_correct"), [(1, 0), (1, 1), (7, 0), (7, 3), (7, 7), (30, 21)])
def test_discrete_optimal_aurc_is_the_best_ranking(n, n_correct):
    correct = torch.tensor([True] * n_correct + [False] * (n - n_correct))
    errors_last = _aurc_of_order(correct.tolist())
    value = optimal_aurc(correct[torch.randperm(n, generator=torch.Generator().manual_seed(n))])
    torch.testing.assert_close(value.item(), errors_last, **EXACT)
    if n <= 7:  # no ordering does better
        best = min(_aurc_of_order(p) for p in set(itertools.permutations(correct.tolist())))
        torch.testing.assert_close(value.item(), best, **EXACT)
    # a perfect ranking has zero excess with the exact optimum
    assert e_aurc(correct.double(), correct).item() == pytest.approx(0.0, abs=1e-15)


@pytest.mark.parametrize(("n", "n_correct"), [(10, 7), (100, 93), (1000, 500), (50, 0), (50, 50)])
def test_continuous_optimal_aurc_and_its_gap_to_the_discrete_one(n, n_correct):
    correct = torch.arange(n) < n_correct
    acc = n_correct / n
    formula = (1 - acc) + (acc * math.log(acc) if acc > 0 else 0.0)
    continuous = optimal_aurc(correct, kind="continuous").item()
    discrete = optimal_aurc(correct).item()
    assert continuous == pytest.approx(formula, abs=1e-15)
    assert -1e-15 <= discrete - continuous <= (1 - acc) / n + 1e-15
    scores = torch.randn(n, generator=torch.Generator().manual_seed(n), dtype=torch.float64)
    value = aurc(scores, correct).item()
    torch.testing.assert_close(e_aurc(scores, correct).item(), value - discrete, **EXACT)
    torch.testing.assert_close(
        e_aurc(scores, correct, optimal="continuous").item(), value - continuous, **EXACT
    )


# -- calibration ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("seed", "n", "k", "n_bins"), [(0, 500, 10, 10), (1, 2000, 3, 15)])
def test_ece_matches_torchmetrics(seed, n, k, n_bins):
    probs, labels = _probs(seed, n, k)  # float32, as torchmetrics bins them
    confidences, correct = top_label_confidence(probs, labels)
    reference = MulticlassCalibrationError(num_classes=k, n_bins=n_bins, norm="l1")
    expected = reference(probs, labels).item()
    value = expected_calibration_error(confidences, correct, n_bins=n_bins).item()
    assert value == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_ece_bins_are_right_closed(dtype):
    # 0.2 falls in (0.1, 0.2] (also as a float32, slightly above 0.2), 1.0 in (0.9, 1.0], 0.0 in
    # the first bin
    values = [0.0, 0.2, 0.15, 1.0, 0.95]
    conf = torch.tensor(values, dtype=dtype)
    correct = torch.tensor([0, 1, 0, 1, 0])
    bins = [conf[:1].double(), conf[1:3].double(), conf[3:].double()]
    accs = [[0], [1, 0], [1, 0]]
    expected = sum(abs(sum(a) - c.sum().item()) for c, a in zip(bins, accs)) / 5
    assert expected_calibration_error(conf, correct).item() == pytest.approx(expected, abs=1e-15)
    assert expected_calibration_error(values, correct).item() == pytest.approx(
        (0 + abs(1 - 0.35) + abs(1 - 1.95)) / 5, abs=1e-15
    )
    metric = ExpectedCalibrationError()
    metric.update(conf, correct)
    assert metric.compute().item() == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize(("seed", "n", "n_bins"), [(0, 503, 10), (1, 64, 15), (2, 7, 10)])
def test_adaptive_ece_matches_a_hand_computation(seed, n, n_bins):
    probs, labels = _probs(seed, n, 5, torch.float64)
    confidences, correct = top_label_confidence(probs, labels)
    expected = _brute_adaptive_ece(confidences.numpy(), correct.numpy(), n_bins)
    value = adaptive_calibration_error(confidences, correct, n_bins=n_bins).item()
    assert value == pytest.approx(expected, abs=1e-12)


def test_adaptive_ece_splits_a_tie_across_a_cut_by_its_mean_correctness():
    # 4 samples, 2 bins of 2: the tie at 0.5 straddles the cut; each tied sample counts 2/3
    conf = torch.tensor([0.5, 0.2, 0.5, 0.5], dtype=torch.float64)
    correct = torch.tensor([1, 0, 0, 1])
    bin_1 = abs((0 + 2 / 3) - (0.2 + 0.5))
    bin_2 = abs((2 / 3 + 2 / 3) - (0.5 + 0.5))
    value = adaptive_calibration_error(conf, correct, n_bins=2).item()
    assert value == pytest.approx((bin_1 + bin_2) / 4, abs=1e-15)
    for perm in itertools.permutations(range(4)):
        idx = list(perm)
        again = adaptive_calibration_error(conf[idx], correct[idx], n_bins=2).item()
        assert again == pytest.approx(value, abs=1e-15)


@pytest.mark.parametrize(("seed", "n", "k"), [(0, 300, 10), (1, 100, 2)])
def test_nll_and_brier_match_sklearn_and_a_hand_loop(seed, n, k):
    probs, labels = _probs(seed, n, k, torch.float64)
    expected_nll = log_loss(labels.numpy(), probs.numpy(), labels=list(range(k)))
    assert negative_log_likelihood(probs, labels).item() == pytest.approx(expected_nll, abs=1e-12)
    p = probs.tolist()
    brier = (
        sum(sum((p[i][j] - (j == labels[i].item())) ** 2 for j in range(k)) for i in range(n)) / n
    )
    assert brier_score(probs, labels).item() == pytest.approx(brier, abs=1e-12)


def test_nll_keeps_a_zero_probability_unless_eps_is_given():
    probs = torch.tensor([[1.0, 0.0], [0.5, 0.5]])
    labels = torch.tensor([1, 0])
    assert negative_log_likelihood(probs, labels).item() == math.inf
    clipped = negative_log_likelihood(probs, labels, eps=1e-12).item()
    assert clipped == pytest.approx((-math.log(1e-12) - math.log(0.5)) / 2)


# -- Metric classes ------------------------------------------------------------------------------

FAILURE_METRICS = [
    (FailureAUROC, {}, failure_auroc),
    (AUPRSuccess, {}, aupr_success),
    (AUPRError, {}, aupr_error),
    (AURC, {}, aurc),
    (EAURC, {}, e_aurc),
    (EAURC, {"optimal": "continuous"}, lambda s, c: e_aurc(s, c, optimal="continuous")),
    (FailureFPRAt95TPR, {}, failure_fpr_at_95_tpr),
    (
        FailureFPRAt95TPR,
        {"tpr_level": 0.8},
        lambda s, c: failure_fpr_at_95_tpr(s, c, tpr_level=0.8),
    ),
]


def _batches(n: int, sizes: list[int]) -> list[slice]:
    bounds = np.cumsum([0, *sizes])
    assert bounds[-1] == n
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]


@pytest.mark.parametrize(("cls", "kwargs", "fn"), FAILURE_METRICS)
def test_failure_metrics_pool_batches_like_the_function(cls, kwargs, fn):
    scores, correct = _failure_data(11, 300, 1)
    metric = cls(**kwargs)
    for part in _batches(300, [100, 0, 37, 163]):
        metric.update(scores[part].float(), correct[part])
    torch.testing.assert_close(metric.compute(), fn(scores.float(), correct), **EXACT)
    # two metrics merged (what DDP's cat reduction does) equal one that saw everything
    first, second = cls(**kwargs), cls(**kwargs)
    first.update(scores[:120], correct[:120])
    second.update(scores[120:], correct[120:].long())
    first.merge_state(second)
    torch.testing.assert_close(first.compute(), fn(scores, correct), **EXACT)


@pytest.mark.parametrize(("cls", "fn"), [(OODAUROC, ood_auroc), (OODFPRAt95TPR, fpr_at_95_tpr)])
def test_ood_metrics_pool_batches_like_the_function(cls, fn):
    g = torch.Generator().manual_seed(3)
    scores = torch.randn(200, generator=g).round(decimals=1)
    is_in = torch.rand(200, generator=g) < 0.5
    scores = scores + is_in
    metric = cls()
    for part in _batches(200, [50, 50, 100]):
        metric.update(scores[part], is_in[part])
    torch.testing.assert_close(metric.compute(), fn(scores[is_in], scores[~is_in]), **EXACT)


def test_calibration_metrics_pool_batches_like_the_function():
    probs, labels = _probs(5, 400, 4)
    confidences, correct = top_label_confidence(probs, labels)
    ece, ada = ExpectedCalibrationError(n_bins=12), AdaptiveCalibrationError(n_bins=7)
    nll, brier = NegativeLogLikelihood(), BrierScore()
    for part in _batches(400, [150, 0, 250]):
        ece.update(confidences[part], correct[part])
        ada.update(confidences[part], correct[part])
        nll.update(probs[part], labels[part])
        brier.update(probs[part], labels[part])
    tight = {"rtol": 0.0, "atol": 1e-14}
    torch.testing.assert_close(
        ece.compute(), expected_calibration_error(confidences, correct, n_bins=12), **tight
    )
    torch.testing.assert_close(
        ada.compute(), adaptive_calibration_error(confidences, correct, n_bins=7), **tight
    )
    torch.testing.assert_close(nll.compute(), negative_log_likelihood(probs, labels), **tight)
    torch.testing.assert_close(brier.compute(), brier_score(probs, labels), **tight)


def test_cat_states_are_float64_so_an_idle_process_can_join_the_gather():
    # torchmetrics gathers `torch.tensor([], dtype=metric.dtype)` for a process that saw no batch;
    # gloo aborts unless it matches the dtype the other processes send (checked by hand with two
    # gloo processes: values equal the pooled function, also with one process idle)
    for metric in (AURC(), OODAUROC(), AdaptiveCalibrationError()):
        assert metric.dtype == torch.float64
        metric.update(torch.tensor([0.5, 0.2], dtype=torch.float32), torch.tensor([1, 0]))
        states = metric.metric_state.values()
        assert all(t.dtype == torch.float64 for state in states for t in state)


# -- order invariance ----------------------------------------------------------------------------


def test_every_metric_is_invariant_to_input_order():
    scores, correct = _failure_data(21, 400, 1)
    probs, labels = _probs(21, 400, 5)
    confidences, conf_correct = top_label_confidence(probs, labels)
    confidences = confidences.double().round(decimals=2)  # ties for the adaptive bins
    perm = torch.randperm(400, generator=torch.Generator().manual_seed(0))
    for fn in (failure_auroc, aupr_success, aupr_error, aurc, e_aurc, failure_fpr_at_95_tpr):
        torch.testing.assert_close(fn(scores[perm], correct[perm]), fn(scores, correct), **EXACT)
    for fn in (expected_calibration_error, adaptive_calibration_error):
        torch.testing.assert_close(
            fn(confidences[perm], conf_correct[perm]), fn(confidences, conf_correct), **EXACT
        )
    for fn in (negative_log_likelihood, brier_score):
        torch.testing.assert_close(fn(probs[perm], labels[perm]), fn(probs, labels), **EXACT)
    half = scores[:200]
    torch.testing.assert_close(
        ood_auroc(half.flip(0), scores[200:]), ood_auroc(half, scores[200:]), **EXACT
    )


# -- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [failure_auroc, aupr_success, aupr_error, aurc, e_aurc])
def test_bad_failure_inputs_are_rejected(fn):
    with pytest.raises(ValueError, match="`scores` is empty"):
        fn(torch.tensor([]), torch.tensor([], dtype=torch.bool))
    with pytest.raises(ValueError, match="contains 1 NaN"):
        fn(torch.tensor([0.1, math.nan, 0.3]), torch.tensor([1, 0, 1]))
    with pytest.raises(ValueError, match="same length, got 3 and 2"):
        fn(torch.tensor([0.1, 0.2, 0.3]), torch.tensor([1, 0]))
    with pytest.raises(ValueError, match=r"only 0/1 or True/False, found \[2"):
        fn(torch.tensor([0.1, 0.2, 0.3]), torch.tensor([1, 0, 2]))
    with pytest.raises(ValueError, match=r"shape \(N,\)"):
        fn(torch.zeros(3, 2), torch.tensor([1, 0, 1]))


@pytest.mark.parametrize("fn", [failure_auroc, failure_fpr_at_95_tpr])
@pytest.mark.parametrize(("correct", "present"), [([1, 1, 1], "correct"), ([0, 0, 0], "wrong")])
def test_one_class_is_refused_where_undefined(fn, correct, present):
    with pytest.raises(ValueError, match=f"only one class is present.*all 3 samples are {present}"):
        fn(torch.tensor([0.1, 0.2, 0.3]), torch.tensor(correct))


def test_one_class_inputs_where_the_metric_is_still_defined():
    scores = torch.tensor([0.3, 0.1, 0.2])
    assert aupr_success(scores, [1, 1, 1]).item() == 1.0
    assert aupr_error(scores, [0, 0, 0]).item() == 1.0
    assert aurc(scores, [1, 1, 1]).item() == 0.0
    assert aurc(scores, [0, 0, 0]).item() == 1.0
    with pytest.raises(ValueError, match="AUPR-error is undefined: no sample .* is wrong"):
        aupr_error(scores, [1, 1, 1])
    with pytest.raises(ValueError, match="AUPR-success is undefined: no sample .* is correct"):
        aupr_success(scores, [0, 0, 0])


def test_bad_ood_and_option_inputs_are_rejected():
    with pytest.raises(ValueError, match="`scores_out` is empty, so only one class is present"):
        ood_auroc(torch.tensor([0.1, 0.2]), torch.tensor([]))
    with pytest.raises(ValueError, match="`scores_in` is empty"):
        fpr_at_95_tpr([], [0.1])
    with pytest.raises(ValueError, match="`scores_out` contains 1 NaN"):
        ood_auroc(torch.tensor([0.1]), torch.tensor([math.nan, 0.0]))
    with pytest.raises(ValueError, match=r"`tpr_level` must lie in \(0, 1\]"):
        fpr_at_95_tpr([0.1], [0.2], tpr_level=95)
    with pytest.raises(ValueError, match="`optimal` must be 'discrete' or 'continuous'"):
        EAURC(optimal="exact")
    with pytest.raises(ValueError, match="`kind` must be"):
        optimal_aurc([1, 0], kind="approx")
    with pytest.raises(ValueError, match="`correct` is empty"):
        optimal_aurc([])
    metric = OODAUROC()
    metric.update(torch.tensor([0.1, 0.2]), torch.tensor([True, True]))
    with pytest.raises(ValueError, match="only one class is present in `is_in_distribution`"):
        metric.compute()


def test_bad_calibration_inputs_are_rejected():
    with pytest.raises(ValueError, match=r"probabilities in \[0, 1\]"):
        expected_calibration_error(torch.tensor([0.5, 1.5]), torch.tensor([1, 0]))
    with pytest.raises(ValueError, match="`confidences` contains 1 NaN"):
        adaptive_calibration_error(torch.tensor([0.5, math.nan]), torch.tensor([1, 0]))
    with pytest.raises(ValueError, match="`n_bins` must be >= 1"):
        expected_calibration_error(torch.tensor([0.5]), torch.tensor([1]), n_bins=0)
    with pytest.raises(ValueError, match="must sum to 1"):
        brier_score(torch.tensor([[0.5, 0.6]]), torch.tensor([0]))
    with pytest.raises(ValueError, match=r"`labels` must lie in \[0, 2\)"):
        negative_log_likelihood(torch.tensor([[0.5, 0.5]]), torch.tensor([2]))
    with pytest.raises(TypeError, match="integer classes"):
        brier_score(torch.tensor([[0.5, 0.5]]), torch.tensor([0.0]))
    with pytest.raises(ValueError, match="same length, got 1 and 2"):
        brier_score(torch.tensor([[0.5, 0.5]]), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="`probs` is empty"):
        negative_log_likelihood(torch.zeros(0, 3), torch.zeros(0, dtype=torch.long))


@pytest.mark.parametrize(
    "metric", [AURC(), AdaptiveCalibrationError(), ExpectedCalibrationError(), BrierScore()]
)
def test_compute_before_update_says_so(metric):
    with (
        pytest.warns(UserWarning, match="before the ``update``"),
        pytest.raises(ValueError, match="no samples|is empty"),
    ):
        metric.compute()


def test_fpr_at_95_takes_the_in_distribution_inputs_as_positive():
    from sklearn.metrics import roc_curve

    scores_in, scores_out = [10.0, 9, 8, 7, 6, 1], [5.0, 4, 3, 2, 0.5, 0]
    # keeping every ID input (threshold 1) accepts the OOD scores 5, 4, 3 and 2
    assert float(fpr_at_95_tpr(scores_in, scores_out)) == pytest.approx(4 / 6)
    # OpenOOD's current evaluator and pytorch-ood: OOD positive, scored by -s; another number
    scores = np.array(scores_in + scores_out)
    fpr, tpr, _ = roc_curve([0] * 6 + [1] * 6, -scores, drop_intermediate=False)
    assert fpr[np.argmax(tpr >= 0.95)] == pytest.approx(1 / 6)


@pytest.mark.parametrize(
    ("scores", "labels", "message"),
    [
        ("0.1 0.9", [0, 1], r"`scores` must be a sequence of numbers, got the text"),
        ([0.1, 0.9], "01", r"`labels` must be a sequence of numbers, got the text '01'"),
        (["0.1", "0.9"], [0, 1], r"`scores` must hold numbers, got numpy dtype <U3"),
    ],
)
def test_ranking_metrics_refuse_text_by_name(scores, labels, message):
    for metric in (binary_auroc, average_precision, fpr_at_tpr):
        with pytest.raises(TypeError, match=message):
            metric(scores, labels)
