"""Benchmark scripts and recipes imported by the tests as modules, as ``python <file>`` would run
them: ``benchmarks/`` on ``sys.path`` (a script imports ``harness`` from there) and the module
registered in ``sys.modules`` before it runs (dataclasses and pickling look it up there)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPOSITORY = Path(__file__).resolve().parents[1]
BENCHMARKS = REPOSITORY / "benchmarks"
RECIPES = REPOSITORY / "recipes"


def script_path(path_or_name: str | Path) -> Path:
    """``"cmv_nd_views"`` or ``"cmv_nd_views.py"``: ``benchmarks/cmv_nd_views.py``; a path to an
    existing file (a recipe, say) as it is."""
    path = Path(path_or_name)
    if path.is_file():
        return path.resolve()
    return BENCHMARKS / path.with_suffix(".py").name


def load_script(path_or_name: str | Path, name: str | None = None) -> ModuleType:
    """The script (:func:`script_path`) imported as module ``name``: by default its stem for a
    benchmark (``cmv_nd_views``), ``<folder>_<stem>`` for any other file (``recipes_fic_tsc``), so
    that a recipe and a benchmark of the same stem do not replace each other."""
    path = script_path(path_or_name)
    if not path.is_file():
        raise FileNotFoundError(path)
    if name is None:
        name = path.stem if path.parent == BENCHMARKS else f"{path.parent.name}_{path.stem}"
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_recipe(name: str) -> ModuleType:
    """``recipes/<name>.py`` as module ``recipes_<name>``."""
    return load_script(RECIPES / f"{name}.py")
