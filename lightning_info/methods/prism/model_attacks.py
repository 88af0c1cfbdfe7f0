"""Membership attacks that need the target model beyond its token log-probabilities.

- Gradient norm (MIMIR's ``gradnorm``; Wang et al., 2024, "Pandora's White-Box"):
  :func:`gradnorm_scores`, one backward pass per text.
- ReCaLL's conditioning (Xie et al., 2024): :func:`recall_token_log_probs` scores the same tokens
  of each text without and with a prefix of non-member texts, the two inputs of
  :func:`~lightning_info.methods.prism.attacks.recall_score`.
- Neighbourhood comparison (Mattern et al., 2023): :func:`make_neighbours` writes one-word
  rewordings of each text with a user-supplied mask filler; :func:`text_token_log_probs` scores
  texts and neighbours, whose losses
  :func:`~lightning_info.methods.prism.attacks.neighbourhood_score` compares. Without a mask
  filler it raises :class:`NeighbourhoodUnavailable`, which a caller catches to skip the attack.

The model-free scores live in :mod:`~lightning_info.methods.prism.attacks`.
"""

from __future__ import annotations

import math
import random
import re
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from lightning_info.core.validation import (
    require_indices,
    require_int,
    require_string_sequence,
)
from lightning_info.lm.features import check_causal_lm
from lightning_info.methods.prism.functional import (
    encode_prompt_fragment,
    fragment_token_statistics,
)

__all__ = [
    "NeighbourhoodUnavailable",
    "gradnorm_scores",
    "make_neighbours",
    "recall_token_log_probs",
    "text_token_log_probs",
]

GRADIENT_NORMS = (1.0, 2.0, math.inf)
"""The p-norms :func:`gradnorm_scores` takes, as MIMIR's ``gradnorm`` does."""


class NeighbourhoodUnavailable(RuntimeError):
    """Raised by :func:`make_neighbours` when no mask filler is given: the neighbourhood attack
    cannot run, and a caller that runs several attacks catches this to skip it."""


# --------------------------------------------------------------------------------------------
# Gradient norm
# --------------------------------------------------------------------------------------------


def gradnorm_scores(
    model: Any,
    input_ids_rows: Sequence[Sequence[int] | Tensor],
    norm: float = math.inf,
    device: torch.device | str | None = None,
) -> Tensor:
    """``-(1/|W|) sum_{w in W} ||grad_w L(x)||_p`` for every text ``x``: minus the mean, over the
    model's trainable parameter tensors ``W``, of the p-norm of the gradient of the text's loss
    ``L(x) = -(1/(T-1)) sum_{t>=2} log p(x_t | x_<t)`` (the causal-LM loss of its own tokens).

    The aggregation is MIMIR's (``gradnorm.py``): a p-norm per parameter tensor, then their mean
    (not the global norm over all parameters), ``norm`` in ``(1, 2, inf)`` with MIMIR's default
    ``inf`` (the largest absolute entry of each tensor). A member sits near a minimum of its
    loss, so its gradient is small: the norm is negated so that a higher score means "more likely
    a member". MIMIR also returns ``-norm`` but then negates every score once more before its
    ROC (its raw scores are lower-is-member), so its ``gradnorm`` ranks *larger* gradients as
    members: the AUCs below 0.5 seen with it (0.32 for GPT-Neo-125M on the Pile's GitHub split,
    where the loss attack reaches 0.83) are that sign.

    ``W`` is the parameters with ``requires_grad`` (all of them for a plain model, only the
    adapters of a ``peft`` one); it must not be empty. Each text gets its own backward pass (a
    batch of 1): the gradient of a batch's loss is the mean of the texts' gradients, and the
    norm of a mean is not the mean of the norms; per-text gradients in one batched pass would
    hold a copy of every parameter's gradient per text. Gradients come from
    :func:`torch.autograd.grad`, so no ``.grad`` of the model is created or changed; the model
    runs in eval mode (no dropout) and its train/eval mode is restored. ``input_ids_rows`` holds
    one row of token ids per text, each of at least 2 tokens. Returns float64 CPU ``(n,)``.
    """
    if norm not in GRADIENT_NORMS:
        raise ValueError(f"`norm` must be one of {GRADIENT_NORMS} (p of the p-norm), got {norm!r}.")
    base = check_causal_lm(model)
    vocab = base.get_input_embeddings().weight.shape[0]
    rows = _id_rows(input_ids_rows, "input_ids_rows", vocab, minimum_length=2)
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError(
            "No parameter of the model requires grad, so there is no gradient to take its norm; "
            "set requires_grad=True on the parameters to attack (e.g. model.requires_grad_())."
        )
    device = base.get_input_embeddings().weight.device if device is None else torch.device(device)
    scores = []
    was_training = model.training
    model.eval()
    try:
        with torch.enable_grad():
            for ids in rows:
                ids = ids.to(device)[None]
                logits = model(input_ids=ids, use_cache=False).logits[0, :-1]
                picked = torch.log_softmax(logits.float(), -1).gather(-1, ids[0, 1:, None])
                loss = -picked.mean()
                grads = torch.autograd.grad(loss, params, allow_unused=True)
                norms = [
                    torch.linalg.vector_norm(g, ord=norm, dtype=torch.float64)
                    for g in grads
                    if g is not None
                ]
                scores.append(-torch.stack(norms).mean())
    finally:
        model.train(was_training)
    return torch.stack(scores).cpu()


