"""Every Python block of the README and of the method cards runs as written.

A block preceded by ``<!-- imports-only -->`` needs the user's own data or a hub model: only its
import statements run, so every name it imports must still exist where it says.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]
DOCUMENTS = [
    REPOSITORY / "README.md",
    *sorted(REPOSITORY.glob("lightning_info/methods/*/README.md")),
]
FENCE = re.compile(r"(<!-- imports-only -->\s*\n)?```python\n(.*?)```", re.DOTALL)


def python_blocks():
    for document in DOCUMENTS:
        text = document.read_text()
        for number, match in enumerate(FENCE.finditer(text), start=1):
            line = text[: match.start()].count("\n") + 1
            where = f"{document.relative_to(REPOSITORY)}:{line}"
            yield pytest.param(match.group(2), bool(match.group(1)), id=f"{where}#{number}")


def imports_of(source: str) -> str:
    tree = ast.parse(source)
    nodes = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    return "\n".join(ast.unparse(node) for node in nodes)


@pytest.mark.parametrize(("source", "imports_only"), list(python_blocks()))
def test_python_block_runs(source, imports_only, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = imports_of(source) if imports_only else source
    exec(compile(code, "<doc block>", "exec"), {"__name__": "__doc_block__"})


def test_the_documents_hold_python_blocks():
    assert len(list(python_blocks())) >= len(DOCUMENTS)
