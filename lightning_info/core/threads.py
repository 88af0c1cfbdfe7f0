"""Run a block with a given number of torch threads or with deterministic algorithms, restoring
torch's former settings afterwards; the line that records them above a results table."""

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


@contextmanager
def deterministic_algorithms(enabled: bool = True) -> Iterator[None]:
    """``torch.use_deterministic_algorithms(True, warn_only=True)`` inside the block: an op with
    no deterministic implementation warns instead of failing a recipe."""
    previous = torch.are_deterministic_algorithms_enabled()
    previous_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    if enabled:
        torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous, warn_only=previous_warn)


def run_environment(deterministic: bool) -> str:
    """One line of what fixes a recipe's numbers besides its config and seeds: torch's version,
    its thread count and whether deterministic algorithms are on."""
    mode = "deterministic algorithms" if deterministic else "default algorithms"
    threads = torch.get_num_threads()
    return f"torch {torch.__version__}, {threads} thread{'s' * (threads != 1)}, {mode}"
