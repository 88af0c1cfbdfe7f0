"""BayesianNetworkDataModule: pgmpy's bundled networks sampled with hidden nodes, the oracle
PAG of the marginalised DAG, a user's table, and its errors."""

from __future__ import annotations

import numpy as np
import pytest

from lightning_info.methods.ancestral_search.datamodule import (
    BayesianNetworkDataModule,
    equal_frequency_bins,
)
from lightning_info.methods.ancestral_search.graphs import mag_from_dag

pytest.importorskip("pgmpy")


def test_asia_with_a_hidden_node_has_the_marginal_pag_as_truth():
    data = BayesianNetworkDataModule("asia", num_samples=2000, hidden=["either"], data_seed=3)
    assert data.hidden == ["either"] and "either" not in data.names and len(data.names) == 7
    assert data.codes.shape == (2000, 7) and (data.levels == 2).all()
    latent = [data.dag_names.index("either")]
    assert np.array_equal(data.truth_mag, mag_from_dag(data.dag, latent))
    assert np.array_equal(data.truth != 0, data.truth_mag != 0)
    again = BayesianNetworkDataModule("asia", num_samples=2000, hidden=["either"], data_seed=3)
    assert np.array_equal(again.codes, data.codes)
    other = BayesianNetworkDataModule("asia", num_samples=2000, hidden=["either"], data_seed=4)
    assert not np.array_equal(other.codes, data.codes)


def test_hidden_fraction_hides_round_p_times_the_fraction():
    data = BayesianNetworkDataModule("alarm", num_samples=500, hidden_fraction=0.1, data_seed=0)
    assert len(data.hidden) == 4 and len(data.names) == 33  # Alarm: 37 nodes
    assert data.truth.shape == (33, 33)
    assert len(list(data.train_dataloader())) == 1


def test_a_users_table_and_the_errors():
    table = np.array([["a", "x"], ["b", "y"], ["a", "y"], ["b", "x"]])
    data = BayesianNetworkDataModule.from_table(table, names=["u", "v"], moves=3)
    assert data.truth is None and data.codes.tolist() == [[0, 0], [1, 1], [0, 1], [1, 0]]
    assert len(list(data.train_dataloader())) == 3
    with pytest.raises(ValueError, match="not in the network"):
        BayesianNetworkDataModule("asia", num_samples=100, hidden=["nowhere"])
    with pytest.raises(ValueError, match="constant"):
        BayesianNetworkDataModule.from_table(np.array([[1, 0], [1, 1], [1, 0]]))


def test_constant_columns_can_join_the_hidden_nodes():
    with pytest.raises(ValueError, match="constant"):
        BayesianNetworkDataModule("insurance", num_samples=200, data_seed=0)
    data = BayesianNetworkDataModule(
        "insurance", num_samples=200, data_seed=0, constant_columns="hide"
    )
    assert data.constant_hidden and set(data.constant_hidden) <= set(data.hidden)
    assert all(name not in data.names for name in data.constant_hidden)
    latent = [data.dag_names.index(h) for h in data.hidden]
    assert np.array_equal(data.truth_mag, mag_from_dag(data.dag, latent))
    assert (data.levels >= 2).all()


def test_equal_frequency_bins_and_continuous_csv_columns(tmp_path):
    values = np.random.default_rng(0).normal(size=1000)
    codes = equal_frequency_bins(values, 4)
    assert np.bincount(codes).tolist() == [250, 250, 250, 250]
    order = np.argsort(values)
    assert (np.diff(codes[order]) >= 0).all()  # monotone in the value
    assert equal_frequency_bins(np.array([1.0, 1.0, 1.0, 2.0]), 4).tolist() == [0, 0, 0, 1]
    with pytest.raises(ValueError, match="NaN"):
        equal_frequency_bins(np.array([1.0, np.nan]), 2)
    path = tmp_path / "mixed.csv"
    rng = np.random.default_rng(1)
    path.write_text(
        "colour,height\n"
        + "\n".join(
            f"{c},{h}" for c, h in zip(rng.choice(["red", "blue"], 60), rng.normal(size=60))
        )
    )
    data = BayesianNetworkDataModule.from_csv(path, bins=3)
    assert data.names == ["colour", "height"] and data.levels.tolist() == [2, 3]
    with pytest.raises(ValueError, match="levels"):
        BayesianNetworkDataModule.from_csv(path, max_levels=10)  # 60 distinct heights
