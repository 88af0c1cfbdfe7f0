"""``lightning_info.functional``: every method's pure core in one namespace.

Each paper's loss, estimator, update rule and score is a function on tensors in its folder's
``functional.py`` (no Lightning, no global state), tested there against its oracle; the Metrics,
Callbacks and LightningModules call it. This namespace gathers them, as ``composer.functional``
does::

    import lightning_info.functional as F

    F.prism_score(...)                  # one function, by its name
    F.prodiff.prototype_attention(...)  # or a method's whole core, by the method's folder name
    F.efg_last_iterate.METHODS          # constants through the method's core only

Names resolve on first use (PEP 562): importing this module loads no method.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from lightning_info._public_names import CORES

# CORES: each method folder's public core, ``lightning_info.methods.<folder>.functional.__all__``
# (written from those lists by scripts/public_names.py, with the stub functional.pyi).

_OWNER = {
    name: method
    for method, names in CORES.items()
    for name in names
    if not name.isupper() and name not in CORES
}
"""The names reachable flat: functions and classes. Constants, and a function named as its
method's folder (``smoothed_information``), are reached through the method's core."""

__all__ = sorted([*CORES, *_OWNER], key=str.lower)


def _core(method: str) -> ModuleType:
    return importlib.import_module(f"lightning_info.methods.{method}.functional")


def __getattr__(name: str) -> Any:
    if name in CORES:
        return _core(name)
    if name in _OWNER:
        return getattr(_core(_OWNER[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
