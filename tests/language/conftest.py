"""Shared fixtures: a BPE tokenizer and a two-layer GPT-2 built from standard-library docstrings."""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from lightning_info.language import (  # noqa: E402
    instruction_dataset,
    stdlib_docstrings,
    tiny_causal_lm,
    train_bpe_tokenizer,
)

CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}:{{ '\\n' }}{{ m['content'] }}"
    "{% if m['role'] == 'assistant' %}{{ eos_token }}{% endif %}{{ '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}assistant:{{ '\\n' }}{% endif %}"
)
"""A plain ``role:\\ncontent`` chat format whose assistant turns end with the eos token."""


@pytest.fixture(scope="session")
def pairs():
    return stdlib_docstrings()


@pytest.fixture(scope="session")
def tokenizer(pairs):
    return train_bpe_tokenizer([text for _, text in pairs[::3]], vocab_size=600)


@pytest.fixture(scope="session")
def model(tokenizer):
    return tiny_causal_lm(tokenizer, n_layer=2, n_embd=32, n_head=4, n_positions=256, seed=0)


@pytest.fixture(scope="session")
def dataset(pairs):
    """Eleven rows of varied length, short enough to fit ``max_length=256`` untruncated."""
    short = [pair for pair in pairs if len(pair[1]) < 300]
    return instruction_dataset(short[:: len(short) // 11][:11], seed=0)
