"""The optional attacks of a fragment-extraction audit, computed from the target model:
gradient norm, ReCaLL, DC-PDD and the neighbourhood comparison
(:attr:`~lightning_info.methods.prism.auditor.FragmentAuditOptions.extra_attacks`; their
definitions are in :mod:`.attacks` and :mod:`.model_attacks`)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from lightning_info.core.validation import require_equal_lengths, require_string_sequence
from lightning_info.methods.prism.attacks import (
    dc_pdd_score,
    neighbourhood_score,
    recall_score,
    token_frequencies,
)
from lightning_info.methods.prism.functional import (
    encode_prompt_fragment,
    fragment_token_statistics,
)
from lightning_info.methods.prism.model_attacks import (
    NeighbourhoodUnavailable,
    gradnorm_scores,
    make_neighbours,
    recall_token_log_probs,
    text_token_log_probs,
)
from lightning_info.methods.prism.options import NEIGHBOURS, RECALL_SHOTS, FragmentAuditOptions


def extra_attack_scores(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    fragments: Sequence[str],
    labels: Sequence[int],
    options: FragmentAuditOptions,
    kinds: Sequence[str] | None = None,
    target_log_probs: Sequence[Tensor] | None = None,
    mask_filler: Any = None,
) -> dict[str, np.ndarray]:
    """The scores of ``options.extra_attacks`` on the target ``model`` (float64, one per query,
    higher = member; NaN for a query the attack does not score).

    A query's text is ``prompt + fragment``. The non-member queries are those of kind
    ``"non_member"`` (with ``kinds``; else, or when there is none, every label-0 query).

    - ``"gradnorm"``: :func:`~lightning_info.methods.prism.model_attacks.gradnorm_scores` of
      each query's tokens as the audit encodes them
      (:func:`~lightning_info.methods.prism.functional.encode_prompt_fragment`), one backward
      pass per query.
    - ``"recall"``: ReCaLL (:func:`~lightning_info.methods.prism.attacks.recall_score` of
      :func:`~lightning_info.methods.prism.model_attacks.recall_token_log_probs` on the query
      texts) with a prefix of :data:`RECALL_SHOTS` non-member queries drawn with
      ``options.seed``. Those queries are *not scored* (NaN): a text inside its own prefix
      would be scored on what it repeats. The attack's figures count the other queries only.
    - ``"dc_pdd"``: :func:`~lightning_info.methods.prism.attacks.dc_pdd_score` of the
      fragments' tokens and their cached log-probabilities ``target_log_probs`` (the target's
      per-token statistics; computed here when not given), calibrated by the token frequencies
      (:func:`~lightning_info.methods.prism.attacks.token_frequencies`) of
      ``options.reference_corpus`` or, without it, of the non-member queries' texts. Counting
      the scored non-members' own tokens raises their frequencies and lowers their scores: an
      optimistic AUC; give a reference corpus for a fair one.
    - ``"neighbourhood"``: :func:`~lightning_info.methods.prism.attacks.neighbourhood_score` of
      the query texts' losses against those of :data:`NEIGHBOURS` neighbours each
      (:func:`~lightning_info.methods.prism.model_attacks.make_neighbours` with
      ``mask_filler``; losses from
      :func:`~lightning_info.methods.prism.model_attacks.text_token_log_probs`). Without a mask
      filler it is skipped with one warning and left out of the result.
    """
    if not isinstance(options, FragmentAuditOptions):
        raise TypeError(f"`options` must be a FragmentAuditOptions, got {type(options).__name__}.")
    prompts = require_string_sequence(prompts, "prompts")
    fragments = require_string_sequence(fragments, "fragments")
    y = np.asarray(labels, dtype=np.int64).reshape(-1)
    require_equal_lengths({"prompts": len(prompts), "fragments": len(fragments), "labels": y.size})
    texts = [p + f for p, f in zip(prompts, fragments)]
    negatives = np.flatnonzero(y == 0)
    if kinds is not None and "non_member" in kinds:
        negatives = np.flatnonzero(np.asarray(kinds) == "non_member")
    size = options.batch_size
    out: dict[str, np.ndarray] = {}
    for attack in options.extra_attacks:
        if attack == "gradnorm":
            rows = [encode_prompt_fragment(tokenizer, p, f)[0] for p, f in zip(prompts, fragments)]
            out[attack] = gradnorm_scores(model, rows).numpy()
        elif attack == "recall":
            shots = RECALL_SHOTS
            if negatives.size <= shots:
                raise ValueError(
                    f"ReCaLL's prefix takes {shots} non-member queries and the attack set has "
                    f"{negatives.size}: give more than {shots} non-members."
                )
            rng = np.random.default_rng(options.seed)
            prefix = np.sort(rng.choice(negatives, size=shots, replace=False))
            scored = np.setdiff1d(np.arange(len(texts)), prefix)
            plain, conditional = recall_token_log_probs(
                model,
                tokenizer,
                [texts[i] for i in scored],
                [texts[i] for i in prefix],
                batch_size=size,
            )
            values = np.full(len(texts), np.nan)
            values[scored] = recall_score(plain, conditional).numpy()
            out[attack] = values
        elif attack == "dc_pdd":
            if target_log_probs is None:
                target_log_probs = fragment_token_statistics(
                    model, tokenizer, prompts, fragments, size, vocabulary_moments=False
                ).log_probs
            ids = []
            for p, f in zip(prompts, fragments):
                row, start = encode_prompt_fragment(tokenizer, p, f)
                ids.append(row[start:])
            corpus = options.reference_corpus
            if corpus is None:
                corpus = [texts[i] for i in negatives]
            counts = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in corpus]
            frequencies = token_frequencies(counts, len(tokenizer))
            out[attack] = dc_pdd_score(ids, target_log_probs, frequencies).numpy()
        elif attack == "neighbourhood":
            try:
                neighbours = make_neighbours(texts, mask_filler, n=NEIGHBOURS, seed=options.seed)
            except NeighbourhoodUnavailable as err:
                warnings.warn(
                    f"The neighbourhood attack is skipped: {err} Enable it with "
                    "FragmentAuditor(..., mask_filler=...) (or the callback's mask_filler).",
                    stacklevel=3,
                )
                continue
            flat = [text for row in neighbours for text in row]
            losses = [-row.mean() for row in text_token_log_probs(model, tokenizer, texts, size)]
            neighbour_losses = [
                -row.mean() for row in text_token_log_probs(model, tokenizer, flat, size)
            ]
            per_text, first = [], 0
            for row in neighbours:
                per_text.append(torch.stack(neighbour_losses[first : first + len(row)]))
                first += len(row)
            out[attack] = neighbourhood_score(torch.stack(losses), per_text).numpy()
    return out
