"""Every public entry point of every method has bad-input rows: each callable that a method's
package or its functional core exports (``lightning_info.methods.<name>.__all__`` and
``.functional.__all__``) is called somewhere in that method's ``tests/methods/<name>/
test_bad_input.py`` or ``test_silent_errors.py`` (or in the functional cores' table of
``tests/test_bad_input.py``). A name used only in an import does not count. Module constants
(tuples and dicts of names) are not entry points, nor is a ``typing.Protocol`` (a type to
implement, with nothing to call)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
METHODS = sorted(
    p.parent.name for p in (TESTS.parent / "lightning_info" / "methods").glob("*/__init__.py")
)
TABLE_FILES = ("test_bad_input.py", "test_silent_errors.py")


def _names_used(path: Path) -> set[str]:
    """Identifiers read in ``path`` outside its import statements."""
    used = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
    return used


@pytest.mark.parametrize("method", METHODS)
def test_every_entry_point_has_bad_input_rows(method):
    entry_points = set()
    for module in (method, f"{method}.functional"):
        exported = importlib.import_module(f"lightning_info.methods.{module}")
        entry_points |= {
            name
            for name in exported.__all__
            if callable(obj := getattr(exported, name)) and not getattr(obj, "_is_protocol", False)
        }
    used = _names_used(TESTS / "test_bad_input.py")
    for file in TABLE_FILES:
        path = TESTS / "methods" / method / file
        if path.exists():
            used |= _names_used(path)
    assert sorted(entry_points - used) == [], (
        f"{method}: give these entry points rows in tests/methods/{method}/test_bad_input.py"
    )
