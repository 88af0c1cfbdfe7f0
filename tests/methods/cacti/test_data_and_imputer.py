"""TabularImputationDataModule (bundled tables, CSV, scaling on the training rows only, errors)
and the scikit-learn CACTIImputer (observed entries bit-identical, inductive, Pipeline)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.base import clone
from sklearn.datasets import load_diabetes
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline

from lightning_info.methods.cacti.datamodule import (
    BUNDLED_TABLES,
    SplitOptions,
    TabularImputationDataModule,
)
from lightning_info.methods.cacti.imputer import CACTIImputer
from lightning_info.methods.cacti.missingness import MissingnessOptions
from lightning_info.methods.cacti.module import CACTI

FAST = {"embed_dim": 8, "encoder_depth": 1, "decoder_depth": 1, "num_heads": 2}


@pytest.mark.parametrize("name", BUNDLED_TABLES)
def test_bundled_tables_load_with_context_and_simulated_missingness(name):
    data = TabularImputationDataModule(
        name,
        mechanism="mcar",
        missingness=MissingnessOptions(rate=0.2),
        context="tfidf",
        context_dim=6,
    )
    assert data.context_embeddings.shape == (data.num_columns, 6)
    assert len(data.context_texts) == data.num_columns
    assert " (is defined as) : " in data.context_texts[0]
    assert data.simulated.mean() == pytest.approx(0.2, abs=0.05)
    splits = data.splits
    assert sorted(np.concatenate(list(splits.values())).tolist()) == list(range(len(data.table)))


def test_scaling_uses_the_training_rows_observed_values_only():
    data = TabularImputationDataModule("diabetes", mechanism="mar", context="none", data_seed=3)
    train = data.splits["train"]
    observed_train = np.where(data.observed[train], data.table[train], np.nan)
    low, high = np.nanmin(observed_train, 0), np.nanmax(observed_train, 0)
    np.testing.assert_allclose(data.scaling.low, low)
    np.testing.assert_allclose(data.scaling.span, high - low)
    values, truth, target = data.arrays("test")
    np.testing.assert_allclose(truth, (data.table[data.splits["test"]] - low) / (high - low))
    assert np.isnan(values[target]).all() and not np.isnan(values[~target]).any()
    batch = next(iter(data.test_dataloader()))
    assert set(batch) == {"values", "observed", "truth", "target"}
    assert torch.equal(batch["target"], torch.as_tensor(target[: len(batch["target"])]))
    assert np.array_equal(data.table, load_diabetes().data)  # the source is not modified


def test_a_csv_with_its_own_missing_values_and_categories(tmp_path):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "height": rng.normal(170, 10, 50),
            "weight": rng.normal(70, 8, 50),
            "city": rng.choice(["Oslo", "Lima"], 50),
        }
    )
    frame.loc[::7, "weight"] = np.nan
    path = tmp_path / "people.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(ValueError, match="column 'city' is not numeric"):
        TabularImputationDataModule(str(path), mechanism="none", context="tfidf")
    data = TabularImputationDataModule(
        str(path),
        mechanism="none",
        context="tfidf",
        encode_categorical=True,
        descriptions={"city": "city of residence"},
    )
    assert data.columns == ["height", "weight", "city"]
    assert (~data.observed).sum() == frame["weight"].isna().sum()
    assert set(np.unique(data.table[:, 2])) == {0.0, 1.0}
    assert data.context_texts[2] == "city (is defined as) : city of residence"
    with pytest.raises(ValueError, match="already has 8 missing"):
        TabularImputationDataModule(str(path), mechanism="mcar", encode_categorical=True)


def test_bad_tables_get_clear_errors():
    with pytest.raises(ValueError, match="at least 2"):
        TabularImputationDataModule.from_table(np.ones((5, 1)), mechanism="none", context="none")
    column_missing = np.random.default_rng(0).random((20, 3))
    column_missing[:, 1] = np.nan
    with pytest.raises(ValueError, match=r"column\(s\) \['column_1'\] have no observed value"):
        TabularImputationDataModule.from_table(column_missing, mechanism="none", context="none")
    row_missing = np.random.default_rng(0).random((20, 3))
    row_missing[4] = np.nan
    with pytest.raises(ValueError, match=r"1 row\(s\) \(e.g. \[4\]\) have no observed value"):
        TabularImputationDataModule.from_table(row_missing, mechanism="none", context="none")
    with pytest.raises(ValueError, match="mechanism"):
        TabularImputationDataModule("wine", mechanism="random")
    with pytest.raises(FileNotFoundError, match="neither a bundled table"):
        TabularImputationDataModule("no-such-table.csv")
    with pytest.raises(ValueError, match="fewer than 2 for training"):
        TabularImputationDataModule(
            "iris", split=SplitOptions(test_fraction=0.9, val_fraction=0.1), context="none"
        )


def _incomplete(seed=0, rows=120):
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(rows, 1))
    table = np.hstack(
        [
            latent,
            2 * latent + 0.1 * rng.normal(size=(rows, 1)),
            -latent + 0.1 * rng.normal(size=(rows, 1)),
            rng.normal(size=(rows, 1)),
        ]
    )
    missing = rng.random(table.shape) < 0.25
    missing[missing.all(1), 0] = False
    return table, np.where(missing, np.nan, table)


def test_imputer_fills_only_missing_entries_and_is_inductive(one_torch_thread):
    complete, incomplete = _incomplete()
    imputer = CACTIImputer(
        context="tfidf", context_dim=4, model={**FAST, "lr": 3e-3}, max_epochs=100, batch_size=32
    )
    filled = imputer.fit(incomplete[:80]).transform(incomplete[80:])
    observed = ~np.isnan(incomplete[80:])
    assert filled.shape == (40, 4) and not np.isnan(filled).any()
    assert np.array_equal(filled[observed], incomplete[80:][observed])  # bit for bit
    assert filled[observed].tobytes() == incomplete[80:][observed].tobytes()
    # the correlated columns are imputed better than by their training means
    missing = ~observed
    means = np.nanmean(incomplete[:80], 0)
    cacti_error = np.abs(filled - complete[80:])[:, :3][missing[:, :3]].mean()
    mean_error = np.abs(np.broadcast_to(means, filled.shape) - complete[80:])[:, :3][
        missing[:, :3]
    ].mean()
    assert cacti_error < mean_error
    # batched transform equals transforming one row at a time
    one_by_one = np.vstack([imputer.transform(incomplete[80 + i : 81 + i]) for i in range(40)])
    np.testing.assert_allclose(filled, one_by_one, atol=1e-5 * np.abs(complete).max())


def test_imputer_works_in_a_pipeline_and_clones(one_torch_thread):
    complete, incomplete = _incomplete(seed=1)
    imputer = CACTIImputer(context="none", model=FAST, max_epochs=2, batch_size=64)
    assert clone(imputer).get_params() == imputer.get_params()
    target = complete[:, 0] + complete[:, 3]
    pipeline = make_pipeline(imputer, LinearRegression()).fit(incomplete, target)
    assert pipeline.predict(incomplete).shape == (120,)
    assert isinstance(pipeline[0].module_, CACTI) and not pipeline[0].module_.use_context
    frame = pd.DataFrame(incomplete, columns=["a", "b", "c", "d"])
    fitted = CACTIImputer(context="tfidf", context_dim=4, model=FAST, max_epochs=1).fit(frame)
    assert list(fitted.feature_names_in_) == ["a", "b", "c", "d"]


def test_imputer_refuses_bad_input_before_training():
    imputer = CACTIImputer(context="none", model=FAST, max_epochs=1)
    with pytest.raises(ValueError, match="no observed value"):
        imputer.fit(np.array([[1.0, np.nan], [np.nan, np.nan], [2.0, 3.0]]))
    with pytest.raises(ValueError, match="infinite"):
        imputer.fit(np.array([[1.0, np.inf], [2.0, 3.0]]))
    with pytest.raises(ValueError, match="a minimum of 2 is required"):
        imputer.fit(np.ones((4, 1)))
    _, incomplete = _incomplete()
    imputer.fit(incomplete)
    with pytest.raises(ValueError, match="expecting 4 features"):
        imputer.transform(incomplete[:, :3])
    with pytest.raises(ValueError, match="no observed value"):
        imputer.transform(np.full((2, 4), np.nan))
