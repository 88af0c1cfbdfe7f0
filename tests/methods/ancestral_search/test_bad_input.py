import gzip
import math

import numpy as np
import pytest

from lightning_info.methods.ancestral_search.datamodule import BayesianNetworkDataModule

pytest.importorskip("pgmpy")

GOOD_BIF = """network tiny {
}
variable A {
  type discrete [ 2 ] { a0, a1 };
}
variable B {
  type discrete [ 2 ] { b0, b1 };
}
probability ( A ) {
  table 0.4, 0.6 ;
}
probability ( B | A ) {
  (a0) 0.9, 0.1;
  (a1) 0.2, 0.8;
}
"""


def test_a_valid_bif_file_loads_plain_and_gzipped(tmp_path):
    (tmp_path / "tiny.bif").write_text(GOOD_BIF)
    with gzip.open(tmp_path / "tiny.bif.gz", "wt") as handle:
        handle.write(GOOD_BIF)
    for name in ("tiny.bif", "tiny.bif.gz"):
        data = BayesianNetworkDataModule(str(tmp_path / name), num_samples=200)
        assert data.names == ["A", "B"] and data.dag.tolist() == [[False, True], [False, False]]


@pytest.mark.parametrize(
    "text",
    ["this is not a bif file\n", GOOD_BIF.split("probability")[0]],
    ids=["garbage", "no-probability-block"],
)
def test_a_malformed_bif_file_is_named(tmp_path, text):
    path = tmp_path / "broken.bif"
    path.write_text(text)
    with pytest.raises(ValueError, match=r"broken\.bif could not be parsed as a BIF"):
        BayesianNetworkDataModule(str(path), num_samples=20)


def test_a_missing_bif_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"BIF file .*absent\.bif does not exist"):
        BayesianNetworkDataModule(str(tmp_path / "absent.bif"), num_samples=20)


def test_from_table_needs_one_name_per_column():
    table = np.array([[0, 1, 0], [1, 0, 1], [0, 0, 1], [1, 1, 0]])
    with pytest.raises(ValueError, match=r"2 names for a table of 3 columns; give one name"):
        BayesianNetworkDataModule.from_table(table, names=["u", "v"])
    with pytest.raises(ValueError, match=r"4 names for a table of 3 columns"):
        BayesianNetworkDataModule.from_table(table, names=["u", "v", "w", "x"])
    with pytest.raises(ValueError, match=r"names \['u'\] repeat"):
        BayesianNetworkDataModule.from_table(table, names=["u", "v", "u"])
    with pytest.raises(ValueError, match="2-D table"):
        BayesianNetworkDataModule.from_table(np.array([0, 1, 0, 1]))
    assert BayesianNetworkDataModule.from_table(table).names == ["X1", "X2", "X3"]


from lightning_info.methods.ancestral_search import (  # noqa: E402
    InformationCache,
    from_causallearn,
    graph_scores,
    pag_from_mag,
    shifted_information,
    to_causallearn,
    to_networkx,
)
from lightning_info.methods.ancestral_search.functional import (  # noqa: E402
    best_conditioning_set,
    choose_move,
    edge_deltas,
    edge_step,
    fci_pag,
    initial_graph,
    is_ancestral,
    marks_from_types,
    node_step,
    with_type,
)
from lightning_info.methods.ancestral_search.graphs import from_edges  # noqa: E402

CODES = np.array([[0, 1, 0], [1, 0, 1], [0, 0, 1], [1, 1, 0], [0, 1, 1]])


def _mag():
    return from_edges(3, directed=[(0, 1)], bidirected=[(1, 2)])


