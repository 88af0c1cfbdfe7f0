"""Small causal language models that are built locally, and a loader for real ones.

:func:`train_bpe_tokenizer` trains a byte-level BPE tokenizer on a list of texts and
:func:`tiny_causal_lm` builds a randomly initialised GPT-2 around it (:func:`sized_causal_lm` from
a study's ``size`` settings); together they give an offline language model for tests and small
experiments. :func:`load_causal_lm` loads a pretrained model and tokenizer from a local folder or
the Hugging Face Hub.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch

from lightning_info.core.validation import require_int

__all__ = [
    "BOS_TOKEN",
    "EOS_TOKEN",
    "PAD_TOKEN",
    "load_causal_lm",
    "sized_causal_lm",
    "tiny_causal_lm",
    "train_bpe_tokenizer",
]

PAD_TOKEN = "<|pad|>"
BOS_TOKEN = "<|bos|>"
EOS_TOKEN = "<|eos|>"


def train_bpe_tokenizer(texts: Iterable[str], vocab_size: int = 2000) -> Any:
    """Train a byte-level BPE tokenizer on ``texts`` and wrap it for ``transformers``.

    Returns a :class:`transformers.PreTrainedTokenizerFast` with ids ``0, 1, 2`` reserved for
    :data:`PAD_TOKEN`, :data:`BOS_TOKEN` and :data:`EOS_TOKEN`, set as its pad, bos and eos
    tokens, so that ``tokenizer(texts, padding=True)`` works. Like GPT-2's tokenizer it adds no
    special tokens when encoding, and as every byte has a token, ``decode(encode(text)) == text``
    for any string. ``vocab_size`` counts the special tokens and the 256 byte tokens; the result
    can be smaller when the texts hold fewer distinct merges.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = [PAD_TOKEN, BOS_TOKEN, EOS_TOKEN]
    vocab_size = require_int(vocab_size, "vocab_size", 256 + len(specials))
    texts = [texts] if isinstance(texts, str) else list(texts)
    if not texts or not all(isinstance(text, str) for text in texts):
        raise ValueError("`texts` must be a non-empty sequence of strings.")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token=PAD_TOKEN,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        clean_up_tokenization_spaces=False,
    )


def tiny_causal_lm(
    tokenizer: Any,
    n_layer: int = 2,
    n_embd: int = 64,
    n_head: int = 4,
    n_positions: int = 256,
    seed: int = 0,
) -> Any:
    """A randomly initialised :class:`transformers.GPT2LMHeadModel` for ``tokenizer``.

    The embedding has ``len(tokenizer)`` rows and the pad, bos and eos ids are the tokenizer's.
    Dropout is off, so training is deterministic given the data order. The weights are drawn
    from a generator seeded with ``seed``; the global torch random state is left untouched.
    """
    from transformers import GPT2Config, GPT2LMHeadModel

    n_layer = require_int(n_layer, "n_layer", 1)
    n_embd = require_int(n_embd, "n_embd", 1)
    n_head = require_int(n_head, "n_head", 1)
    n_positions = require_int(n_positions, "n_positions", 1)
    seed = require_int(seed, "seed", 0)
    if n_embd % n_head:
        raise ValueError(f"`n_embd` ({n_embd}) must be divisible by `n_head` ({n_head}).")
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=n_positions,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GPT2LMHeadModel(config)
    return model.eval()


def sized_causal_lm(
    tokenizer: Any, size: Mapping[str, int], *, n_positions: int = 256, seed: int = 0
) -> Any:
    """:func:`tiny_causal_lm` of a study's ``size`` settings: ``n_layer``, ``n_embd`` and ``n_head``
    are ``size["layers"]``, ``size["width"]`` and ``size["heads"]``."""
    return tiny_causal_lm(
        tokenizer,
        n_layer=size["layers"],
        n_embd=size["width"],
        n_head=size["heads"],
        n_positions=n_positions,
        seed=seed,
    )


def load_causal_lm(
    name_or_path: str, tokenizer_name_or_path: str | None = None, **model_kwargs: Any
) -> tuple[Any, Any]:
    """Load ``(model, tokenizer)`` with the ``transformers`` auto classes.

    The model comes from ``AutoModelForCausalLM.from_pretrained(name_or_path, **model_kwargs)``
    (pass e.g. ``dtype=torch.bfloat16``, ``device_map="auto"`` or ``revision=...``) and is put
    in eval mode; the tokenizer from ``AutoTokenizer.from_pretrained`` of
    ``tokenizer_name_or_path`` (default ``name_or_path``). A tokenizer without a pad token gets
    its eos token as pad token, as is usual for causal LMs, so that it can pad batches. A Hub
    name is downloaded unless it is cached; a local folder written by ``save_pretrained`` is
    read offline.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_name_or_path or name_or_path)
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(name_or_path, **model_kwargs)
    return model.eval(), tokenizer
