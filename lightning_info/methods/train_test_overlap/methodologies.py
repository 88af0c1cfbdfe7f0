"""The other contamination methodologies developers report: GPT-4's three 50-character substrings
and Llama-2's token coverage with clean/dirty thresholds."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from lightning_info.core.validation import require_fraction, require_int
from lightning_info.methods.train_test_overlap.functional import (
    OverlapOptions,
    TestInstance,
    compute_overlap,
    reject_bare_text,
)


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
    """
    length = require_int(length, "length", 1)
    samples = require_int(samples, "samples", 1)
    reject_bare_text(texts, "texts")
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
    ``"clean"`` below ``clean_below``, ``"dirty"`` above ``dirty_above``, else ``"neither"``.
    """
    require_fraction(clean_below, "clean_below")
    require_fraction(dirty_above, "dirty_above")
    reject_bare_text(texts, "texts")
    instances = [TestInstance(id=str(k), input=t) for k, t in enumerate(texts)]
    options = OverlapOptions(
        n=min_length, n_values=(), tokenizer=tokenizer, max_frequency=0, chunk_size=chunk_size
    )
    report = compute_overlap(instances, documents, options)
    results = []
    for row in report.rows:
        share = row["input_token"]
        label = "clean" if share < clean_below else "dirty" if share > dirty_above else "neither"
        results.append({"contamination": share, "label": label})
    return results