BAD_INPUT = [
    pytest.param(
        lambda: shifted_information(CODES, 0, 1, 2, negative_info="no"),
        TypeError,
        r"`negative_info` must be True or False, got 'no'",
        id="shifted-information-negative-info-str",
    ),
    pytest.param(
        lambda: shifted_information(CODES, 0.0, 1),
        TypeError,
        r"`x` must hold integer column indices, got 0.0",
        id="shifted-information-float-column",
    ),
    pytest.param(
        lambda: shifted_information(CODES, True, 1),
        TypeError,
        r"`x` must hold column indices, got True",
        id="shifted-information-bool-column",
    ),
    pytest.param(
        lambda: shifted_information(CODES, 0, 3),
        ValueError,
        r"`y` index 3 is out of range for 3 columns",
        id="shifted-information-column-out-of-range",
    ),
    pytest.param(
        lambda: shifted_information(CODES.astype(float), 0, 1),
        ValueError,
        r"`codes` must hold integers \(got dtype float64\)",
        id="shifted-information-float-codes",
    ),
    pytest.param(
        lambda: shifted_information(np.zeros((0, 3), dtype=int), 0, 1),
        ValueError,
        r"`codes` must be a 2-D \(n_samples, n_variables\) array, got shape \(0, 3\)",
        id="shifted-information-empty",
    ),
    pytest.param(
        lambda: InformationCache(CODES, negative_info="false"),
        TypeError,
        r"`negative_info` must be True or False, got 'false'",
        id="information-cache-negative-info-str",
    ),
    pytest.param(
        lambda: InformationCache(CODES)(1.0, 2),
        TypeError,
        r"`x` must hold integer column indices, got 1.0",
        id="information-cache-float-column",
    ),
    pytest.param(
        lambda: InformationCache(CODES, method="NML"),
        ValueError,
        r"`method` must be one of \('nml', 'bic'\), got 'NML'",
        id="information-cache-method-case",
    ),
    pytest.param(
        lambda: graph_scores(_mag().astype(bool), _mag()),
        TypeError,
        r"`marks` must be an int edge-mark matrix .* got a bool matrix",
        id="graph-scores-bool-marks",
    ),
    pytest.param(
        lambda: graph_scores(_mag(), np.zeros((4, 4), dtype=np.int8)),
        ValueError,
        r"the graphs have 3 and 4 nodes",
        id="graph-scores-size-mismatch",
    ),
    pytest.param(
        lambda: graph_scores(np.full((3, 3), np.nan), _mag()),
        ValueError,
        r"`marks` may hold only 0 \(none\), 1 \(tail\), 2 \(arrow\) and 3 \(circle\)",
        id="graph-scores-nan-marks",
    ),
    pytest.param(
        lambda: pag_from_mag(from_edges(3, nondirected=[(0, 1)])),
        ValueError,
        r"`mag` must hold directed and bidirected edges only",
        id="pag-from-mag-circles",
    ),
    pytest.param(
        lambda: pag_from_mag(from_edges(3, directed=[(0, 1), (1, 2), (2, 0)])),
        ValueError,
        r"directed cycle",
        id="pag-from-mag-cycle",
    ),
    pytest.param(
        lambda: to_causallearn(_mag(), names="ABC"),
        TypeError,
        r"`names` must be a sequence of 3 names, got the single string 'ABC'",
        id="to-causallearn-names-str",
    ),
    pytest.param(
        lambda: to_causallearn(_mag(), names=[1, "1", 2]),
        ValueError,
        r"`names` must be 3 distinct names; \['1'\] repeat",
        id="to-causallearn-names-repeat",
    ),
    pytest.param(
        lambda: to_networkx(_mag(), names=["A", "B"]),
        ValueError,
        r"`names` must be 3 distinct names, got 2",
        id="to-networkx-names-short",
    ),
    pytest.param(
        lambda: to_networkx(_mag() + 0.5),
        ValueError,
        r"`marks` may hold only 0",
        id="to-networkx-float-marks",
    ),
    pytest.param(
        lambda: from_causallearn("graph"),
        TypeError,
        r"`graph` must be a causal-learn graph",
        id="from-causallearn-str",
    ),
    pytest.param(
        lambda: from_causallearn(type("G", (), {"graph": np.array([[0, 1.5], [-1, 0]])})()),
        ValueError,
        r"endpoint codes other than -1, 1, 2",
        id="from-causallearn-float-code",
    ),
    pytest.param(
        lambda: marks_from_types(TYPES.astype(bool)),
        TypeError,
        r"`types` must be an int edge-type matrix .* got a bool matrix",
        id="marks-from-types-bool",
    ),
    pytest.param(
        lambda: marks_from_types(np.array([[0, 3], [3, 0]])),
        ValueError,
        r"`types` may hold only 0 \(none\), 1 \(undirected\), 2 / -2",
        id="marks-from-types-marks",
    ),
    pytest.param(
        lambda: marks_from_types(np.zeros((2, 3), dtype=int)),
        ValueError,
        r"`types` must be a square \(p, p\) matrix, got shape \(2, 3\)",
        id="marks-from-types-not-square",
    ),
    pytest.param(
        lambda: is_ancestral(np.array([[0, 2], [2, 0]])),
        ValueError,
        r"`types` is not consistent: types\[b, a\] must be -2",
        id="is-ancestral-both-forward",
    ),
    pytest.param(
        lambda: with_type(TYPES, True, 2, 2),
        TypeError,
        r"`x` must be an integer index, got bool True",
        id="with-type-bool-node",
    ),
    pytest.param(
        lambda: with_type(TYPES, -1, 1, 2),
        ValueError,
        r"`x` must be an index in \[0, 3\), got -1",
        id="with-type-negative-node",
    ),
    pytest.param(
        lambda: with_type(TYPES, 1, 1, 2),
        ValueError,
        r"`x` and `y` must be two nodes, got 1 twice",
        id="with-type-self-loop",
    ),
    pytest.param(
        lambda: with_type(TYPES, 0, 1, 3),
        ValueError,
        r"`kind` must be one of \(0, 1, 2, -2, 6\)",
        id="with-type-unknown-kind",
    ),
    pytest.param(
        lambda: choose_move(TYPES, [(math.nan, 0, 1, -2)], set(), None),
        ValueError,
        r"a move's delta must be finite, got nan",
        id="choose-move-nan-delta",
    ),
    pytest.param(
        lambda: choose_move(TYPES, [(-1.0, 0.0, 1, -2)], set(), None),
        TypeError,
        r"`x` must be an integer index, got float 0.0",
        id="choose-move-float-node",
    ),
    pytest.param(
        lambda: choose_move(TYPES, [(-1.0, 0, 1, -2)], [], None),
        TypeError,
        r"`seen` must be a set of visited matrices' tobytes\(\), got list",
        id="choose-move-seen-list",
    ),
    pytest.param(
        lambda: edge_deltas(TYPES, _score, [(0, -1)]),
        ValueError,
        r"`y` must be an index in \[0, 3\), got -1",
        id="edge-deltas-negative-node",
    ),
    pytest.param(
        lambda: edge_deltas(TYPES, _score, [(0, 2)]),
        ValueError,
        r"`edges` \[\(0, 2\)\] are not edges of `types`",
        id="edge-deltas-not-an-edge",
    ),
    pytest.param(
        lambda: edge_deltas(TYPES, lambda x, y, z: math.nan),
        ValueError,
        r"score\(\(0,\), \(1,\), \(\)\) returned nan",
        id="edge-deltas-nan-score",
    ),
    pytest.param(
        lambda: edge_step(TYPES, _score, -1),
        ValueError,
        r"`max_moves` must be >= 0, got -1",
        id="edge-step-negative-moves",
    ),
    pytest.param(
        lambda: edge_step(np.array([[0, 3], [3, 0]]), _score),
        ValueError,
        r"`types` may hold only",
        id="edge-step-marks",
    ),
    pytest.param(
        lambda: node_step(TYPES, _score, 1.5),
        TypeError,
        r"`max_rounds` must be an int, got 1.5",
        id="node-step-float-rounds",
    ),
    pytest.param(
        lambda: node_step(TYPES, lambda x, y, z: math.nan),
        ValueError,
        r"returned nan; the score must return a finite number",
        id="node-step-nan-score",
    ),
    pytest.param(
        lambda: best_conditioning_set(_score, 0.0, [1, 2]),
        TypeError,
        r"`target` must be an integer index, got float 0.0",
        id="best-conditioning-set-float-target",
    ),
    pytest.param(
        lambda: best_conditioning_set(_score, 0, [0, 1]),
        ValueError,
        r"`candidates` must be distinct columns other than `target` 0",
        id="best-conditioning-set-target-candidate",
    ),
    pytest.param(
        lambda: best_conditioning_set(_score, 0, [1, 1]),
        ValueError,
        r"`candidates` must be distinct columns",
        id="best-conditioning-set-repeat",
    ),
    pytest.param(
        lambda: best_conditioning_set(_score, 0, "12"),
        TypeError,
        r"`candidates` must be a sequence of column indices, got '12'",
        id="best-conditioning-set-str",
    ),
    pytest.param(
        lambda: fci_pag(CODES, alpha=2.0),
        ValueError,
        r"`alpha` must be a significance level in \(0, 1\), got 2.0",
        id="fci-pag-alpha-above-one",
    ),
    pytest.param(
        lambda: fci_pag(CODES, test="G2"),
        ValueError,
        r"`test` must be one of \('gsq', 'chisq'\), got 'G2'",
        id="fci-pag-unknown-test",
    ),
    pytest.param(
        lambda: fci_pag(CODES.astype(float)),
        ValueError,
        r"`codes` must hold integers \(got dtype float64\)",
        id="fci-pag-float-codes",
    ),
    pytest.param(
        lambda: initial_graph(None, pag=np.ones((2, 2), dtype=bool)),
        TypeError,
        r"`marks` must be an int edge-mark matrix .* got a bool matrix",
        id="initial-graph-bool-pag",
    ),
]

TYPES = np.array([[0, 2, 0], [-2, 0, 1], [0, 1, 0]], dtype=np.int8)


def _score(x, y, z):
    return 0.1
