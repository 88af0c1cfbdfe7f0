"""Input whose right answer is a result or a warning rather than an error: a row with no observed
value is filled from an empty layout with a warning naming it, an empty batch is imputed as an
empty batch, a 0/1 integer mask scores as the bool mask, and the columns' descriptions of a
bundled table follow the columns that are kept."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lightning_info.methods.cacti.datamodule import TabularImputationDataModule
from lightning_info.methods.cacti.functional import imputation_scores
from lightning_info.methods.cacti.module import CACTI
from lightning_info.methods.cacti.networks import CACTINetwork


def _model() -> CACTI:
    torch.manual_seed(0)
    network = CACTINetwork(3, None, embed_dim=8, encoder_depth=1, decoder_depth=1, num_heads=2)
    return CACTI(3, use_context=False, network=network).eval()


def test_a_row_with_nothing_observed_warns_and_gets_the_empty_layout_prediction():
    model = _model()
    values = torch.rand(5, 3, generator=torch.Generator().manual_seed(1))
    observed = torch.tensor([[True, False, True], [False] * 3, [True] * 3, [False] * 3, [True] * 3])
    values[1, 0] = values[3, 2] = float("nan")  # unobserved: never read
    with pytest.warns(
        UserWarning,
        match=r"2 row\(s\) of `observed` have no observed value \(rows "
        r"\[1, 3\]\): each is filled with the prediction from an empty layout",
    ):
        imputed = model.impute(values, observed)
    # the documented rule: the network on a layout of one padded slot (the CLS token alone)
    empty_layout = model.network(
        torch.zeros(1, 3),
        torch.zeros(1, 3, dtype=torch.bool),
        torch.zeros(1, 1, dtype=torch.long),
        torch.ones(1, 1, dtype=torch.bool),
    )[0]
    torch.testing.assert_close(imputed[1], empty_layout)
    torch.testing.assert_close(imputed[3], empty_layout)
    assert torch.equal(imputed[observed], values[observed])  # observed entries as given
    with pytest.warns(UserWarning, match=r"1 row\(s\) .*\(rows \[0\]\)"):
        alone = model.impute(values[1:2], observed[1:2])  # the same row on its own
    torch.testing.assert_close(alone[0], empty_layout)


def test_rows_with_an_observed_value_impute_without_a_warning(recwarn):
    model = _model()
    values = torch.rand(4, 3, generator=torch.Generator().manual_seed(2))
    observed = torch.tensor(
        [[True, False, False], [False, True, False], [True] * 3, [False, False, True]]
    )
    imputed = model.impute(values, observed)
    assert not [w for w in recwarn if "no observed value" in str(w.message)]
    assert torch.equal(imputed[observed], values[observed])
    empty = model.impute(torch.zeros(0, 3), torch.zeros(0, 3, dtype=torch.bool))
    assert empty.shape == (0, 3)  # an empty batch is an empty result


def test_the_imputer_refuses_rows_with_nothing_observed():
    from tests.methods.cacti.test_bad_input import _fitted, _frame

    frame = _frame(seed=3)
    frame.iloc[[2, 5]] = np.nan
    with pytest.raises(
        ValueError, match=r"X: 2 row\(s\) \(e\.g\. \[2, 5\]\) have no observed value"
    ):
        _fitted().transform(frame)


def test_a_zero_one_integer_mask_scores_as_the_bool_mask():
    rng = np.random.default_rng(0)
    truth, imputed = rng.random((8, 3)), rng.random((8, 3))
    mask = rng.random((8, 3)) < 0.5
    as_bool = imputation_scores(truth, imputed, mask)
    assert imputation_scores(truth, imputed, mask.astype(np.int64)) == as_bool
    errors = (imputed - truth)[mask]
    assert as_bool["rmse"] == pytest.approx(float(np.sqrt((errors**2).mean())), rel=1e-12)


def test_a_bundled_tables_descriptions_follow_its_columns():
    data = TabularImputationDataModule("iris", mechanism="none", context="none")
    assert data.context_texts[0].startswith("sepal length (cm) (is defined as) : sepal length")
    two = TabularImputationDataModule.from_table(
        data.table[:, :2], data.columns[:2], name="iris", mechanism="none", context="none"
    )  # a named table cut to two columns keeps those columns' descriptions only
    assert two.context_texts == data.context_texts[:2]
