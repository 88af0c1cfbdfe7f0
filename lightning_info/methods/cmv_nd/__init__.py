"""CMV-ND: complementary multi-view neighbourhood differentiation for attribute-missing graphs.

See README.md in this folder. ``NeighbourhoodDifferentiation`` (a torch_geometric transform,
extra ``graph``) is resolved on first use, so importing this package never imports
torch_geometric (see ``transform.py``).
"""

from typing import Any

from lightning_info.methods.cmv_nd.datamodule import (
    NETWORKX_GRAPHS,
    AttributeMissingGraphDataModule,
    GraphFeatureOptions,
    GraphFiles,
    SBMOptions,
    class_features,
    load_graph_files,
    missing_mask,
    networkx_graph,
    stochastic_block_model,
)
from lightning_info.methods.cmv_nd.functional import (
    graph_adjacency,
    mean_impute,
    neighbourhood_views,
    normalized_adjacency,
    sign_views,
)

__all__ = [
    "NETWORKX_GRAPHS",
    "AttributeMissingGraphDataModule",
    "GraphFeatureOptions",
    "GraphFiles",
    "NeighbourhoodDifferentiation",
    "SBMOptions",
    "class_features",
    "graph_adjacency",
    "load_graph_files",
    "mean_impute",
    "missing_mask",
    "neighbourhood_views",
    "networkx_graph",
    "normalized_adjacency",
    "sign_views",
    "stochastic_block_model",
]


def __getattr__(name: str) -> Any:
    if name == "NeighbourhoodDifferentiation":
        from lightning_info.methods.cmv_nd import transform

        return transform.NeighbourhoodDifferentiation
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
