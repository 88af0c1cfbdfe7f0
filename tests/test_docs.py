"""Every Python block of the README, of the method cards and of their notes runs as written,
and so do the README's commands.

A block preceded by ``<!-- imports-only -->`` needs the user's own data or a hub model: only its
import statements run, so every name it imports must still exist where it says. A Python block
preceded by ``<!-- save-as: NAME -->`` is also a file the README's commands use; a bash block
preceded by ``<!-- runs-in-tests -->`` runs exactly as written in a folder holding those files and
a ``.venv`` link to the running interpreter's environment. The Quickstart's two commands install
environments and run for minutes: CI runs the test command verbatim (``.ci/run``) and the recipe
at a toy config (``.ci/extras``), which the last tests check.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]
DOCUMENTS = [
    REPOSITORY / "README.md",
    *sorted(REPOSITORY.glob("lightning_info/methods/*/README.md")),
    *sorted(REPOSITORY.glob("recipes/lab/*/NOTES.md")),
]
FENCE = re.compile(r"(<!-- imports-only -->\s*\n)?```python\n(.*?)```", re.DOTALL)
SAVED = re.compile(r"<!-- save-as: (\S+) -->\s*\n```python\n(.*?)```", re.DOTALL)
COMMANDS = re.compile(r"(<!-- runs-in-tests -->\s*\n)?```bash\n(.*?)```", re.DOTALL)
README = (REPOSITORY / "README.md").read_text()


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


def readme_commands(runnable: bool) -> list[str]:
    return [m.group(2) for m in COMMANDS.finditer(README) if bool(m.group(1)) == runnable]


@pytest.mark.parametrize("commands", readme_commands(runnable=True))
def test_readme_commands_run_as_written(commands, tmp_path):
    for name, source in SAVED.findall(README):
        (tmp_path / name).write_text(source)
    (tmp_path / ".venv").symlink_to(sys.prefix)
    environment = {**os.environ, "WANDB_MODE": "offline"}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", commands],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def test_ci_runs_the_quickstart_commands():
    recipe, tests = readme_commands(runnable=False)[:2]
    assert tests.strip() in (REPOSITORY / ".ci/run").read_text()
    extras = (REPOSITORY / ".ci/extras").read_text()
    assert (
        ".venv/bin/python recipes/fic_tsc.py" in recipe and '"$repo/recipes/fic_tsc.py"' in extras
    )
    assert recipe.split(" && ")[0] == tests.split(" && ")[0] == "python3 -m venv .venv"
