"""Test-session defaults: W&B and the Hugging Face hub never reach the network, W&B writes under a
temporary folder; a fixture that runs a module on one torch thread; a BPE tokenizer and a
two-layer GPT-2 built from standard-library docstrings, for the language-model tests."""

import logging
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_DIR", tempfile.mkdtemp(prefix="lightning-info-wandb-"))
os.environ.setdefault("WANDB_QUIET", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# processes the tests launch (torchrun, spawn) import the lab as the recipes do
RECIPES = str(Path(__file__).resolve().parents[1] / "recipes")
os.environ["PYTHONPATH"] = os.pathsep.join(
    [RECIPES, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
)

from lightning_info.lm.corpus import instruction_dataset, stdlib_docstrings  # noqa: E402
from lightning_info.lm.tiny_lm import tiny_causal_lm, train_bpe_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def one_torch_thread():
    """Small-tensor loops run far faster on one thread than on two shared cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


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


class _Messages(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def lightning_messages():
    """What ``rank_zero_info`` / ``rank_zero_warn`` reported during the test, as one string."""
    logger = logging.getLogger("lightning.pytorch")
    handler, level = _Messages(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def ddp_rows(tmp_path_factory):
    """Every plugin-table row, and the metric table, under ``Trainer(strategy="ddp", devices=2)``
    in two CPU processes started once by torchrun (``tests/ddp_plugin_rows.py``); the folder of
    their results."""
    out = tmp_path_factory.mktemp("ddp_rows")
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    command += ["--master-port", str(_free_port()), "-m", "tests.ddp_plugin_rows", str(out)]
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
