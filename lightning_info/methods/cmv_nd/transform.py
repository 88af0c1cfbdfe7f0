"""``NeighbourhoodDifferentiation``: the CMV-ND hop views as a torch_geometric transform.

Like PyG's ``transforms.SIGN(K)``, which writes ``data.x1 .. data.xK``, it writes the hop views
``data.hop1 .. data.hopK`` (``H_k``: the mean of the observed features at distance exactly
``k``; :func:`~lightning_info.methods.cmv_nd.functional.neighbourhood_views`) and leaves
``data.x`` as it is.

torch_geometric is an optional dependency (``pip install 'lightning-info[graph]'``) and the
class subclasses its ``BaseTransform``, so the class is created on first use: this module's
``__getattr__`` (PEP 562) builds it the first time ``NeighbourhoodDifferentiation`` is looked up
(``from lightning_info.methods.cmv_nd import NeighbourhoodDifferentiation`` included), caches it
in the module and returns it; without torch_geometric that lookup raises an ``ImportError``
naming the extra. Importing this module or ``lightning_info.methods.cmv_nd`` never imports
torch_geometric. Once built it is an ordinary class: ``isinstance``, subclassing and pickling
work (its ``__module__`` and ``__qualname__`` point here).
"""

from __future__ import annotations

from typing import Any

from lightning_info.core.optional import require_extra
from lightning_info.core.validation import require_int
from lightning_info.methods.cmv_nd.functional import neighbourhood_views

__all__ = ["NeighbourhoodDifferentiation"]  # noqa: F822 (built by __getattr__ below)

_NAME = "NeighbourhoodDifferentiation"


def _build() -> type:
    transforms = require_extra("torch_geometric.transforms", "graph", _NAME)

    class NeighbourhoodDifferentiation(transforms.BaseTransform):
        """Write ``data.hop1 .. data.hopK``, the CMV-ND hop views of ``data.x`` on
        ``data.edge_index`` (module docstring).

        Args:
            num_hops: ``K >= 1``.
            observed_key: name of a bool node attribute of the data (e.g. ``"observed"``)
                flagging the nodes whose attributes are known; ``None``: all are.
            chunk_size, undirected, threads: as in
                :func:`~lightning_info.methods.cmv_nd.functional.neighbourhood_views`.
        """

        def __init__(
            self,
            num_hops: int,
            observed_key: str | None = None,
            chunk_size: int = 16384,
            undirected: bool = True,
            threads: int | None = None,
        ) -> None:
            self.num_hops = require_int(num_hops, "num_hops", 1)
            if observed_key is not None and not isinstance(observed_key, str):
                raise TypeError(f"`observed_key` must be a str or None, got {observed_key!r}.")
            if not isinstance(undirected, bool):
                raise TypeError(f"`undirected` must be a bool, got {undirected!r}.")
            self.observed_key = observed_key
            self.chunk_size = require_int(chunk_size, "chunk_size", 1)
            self.undirected = undirected
            self.threads = None if threads is None else require_int(threads, "threads", 1)

        def forward(self, data: Any) -> Any:
            for key in ("edge_index", "x"):
                if getattr(data, key, None) is None:
                    raise ValueError(
                        f"{_NAME} needs `data.{key}`; got a {type(data).__name__} without it "
                        "(heterogeneous graphs are not supported)."
                    )
            observed = None
            if self.observed_key is not None:
                observed = getattr(data, self.observed_key, None)
                if observed is None:
                    raise ValueError(
                        f"`data.{self.observed_key}` (observed_key) is missing; store the bool "
                        "mask of observed nodes there or pass observed_key=None."
                    )
            views = neighbourhood_views(
                data.edge_index,
                data.x,
                num_hops=self.num_hops,
                observed=observed,
                chunk_size=self.chunk_size,
                undirected=self.undirected,
                threads=self.threads,
            )
            for k, view in enumerate(views[1:], start=1):
                data[f"hop{k}"] = view
            return data

        def __repr__(self) -> str:
            return f"{type(self).__name__}(num_hops={self.num_hops})"

    NeighbourhoodDifferentiation.__module__ = __name__
    NeighbourhoodDifferentiation.__qualname__ = _NAME
    return NeighbourhoodDifferentiation


def __getattr__(name: str) -> Any:
    if name == _NAME:
        cls = _build()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), _NAME})