# --------------------------------------------------------------------------------------------
# Token log-probabilities of whole texts, with and without a prefix (ReCaLL)
# --------------------------------------------------------------------------------------------


def text_token_log_probs(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str],
    batch_size: int = 16,
    device: torch.device | str | None = None,
) -> list[Tensor]:
    """``log p(x_t | bos, x_<t)`` for every token of every text: the text is the fragment of
    :func:`~lightning_info.methods.prism.functional.fragment_token_statistics` after an empty
    prompt (so its first token is scored after the tokenizer's bos, else eos, token), encoded as
    is (no whitespace moved). One float64 CPU row per text; ``-row.mean()`` is the text's loss."""
    texts = require_string_sequence(texts, "texts")
    return fragment_token_statistics(
        model, tokenizer, [""] * len(texts), texts, batch_size, device, False, False
    ).log_probs


def recall_token_log_probs(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str],
    prefix_texts: Sequence[str],
    separator: str = "\n\n",
    batch_size: int = 16,
    device: torch.device | str | None = None,
) -> tuple[list[Tensor], list[Tensor]]:
    """The two inputs of :func:`~lightning_info.methods.prism.attacks.recall_score`: the token
    log-probabilities of each text alone (:func:`text_token_log_probs`) and after the prefix
    ``P = separator.join(prefix_texts) + separator`` of non-member texts (ReCaLL's shots), as
    ``(log_probs, conditional_log_probs)``, float64 CPU rows over the *same* tokens of each text.

    The prefix is the prompt of
    :func:`~lightning_info.methods.prism.functional.fragment_token_statistics` and the text its
    fragment, tokenised separately and without moving whitespace, so the text's tokens are those
    it has alone. When prefix + longest text exceed the model's positions, the first shots are
    dropped until it fits (with a warning; MIMIR also keeps the last shots); if even one shot
    does not fit it raises.
    """
    texts = require_string_sequence(texts, "texts")
    shots = require_string_sequence(prefix_texts, "prefix_texts")
    if not texts:
        raise ValueError("`texts` is empty: give the texts to score.")
    if not shots or not all(shot.strip() for shot in shots):
        raise ValueError(
            "`prefix_texts` must hold one or more non-empty non-member texts (ReCaLL's prefix)."
        )
    if not isinstance(separator, str):
        raise TypeError(f"`separator` must be a string, got {type(separator).__name__}.")
    base = check_causal_lm(model, tokenizer)
    limit = getattr(base.config, "n_positions", None) or getattr(
        base.config, "max_position_embeddings", None
    )
    kept = list(shots)
    if limit is not None:
        longest = max(
            texts, key=lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])
        )
        while kept:
            prefix = separator.join(kept) + separator
            if len(encode_prompt_fragment(tokenizer, prefix, longest, False)[0]) <= limit:
                break
            kept.pop(0)
        if not kept:
            raise ValueError(
                f"Not even the last prefix text fits before the longest text in the model's "
                f"{limit} positions; give shorter prefix texts or score shorter texts."
            )
        if len(kept) < len(shots):
            warnings.warn(
                f"ReCaLL's prefix keeps the last {len(kept)} of {len(shots)} prefix texts: more "
                f"do not fit before the longest text in the model's {limit} positions.",
                stacklevel=2,
            )
    prefix = separator.join(kept) + separator
    plain = text_token_log_probs(model, tokenizer, texts, batch_size, device)
    conditional = fragment_token_statistics(
        model, tokenizer, [prefix] * len(texts), texts, batch_size, device, False, False
    ).log_probs
    return plain, conditional


# --------------------------------------------------------------------------------------------
# Neighbours (Mattern et al., 2023)
# --------------------------------------------------------------------------------------------


