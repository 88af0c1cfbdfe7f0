"""``lightning-info callbacks`` and ``python -m lightning_info.configs`` through the installed
entry point: the listing equals the packaged files; a bad name is refused."""

from __future__ import annotations

import subprocess
import sys

from lightning_info.configs import callback_configs
from tests.cli.entry_point import ok, refused, run


def test_the_listing_is_every_packaged_yaml_with_its_path(tmp_path):
    listed = ok(run("callbacks", cwd=tmp_path)).stdout.splitlines()
    assert [line.split()[0] for line in listed] == list(callback_configs())
    assert {line.split()[1] for line in listed} == {str(p) for p in callback_configs().values()}


def test_a_name_prints_its_path_with_or_without_the_suffix(tmp_path):
    path = str(callback_configs()["fisher_constraint"])
    for name in ("fisher_constraint", "fisher_constraint.yaml"):
        assert ok(run("callbacks", "--name", name, cwd=tmp_path)).stdout.strip() == path


def test_an_unknown_name_is_refused_with_the_names_shipped(tmp_path):
    result = run("callbacks", "--name", "nope", cwd=tmp_path)
    refused(result, "no callback config 'nope'", "lookahead")


def test_every_command_has_help(tmp_path):
    for name in ("audit", "callbacks", "overlap", "select"):
        assert "--config" in ok(run(name, "--help", cwd=tmp_path)).stdout
    top = ok(run("--help", cwd=tmp_path)).stdout
    assert all(name in top for name in ("audit", "callbacks", "overlap", "select"))


def test_python_m_configs_takes_help_as_help_not_as_a_name(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "lightning_info.configs", "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0 and "usage:" in done.stdout
    assert "no callback config" not in done.stderr
