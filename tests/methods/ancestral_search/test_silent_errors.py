"""Node indices that used to be ignored or misread are refused (issue 35): a latent node that is
not in the DAG (out of range or negative) was dropped from the latent set, so the "marginal"
graph kept it; a float was truncated; a hidden node given as a string was read character by
character. Valid boundary input still works."""

from __future__ import annotations

import numpy as np
import pytest
import torch

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


def _data_seed(seed):
    pytest.importorskip("pgmpy")
    from lightning_info.methods.ancestral_search.datamodule import BayesianNetworkDataModule

    return BayesianNetworkDataModule("asia", num_samples=50, data_seed=seed)


def _data(hidden):
    pytest.importorskip("pgmpy")
    from lightning_info.methods.ancestral_search.datamodule import BayesianNetworkDataModule

    return BayesianNetworkDataModule("asia", num_samples=50, hidden=hidden)


def _csv(tmp_path, text: str):
    pytest.importorskip("pandas")
    from lightning_info.methods.ancestral_search.datamodule import BayesianNetworkDataModule

    path = tmp_path / "table.csv"
    path.write_text(text)
    return BayesianNetworkDataModule.from_csv(path)


def _from_table(table, **kwargs):
    from lightning_info.methods.ancestral_search.datamodule import BayesianNetworkDataModule

    return BayesianNetworkDataModule.from_table(table, **kwargs)


def _from_csv(path):
    from lightning_info.methods.ancestral_search.datamodule import BayesianNetworkDataModule

    return BayesianNetworkDataModule.from_csv(path)


