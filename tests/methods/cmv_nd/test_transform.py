"""The torch_geometric transform: it writes hop1..hopK equal to the functional core, leaves the
input alone, and is created only on first use (torch_geometric is the optional extra ``graph``)."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch

from lightning_info.methods.cmv_nd.functional import neighbourhood_views

LAZY = """
import json, sys
import lightning_info.methods.cmv_nd as cmv_nd
from lightning_info.methods.cmv_nd import transform
out = {"loaded_on_import": sys.modules.get("torch_geometric") is not None}
sys.modules["torch_geometric"] = None  # as if the extra were not installed
try:
    cmv_nd.NeighbourhoodDifferentiation
except ImportError as err:
    out["error"] = str(err)
del sys.modules["torch_geometric"]
try:
    out["built"] = cmv_nd.NeighbourhoodDifferentiation.__name__
except ImportError:
    out["built"] = None  # torch_geometric is not installed here
print(json.dumps(out))
"""


def test_importing_the_method_never_imports_torch_geometric_and_a_missing_one_names_the_extra():
    done = subprocess.run([sys.executable, "-c", LAZY], capture_output=True, text=True, check=True)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["loaded_on_import"] is False
    assert "pip install 'lightning-info[graph]'" in out["error"]
    assert "NeighbourhoodDifferentiation" in out["error"]
    pytest.importorskip("torch_geometric")
    assert out["built"] == "NeighbourhoodDifferentiation"


@pytest.fixture
def data():
    pyg_data = pytest.importorskip("torch_geometric.data")
    rng = np.random.default_rng(0)
    edge_index = torch.from_numpy(rng.integers(0, 60, size=(2, 150)))
    x = torch.randn(60, 4, generator=torch.Generator().manual_seed(0))
    observed = torch.from_numpy(rng.random(60) < 0.5)
    return pyg_data.Data(x=x, edge_index=edge_index, observed=observed)


def test_writes_hop_views_equal_to_the_functional_and_leaves_the_input(data):
    from lightning_info.methods.cmv_nd import NeighbourhoodDifferentiation

    x, edge_index = data.x.clone(), data.edge_index.clone()
    out = NeighbourhoodDifferentiation(3, observed_key="observed", chunk_size=16)(data)
    views = neighbourhood_views(edge_index, x, num_hops=3, observed=data.observed)
    for k in (1, 2, 3):
        assert torch.equal(out[f"hop{k}"], views[k])
    assert "hop4" not in out and "x1" not in out
    assert torch.equal(out.x, x) and torch.equal(data.x, x)  # x as it was
    assert "hop1" not in data  # BaseTransform works on a shallow copy
    all_seen = NeighbourhoodDifferentiation(2)(data)
    assert torch.equal(all_seen.hop2, neighbourhood_views(edge_index, x, num_hops=2)[2])


def test_is_a_base_transform_that_pickles_and_composes(data):
    from torch_geometric.transforms import BaseTransform, Compose

    from lightning_info.methods.cmv_nd import NeighbourhoodDifferentiation
    from lightning_info.methods.cmv_nd import transform as module

    transform = NeighbourhoodDifferentiation(2, observed_key="observed", undirected=False)
    assert isinstance(transform, BaseTransform)
    assert module.NeighbourhoodDifferentiation is NeighbourhoodDifferentiation
    assert repr(transform) == "NeighbourhoodDifferentiation(num_hops=2)"
    again = pickle.loads(pickle.dumps(transform))
    assert type(again) is NeighbourhoodDifferentiation and again.undirected is False
    composed = Compose([transform])(data)
    expected = neighbourhood_views(
        data.edge_index, data.x, num_hops=2, observed=data.observed, undirected=False
    )
    assert torch.equal(composed.hop2, expected[2])


def test_bad_arguments_and_data(data):
    from lightning_info.methods.cmv_nd import NeighbourhoodDifferentiation

    with pytest.raises(ValueError, match="num_hops"):
        NeighbourhoodDifferentiation(0)
    with pytest.raises(TypeError, match="observed_key"):
        NeighbourhoodDifferentiation(2, observed_key=3)
    with pytest.raises(ValueError, match="chunk_size"):
        NeighbourhoodDifferentiation(2, chunk_size=0)
    with pytest.raises(ValueError, match="data.known"):
        NeighbourhoodDifferentiation(2, observed_key="known")(data)
    del data.x
    with pytest.raises(ValueError, match="needs `data.x`"):
        NeighbourhoodDifferentiation(2)(data)
    with pytest.raises(AttributeError, match="no attribute 'Other'"):
        from lightning_info.methods.cmv_nd import transform

        transform.Other  # noqa: B018
