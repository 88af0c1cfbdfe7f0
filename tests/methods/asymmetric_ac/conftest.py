"""Shared set-up of the control tests: one torch thread, Lightning's info lines silenced."""

import logging

import pytest


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_torch_thread):
    """Every test here runs on one torch thread (``tests/conftest.py``)."""


@pytest.fixture(autouse=True)
def _quiet_lightning():
    logger = logging.getLogger("lightning.pytorch")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)
