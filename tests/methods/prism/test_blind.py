"""The blind baseline and distribution check of ``prism.blind`` against oracles: an obvious
topic split (AUC ~ 1) and a shuffled single distribution (AUC ~ 0.5); out-of-fold scores against
a hand-run of an independently built pipeline on each fold; the bootstrap against a loop of
sklearn AUCs; n-gram overlap and deduplication against brute-force window comparison; the length
test against scipy; the rule of ``beats_blind`` on hand cases; bad input."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import mannwhitneyu
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import FeatureUnion, Pipeline

from lightning_info.methods.prism.blind import (
    BLIND_C,
    BOOTSTRAP_RESAMPLES,
    beats_blind,
    blind_baseline_auc,
    blind_baseline_scores,
    deduplicate_non_members,
    distribution_check,
    ngram_overlap,
    text_distribution,
    word_ngrams,
)

CAT_TEMPLATES = [
    "The {a} cat {v} on the {p} all afternoon.",
    "My {a} kitten {v} near the {p} and purred softly.",
    "A {a} tabby {v} beside the {p} while we watched.",
]
CAT_WORDS = dict(
    a=["sleepy", "fluffy", "ginger", "curious", "old", "tiny"],
    v=["slept", "napped", "stretched", "rolled", "sat", "yawned"],
    p=["sofa", "windowsill", "rug", "bed", "porch", "chair"],
)
STOCK_TEMPLATES = [
    "Shares of {c} {m} {x} percent in early trading.",
    "The {c} stock {m} {x} percent after quarterly earnings.",
    "Investors watched {c} {m} {x} percent by the closing bell.",
]
STOCK_WORDS = dict(
    c=["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay"],
    m=["rose", "fell", "climbed", "dropped", "slipped", "jumped"],
    x=[str(k) for k in range(1, 10)],
)


def _texts(templates, words, count, rng):
    return [
        templates[rng.integers(len(templates))].format(
            **{key: options[rng.integers(len(options))] for key, options in words.items()}
        )
        for _ in range(count)
    ]


def _cats(count, seed):
    return _texts(CAT_TEMPLATES, CAT_WORDS, count, np.random.default_rng(seed))


def _stocks(count, seed):
    return _texts(STOCK_TEMPLATES, STOCK_WORDS, count, np.random.default_rng(seed))


def _oracle_pipeline():
    words = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    chars = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True)
    return Pipeline(
        [
            ("features", FeatureUnion([("words", words), ("chars", chars)])),
            ("classifier", LogisticRegression(C=BLIND_C, max_iter=5000)),
        ]
    )


def _brute_force_shares(a: str, b: str, n: int) -> bool:
    """Whether some run of ``n`` words of ``a`` equals some run of ``b`` (lower case), by loops."""
    x, y = a.lower().split(), b.lower().split()
    for i in range(len(x) - n + 1):
        for j in range(len(y) - n + 1):
            if all(x[i + k] == y[j + k] for k in range(n)):
                return True
    return False


# Small texts with planted overlaps: case and spacing differ, runs of 1 to 5 shared words.
MEMBERS = [
    "the quick brown fox jumps over the lazy dog",
    "A  stitch in time saves nine",
    "all that glitters is not gold",
]
NON_MEMBERS = [
    "THE QUICK brown fox ran away",  # 4 words with members[0]
    "time saves nine lives they say",  # 3 words with members[1]
    "nothing in common here at all",  # 1 word ("all", "in") with members
    "glitters is not gold",  # 4 words with members[2]
    "fox",  # one word
    "",  # no words
    "over the lazy dog jumps the quick brown",  # 4 + 3 words with members[0]
]


def test_blind_auc_is_near_one_when_the_sets_differ_in_topic():
    result = blind_baseline_auc(_cats(60, seed=1), _stocks(60, seed=2), folds=5, seed=0)
    assert result["auc"] > 0.95
    assert result["folds"] == 5
    assert 0.0 <= result["auc_se"] < 0.05


def test_blind_auc_is_near_chance_when_labels_are_a_shuffle_of_one_distribution():
    pool = _cats(120, seed=3)
    order = np.random.default_rng(4).permutation(len(pool))
    members, non_members = [pool[i] for i in order[:60]], [pool[i] for i in order[60:]]
    result = blind_baseline_auc(members, non_members, folds=5, seed=0)
    assert abs(result["auc"] - 0.5) < 0.15
    assert result["auc_se"] > 0.02  # an AUC on 120 texts is uncertain by several points


def test_scores_equal_a_hand_run_of_the_pipeline_on_each_fold():
    members, non_members = _cats(12, seed=5) + _stocks(3, seed=6), _stocks(10, seed=7)
    scores = blind_baseline_scores(members, non_members, folds=4, seed=11)
    texts = members + non_members
    labels = np.array([1] * len(members) + [0] * len(non_members))
    expected = np.full(len(texts), np.nan)
    splitter = StratifiedKFold(n_splits=4, shuffle=True, random_state=11)
    for train, test in splitter.split(np.zeros(len(texts)), labels):
        model = _oracle_pipeline().fit([texts[i] for i in train], labels[train])
        expected[test] = model.predict_proba([texts[i] for i in test])[:, 1]
    np.testing.assert_allclose(scores, expected, rtol=1e-10, atol=1e-12)


def test_a_score_does_not_depend_on_the_texts_of_its_own_fold():
    members, non_members = _cats(10, seed=8), _stocks(10, seed=9)
    before = blind_baseline_scores(members, non_members, folds=5, seed=0)
    labels = np.array([1] * 10 + [0] * 10)
    fold_of = np.empty(20, dtype=int)
    splits = StratifiedKFold(n_splits=5, shuffle=True, random_state=0).split(np.zeros(20), labels)
    for k, (_, test) in enumerate(splits):
        fold_of[test] = k
    changed = 0  # a member's text replaced: the fold ids depend on the labels only
    edited = list(members)
    edited[changed] = "Shares of Hooli jumped 9 percent as the fluffy cat watched."
    after = blind_baseline_scores(edited, non_members, folds=5, seed=0)
    same_fold = (fold_of == fold_of[changed]) & (np.arange(20) != changed)
    assert same_fold.any()
    np.testing.assert_array_equal(after[same_fold], before[same_fold])
    other_folds = fold_of != fold_of[changed]
    assert not np.allclose(after[other_folds], before[other_folds])  # the edit was seen there


def test_auc_and_bootstrap_se_equal_sklearn_over_the_same_resamples():
    members, non_members = _cats(20, seed=10) + _stocks(5, seed=12), _stocks(15, seed=13)
    result = blind_baseline_auc(members, non_members, folds=5, seed=3)
    scores = blind_baseline_scores(members, non_members, folds=5, seed=3)
    labels = np.array([1] * 25 + [0] * 15)
    assert result["auc"] == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
    # paired resamples of the (score, label) pairs, drawn as one (resamples, n) index matrix
    rows = np.random.default_rng(3).integers(0, 40, size=(BOOTSTRAP_RESAMPLES, 40))
    assert all(0 < labels[row].sum() < 40 for row in rows)  # no resample needs a redraw
    aucs = [roc_auc_score(labels[row], scores[row]) for row in rows]
    assert result["auc_se"] == pytest.approx(np.std(aucs, ddof=1), rel=1e-9)


def test_tuples_and_generators_give_the_same_result_as_lists():
    members, non_members = _cats(8, seed=18), _stocks(8, seed=19)
    expected = blind_baseline_auc(members, non_members, folds=4)
    assert blind_baseline_auc(tuple(members), (t for t in non_members), folds=4) == expected
    assert ngram_overlap(iter(members), tuple(non_members), n=2) == ngram_overlap(
        members, non_members, n=2
    )


def test_the_bootstrap_counts_tied_scores_as_one_half():
    # every text identical: every out-of-fold score ties, the AUC is 1/2 in every resample
    result = blind_baseline_auc(["same words here"] * 6, ["same words here"] * 6, folds=3)
    assert result["auc"] == pytest.approx(0.5)
    assert result["auc_se"] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_ngram_overlap_equals_brute_force(n):
    expected = np.mean([any(_brute_force_shares(t, m, n) for m in MEMBERS) for t in NON_MEMBERS])
    assert ngram_overlap(MEMBERS, NON_MEMBERS, n=n) == pytest.approx(expected)


def test_ngram_overlap_by_hand():
    # 4-grams: non-members 0, 3 and 6 share one; 4 others do not (a 1-word and an empty text)
    assert ngram_overlap(MEMBERS, NON_MEMBERS, n=4) == pytest.approx(3 / 7)
    assert ngram_overlap(MEMBERS, NON_MEMBERS, n=5) == 0.0
    assert word_ngrams("A b  A b", 2) == {("a", "b"), ("b", "a")}
    assert word_ngrams("two words", 3) == set()


@pytest.mark.parametrize("ns", [(1,), (2,), (3,), (4,), (5,), (3, 4), (4, 2), (7, 13)])
def test_deduplication_equals_brute_force(ns):
    expected = [
        i
        for i, text in enumerate(NON_MEMBERS)
        if not any(_brute_force_shares(text, m, n) for m in MEMBERS for n in ns)
    ]
    assert deduplicate_non_members(MEMBERS, NON_MEMBERS, ns=ns) == expected


def test_deduplication_by_hand_keeps_short_texts_and_leaves_the_input_alone():
    non_members = list(NON_MEMBERS)
    assert deduplicate_non_members(MEMBERS, non_members, ns=(3,)) == [2, 4, 5]
    assert non_members == NON_MEMBERS


def test_length_test_equals_scipy_on_word_counts():
    members = _cats(15, seed=14) + ["a much longer member text " * 4]
    non_members = _stocks(12, seed=15)
    check = distribution_check(members, non_members, seed=0)
    reference = mannwhitneyu(
        [len(t.split()) for t in members],
        [len(t.split()) for t in non_members],
        alternative="two-sided",
    )
    assert check["length_p_value"] == pytest.approx(reference.pvalue, rel=1e-12)
    assert check["length_u"] == pytest.approx(reference.statistic, rel=1e-12)


def test_distribution_check_gathers_the_overlaps_and_the_blind_auc():
    base = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
    members = _cats(10, seed=16) + [base]
    non_members = _stocks(9, seed=17) + [base.upper(), "one two three four five six seven"]
    check = distribution_check(members, non_members, seed=2)
    blind = blind_baseline_auc(members, non_members, seed=2)
    assert check["overlap_7"] == pytest.approx(2 / 11)  # the copy and the 7-word prefix
    assert check["overlap_13"] == pytest.approx(1 / 11)  # only the copy has 13 words
    assert check["blind_auc"] == blind["auc"]
    assert check["blind_auc_se"] == blind["auc_se"]
    assert check["folds"] == 5
    assert text_distribution(members, non_members) == {
        key: check[key] for key in ("overlap_7", "overlap_13", "length_u", "length_p_value")
    }
    with pytest.raises(ValueError, match="is empty"):
        text_distribution(members, [])


@pytest.mark.parametrize(
    ("attack_auc", "attack_se", "blind_auc", "expected"),
    [
        (0.875, 0.0625, 0.75, True),  # margin 0.125 > 0.0625
        (0.75, 0.125, 0.625, False),  # margin equal to the s.e.: not a win
        (0.75, 0.25, 0.625, False),  # margin within the s.e.
        (0.5, 0.0, 0.5, False),  # a tie
        (0.625, 0.0, 0.5, True),  # any margin when the s.e. is 0
        (0.5, 0.0625, 0.875, False),  # below the blind baseline
        (1.0, 0.0, 0.0, True),
    ],
)
def test_beats_blind_rule_on_hand_cases(attack_auc, attack_se, blind_auc, expected):
    assert beats_blind(attack_auc, attack_se, blind_auc) is expected


TEXTS = ["a b c d e f g"] * 6

BAD_INPUT = [
    pytest.param(
        lambda: blind_baseline_scores([], TEXTS),
        ValueError,
        "`member_texts` is empty",
        id="blind-scores-no-members",
    ),
    pytest.param(
        lambda: blind_baseline_auc(TEXTS, []),
        ValueError,
        "`non_member_texts` is empty",
        id="blind-auc-no-non-members",
    ),
    pytest.param(
        lambda: ngram_overlap([], TEXTS),
        ValueError,
        "`member_texts` is empty",
        id="blind-overlap-no-members",
    ),
    pytest.param(
        lambda: deduplicate_non_members(TEXTS, []),
        ValueError,
        "`non_member_texts` is empty",
        id="blind-dedup-no-non-members",
    ),
    pytest.param(
        lambda: distribution_check([], TEXTS), ValueError, "is empty", id="blind-check-no-members"
    ),
    pytest.param(
        lambda: blind_baseline_scores(TEXTS[:4], TEXTS),
        ValueError,
        "at least 5 texts",
        id="blind-members-fewer-than-folds",
    ),
    pytest.param(
        lambda: blind_baseline_auc(TEXTS, TEXTS[:2], folds=3),
        ValueError,
        "lower `folds`",
        id="blind-non-members-fewer-than-folds",
    ),
    pytest.param(
        lambda: blind_baseline_scores(TEXTS, TEXTS, folds=1),
        ValueError,
        "`folds` must be >=",
        id="blind-folds-one",
    ),
    pytest.param(
        lambda: blind_baseline_scores(TEXTS, TEXTS, folds=2.0),
        TypeError,
        "`folds` must be",
        id="blind-folds-float",
    ),
    pytest.param(
        lambda: blind_baseline_scores(TEXTS, TEXTS, seed=-1),
        ValueError,
        "`seed`",
        id="blind-seed-negative",
    ),
    pytest.param(
        lambda: blind_baseline_scores(TEXTS + [3], TEXTS),
        TypeError,
        r"member_texts\[6\]",
        id="blind-member-not-a-string",
    ),
    pytest.param(
        lambda: ngram_overlap(TEXTS, [b"bytes"]),
        TypeError,
        r"non_member_texts\[0\]",
        id="blind-non-member-bytes",
    ),
    pytest.param(
        lambda: ngram_overlap("one text", TEXTS),
        TypeError,
        "Wrap it in a list",
        id="blind-bare-string",
    ),
    pytest.param(
        lambda: deduplicate_non_members(TEXTS, [None]),
        TypeError,
        "must be a string",
        id="blind-non-member-none",
    ),
    pytest.param(
        lambda: blind_baseline_scores([" "] * 5, [""] * 5),
        ValueError,
        "nothing to classify",
        id="blind-all-texts-empty",
    ),
    pytest.param(
        lambda: ngram_overlap(TEXTS, TEXTS, n=0),
        ValueError,
        "`n` must be >= 1",
        id="blind-overlap-n-zero",
    ),
    pytest.param(
        lambda: ngram_overlap(TEXTS, TEXTS, n=-2),
        ValueError,
        "`n` must be >= 1",
        id="blind-overlap-n-negative",
    ),
    pytest.param(
        lambda: word_ngrams("a b", 0), ValueError, "`n` must be >= 1", id="blind-word-ngrams-n-zero"
    ),
    pytest.param(
        lambda: deduplicate_non_members(TEXTS, TEXTS, ns=(7, 0)),
        ValueError,
        "must be >= 1",
        id="blind-dedup-ns-zero",
    ),
    pytest.param(
        lambda: deduplicate_non_members(TEXTS, TEXTS, ns=()),
        ValueError,
        "`ns` is empty",
        id="blind-dedup-ns-empty",
    ),
    pytest.param(
        lambda: deduplicate_non_members(TEXTS, TEXTS, ns=7),
        TypeError,
        "such as",
        id="blind-dedup-ns-int",
    ),
    pytest.param(
        lambda: beats_blind(1.5, 0.01, 0.5),
        ValueError,
        "`attack_auc` must be an AUC",
        id="blind-beats-auc-above-one",
    ),
    pytest.param(
        lambda: beats_blind(0.7, 0.01, -0.1),
        ValueError,
        "`blind_auc` must be an AUC",
        id="blind-beats-blind-negative",
    ),
    pytest.param(
        lambda: beats_blind(0.7, -0.01, 0.5),
        ValueError,
        "`attack_se` must be >= 0",
        id="blind-beats-se-negative",
    ),
    pytest.param(
        lambda: beats_blind(0.7, float("nan"), 0.5),
        ValueError,
        "`attack_se` must be finite",
        id="blind-beats-se-nan",
    ),
    pytest.param(
        lambda: beats_blind("0.7", 0.01, 0.5),
        TypeError,
        "`attack_auc` must be a real",
        id="blind-beats-auc-string",
    ),
]


@pytest.mark.parametrize(("call", "error", "match"), BAD_INPUT)
def test_bad_input_is_refused_with_a_clear_message(call, error, match):
    with pytest.raises(error, match=match):
        call()
