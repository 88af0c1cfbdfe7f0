"""CACTIImputer follows scikit-learn's conventions (issue 35): ``transform`` refuses renamed or
reordered DataFrame columns instead of imputing by position, ``set_output`` and
``get_feature_names_out`` work, and scikit-learn's estimator checks pass at a tiny size; bad
model settings, missingness and split options are refused before any work."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.utils.estimator_checks import estimator_checks_generator

from lightning_info.methods.cacti.context import column_descriptions, context_texts, embed_columns
from lightning_info.methods.cacti.datamodule import (
    SplitOptions,
    TabularImputationDataModule,
    frame_values,
    load_table,
)
from lightning_info.methods.cacti.functional import (
    copy_masks,
    encoder_length,
    imputation_scores,
    inference_layout,
    median_truncation,
    random_masking,
    reconstruction_loss,
)
from lightning_info.methods.cacti.imputer import CACTIImputer
from lightning_info.methods.cacti.metrics import (
    ImputationMAE,
    ImputationR2,
    ImputationRMSE,
    ImputationWasserstein,
    imputation_metrics,
)
from lightning_info.methods.cacti.missingness import (
    MissingnessOptions,
    simulate_missing,
    solve_intercepts,
)
from lightning_info.methods.cacti.module import CACTI

FAST = {"embed_dim": 8, "encoder_depth": 1, "decoder_depth": 1, "num_heads": 2}
COLUMNS = ["age", "bmi", "bp", "s1"]


def _tiny(**overrides) -> CACTIImputer:
    return CACTIImputer(
        **{"context": "none", "model": FAST, "max_epochs": 1, "batch_size": 16, **overrides}
    )


def _frame(rows: int = 40, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(rows, 1))
    table = np.hstack([latent, 2 * latent, -latent, rng.normal(size=(rows, 1))])
    table += 0.1 * rng.normal(size=table.shape)
    missing = rng.random(table.shape) < 0.25
    missing[missing.all(1), 0] = False
    return pd.DataFrame(np.where(missing, np.nan, table), columns=COLUMNS)


def _missing() -> torch.Tensor:
    return torch.rand(6, 4, generator=torch.Generator().manual_seed(0)) < 0.3


def _csv(tmp_path, text: str) -> str:
    path = tmp_path / "table.csv"
    path.write_text(text)
    return str(path)


def _table_data(**kwargs) -> TabularImputationDataModule:
    table = np.random.default_rng(0).random((10, 3))
    kwargs = {"mechanism": "mcar", "context": "none", **kwargs}
    return TabularImputationDataModule.from_table(table, **kwargs)


def _scored(metric, imputed=None, truth=None, missing=None):
    """``metric`` updated once with a (4, 2) batch (entries replaced by the arguments given)."""
    generator = torch.Generator().manual_seed(0)
    imputed = torch.rand(4, 2, generator=generator) if imputed is None else imputed
    truth = torch.rand(4, 2, generator=generator) if truth is None else truth
    missing = torch.ones(4, 2, dtype=torch.bool) if missing is None else missing
    metric.update(imputed, truth, missing)
    return metric.compute()


@functools.cache
def _fitted() -> CACTIImputer:
    torch.manual_seed(0)
    return _tiny().fit(_frame())


BAD_INPUT = [
    pytest.param(
        lambda: _fitted().transform(_frame(seed=1)[["bmi", "age", "bp", "s1"]]),
        ValueError,
        r"(?s)feature names should match.*same order",
        id="reordered-columns",
    ),
    pytest.param(
        lambda: _fitted().transform(_frame(seed=1).rename(columns={"bmi": "weight"})),
        ValueError,
        r"(?s)feature names should match.*Feature names unseen at fit time:\n- weight",
        id="renamed-column",
    ),
    pytest.param(
        lambda: _fitted().transform(_frame(seed=1)[["age", "bmi", "bp"]]),
        ValueError,
        r"(?s)feature names should match.*seen at fit time, yet now missing:\n- s1",
        id="missing-column",
    ),
    pytest.param(
        lambda: _tiny().fit(_frame().to_numpy()).transform(np.ones((3, 3))),
        ValueError,
        r"X has 3 features, but CACTIImputer is expecting 4 features",
        id="array-with-a-column-less",
    ),
    pytest.param(
        lambda: _tiny().fit(np.ones((5, 1))),
        ValueError,
        r"1 feature\(s\) .* a minimum of 2 is required by CACTIImputer",
        id="one-column",
    ),
    pytest.param(
        lambda: _tiny().fit(np.ones((1, 3))),
        ValueError,
        r"1 sample\(s\) .* a minimum of 2 is required by CACTIImputer",
        id="one-row",
    ),
    pytest.param(
        lambda: _tiny().fit(np.array([[1.0, np.inf], [2.0, 3.0]])),
        ValueError,
        r"infinite values: replace them \(NaN marks a missing value\)",
        id="infinity",
    ),
    pytest.param(
        lambda: _tiny().fit(pd.DataFrame({"a": [1.0, 2.0], "b": ["x", "y"]})),
        ValueError,
        r"column 'b' is not numeric .*encode it first",
        id="text-column",
    ),
    pytest.param(
        lambda: _tiny(model={**FAST, "lr": -1.0}).fit(_frame()),
        ValueError,
        r"`optimizer.lr` must be > 0",
        id="negative-learning-rate",
    ),
    pytest.param(
        lambda: _tiny(model={**FAST, "embed_dim": 10}).fit(_frame()),
        ValueError,
        r"`embed_dim` \(10\) must be a multiple of 4",
        id="embed-dim-not-a-multiple-of-4",
    ),
    pytest.param(
        lambda: MissingnessOptions(rate=0.0),
        ValueError,
        r"`rate` must lie in \(0, 1\)",
        id="missing-rate-zero",
    ),
    pytest.param(
        lambda: MissingnessOptions(observed_share=-0.1),
        ValueError,
        r"`observed_share` must lie in \[0, 1\)",
        id="negative-observed-share",
    ),
    pytest.param(
        lambda: SplitOptions(val_fraction=1.5),
        ValueError,
        r"`val_fraction` must lie in \[0, 1\)",
        id="validation-share-over-one",
    ),
    pytest.param(
        lambda: TabularImputationDataModule("iris", missingness={"rate": 0.2}, context="none"),
        TypeError,
        r"`missingness` must be a MissingnessOptions, got dict",
        id="missingness-as-a-dict",
    ),
    pytest.param(
        lambda: TabularImputationDataModule("iris", mechanism="random", context="none"),
        ValueError,
        r"`mechanism` must be one of \('mcar', 'mar', 'mnar', 'none'\), got 'random'",
        id="unknown-mechanism",
    ),
    pytest.param(
        lambda: copy_masks(_missing(), float("nan")),
        ValueError,
        r"`probability` must be finite, got nan",
        id="copy-probability-nan",
    ),
    pytest.param(
        lambda: copy_masks(_missing(), 1.5),
        ValueError,
        r"`probability` must be a probability in \[0, 1\], got 1.5",
        id="copy-probability-above-one",
    ),
    pytest.param(
        lambda: copy_masks(_missing(), True),
        TypeError,
        r"`probability` must be a real number, got True",
        id="copy-probability-bool",
    ),
    pytest.param(
        lambda: random_masking(_missing(), False),
        ValueError,
        r"`ratio` .*must lie in \[0, 1\), got False",
        id="mask-ratio-bool",
    ),
    pytest.param(
        lambda: median_truncation(torch.zeros(0, 3, dtype=torch.bool)),
        ValueError,
        r"`visible_counts` is empty: a batch needs at least one row",
        id="median-truncation-no-rows",
    ),
    pytest.param(
        lambda: encoder_length(torch.zeros(0, dtype=torch.long)),
        ValueError,
        r"`visible_counts` is empty",
        id="encoder-length-no-rows",
    ),
    pytest.param(
        lambda: reconstruction_loss(torch.rand(6, 4), torch.rand(6, 1), ~_missing(), ~_missing()),
        ValueError,
        r"must share one \(B, d\) shape, got \(6, 4\), \(6, 1\), \(6, 4\) and \(6, 4\)",
        id="loss-values-broadcast",
    ),
    pytest.param(
        lambda: reconstruction_loss(
            torch.rand(6, 4), torch.rand(6, 4), (~_missing()).float(), ~_missing()
        ),
        TypeError,
        r"`observed` must be a bool mask, got dtype torch.float32",
        id="loss-float-mask",
    ),
    pytest.param(
        lambda: imputation_scores(np.ones((4, 2)), np.ones((4, 2)), np.full((4, 2), 0.5)),
        ValueError,
        r"`missing` must be a bool mask \(or 0/1\), got other values",
        id="scores-fractional-mask",
    ),
    pytest.param(
        lambda: context_texts(["a", "b"], {"a": "x", "zz": "y"}),
        ValueError,
        r"`descriptions` names column\(s\) \['zz'\] that the table does not have; its "
        r"columns are \['a', 'b'\]",
        id="context-unknown-column",
    ),
    pytest.param(
        lambda: _table_data(descriptions={"zz": "y"}),
        ValueError,
        r"column\(s\) \['zz'\] that the table does not have; its columns are "
        r"\['column_0', 'column_1', 'column_2'\]",
        id="datamodule-unknown-description",
    ),
    pytest.param(
        lambda: _tiny(descriptions={"weight": "body weight"}).fit(_frame()),
        ValueError,
        r"\['weight'\] that the table does not have; its columns are \['age', 'bmi', 'bp', "
        r"'s1'\]",
        id="imputer-unknown-description",
    ),
    pytest.param(
        lambda: _table_data(context="tfidf", context_dim=True),
        TypeError,
        r"`context_dim` must be an int, got True",
        id="context-dim-bool",
    ),
    pytest.param(
        lambda: _table_data(columns=["a", "a", "b"]),
        ValueError,
        r"`columns` repeats the name\(s\) \['a'\]",
        id="from-table-repeated-names",
    ),
    pytest.param(
        lambda: _table_data(columns="abc"),
        TypeError,
        r"`columns` must be a list of names, got the string 'abc'",
        id="from-table-names-string",
    ),
    pytest.param(
        lambda: frame_values(pd.DataFrame(np.ones((3, 2)), columns=["a", "a"])),
        ValueError,
        r"the table repeats the column name\(s\) \['a'\]; rename them apart",
        id="frame-repeated-columns",
    ),
    pytest.param(
        lambda tmp_path: load_table(_csv(tmp_path, "a,b,a\n1,2,3\n4,5,6\n")),
        ValueError,
        r"table\.csv: the header repeats the column name\(s\) \['a'\]",
        id="csv-repeated-header",
    ),
    pytest.param(
        lambda tmp_path: load_table(_csv(tmp_path, "a,b,c\n1,2,3\n4,5\n")),
        ValueError,
        r"table\.csv, line 3: 2 field\(s\) for the header's 3 columns \(a truncated line\?\)",
        id="csv-truncated-line",
    ),
    pytest.param(
        lambda tmp_path: load_table(_csv(tmp_path, "")),
        ValueError,
        r"table\.csv has no header row",
        id="csv-empty-file",
    ),
    pytest.param(
        lambda: load_table("synthetic:2.5"),
        ValueError,
        r"the rows of `synthetic:<rows>` must be a whole number, got '2.5'",
        id="synthetic-rows-not-a-number",
    ),
    pytest.param(
        lambda: TabularImputationDataModule(3, context="none"),
        TypeError,
        r"the table must be named by a str or a Path, got int 3; .*from_table",
        id="table-name-int",
    ),
    pytest.param(
        lambda: CACTI(3, use_context=False).impute(
            torch.ones(2, 3, dtype=torch.long), torch.tensor([[True, False, True]] * 2)
        ),
        TypeError,
        r"`values` must be a floating-point tensor, got dtype torch.int64.*values.float\(\)",
        id="impute-integer-values",
    ),
    pytest.param(
        lambda: inference_layout(_missing().float()),
        ValueError,
        r"`missing` must be a 2-D boolean tensor \(rows, columns\), got \(6, 4\) of "
        r"torch.float32",
        id="inference-layout-float-mask",
    ),
    pytest.param(
        lambda: inference_layout(torch.tensor([True, False])),
        ValueError,
        r"`missing` must be a 2-D boolean tensor \(rows, columns\), got \(2,\)",
        id="inference-layout-1d-mask",
    ),
    pytest.param(
        lambda: solve_intercepts(np.zeros((3, 2)), 1.5),
        ValueError,
        r"`rate` must lie in \[0, 1\), got 1.5",
        id="intercepts-rate-above-one",
    ),
    pytest.param(
        lambda: solve_intercepts(np.zeros((3, 2)), float("nan")),
        ValueError,
        r"`rate` must be finite, got nan",
        id="intercepts-rate-nan",
    ),
    pytest.param(
        lambda: solve_intercepts(np.full((3, 2), np.nan), 0.3),
        ValueError,
        r"`scores` must be finite",
        id="intercepts-nan-scores",
    ),
    pytest.param(
        lambda: solve_intercepts(np.zeros(3), 0.3),
        ValueError,
        r"`scores` must be an \(n, d\) array with n >= 1 rows, got shape \(3,\)",
        id="intercepts-1d-scores",
    ),
    pytest.param(
        lambda: solve_intercepts(np.zeros((0, 2)), 0.3),
        ValueError,
        r"`scores` must be an \(n, d\) array with n >= 1 rows, got shape \(0, 2\)",
        id="intercepts-no-rows",
    ),
    pytest.param(
        lambda: solve_intercepts(np.zeros((3, 2), dtype=bool), 0.3),
        TypeError,
        r"`scores` must be a real \(n, d\) array, got ndarray of dtype bool",
        id="intercepts-bool-scores",
    ),
    pytest.param(
        lambda: solve_intercepts(np.zeros((3, 2)), 0.3, steps=True),
        TypeError,
        r"`steps` must be an int, got True",
        id="intercepts-steps-bool",
    ),
    pytest.param(
        lambda: solve_intercepts(np.zeros((3, 2)), 0.3, steps=2.5),
        TypeError,
        r"`steps` must be an int, got 2.5",
        id="intercepts-steps-float",
    ),
    pytest.param(
        lambda: simulate_missing(np.random.default_rng(0).random((5, 3)), rate=True),
        TypeError,
        r"`rate` must be a real number, got True",
        id="simulate-rate-bool",
    ),
    pytest.param(
        lambda: simulate_missing(np.random.default_rng(0).random((5, 3)), seed=1.5),
        TypeError,
        r"`seed` must be an int, got 1.5",
        id="simulate-seed-float",
    ),
    pytest.param(
        lambda: simulate_missing(np.random.default_rng(0).random((5, 3)), mechanism="MAR"),
        ValueError,
        r"`mechanism` must be one of \('mcar', 'mar', 'mnar'\), got 'MAR'",
        id="simulate-unknown-mechanism",
    ),
    pytest.param(
        lambda: simulate_missing(np.array([[1.0, np.nan], [1.0, 2.0]])),
        ValueError,
        r"the table must be complete and finite",
        id="simulate-nan-table",
    ),
    pytest.param(
        lambda: simulate_missing(np.ones((3, 1))),
        ValueError,
        r"need a 2-D table of at least 2 rows and 2 columns, got \(3, 1\)",
        id="simulate-one-column",
    ),
    pytest.param(
        lambda: simulate_missing([["a", "b"], ["c", "d"]]),
        TypeError,
        r"the table must hold numbers \(could not convert string to float: 'a'\); encode",
        id="simulate-text-table",
    ),
    pytest.param(
        lambda: ImputationR2(True),
        TypeError,
        r"`num_columns` must be an int, got True",
        id="r2-num-columns-bool",
    ),
    pytest.param(
        lambda: ImputationR2(2, variance_rtol=float("nan")),
        ValueError,
        r"`variance_rtol` must be finite, got nan",
        id="r2-rtol-nan",
    ),
    pytest.param(
        lambda: _scored(ImputationR2(2), truth=torch.rand(4, 1)),
        ValueError,
        r"must be 2-D \(rows, columns\) of one shape, got \(4, 2\), \(4, 1\) and \(4, 2\)",
        id="r2-shape-mismatch",
    ),
    pytest.param(
        lambda: ImputationRMSE(0),
        ValueError,
        r"`num_columns` must be >= 1, got 0",
        id="rmse-num-columns-zero",
    ),
    pytest.param(
        lambda: _scored(ImputationRMSE(3)),
        ValueError,
        r"built for `num_columns` = 3 but the batch has 2 columns",
        id="rmse-other-column-count",
    ),
    pytest.param(
        lambda: _scored(ImputationRMSE(2), imputed=torch.full((4, 2), float("nan"))),
        ValueError,
        r"the truth and the imputation must be finite at the missing entries",
        id="rmse-nan-imputation",
    ),
    pytest.param(
        lambda: ImputationRMSE(2).compute(),
        ValueError,
        r"ImputationRMSE has seen no missing entry",
        id="rmse-compute-before-update",
    ),
    pytest.param(
        lambda: ImputationMAE("3"),
        TypeError,
        r"`num_columns` must be an int, got '3'",
        id="mae-num-columns-string",
    ),
    pytest.param(
        lambda: _scored(ImputationMAE(2), missing=torch.ones(4, 2)),
        TypeError,
        r"`missing` must be a bool mask .*got dtype torch.float32; pass `mask.bool\(\)`",
        id="mae-float-mask",
    ),
    pytest.param(
        lambda: ImputationWasserstein(None),
        TypeError,
        r"`num_columns` must be an int, got None",
        id="wasserstein-num-columns-none",
    ),
    pytest.param(
        lambda: _scored(ImputationWasserstein(2), truth=torch.full((4, 2), float("inf"))),
        ValueError,
        r"the truth and the imputation must be finite at the missing entries",
        id="wasserstein-infinite-truth",
    ),
    pytest.param(
        lambda: imputation_metrics(-1),
        ValueError,
        r"`num_columns` must be >= 1, got -1",
        id="metrics-num-columns-negative",
    ),
    pytest.param(
        lambda: column_descriptions("nope"),
        ValueError,
        r"unknown table 'nope'; known tables: breast_cancer, diabetes, iris",
        id="descriptions-unknown-table",
    ),
    pytest.param(
        lambda: column_descriptions(["diabetes"]),
        ValueError,
        r"unknown table \['diabetes'\]; known tables",
        id="descriptions-table-list",
    ),
    pytest.param(
        lambda: embed_columns(["a", "b"], "tfidf", True),
        TypeError,
        r"`dim` must be an int, got True",
        id="embed-dim-bool",
    ),
    pytest.param(
        lambda: embed_columns(["a", "b"], "tfidf", 2.5),
        TypeError,
        r"`dim` must be an int, got 2.5",
        id="embed-dim-float",
    ),
    pytest.param(
        lambda: embed_columns([1, 2], "tfidf", 4),
        TypeError,
        r"`texts\[0\]` must be a string, got int 1",
        id="embed-texts-not-strings",
    ),
    pytest.param(
        lambda: embed_columns("age", "tfidf", 4),
        TypeError,
        r"`texts` must be a sequence of strings, got a single str",
        id="embed-texts-one-string",
    ),
    pytest.param(
        lambda: embed_columns(["a", "b"], "tfidf", 4, seed=-1),
        ValueError,
        r"`seed` must be >= 0, got -1",
        id="embed-seed-negative",
    ),
]


def test_solve_intercepts_hits_the_rate_when_scores_lie_beyond_the_default_bracket():
    scores = np.array([[100.0, -200.0], [140.0, -180.0], [120.0, -190.0]])
    b = solve_intercepts(scores, 0.27)
    mean = (1 / (1 + np.exp(-(scores + b)))).mean(0)  # the defining equation, in float64
    assert np.allclose(mean, 0.27, atol=1e-9)


def test_fit_sets_the_feature_names_and_transform_keeps_them(one_torch_thread):
    imputer = _fitted()
    assert list(imputer.feature_names_in_) == COLUMNS and imputer.n_features_in_ == 4
    assert list(imputer.get_feature_names_out()) == COLUMNS
    frame = _frame(seed=1)
    filled = imputer.transform(frame)  # the same columns in the same order: accepted
    observed = frame.notna().to_numpy()
    assert np.array_equal(filled[observed], frame.to_numpy()[observed])
    assert not np.isnan(filled).any()
    # an array has no names to check: scikit-learn warns that it is taken by position
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        assert np.array_equal(imputer.transform(frame.to_numpy()), filled)
    unnamed = _tiny().fit(frame.to_numpy())
    assert not hasattr(unnamed, "feature_names_in_")
    assert list(unnamed.get_feature_names_out()) == ["x0", "x1", "x2", "x3"]


def test_set_output_returns_a_frame_with_the_input_names_and_index(one_torch_thread):
    frame = _frame(seed=2)
    frame.index = np.arange(100, 100 + len(frame))
    imputer = _tiny().set_output(transform="pandas")
    filled = imputer.fit_transform(frame)
    assert isinstance(filled, pd.DataFrame)
    assert list(filled.columns) == COLUMNS and filled.index.equals(frame.index)
    plain = _tiny().fit(frame).transform(frame)  # the same seed: the same fit
    assert np.array_equal(filled.to_numpy(), plain)


NOT_APPLICABLE = {
    "check_array_api_input": "CACTIImputer computes with torch on numpy or pandas input and does "
    "not claim array-API inputs; scikit-learn skips this check unless SCIPY_ARRAY_API is set"
}
"""scikit-learn's estimator checks left out, and why."""

