"""Small causal language models that are built locally, and a loader for real ones.

:func:`train_bpe_tokenizer` trains a byte-level BPE tokenizer on a list of texts and
:func:`tiny_causal_lm` builds a randomly initialised GPT-2 around it (:func:`sized_causal_lm` from
a study's ``size`` settings); together they give an offline language model for tests and small
experiments. :func:`load_causal_lm` loads a pretrained model and tokenizer from a local folder or
the Hugging Face Hub, :func:`load_tokenizer` a tokenizer alone; a name that is neither an existing
folder nor a hub id that can be fetched or is cached fails at once, before any download is tried.
"""

from __future__ import annotations

import functools
import os
import re
import socket
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import torch

from lightning_info.core.validation import require_int

__all__ = [
    "BOS_TOKEN",
    "EOS_TOKEN",
    "PAD_TOKEN",
    "load_causal_lm",
    "load_tokenizer",
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


MODEL_FILES = ("config.json",)
"""A folder holding one of these is a model written by ``save_pretrained``."""
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")
"""A folder holding one of these is a tokenizer written by ``save_pretrained``."""
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")
_MISSING = "no such local folder; pass a folder holding config.json or a hub id with network access"


def _offline() -> bool:
    """Whether the Hugging Face libraries are told not to reach the hub."""
    flags = (os.environ.get(key, "") for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
    if any(flag.strip().upper() in {"1", "ON", "YES", "TRUE"} for flag in flags):
        return True
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


@functools.cache
def _hub_reachable() -> bool:
    """Whether a TCP connection to the hub's host opens within 3 s (assumed where a proxy is
    set, which a direct connection would not use)."""
    proxies = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
    if any(os.environ.get(key) for key in proxies):
        return True
    endpoint = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    port = endpoint.port or (80 if endpoint.scheme == "http" else 443)
    try:
        socket.create_connection((endpoint.hostname, port), timeout=3).close()
    except OSError:
        return False
    return True


def _cached(repo_id: str, files: tuple[str, ...], cache_dir: Any) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return any(
        isinstance(try_to_load_from_cache(repo_id, name, cache_dir=cache_dir), str)
        for name in files
    )


def pretrained_source(
    name_or_path: Any, what: str, files: tuple[str, ...] = MODEL_FILES, cache_dir: Any = None
) -> tuple[str, bool]:
    """``(source, local_files_only)`` for a ``from_pretrained`` call of ``name_or_path``, or a
    ``FileNotFoundError`` at once, before any download is tried.

    An existing folder must hold one of ``files``. Any other name is read as a hub id when it has
    that form (``name`` or ``owner/name``) and does not look like a path: a path (it starts with
    ``.``, ``/`` or ``~``, or its first component exists here) that does not exist is refused.
    A hub id is refused when it cannot be fetched and is not in the local cache: the hub is
    unreachable or ``HF_HUB_OFFLINE`` is set. ``local_files_only`` is ``True`` when only the
    cache can serve it (so that ``transformers`` does not retry the network first).
    """
    if isinstance(name_or_path, os.PathLike):
        name_or_path = os.fspath(name_or_path)
    if not isinstance(name_or_path, str) or not name_or_path.strip():
        raise TypeError(
            f"`{what}` must be a local folder or a Hugging Face hub id (a str), got "
            f"{name_or_path!r}."
        )
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        if not any((path / name).is_file() for name in files):
            raise FileNotFoundError(
                f"`{what}` {name_or_path!r} is a folder holding none of {list(files)}; pass a "
                "folder written by `save_pretrained` (a model's holds config.json) or a hub id "
                "with network access."
            )
        return str(path), False
    if path.exists():
        raise NotADirectoryError(f"`{what}` {name_or_path!r} is a file, not a folder: {_MISSING}.")
    first = Path(name_or_path.replace("\\", "/").split("/")[0]).expanduser()
    path_like = name_or_path.startswith((".", "/", "~", "\\")) or first.exists()
    if path_like or not _REPO_ID.match(name_or_path):
        raise FileNotFoundError(f"`{what}` {name_or_path!r}: {_MISSING}.")
    offline = _offline()
    if offline or not _hub_reachable():
        if _cached(name_or_path, files, cache_dir):
            return name_or_path, True
        reason = "HF_HUB_OFFLINE is set" if offline else "the hub is unreachable"
        raise FileNotFoundError(
            f"`{what}` {name_or_path!r}: {_MISSING} ({reason} and the hub id is not in the "
            "local cache)."
        )
    return name_or_path, False


def load_tokenizer(name_or_path: str, **kwargs: Any) -> Any:
    """``AutoTokenizer.from_pretrained(name_or_path, **kwargs)``, the source checked first
    (:func:`pretrained_source`); a tokenizer without a pad token gets its eos token as pad."""
    from transformers import AutoTokenizer

    source, local = pretrained_source(
        name_or_path, "tokenizer", TOKENIZER_FILES, kwargs.get("cache_dir")
    )
    tokenizer = AutoTokenizer.from_pretrained(source, **{"local_files_only": local, **kwargs})
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_causal_lm(
    name_or_path: str, tokenizer_name_or_path: str | None = None, **model_kwargs: Any
) -> tuple[Any, Any]:
    """Load ``(model, tokenizer)`` with the ``transformers`` auto classes.

    The model comes from ``AutoModelForCausalLM.from_pretrained(name_or_path, **model_kwargs)``
    (pass e.g. ``dtype=torch.bfloat16``, ``device_map="auto"`` or ``revision=...``) and is put
    in eval mode; the tokenizer from :func:`load_tokenizer` of ``tokenizer_name_or_path``
    (default ``name_or_path``). A tokenizer without a pad token gets its eos token as pad token,
    as is usual for causal LMs, so that it can pad batches. A Hub name is downloaded unless it
    is cached; a local folder written by ``save_pretrained`` is read offline. A missing folder,
    or a hub id that can be neither fetched nor read from the cache, raises
    ``FileNotFoundError`` at once (:func:`pretrained_source`); a tokenizer with more tokens than
    the model's input embedding has rows (another model's) raises ``ValueError``.
    """
    from transformers import AutoModelForCausalLM

    from lightning_info.lm.features import require_matching_tokenizer

    tokenizer = load_tokenizer(tokenizer_name_or_path or name_or_path)
    source, local = pretrained_source(
        name_or_path, "model", MODEL_FILES, model_kwargs.get("cache_dir")
    )
    model = AutoModelForCausalLM.from_pretrained(
        source, **{"local_files_only": local, **model_kwargs}
    )
    require_matching_tokenizer(model, tokenizer)
    return model.eval(), tokenizer
