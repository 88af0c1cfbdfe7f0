"""``lightning_info.functional``: every method's public core, and only it, under one name each."""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

import lightning_info.functional as F

METHODS = Path(__file__).resolve().parents[1] / "lightning_info" / "methods"
FOLDERS = sorted(p.parent.name for p in METHODS.glob("*/functional.py"))


def test_every_method_folder_has_a_core_in_the_namespace():
    assert sorted(F.CORES) == FOLDERS
    assert len(FOLDERS) == 19


@pytest.mark.parametrize("method", FOLDERS)
def test_the_namespace_lists_exactly_the_core_s_public_names(method):
    core = importlib.import_module(f"lightning_info.methods.{method}.functional")
    assert set(F.CORES[method]) == set(core.__all__)
    defined_here = {
        name
        for name, obj in vars(core).items()
        if not name.startswith("_")
        and (inspect.isfunction(obj) or inspect.isclass(obj))
        and obj.__module__ == core.__name__
    }
    assert defined_here <= set(core.__all__), (
        f"public but not exported: {defined_here - set(core.__all__)}"
    )
    assert F.__getattr__(method) is core
    for name in core.__all__:
        assert getattr(F.__getattr__(method), name) is getattr(core, name)
        if not name.isupper() and name not in F.CORES:
            assert getattr(F, name) is getattr(core, name)


def test_no_flat_name_belongs_to_two_methods():
    names = [
        name
        for names in F.CORES.values()
        for name in names
        if not name.isupper() and name not in F.CORES
    ]
    assert len(names) == len(set(names))
    assert len(names) > 150


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no_such_core"):
        F.no_such_core  # noqa: B018


def test_importing_the_namespace_loads_no_method_and_no_torch():
    code = (
        "import json, sys, lightning_info.functional\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('torch', "
        "'lightning_info.methods')))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
