"""Shared set-up of the control tests: one torch thread."""

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Small-array loops run far faster on one thread than on two shared cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
