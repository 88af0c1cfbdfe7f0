"""Shared set-up of the scoring tests: one torch thread."""

import pytest


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_torch_thread):
    """Every test here runs on one torch thread (``tests/conftest.py``)."""