CHECKS = [
    pytest.param(estimator, check, id=name)
    for estimator, check in estimator_checks_generator(_tiny(), legacy=True)
    if (name := getattr(check, "func", check).__name__) not in NOT_APPLICABLE
]


@pytest.mark.parametrize(("estimator", "check"), CHECKS)
def test_scikit_learn_estimator_checks(estimator, check, one_torch_thread):
    check(estimator)


from lightning_info.methods.cacti import functional as _core  # noqa: E402

_POSITIONS = torch.tensor([[0, 1], [2, 0]])
_PADDING = torch.tensor([[False, False], [False, True]])

BAD_INPUT += [
    pytest.param(
        lambda: _core.kept_mask(_POSITIONS, torch.tensor([[False], [True]]), 3),
        ValueError,
        r"`padding` the same shape, got \(2, 2\) and \(2, 1\)",
        id="kept-mask-padding-shape",
    ),
    pytest.param(
        lambda: _core.kept_mask(_POSITIONS.float(), _PADDING, 3),
        TypeError,
        r"`positions` must hold integer column indices, got dtype torch.float32",
        id="kept-mask-float-positions",
    ),
    pytest.param(
        lambda: _core.kept_mask(_POSITIONS, _PADDING.long(), 3),
        TypeError,
        r"`padding` must be a bool tensor, got dtype torch.int64",
        id="kept-mask-integer-padding",
    ),
    pytest.param(
        lambda: _core.kept_mask(_POSITIONS, _PADDING, True),
        TypeError,
        r"`num_columns` must be an int, got True",
        id="kept-mask-bool-num-columns",
    ),
    pytest.param(
        lambda: _core.kept_mask(_POSITIONS, _PADDING, 0),
        ValueError,
        r"`num_columns` must be >= 1, got 0",
        id="kept-mask-zero-columns",
    ),
]


def test_kept_mask_marks_unpadded_columns():
    """Brute force: column ``j`` of row ``b`` is kept iff some unpadded slot holds ``j``."""
    kept = _core.kept_mask(_POSITIONS, _PADDING, 3)
    expected = [
        [j in [p for p, m in zip(row, pad) if not m] for j in range(3)]
        for row, pad in zip(_POSITIONS.tolist(), _PADDING.tolist())
    ]
    assert kept.tolist() == expected
