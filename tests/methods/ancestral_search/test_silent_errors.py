"""Node indices that used to be ignored or misread are refused (issue 35): a latent node that is
not in the DAG (out of range or negative) was dropped from the latent set, so the "marginal"
graph kept it; a float was truncated; a hidden node given as a string was read character by
character. Valid boundary input still works."""

from __future__ import annotations

import numpy as np
import pytest

from lightning_info.methods.ancestral_search.graphs import (
    ARROW,
    TAIL,
    from_edges,
    m_separated,
    mag_from_dag,
    pag_from_dag,
)


def _dag() -> np.ndarray:
    """0 -> 1 <- 3 -> 2: with 3 latent, the MAG over 0, 1, 2 is 0 -> 1 <-> 2."""
    dag = np.zeros((4, 4), dtype=bool)
    dag[0, 1] = dag[3, 1] = dag[3, 2] = True
    return dag


def _pag(latent):
    pytest.importorskip("causallearn")
    return pag_from_dag(_dag(), latent)


def _data(hidden):
    pytest.importorskip("pgmpy")
    from lightning_info.methods.ancestral_search.datamodule import BayesianNetworkDataModule

    return BayesianNetworkDataModule("asia", num_samples=50, hidden=hidden)


MARKS = from_edges(3, directed=[(0, 1)], bidirected=[(1, 2)])
RANGE = r"names node {}, but the graph has nodes 0\.\.{}"

BAD_INPUT = [
    pytest.param(
        lambda: mag_from_dag(_dag(), [4]),
        ValueError,
        "`latent` " + RANGE.format(4, 3),
        id="mag-latent-past-the-end",
    ),
    pytest.param(
        lambda: mag_from_dag(_dag(), [-1]),
        ValueError,
        "`latent` " + RANGE.format(-1, 3),
        id="mag-latent-negative",
    ),
    pytest.param(
        lambda: mag_from_dag(_dag(), [3.0]),
        TypeError,
        "`latent` must hold integer node indices, got 3.0",
        id="mag-latent-float",
    ),
    pytest.param(
        lambda: mag_from_dag(_dag(), [True]),
        TypeError,
        "`latent` must hold integer node indices, got True",
        id="mag-latent-bool",
    ),
    pytest.param(
        lambda: _pag([7]),
        ValueError,
        "`latent` " + RANGE.format(7, 3),
        id="pag-latent-past-the-end",
    ),
    pytest.param(
        lambda: m_separated(MARKS, 0, -1),
        ValueError,
        "`y` " + RANGE.format(-1, 2),
        id="m-separated-negative",
    ),
    pytest.param(
        lambda: m_separated(MARKS, 0, 2, [5]),
        ValueError,
        "`z` " + RANGE.format(5, 2),
        id="m-separated-past-the-end",
    ),
    pytest.param(
        lambda: m_separated(MARKS, "0", 2),
        TypeError,
        "`x` must hold integer node indices",
        id="m-separated-string",
    ),
    pytest.param(
        lambda: from_edges(3, directed=[(0, -1)]),
        ValueError,
        "`edge` " + RANGE.format(-1, 2),
        id="from-edges-negative",
    ),
    pytest.param(
        lambda: from_edges(3.0), TypeError, "`num_nodes` must be an int", id="from-edges-float-size"
    ),
    pytest.param(
        lambda: _data("either"),
        TypeError,
        r"`hidden` must be a list of node names; write hidden=\['either'\]",
        id="datamodule-hidden-string",
    ),
]


def test_the_last_node_as_latent_is_marginalised():
    mag = mag_from_dag(_dag(), [3])  # the last node, as -1 would have named it
    expected = np.zeros((3, 3), dtype=np.int8)
    expected[1, 0], expected[0, 1] = TAIL, ARROW  # 0 -> 1
    expected[1, 2] = expected[2, 1] = ARROW  # 1 <-> 2
    assert np.array_equal(mag, expected)
    assert np.array_equal(mag_from_dag(_dag(), np.array([3])), expected)  # numpy ints are fine
    assert mag_from_dag(_dag()).shape == (4, 4)
    assert m_separated(MARKS, 0, 2) and not m_separated(MARKS, 0, 2, [1])
    assert m_separated(MARKS, np.int64(0), [2])
