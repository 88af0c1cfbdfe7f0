"""Column context for CACTI: descriptions parsed from scikit-learn's DESCR, CACTI's context texts,
and their embeddings through the shared sentence encoders (tested in tests/lm)."""

from __future__ import annotations

import numpy as np
import pytest
import sklearn.datasets

from lightning_info.lm.sentence_encoders import embed_texts
from lightning_info.methods.cacti.context import (
    TABLES,
    column_descriptions,
    context_texts,
    embed_columns,
)

BMI = "bmi (is defined as) : body mass index"
WEIGHT = "weight (is defined as) : body weight"
SULPHATES = "sulphates (is defined as) : sulphates"


def _cosine(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# --- descriptions -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", TABLES)
def test_every_column_of_every_table_is_described(name):
    columns = [str(c) for c in getattr(sklearn.datasets, f"load_{name}")().feature_names]
    descriptions = column_descriptions(name)
    assert list(descriptions) == columns
    assert all(isinstance(d, str) and d.strip() for d in descriptions.values())


@pytest.mark.parametrize(
    ("name", "column", "words"),
    [
        ("diabetes", "bmi", ["body mass index"]),
        ("diabetes", "s1", ["total serum cholesterol"]),
        ("diabetes", "bp", ["average blood pressure"]),
        ("wine", "malic_acid", ["malic acid"]),
        ("wine", "od280/od315_of_diluted_wines", ["diluted wines"]),
        ("breast_cancer", "mean radius", ["mean of radius", "distances from center"]),
        ("breast_cancer", "radius error", ["standard error", "distances from center"]),
        ("breast_cancer", "worst concave points", ["largest", "concave portions"]),
        ("breast_cancer", "mean concavity", ["severity of concave"]),
        ("iris", "sepal length (cm)", ["sepal length", "cm"]),
        ("iris", "petal width (cm)", ["petal width"]),
        ("linnerud", "Chins", ["exercise"]),
        ("linnerud", "Jumps", ["exercise"]),
    ],
)
def test_known_descriptions_have_their_words(name, column, words):
    description = column_descriptions(name)[column].lower()
    for word in words:
        assert word in description


def test_a_column_described_nowhere_is_its_own_name():
    # diabetes' DESCR lists "- sex" with nothing after it
    assert column_descriptions("diabetes")["sex"] == "sex"
    # and the text after diabetes' column names never repeats the name
    assert not column_descriptions("diabetes")["age"].startswith("age age")


def test_breast_cancer_statistics_share_their_base_feature():
    d = column_descriptions("breast_cancer")
    base = "(mean of distances from center to points on the perimeter)"
    assert all(base in d[c] for c in ("mean radius", "radius error", "worst radius"))
    assert len({d["mean radius"], d["radius error"], d["worst radius"]}) == 3


def test_an_unknown_table_is_refused_with_the_known_names():
    with pytest.raises(ValueError, match="diabetes") as error:
        column_descriptions("boston")
    assert all(name in str(error.value) for name in TABLES)


# --- context texts ------------------------------------------------------------------------------


def test_context_texts_format():
    assert context_texts(["bmi"], {"bmi": "body mass index"}) == [BMI]
    assert context_texts(["bmi", "s1"]) == ["bmi (is defined as) : bmi", "s1 (is defined as) : s1"]


def test_a_mapping_may_miss_columns_and_a_sequence_aligns():
    assert context_texts(["a", "b"], {"b": "beta"}) == [
        "a (is defined as) : a",
        "b (is defined as) : beta",
    ]
    assert context_texts(["a", "b"], ["alpha", ""]) == [
        "a (is defined as) : alpha",
        "b (is defined as) : b",
    ]
    texts = context_texts(list(column_descriptions("iris")), column_descriptions("iris"))
    assert texts[0] == "sepal length (cm) (is defined as) : sepal length in cm"


def test_context_texts_refuse_misaligned_or_malformed_descriptions():
    with pytest.raises(ValueError, match="3 descriptions for 2 columns"):
        context_texts(["a", "b"], ["x", "y", "z"])
    with pytest.raises(TypeError):
        context_texts(["a"], "alpha")
    with pytest.raises(TypeError):
        context_texts("ab")


# --- embeddings ---------------------------------------------------------------------------------


def test_embed_columns_is_the_shared_encoder():
    texts = context_texts(list(column_descriptions("wine")), column_descriptions("wine"))
    np.testing.assert_array_equal(
        embed_columns(texts, "tfidf", 8, 3), embed_texts(texts, "tfidf", 8, 3)
    )
    assert embed_columns(texts, "tfidf", 8, 3).shape == (13, 8)
