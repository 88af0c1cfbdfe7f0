"""The language-model loaders and features refuse, at once and naming the fix, a missing local
folder, a hub id that cannot be fetched offline, a tokenizer of another model, a bare string of
prompts, and arguments of the wrong type. Nothing here reaches the network (HF_HUB_OFFLINE)."""

from __future__ import annotations

import functools
import socket

import pytest

from lightning_info.lm.corpus import module_of, stdlib_docstrings
from lightning_info.lm.features import response_features, tokenize_prompt_response
from lightning_info.lm.fine_tuner import CausalLMFineTuner
from lightning_info.lm.tiny_lm import (
    load_causal_lm,
    load_tokenizer,
    tiny_causal_lm,
    train_bpe_tokenizer,
)
from tests import tiny_lm

MISSING = (
    r"no such local folder; pass a folder holding config\.json or a hub id with network access"
)


@functools.cache
def _model():
    return tiny_causal_lm(tiny_lm.tokenizer(), n_layer=1, n_embd=16, n_head=2)


def _mismatched_folder(tmp_path):
    """A model with 260 embedding rows saved beside a tokenizer of 400 tokens."""
    tokenizer = train_bpe_tokenizer(["hello world"], vocab_size=260)
    small = tiny_causal_lm(tokenizer, n_layer=1, n_embd=8)
    small.save_pretrained(tmp_path / "model")
    tiny_lm.tokenizer().save_pretrained(tmp_path / "model")
    return str(tmp_path / "model")


def _empty_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    return str(tmp_path / "empty")


BAD_INPUT = [
    pytest.param(
        lambda: load_causal_lm("./no/such-model"),
        FileNotFoundError,
        rf"`tokenizer` './no/such-model': {MISSING}",
        id="load-relative-missing-folder",
    ),
    pytest.param(
        lambda tmp: load_causal_lm(str(tmp / "nothere")),
        FileNotFoundError,
        rf"nothere': {MISSING}",
        id="load-absolute-missing-folder",
    ),
    pytest.param(
        lambda: load_causal_lm("~/no-such-model-folder"),
        FileNotFoundError,
        MISSING,
        id="load-home-missing-folder",
    ),
    pytest.param(
        lambda: load_causal_lm("tests/no-such-model"),
        FileNotFoundError,
        MISSING,
        id="load-partly-existing-path",
    ),
    pytest.param(
        lambda: load_causal_lm("no/such-model"),
        FileNotFoundError,
        rf"{MISSING} \(HF_HUB_OFFLINE is set and the hub id is not in the local cache\)",
        id="load-uncached-hub-id-offline",
    ),
    pytest.param(
        lambda: CausalLMFineTuner("no/such-model"),
        FileNotFoundError,
        MISSING,
        id="fine-tuner-uncached-hub-id-offline",
    ),
    pytest.param(
        lambda tmp: load_tokenizer(_empty_folder(tmp)),
        FileNotFoundError,
        r"`tokenizer` '.*empty' is a folder holding none of \['tokenizer.json'",
        id="tokenizer-empty-folder",
    ),
    pytest.param(
        lambda: load_causal_lm(None),
        TypeError,
        r"`tokenizer` must be a local folder or a Hugging Face hub id \(a str\), got None",
        id="load-none",
    ),
    pytest.param(
        lambda: load_causal_lm(3),
        TypeError,
        r"got 3",
        id="load-integer",
    ),
    pytest.param(
        lambda tmp: load_causal_lm(_mismatched_folder(tmp)),
        ValueError,
        r"tokenizer does not belong to this model: a vocabulary/embedding mismatch, its "
        r"vocabulary has 400 tokens but the model's input embedding has only 260 rows",
        id="load-tokenizer-of-another-model",
    ),
    pytest.param(
        lambda tmp: CausalLMFineTuner(_mismatched_folder(tmp)),
        ValueError,
        r"vocabulary/embedding mismatch",
        id="fine-tuner-tokenizer-of-another-model",
    ),
    pytest.param(
        lambda: CausalLMFineTuner(3),
        TypeError,
        r"`model` must be a causal LM \(a torch.nn.Module\) or a local folder",
        id="fine-tuner-integer-model",
    ),
    pytest.param(
        lambda: CausalLMFineTuner(_model(), lora="r=8"),
        TypeError,
        r"`lora` must be a dict of peft.LoraConfig arguments or None, got str",
        id="fine-tuner-string-lora",
    ),
    pytest.param(
        lambda: tokenize_prompt_response(tiny_lm.tokenizer(), "Explain x.", "It is x."),
        TypeError,
        r"`prompts` must be a sequence of strings, one per row, got a single str",
        id="tokenize-bare-string",
    ),
    pytest.param(
        lambda: response_features(
            _model(), tiny_lm.tokenizer(), {"prompt": "Explain x.", "response": "abc"}
        ),
        TypeError,
        r"Column 'prompt' must hold one string per row, got a single string",
        id="features-bare-string-column",
    ),
    pytest.param(
        lambda: stdlib_docstrings("json"),
        TypeError,
        r"`modules` must be a sequence of module names, got the single string 'json'",
        id="docstrings-modules-bare-string",
    ),
    pytest.param(
        lambda: module_of(3),
        TypeError,
        r"`name` must be a qualified name \(str\), got 3",
        id="module-of-integer",
    ),
]


def test_a_missing_hub_id_fails_at_once_offline(monkeypatch):
    """Offline, a name that is no local folder and not in the cache is refused without a
    single connection attempt (a connection would fail this test, not wait on it)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def no_network(*args, **kwargs):
        raise AssertionError("the loader tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    with pytest.raises(FileNotFoundError, match=MISSING):
        CausalLMFineTuner("no/such-model")


def test_a_saved_folder_still_loads(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _model().save_pretrained(tmp_path / "lm")
    tiny_lm.tokenizer().save_pretrained(tmp_path / "lm")
    model, tokenizer = load_causal_lm(str(tmp_path / "lm"))
    assert len(tokenizer) == model.get_input_embeddings().weight.shape[0] == 400
    assert load_tokenizer(tmp_path / "lm").get_vocab() == tiny_lm.tokenizer().get_vocab()
