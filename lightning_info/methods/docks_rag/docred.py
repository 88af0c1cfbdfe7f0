"""DocRED-format documents: reading and checking the official JSON.

A document (DocRED, Yao et al., 2019; Re-DocRED keeps the format) is a dict with ``title``,
``sents`` (a list of token lists), ``vertexSet`` (one list of mentions per entity; a mention has
``name``, ``sent_id``, ``pos`` = [start, end) token offsets in its sentence, and ``type``) and,
in annotated splits, ``labels`` (``h`` and ``t`` index ``vertexSet``, ``r`` is a relation id
such as ``"P17"``, ``evidence`` lists sentence ids). ``rel_info.json`` maps relation ids to
names. :func:`read_docred` reads a split and refuses, naming the document, what the official
scorer would silently mis-score: an unknown relation id, an entity without mentions, an entity
or evidence index out of range, a mention outside its sentence.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lightning_info.core.files import read_json

__all__ = ["check_document", "check_predictions", "read_docred", "read_relation_info"]

Document = dict[str, Any]


def read_relation_info(path: str | Path) -> dict[str, str]:
    """``rel_info.json``: relation id -> name."""
    info = read_json(path)
    if not isinstance(info, dict) or not info:
        raise ValueError(f"{path} must hold a non-empty JSON object of relation id -> name.")
    return {str(k): str(v) for k, v in info.items()}


def _require_index(value: Any, what: str, title: Any) -> None:
    """Raise unless ``value`` is an int (not a bool): a string entity index never matches a
    prediction's int (F1 0, silently), a float one breaks the scorer's lookups."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"document {title!r}: {what} is {value!r} ({type(value).__name__}); DocRED indices "
            "are JSON integers: convert them with int(...)."
        )


def check_predictions(predictions: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``predictions`` as a list, after checking that each is a dict with ``title``, ``r`` and
    integer ``h_idx`` / ``t_idx`` (``vertexSet`` positions): a string index never matches the
    gold facts and would score F1 0 silently."""
    predictions = list(predictions)
    for p in predictions:
        keys = p if isinstance(p, dict) else {}
        missing = [k for k in ("title", "h_idx", "t_idx", "r") if k not in keys]
        if missing:
            raise ValueError(f"prediction {p!r} lacks {missing}: give title, h_idx, t_idx and r.")
        for key in ("h_idx", "t_idx"):
            if isinstance(p[key], bool) or not isinstance(p[key], numbers.Integral):
                raise TypeError(
                    f"prediction {p!r}: {key} is {p[key]!r} ({type(p[key]).__name__}); entity "
                    "indices are ints (positions in the document's vertexSet): convert them "
                    "with int(...)."
                )
    return predictions


def check_document(document: Document, relations: dict[str, str] | None = None) -> Document:
    """``document`` if it is a well-formed DocRED document (module docstring); ``relations``
    (id -> name), when given, must hold every label's relation."""
    title = document.get("title", "<untitled>")
    for key in ("title", "sents", "vertexSet"):
        if key not in document:
            raise ValueError(f"document {title!r} has no {key!r}: is this a DocRED file?")
    sents = document["sents"]
    if not sents:
        raise ValueError(f"document {title!r} has no sentences.")
    for e, mentions in enumerate(document["vertexSet"]):
        if not mentions:
            raise ValueError(
                f"document {title!r}: entity {e} has no mentions; drop it (and renumber the "
                "labels) before use."
            )
        for m in mentions:
            sent, (start, end) = m["sent_id"], m["pos"]
            _require_index(sent, f"mention {m.get('name')!r} of entity {e}: sent_id", title)
            _require_index(start, f"mention {m.get('name')!r} of entity {e}: pos start", title)
            _require_index(end, f"mention {m.get('name')!r} of entity {e}: pos end", title)
            if not 0 <= sent < len(sents) or not 0 <= start < end <= len(sents[sent]):
                raise ValueError(
                    f"document {title!r}: mention {m.get('name')!r} of entity {e} lies outside "
                    f"its sentence (sent_id {sent}, pos {[start, end]})."
                )
    entities = len(document["vertexSet"])
    for label in document.get("labels", []):
        h, t, r = label["h"], label["t"], label["r"]
        _require_index(h, f"label {label}: h", title)
        _require_index(t, f"label {label}: t", title)
        for sentence in label.get("evidence", []):
            _require_index(sentence, f"label {label}: evidence sentence", title)
        if not (0 <= h < entities and 0 <= t < entities):
            raise ValueError(f"document {title!r}: label {label} names an entity out of range.")
        if relations is not None and r not in relations:
            raise ValueError(
                f"document {title!r}: relation {r!r} is not in rel_info ({len(relations)} "
                "relations); check that the split and rel_info.json belong together."
            )
        bad = [s for s in label.get("evidence", []) if not 0 <= s < len(sents)]
        if bad:
            raise ValueError(f"document {title!r}: evidence sentences {bad} are out of range.")
    return document


def read_docred(path: str | Path, relations: dict[str, str] | None = None) -> list[Document]:
    """The documents of a DocRED / Re-DocRED split (``train_annotated.json``, ``dev.json``,
    ...), each checked by :func:`check_document`; titles must be unique (the scorer keys
    facts by title)."""
    documents = read_json(path)
    if not isinstance(documents, list) or not documents:
        raise ValueError(f"{path} must hold a non-empty JSON list of documents.")
    if not all(isinstance(d, dict) for d in documents):
        raise ValueError(f"{path}: every document must be a JSON object; is this a DocRED file?")
    titles = [d.get("title") for d in documents]
    repeated = sorted({t for t in titles if titles.count(t) > 1})
    if repeated:
        raise ValueError(f"{path}: titles {repeated[:3]} repeat; the scorer keys by title.")
    return [check_document(d, relations) for d in documents]
