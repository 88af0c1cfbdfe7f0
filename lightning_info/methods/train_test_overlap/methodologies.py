"""The other contamination methodologies developers report: GPT-4's three 50-character substrings
and Llama-2's token coverage with clean/dirty thresholds."""

from __future__ import annotations

import random
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from lightning_info.core.validation import require_fraction, require_int, require_string_sequence
from lightning_info.methods.train_test_overlap.functional import (
    OverlapOptions,
    TestInstance,
    compute_overlap,
    reject_bare_text,
)
from lightning_info.methods.train_test_overlap.report import UndetectableInstancesWarning


def substring_overlap(
    texts: Sequence[str],
    documents: Iterable[str],
    length: int = 50,
    samples: int = 3,
    seed: int = 0,
) -> list[bool]:
    """GPT-4's check: is any of ``samples`` random ``length``-character substrings in training?

    Texts and documents are first reduced to their alphanumeric characters (spaces and symbols
    removed, as in the GPT-4 report); a text shorter than ``length`` is used whole. Substrings
    are drawn with ``random.Random(seed)``. Matching is exact substring search over each document.
    A text without any alphanumeric character has no substring to look for and is reported
    ``False`` with an ``UndetectableInstancesWarning`` naming its position.
    """
    length = require_int(length, "length", 1)
    samples = require_int(samples, "samples", 1)
    seed = require_int(seed, "seed", 0)
    texts = require_string_sequence(texts, "texts")
    reject_bare_text(documents, "documents")
    rng = random.Random(seed)

    def clean(text: str) -> str:
        return "".join(ch for ch in text if ch.isalnum())

    probes = []
    for text in texts:
        text = clean(text)
        if len(text) <= length:
            probes.append([text] if text else [])
        else:
            starts = [rng.randrange(len(text) - length + 1) for _ in range(samples)]
            probes.append([text[s : s + length] for s in starts])
    empty = [k for k, subs in enumerate(probes) if not subs]
    if empty:
        warnings.warn(
            f"{len(empty)} of {len(probes)} texts have no alphanumeric character (positions "
            f"{empty[:5]}{' ...' if len(empty) > 5 else ''}): no substring can find them, so "
            "they read False whatever the training data holds; check these texts.",
            UndetectableInstancesWarning,
            stacklevel=2,
        )
    found = [False] * len(probes)
    seen = 0
    for document in documents:
        seen += 1
        document = clean(document)
        for k, subs in enumerate(probes):
            if not found[k] and any(s in document for s in subs):
                found[k] = True
    if seen == 0:
        raise ValueError("the training corpus is empty: pass at least one document.")
    return found


def llama2_contamination(
    texts: Sequence[str],
    documents: Iterable[str],
    min_length: int = 10,
    clean_below: float = 0.2,
    dirty_above: float = 0.8,
    tokenizer: str | Callable[[str], list[str]] = "default",
    chunk_size: int = 1000,
) -> list[dict[str, Any]]:
    """Llama 2's token contamination: share of tokens inside matched spans of >= ``min_length``.

    A token is contaminated when it lies in a ``min_length``-gram that occurs in training (any
    matched span of length >= ``min_length`` is a union of such n-grams). Each text is
    ``"clean"`` below ``clean_below``, ``"dirty"`` above ``dirty_above``, else ``"neither"``
    (``clean_below <= dirty_above``). ``"detectable"`` is ``False`` for a text with fewer than
    ``min_length`` tokens: no span can be matched, so it reads ``"clean"`` whatever the training
    data holds (computing the report warns; ``tokenizer="character"`` counts characters).
    """
    require_int(min_length, "min_length", 1)
    require_int(chunk_size, "chunk_size", 1)
    clean_below = require_fraction(clean_below, "clean_below")
    dirty_above = require_fraction(dirty_above, "dirty_above")
    if clean_below > dirty_above:
        raise ValueError(
            f"`clean_below` ({clean_below}) must not exceed `dirty_above` ({dirty_above}): a "
            "share between them would be both; pass clean_below <= dirty_above."
        )
    texts = require_string_sequence(texts, "texts")
    if not texts:
        raise ValueError("`texts` is empty: pass at least one text to score.")
    instances = [TestInstance(id=str(k), input=t) for k, t in enumerate(texts)]
    options = OverlapOptions(
        n=min_length, n_values=(), tokenizer=tokenizer, max_frequency=0, chunk_size=chunk_size
    )
    report = compute_overlap(instances, documents, options)
    undetectable = {item["id"] for item in report.undetectable}
    results = []
    for row in report.rows:
        share = row["input_token"]
        label = "clean" if share < clean_below else "dirty" if share > dirty_above else "neither"
        detectable = row["id"] not in undetectable
        results.append({"contamination": share, "label": label, "detectable": detectable})
    return results
