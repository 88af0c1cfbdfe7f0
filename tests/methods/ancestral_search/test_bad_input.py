import gzip

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
