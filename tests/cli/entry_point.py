"""Running the installed ``lightning-info`` script as a user does, for the commands' tests."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest


def command() -> Path:
    """The installed ``lightning-info`` script beside this interpreter."""
    script = Path(sys.executable).parent / "lightning-info"
    if not script.is_file():
        pytest.fail(
            f"{script} is missing: install the package into this environment "
            "(pip install -e .) so that its console entry point exists."
        )
    return script


def run(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``lightning-info *args`` in a fresh process, offline, one thread."""
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    return subprocess.run(
        [str(command()), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


def run_here(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``lightning-info *args`` in this process: the ``main`` the script calls, its output
    captured. For the refusals, which end before any work: a fresh process per case would cost a
    few seconds of imports each (each command keeps one refusal through the script itself)."""
    from lightning_info.cli import main

    out, err, here = io.StringIO(), io.StringIO(), os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with redirect_stdout(out), redirect_stderr(err):
            try:
                status = main([str(arg) for arg in args])
            except SystemExit as exit_:
                status = exit_.code
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(args, status, out.getvalue(), err.getvalue())


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """``result``, asserted to have exited 0."""
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def refused(result: subprocess.CompletedProcess, *fragments: str) -> str:
    """The error of a command refused with exit status 2, naming each of ``fragments``, without
    a traceback."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr[-3000:])
    assert result.stderr.startswith("lightning-info: error: ") or "error:" in result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, (fragment, result.stderr[-3000:])
    return result.stderr


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path
