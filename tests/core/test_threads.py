"""torch_threads sets the thread count inside the block and restores it after, even on error."""

import pytest
import torch

from lightning_info.core.threads import torch_threads


def test_sets_and_restores_the_thread_count():
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), torch_threads(1):
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before
    with torch_threads(0):
        assert torch.get_num_threads() == before
    with pytest.raises(ValueError), torch_threads(-1):
        pass
