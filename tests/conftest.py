"""Test-session defaults: W&B never reaches the network and writes under a temporary folder;
a fixture that runs a module on one torch thread."""

import os
import tempfile

import pytest
import torch

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_DIR", tempfile.mkdtemp(prefix="lightning-info-wandb-"))
os.environ.setdefault("WANDB_QUIET", "true")


@pytest.fixture(scope="module")
def one_torch_thread():
    """Small-tensor loops run far faster on one thread than on two shared cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
