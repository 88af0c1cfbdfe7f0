"""Run a block with a given number of torch threads, restoring the former count afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from lightning_info.core.validation import require_int


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """``torch.set_num_threads(count)`` inside the block (``0`` leaves torch's setting)."""
    count = require_int(count, "count", 0)
    previous = torch.get_num_threads()
    if count > 0:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