def make_neighbours(
    texts: Sequence[str],
    mask_filler: Any = None,
    n: int = 25,
    seed: int = 0,
    top_k: int = 10,
    mask_token: str = "<mask>",
) -> list[list[str]]:
    """Up to ``n`` neighbours of every text: copies with one word replaced by a word a masked
    language model finds likely there, the neighbours of Mattern et al. (2023).

    Each whitespace-separated word in turn is replaced by a mask and ``mask_filler`` proposes
    replacements, best first: a ``transformers`` fill-mask pipeline (called with its tokenizer's
    mask token and ``top_k``; its ``token_str`` are the words) or any callable taking the masked
    text (``mask_token`` marking the word) and returning a list of words. A replacement equal to
    the original word (ignoring case and surrounding spaces) or giving a text already made is
    skipped. Neighbours are taken by rank: every word's best replacement first, then every word's
    second best, and so on; within a rank the words come in an order shuffled with ``seed``. The
    paper ranks swaps by the filler's probability across positions and keeps the original word in
    view (dropout on its embedding instead of a mask); the rank order needs only the words, so
    any mask filler works.

    Without a mask filler this raises :class:`NeighbourhoodUnavailable` (a caller running several
    attacks catches it and skips this one). A text given fewer than ``n`` neighbours warns; one
    given none raises. One filler call per word of every text.
    """
    if mask_filler is None:
        raise NeighbourhoodUnavailable(
            "The neighbourhood attack needs a mask filler to write neighbours: pass a transformers "
            "fill-mask pipeline (pipeline('fill-mask', model='roberta-base')) or a callable "
            "masked text -> list of words; without one, skip this attack."
        )
    if not callable(mask_filler):
        raise TypeError(
            f"`mask_filler` must be a fill-mask pipeline or a callable, got "
            f"{type(mask_filler).__name__}."
        )
    texts = require_string_sequence(texts, "texts")
    if not texts:
        raise ValueError("`texts` is empty: give the texts to write neighbours for.")
    n = require_int(n, "n", 1)
    seed = require_int(seed, "seed", 0)
    top_k = require_int(top_k, "top_k", 1)
    fill = _word_filler(mask_filler, mask_token, top_k)
    generator = random.Random(seed)
    neighbours = []
    for i, text in enumerate(texts):
        words = list(re.finditer(r"\S+", text))
        if not words:
            raise ValueError(f"`texts[{i}]` has no word to replace; drop empty texts.")
        proposals = [fill(text[: w.start()] + fill.mask + text[w.end() :]) for w in words]
        order = list(range(len(words)))
        generator.shuffle(order)
        made: list[str] = []
        seen = {text}
        for rank in range(top_k):
            for j in order:
                if rank >= len(proposals[j]) or len(made) == n:
                    continue
                word = proposals[j][rank].strip()
                original = words[j].group()
                if not word or word.lower() == original.lower():
                    continue
                candidate = text[: words[j].start()] + word + text[words[j].end() :]
                if candidate not in seen:
                    seen.add(candidate)
                    made.append(candidate)
        if not made:
            raise ValueError(
                f"The mask filler proposed no replacement for any word of `texts[{i}]`; no "
                "neighbour can be made for it."
            )
        if len(made) < n:
            warnings.warn(
                f"`texts[{i}]` has {len(made)} neighbours, fewer than n={n}: its words get too "
                "few distinct replacements (raise top_k or lower n).",
                stacklevel=2,
            )
        neighbours.append(made)
    return neighbours


class _WordFiller:
    """Masked text -> candidate words, best first, from a pipeline or a plain callable."""

    def __init__(self, filler: Callable, mask: str, top_k: int, pipeline: bool) -> None:
        self.filler, self.mask, self.top_k, self.pipeline = filler, mask, top_k, pipeline

    def __call__(self, masked: str) -> list[str]:
        if self.pipeline:
            results = self.filler(masked, top_k=self.top_k)
            words = [result["token_str"] for result in results]
        else:
            words = self.filler(masked)
        if isinstance(words, str) or not isinstance(words, Sequence):
            raise TypeError(
                f"The mask filler must return a list of words, got {type(words).__name__}."
            )
        words = list(words)[: self.top_k]
        for word in words:
            if not isinstance(word, str):
                raise TypeError(
                    f"The mask filler must return strings, got {type(word).__name__} {word!r}."
                )
        return words


def _word_filler(mask_filler: Any, mask_token: str, top_k: int) -> _WordFiller:
    if getattr(mask_filler, "task", None) == "fill-mask":
        mask = getattr(getattr(mask_filler, "tokenizer", None), "mask_token", None)
        if not mask:
            raise ValueError("The fill-mask pipeline's tokenizer has no mask token.")
        return _WordFiller(mask_filler, mask, top_k, pipeline=True)
    if not isinstance(mask_token, str) or not mask_token:
        raise ValueError("`mask_token` must be a non-empty string marking the masked word.")
    return _WordFiller(mask_filler, mask_token, top_k, pipeline=False)


# --------------------------------------------------------------------------------------------
# Internals
# --------------------------------------------------------------------------------------------


def _id_rows(
    rows: Sequence[Sequence[int] | Tensor], name: str, vocab: int, minimum_length: int
) -> list[Tensor]:
    if isinstance(rows, Tensor) and rows.dim() == 1:
        raise ValueError(
            f"`{name}` is one 1-D tensor; give a list with one row of token ids per text "
            f"(e.g. [ids] for a single text)."
        )
    if isinstance(rows, (str, bytes)) or len(rows) == 0:
        raise ValueError(f"`{name}` is empty: give one row of token ids per text.")
    checked = []
    for i, row in enumerate(rows):
        ids = require_indices(row, f"{name}[{i}]", vocab)
        if ids.numel() < minimum_length:
            raise ValueError(
                f"`{name}[{i}]` has {ids.numel()} tokens; the loss of a text needs at least "
                f"{minimum_length} (the first token is only context)."
            )
        checked.append(ids)
    return checked
