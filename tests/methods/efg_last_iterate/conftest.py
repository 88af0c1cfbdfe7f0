"""The games the tests share, walked once per session."""

import pytest


@pytest.fixture(scope="session")
def kuhn():
    pytest.importorskip("pyspiel")
    from lightning_info.methods.efg_last_iterate.game import game_tree

    return game_tree("kuhn_poker")


@pytest.fixture(scope="session")
def leduc():
    pytest.importorskip("pyspiel")
    from lightning_info.methods.efg_last_iterate.game import game_tree

    return game_tree("leduc_poker")
