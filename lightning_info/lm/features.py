"""Response-token features of a frozen causal language model.

Information-gain selection for supervised fine-tuning scores example ``i`` by the block
``X_i`` in ``R^{m_i x d}`` of the model's last-layer hidden states at the ``m_i`` tokens of its
response, the pre-logit embeddings ``h_t`` with ``logits_t = W h_t``. A prompt/response pair is
tokenised as the prompt followed by the response and an eos token
(:func:`tokenize_prompt_response`); :func:`response_features` runs the model over a data set
and returns the blocks as :class:`~lightning_info.core.blocks.TokenBlocks`, and
:func:`~lightning_info.core.blocks.pooled_features` (re-exported) reduces each block to one vector.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor
from tqdm.auto import tqdm

from lightning_info.core.blocks import TokenBlocks, pooled_features
from lightning_info.core.validation import require_int

__all__ = [
    "pooled_features",
    "require_matching_tokenizer",
    "response_features",
    "tokenize_prompt_response",
]


def tokenize_prompt_response(
    tokenizer: Any,
    prompts: Sequence[str],
    responses: Sequence[str],
    max_length: int = 256,
    chat_template: bool = False,
    separator: str = "\n",
) -> dict[str, Tensor]:
    """Token ids of ``prompt + response`` rows, padded, with a mask of the response tokens.

    Returns ``input_ids``, ``attention_mask`` and ``response_mask``, long tensors of shape
    ``(rows, longest row)``, padded on ``tokenizer.padding_side`` with its pad id (else its eos
    id, else 0; padding is masked out either way). ``response_mask`` is 1 exactly at the tokens
    that the model is trained to produce:

    * ``chat_template=False``: ``prompt + separator`` is encoded with the tokenizer's own
      special tokens (e.g. a leading bos, where the tokenizer adds one), the response without
      any, and the tokenizer's eos id is appended to the response. The response tokens are the
      response's own tokens and that eos, so they decode to ``response + eos_token``.
    * ``chat_template=True``: the conversation ``[user: prompt, assistant: response]`` is
      rendered with ``tokenizer.apply_chat_template`` and encoded without added special tokens.
      The rendered prompt with the generation prompt must be a prefix of the rendered
      conversation. The response tokens are those overlapping the characters from the start of
      the response text to the end of the rendered text less trailing whitespace: the response
      and the template's end-of-turn marker. Needs a fast tokenizer (for character offsets).

    Rows longer than ``max_length`` tokens lose their end, so the response is cut from the
    right; a row whose prompt leaves no room for a single response token raises ``ValueError``,
    as does an empty or whitespace-only response, naming the row.
    """
    rows = _encode_rows(tokenizer, prompts, responses, max_length, chat_template, separator)
    return _pad(rows, pad_token_id(tokenizer), tokenizer.padding_side)


def response_features(
    model: Any,
    tokenizer: Any,
    dataset: Any,
    prompt_column: str = "prompt",
    response_column: str = "response",
    batch_size: int = 16,
    max_length: int = 256,
    chat_template: bool = False,
    progress: bool = True,
    device: torch.device | str | None = None,
    separator: str = "\n",
    curvature_weights: bool = False,
    project: Callable[[Tensor], Tensor] | None = None,
) -> TokenBlocks | tuple[TokenBlocks, Tensor]:
    """Last-layer hidden states of ``model`` at the response tokens of every row of ``dataset``.

    Block ``i`` of the result is ``X_i = H_i[R_i]``, the rows of the final hidden states
    ``H_i`` (the ``last_hidden_state`` of the model's decoder stack, ``model.base_model``) at the
    response positions ``R_i`` of :func:`tokenize_prompt_response` (same ``max_length``,
    ``chat_template`` and ``separator``). For GPT-2 and other Hugging Face causal LMs it is taken
    after the final layer norm, so ``logits = lm_head(H_i)``: ``X_i`` holds the pre-logit
    embeddings of the response tokens. Blocks are float32 on the CPU, one per row in
    dataset order.

    ``dataset`` is a :class:`datasets.Dataset` or a mapping of column names to lists of
    strings. ``model`` is a causal LM (``model.can_generate()`` and not an encoder-decoder),
    possibly wrapped by ``peft``; it runs in eval mode under :func:`torch.no_grad` on ``device``
    (default: the device of its input embedding) and its train/eval mode is restored afterwards.
    Rows are batched longest first to reduce padding; position ids are computed from the
    attention mask, so left and right padding give the same features.

    With ``curvature_weights=True`` it also returns one float32 weight per token row, the softmax
    curvature ``p (1 - p)`` of the token the model predicts there (``p`` the largest next-token
    probability of ``lm_head(h_t)``), the scalar by which the linearised SFT Hessian weighs
    ``h_t h_t^T`` (pass them as ``token_weights`` to the selection). ``project`` (e.g. FisherSFT's
    ``FeatureSketch``) maps each batch's float32 response rows ``(n, d)`` to ``(n, k)`` on the
    model's device before they are kept, so the pool is held at ``k`` columns; the curvature
    weights are those of the unprojected rows. Raises ``ValueError``
    for a model that is not a causal LM, a tokenizer with more tokens than the model's
    embedding has rows, missing columns, an empty data set or an empty response.
    """
    batch_size = require_int(batch_size, "batch_size", 1)
    base = check_causal_lm(model, tokenizer)
    prompts, responses = _columns(dataset, prompt_column, response_column)
    rows = _encode_rows(tokenizer, prompts, responses, max_length, chat_template, separator)
    if device is None:
        device = base.get_input_embeddings().weight.device
    # The decoder stack without the LM head (GPT2Model, LlamaModel, ...): its last_hidden_state
    # is the pre-logit embedding, with no vocabulary-sized logits computed. peft's adapters live
    # inside it. Reading it directly also avoids `output_hidden_states`, which is recorded by
    # hooks that do not survive pickling the model into ddp_spawn workers.
    backbone = base.base_model
    head = base.get_output_embeddings() if curvature_weights else None
    blocks: list[Tensor | None] = [None] * len(rows)
    weights: list[Tensor | None] = [None] * len(rows)
    was_training = model.training
    model.eval()
    bar = tqdm(total=len(rows), desc="response features", unit="example", disable=not progress)
    try:
        with torch.no_grad():
            for chunk, batch in padded_batches(rows, tokenizer, batch_size):
                mask = batch["attention_mask"].to(device)
                hidden = backbone(
                    input_ids=batch["input_ids"].to(device),
                    attention_mask=mask,
                    position_ids=(mask.cumsum(-1) - 1).clamp(min=0),
                    use_cache=False,
                    return_dict=True,
                ).last_hidden_state
                response = batch["response_mask"].bool()
                at_response = hidden[response.to(device)]
                sizes = response.sum(1).tolist()
                kept = at_response.float() if project is None else project(at_response.float())
                for i, block in zip(chunk, kept.cpu().split(sizes)):
                    blocks[i] = block
                if head is not None:
                    curvature = _predicted_token_curvature(head, at_response)
                    for i, weight in zip(chunk, curvature.split(sizes)):
                        weights[i] = weight
                bar.update(len(chunk))
    finally:
        bar.close()
        model.train(was_training)
    features = TokenBlocks.from_list(blocks)
    return (features, torch.cat(weights)) if curvature_weights else features


def _predicted_token_curvature(head: torch.nn.Module, hidden: Tensor, rows: int = 512) -> Tensor:
    """``p (1 - p)`` of the most probable next token at each row of ``hidden``, on the CPU; the
    vocabulary-sized logits exist for ``rows`` rows at a time."""
    parts = []
    for part in hidden.split(rows):
        top = torch.softmax(head(part).float(), dim=-1).amax(-1)
        parts.append((top * (1 - top)).cpu())
    return torch.cat(parts) if parts else hidden.new_zeros(0, dtype=torch.float32).cpu()


def _unwrap(model: Any) -> Any:
    """The model inside a ``peft`` wrapper, or ``model`` itself."""
    get_base_model = getattr(model, "get_base_model", None)
    return get_base_model() if callable(get_base_model) else model


def cache_argument(model: Any) -> str:
    """The keyword by which a Hugging Face causal LM (or its ``peft`` wrapper) takes a key/value
    cache: transformers 5 names it ``cache``, earlier versions ``past_key_values``."""
    forward = inspect.signature(_unwrap(model).forward).parameters
    return "cache" if "cache" in forward else "past_key_values"


def output_cache(output: Any) -> Any:
    """The key/value cache a causal LM's output returns, under either name."""
    return getattr(output, "cache", None) or output.past_key_values


def check_causal_lm(model: Any, tokenizer: Any = None) -> Any:
    """The base model (inside any ``peft`` wrapper) of a decoder-only causal LM; with a
    ``tokenizer``, also checks that every token has a row in the model's input embedding."""
    base = _unwrap(model)
    config = getattr(base, "config", None)
    can_generate = getattr(base, "can_generate", None)
    if config is None or not callable(can_generate):
        raise TypeError(
            f"Expected a transformers causal language model, got {type(model).__name__}."
        )
    if getattr(config, "is_encoder_decoder", False):
        raise ValueError(
            f"{type(base).__name__} is an encoder-decoder model; response features need a "
            "decoder-only causal LM (e.g. loaded with AutoModelForCausalLM)."
        )
    if not can_generate():
        raise ValueError(
            f"{type(base).__name__} is not a causal language model (it has no generation head); "
            "load the checkpoint with AutoModelForCausalLM."
        )
    if tokenizer is not None:
        require_matching_tokenizer(base, tokenizer)
    return base


def require_matching_tokenizer(model: Any, tokenizer: Any) -> None:
    """Raise unless every token id of ``tokenizer`` has a row in ``model``'s input embedding (a
    tokenizer of another model would index past it). A model without ``get_input_embeddings``
    is not checked."""
    get_embeddings = getattr(_unwrap(model), "get_input_embeddings", None)
    embeddings = get_embeddings() if callable(get_embeddings) else None
    weight = getattr(embeddings, "weight", None)
    if weight is None or tokenizer is None:
        return
    rows, vocabulary = weight.shape[0], len(tokenizer)
    if vocabulary > rows:
        raise ValueError(
            f"The tokenizer does not belong to this model: a vocabulary/embedding mismatch, its "
            f"vocabulary has {vocabulary} tokens but the model's input embedding has only {rows} "
            f"rows, so token ids {rows}..{vocabulary - 1} have no embedding. Use the tokenizer "
            "saved with this model, or call "
            "`model.resize_token_embeddings(len(tokenizer))` after adding tokens to it."
        )


def _columns(dataset: Any, prompt_column: str, response_column: str) -> tuple[list, list]:
    if isinstance(dataset, Mapping):
        present = list(dataset.keys())
    else:
        present = list(getattr(dataset, "column_names", None) or [])
    missing = [c for c in (prompt_column, response_column) if c not in present]
    if missing:
        raise ValueError(f"Column(s) {missing} not found; the data set has columns {present}.")
    for column in (prompt_column, response_column):
        if isinstance(dataset[column], (str, bytes)):
            raise TypeError(
                f"Column {column!r} must hold one string per row, got a single string; wrap it "
                "in a list: {column: [text]}."
            )
    prompts, responses = list(dataset[prompt_column]), list(dataset[response_column])
    if len(prompts) != len(responses):
        raise ValueError(
            f"Columns {prompt_column!r} and {response_column!r} differ in length "
            f"({len(prompts)} vs {len(responses)})."
        )
    return prompts, responses


def pad_token_id(tokenizer: Any) -> int:
    """The tokenizer's padding id: its pad token, else its end-of-sequence token, else 0."""
    for token_id in (tokenizer.pad_token_id, tokenizer.eos_token_id):
        if token_id is not None:
            return int(token_id)
    return 0


def pad_token_rows(
    rows: Sequence[Sequence[int]], value: int, left: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token rows padded with ``value`` to the longest, on the right (or the ``left``, where a
    causal LM's next token follows the last column): ``(ids, mask)``, both ``(len(rows), width)``
    long tensors, ``mask`` 1 at the rows' own tokens."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), int(value), dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, r in enumerate(rows):
        span = slice(width - len(r), width) if left else slice(0, len(r))
        ids[i, span], mask[i, span] = torch.tensor(list(r), dtype=torch.long), 1
    return ids, mask


def _encode_rows(
    tokenizer: Any,
    prompts: Sequence[str],
    responses: Sequence[str],
    max_length: int,
    chat_template: bool,
    separator: str,
) -> list[tuple[list[int], int, int]]:
    """Per row: token ids and the ``[start, end)`` token span of the response, truncated."""
    max_length = require_int(max_length, "max_length", 1)
    for name, values in (("prompts", prompts), ("responses", responses)):
        if isinstance(values, (str, bytes)):
            raise TypeError(
                f"`{name}` must be a sequence of strings, one per row, got a single "
                f"{type(values).__name__}; wrap it in a list: [text]."
            )
    if len(prompts) != len(responses):
        raise ValueError(
            f"Got {len(prompts)} prompts but {len(responses)} responses; they must pair up."
        )
    if len(prompts) == 0:
        raise ValueError("The data set is empty; there are no responses to embed.")
    if chat_template and not getattr(tokenizer, "is_fast", False):
        raise TypeError("`chat_template=True` needs a fast tokenizer (for character offsets).")
    rows = []
    for index, (prompt, response) in enumerate(zip(prompts, responses)):
        if not isinstance(prompt, str) or not isinstance(response, str):
            raise TypeError(f"Row {index}: prompt and response must be strings.")
        if not response.strip():
            raise ValueError(f"Row {index}: the response is empty or whitespace only.")
        if chat_template:
            ids, start, end = _encode_chat(tokenizer, prompt, response, index)
        else:
            ids, start, end = _encode_plain(tokenizer, prompt, response, separator, index)
        if start >= max_length:
            raise ValueError(
                f"Row {index}: the prompt takes {start} tokens, leaving no room for the response "
                f"within max_length={max_length}; raise max_length or shorten the prompt."
            )
        rows.append((ids[:max_length], start, min(end, max_length)))
    return rows


def _encode_plain(
    tokenizer: Any, prompt: str, response: str, separator: str, index: int
) -> tuple[list[int], int, int]:
    prompt_ids = list(tokenizer(prompt + separator, add_special_tokens=True)["input_ids"])
    response_ids = list(tokenizer(response, add_special_tokens=False)["input_ids"])
    if not response_ids:
        raise ValueError(f"Row {index}: the response has no tokens after tokenisation.")
    if tokenizer.eos_token_id is not None:
        response_ids.append(int(tokenizer.eos_token_id))
    return prompt_ids + response_ids, len(prompt_ids), len(prompt_ids) + len(response_ids)


def _encode_chat(
    tokenizer: Any, prompt: str, response: str, index: int
) -> tuple[list[int], int, int]:
    user = [{"role": "user", "content": prompt}]
    head = tokenizer.apply_chat_template(user, tokenize=False, add_generation_prompt=True)
    full = tokenizer.apply_chat_template(
        [*user, {"role": "assistant", "content": response}], tokenize=False
    )
    if not full.startswith(head):
        raise ValueError(
            f"Row {index}: the chat template does not render the prompt (with the generation "
            "prompt) as a prefix of the whole conversation, so the response cannot be located."
        )
    first = full.find(response, len(head))
    if first < 0:
        first = full.find(response.strip(), len(head))
    if first < 0:
        raise ValueError(f"Row {index}: the chat template does not render the response verbatim.")
    last = len(full.rstrip())
    encoding = tokenizer(full, add_special_tokens=False, return_offsets_mapping=True)
    inside = [t for t, (a, b) in enumerate(encoding["offset_mapping"]) if b > first and a < last]
    if not inside:
        raise ValueError(f"Row {index}: the response has no tokens after tokenisation.")
    return list(encoding["input_ids"]), inside[0], inside[-1] + 1


def padded_batches(
    rows: Sequence[tuple[list[int], int, int]], tokenizer: Any, batch_size: int
) -> Iterator[tuple[list[int], dict[str, Tensor]]]:
    """``(row indices, padded batch)`` over ``rows`` ``(ids, start, end)``, longest first to
    reduce padding, padded on the tokenizer's side; ``response_mask`` marks ``[start, end)``."""
    order = sorted(range(len(rows)), key=lambda i: -len(rows[i][0]))
    pad_id, padding_side = pad_token_id(tokenizer), tokenizer.padding_side
    for first in range(0, len(order), batch_size):
        chunk = order[first : first + batch_size]
        yield chunk, _pad([rows[i] for i in chunk], pad_id, padding_side)


def _pad(
    rows: Sequence[tuple[list[int], int, int]], pad_id: int, padding_side: str
) -> dict[str, Tensor]:
    width = max(len(ids) for ids, _, _ in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    response_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for r, (ids, start, end) in enumerate(rows):
        shift = width - len(ids) if padding_side == "left" else 0
        input_ids[r, shift : shift + len(ids)] = torch.tensor(ids, dtype=torch.long)
        attention_mask[r, shift : shift + len(ids)] = 1
        response_mask[r, shift + start : shift + end] = 1
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "response_mask": response_mask,
    }
