"""Imports: optional dependencies, imported where they are needed with an error that names the
extra, and objects named by a dotted path in a config."""

from __future__ import annotations

import importlib
from types import ModuleType

EXTRAS: dict[str, tuple[str, ...]] = {
    "control": ("gymnasium",),
    "tsc": ("aeon",),
    "plots": ("matplotlib",),
    "audit": ("dask",),
    "graph": ("torch_geometric",),
    "context": ("sentence_transformers",),
    "causal": ("pgmpy",),
    "games": ("open_spiel",),
    "tune": ("optuna",),
    "overlap": ("numba",),
}
"""The extras of ``pyproject.toml`` the package imports from, and the modules each installs."""


def require_extra(module: str, extra: str, needed_by: str) -> ModuleType:
    """Import ``module``, or raise an ``ImportError`` saying which extra of the package has it.

    ``needed_by`` names what needs it (e.g. ``"The actor-critic modules"``).
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"{needed_by} need the optional dependency {module.split('.')[0]}; install it with "
            f"pip install 'lightning-info[{extra}]'"
        ) from err


def import_object(path: str):
    """The object a dotted path names (``"package.module.Name"``), as a config's ``class_path``."""
    module, _, name = path.rpartition(".")
    if not module:
        raise ValueError(f"{path!r} is not a dotted path `package.module.Name`.")
    return getattr(importlib.import_module(module), name)