def _bins(values):
    from lightning_info.methods.ancestral_search.datamodule import equal_frequency_bins

    return equal_frequency_bins(np.array(values), 2)


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
    pytest.param(
        lambda tmp_path: _csv(tmp_path, "A,B,A\n0,1,0\n1,0,1\n0,0,1\n1,1,0\n"),
        ValueError,
        r"table\.csv: the header repeats the column name\(s\) \['A'\]; give every column",
        id="csv-repeated-column",
    ),
    pytest.param(
        lambda tmp_path: _csv(tmp_path, "A,B\n0,1\n1,0\n0\n1,1\n"),
        ValueError,
        r"table\.csv, line 4: 1 field\(s\) for the header's 2 columns \(a truncated line\?\)",
        id="csv-truncated-line",
    ),
    pytest.param(
        lambda tmp_path: _csv(tmp_path, ""),
        ValueError,
        r"table\.csv has no header row",
        id="csv-empty",
    ),
    pytest.param(
        lambda tmp_path: _from_csv(tmp_path / "absent.csv"),
        FileNotFoundError,
        r"CSV file .*absent\.csv does not exist",
        id="csv-missing-file",
    ),
    pytest.param(
        lambda: _from_table(np.array([[0, 1], [1, 0], [0, 0]]), names="AB"),
        TypeError,
        r"`names` must be a list of column names, got the string 'AB'",
        id="from-table-names-string",
    ),
    pytest.param(
        lambda: _from_table(np.array([[0, 1], [1, 1], [0, 1]]), names=["u", "v"]),
        ValueError,
        r"column 'v' is constant",
        id="from-table-error-names-the-column",
    ),
    pytest.param(
        lambda: _bins([0.0, 1.0, np.inf, 2.0]),
        ValueError,
        r"a continuous column holds an infinite value",
        id="bins-infinity",
    ),
    pytest.param(
        lambda: _data_seed(True),
        TypeError,
        r"`data_seed` must be an int, got True",
        id="datamodule-data-seed-bool",
    ),
    pytest.param(
        lambda: _data_seed(-1),
        ValueError,
        r"`data_seed` must be >= 0, got -1",
        id="datamodule-data-seed-negative",
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


def test_a_csv_with_a_byte_order_mark_reads_as_without(tmp_path):
    plain = _csv(tmp_path, "A,B\n0,1\n1,0\n0,0\n1,1\n")
    marked = _csv(tmp_path, "\ufeffA,B\n0,1\n1,0\n0,0\n1,1\n\n")  # a blank last line too
    assert plain.names == marked.names == ["A", "B"]
    assert np.array_equal(plain.codes, marked.codes)
    assert plain.codes.tolist() == [[0, 1], [1, 0], [0, 0], [1, 1]]


def _resumable_search(tmp_path, codes, names):
    pytest.importorskip("causallearn")
    from lightning_info.core.trainers import quiet_trainer
    from lightning_info.methods.ancestral_search import AncestralGraphSearch

    data = _from_table(codes, names=names)
    trainer = quiet_trainer(max_epochs=1, accelerator="cpu", default_root_dir=tmp_path)
    model = AncestralGraphSearch()
    trainer.fit(model, datamodule=data)
    path = tmp_path / "search.ckpt"
    trainer.save_checkpoint(path)
    return path


def _toy_codes():
    from lightning_info.methods.ancestral_search.datamodule import (
        TOY_GRAPHS,
        monotone_binary_samples,
    )

    dag, latent = TOY_GRAPHS["confounded_pair"]
    observed = [v for v in range(len(dag)) if v not in latent]
    return monotone_binary_samples(dag, 2000, 0)[:, observed]


@pytest.mark.parametrize("change", ["columns-reordered", "other-rows", "column-dropped"])
def test_a_search_is_not_resumed_on_other_data(tmp_path, change):
    from lightning_info.core.trainers import quiet_trainer
    from lightning_info.methods.ancestral_search import AncestralGraphSearch

    pytest.importorskip("pgmpy")
    codes, names = _toy_codes(), ["X1", "X2", "X3", "X4"]
    path = _resumable_search(tmp_path, codes, names)
    other = {
        "columns-reordered": (codes[:, [1, 0, 2, 3]], [names[1], names[0], *names[2:]]),
        "other-rows": (codes[::-1][:1500], names),
        "column-dropped": (codes[:, :3], names[:3]),
    }[change]
    trainer = quiet_trainer(max_epochs=3, accelerator="cpu", default_root_dir=tmp_path)
    with pytest.raises(
        ValueError,
        match=r"the checkpoint holds a search state .*made from other "
        r"inputs",
    ):
        trainer.fit(
            AncestralGraphSearch(), datamodule=_from_table(other[0], names=other[1]), ckpt_path=path
        )
    loaded = AncestralGraphSearch.load_from_checkpoint(path)  # no data yet: checked at setup
    with pytest.raises(ValueError, match=r"made from other inputs"):
        quiet_trainer(max_epochs=3, accelerator="cpu", default_root_dir=tmp_path).fit(
            loaded, datamodule=_from_table(other[0], names=other[1])
        )


def test_a_search_resumes_on_its_own_data(tmp_path):
    from lightning_info.core.trainers import quiet_trainer
    from lightning_info.methods.ancestral_search import AncestralGraphSearch

    pytest.importorskip("pgmpy")
    codes, names = _toy_codes(), ["X1", "X2", "X3", "X4"]
    path = _resumable_search(tmp_path, codes, names)
    straight = AncestralGraphSearch()
    quiet_trainer(max_epochs=50, accelerator="cpu", default_root_dir=tmp_path).fit(
        straight, datamodule=_from_table(codes, names=names)
    )
    resumed = AncestralGraphSearch()
    quiet_trainer(max_epochs=50, accelerator="cpu", default_root_dir=tmp_path).fit(
        resumed, datamodule=_from_table(codes.copy(), names=list(names)), ckpt_path=path
    )
    assert np.array_equal(resumed.graph, straight.graph)
    assert torch.equal(resumed.types, straight.types)


def test_edge_type_steps_accept_a_nested_list_and_leave_it_unchanged():
    from lightning_info.methods.ancestral_search.functional import (
        best_conditioning_set,
        choose_move,
        edge_deltas,
        is_ancestral,
        marks_from_types,
        with_type,
    )

    types = [[0, 2, 0], [-2, 0, 1], [0, 1, 0]]  # 0 -> 1 - 2
    before = [row[:] for row in types]
    moved = with_type(types, np.int64(1), 2, 6)
    assert moved.tolist() == [[0, 2, 0], [-2, 0, 6], [0, 6, 0]] and types == before
    assert is_ancestral(moved)
    assert not is_ancestral([[0, 2, -2], [-2, 0, 2], [2, -2, 0]])  # 0 -> 1 -> 2 -> 0
    assert marks_from_types(types).tolist() == [[0, ARROW, 0], [TAIL, 0, TAIL], [0, TAIL, 0]]
    # score I'(X; Y | Z) = 1 for the pair (0, 1) and 0 otherwise: only 1 is kept for 0
    score = lambda x, y, z: 1.0 if {x[0], y[0]} == {0, 1} else 0.0  # noqa: E731
    assert best_conditioning_set(score, 0, [1, 2]) == (1,)
    moves = edge_deltas(types, score)
    assert all(isinstance(m[1], int) for m in moves) and types == before
    assert choose_move(types, [(1.0, 0, 1, -2)], set(), None) is None  # no negative delta
