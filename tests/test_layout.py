"""The layout rules of CONTRIBUTING.md that a machine can check: file names, constructor sizes,
no private import across packages."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest
import torchmetrics
from lightning.pytorch import Callback, LightningDataModule, LightningModule

import lightning_info

PACKAGE = Path(lightning_info.__file__).resolve().parent
MAX_CONSTRUCTOR_ARGUMENTS = 12
"""What a user reads in one signature. ``validate_args`` (the same switch on every plugin, as
torchmetrics passes it) does not count; a record (a mutable dataclass of arrays or results, such
as ``GameTree``, built for the user by a function) is data, not a constructor to configure."""

WIDE_CONSTRUCTORS = {
    "SFTPipelineDataModule": "composes four methods' data stages (decontaminate, select, serve, "
    "audit); each method's settings are already one injected options object",
}
"""Public classes allowed past the bound, and why (a stale entry fails)."""

VOCABULARY = {
    LightningModule: "module",
    LightningDataModule: "datamodule",
    Callback: "callback",
    torchmetrics.Metric: "metrics",
}
"""The file a method folder keeps each kind of Lightning class in."""


def _public_classes() -> list[tuple[str, type]]:
    return [
        (name, obj)
        for name in lightning_info.__all__
        if inspect.isclass(obj := getattr(lightning_info, name))
    ]


def _arguments(cls: type) -> list[str]:
    return [
        p.name
        for p in inspect.signature(cls.__init__).parameters.values()
        if p.name not in ("self", "validate_args")
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


def _is_record(cls: type) -> bool:
    """A mutable dataclass of results or arrays (frozen ones are options a user sets)."""
    if not dataclasses.is_dataclass(cls) or issubclass(cls, tuple(VOCABULARY)):
        return False
    return not cls.__dataclass_params__.frozen


@pytest.mark.parametrize(
    "name, cls",
    [(n, c) for n, c in _public_classes() if not _is_record(c)],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_no_public_constructor_takes_more_than_a_dozen_arguments(name, cls):
    arguments = _arguments(cls)
    if name in WIDE_CONSTRUCTORS:
        assert len(arguments) > MAX_CONSTRUCTOR_ARGUMENTS, f"{name} fits now: drop its entry"
        return
    assert len(arguments) <= MAX_CONSTRUCTOR_ARGUMENTS, (
        f"{name} takes {len(arguments)} arguments: bundle related ones into an options dataclass "
        "or take the configured object (CONTRIBUTING.md, Constructors)"
    )


@pytest.mark.parametrize(
    "name, cls", _public_classes(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_a_method_s_lightning_classes_live_in_the_vocabulary_s_files(name, cls):
    parts = cls.__module__.split(".")
    if parts[:2] != ["lightning_info", "methods"]:
        return
    for base, file in VOCABULARY.items():
        if issubclass(cls, base):
            assert parts[-1] == file or parts[-1].endswith(f"_{file}"), (
                f"{name} is a {base.__name__}: it belongs in {file}.py"
            )
            return


def _private_imports_across_packages() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        package = ".".join(("lightning_info", *path.relative_to(PACKAGE).parent.parts))
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or not node.module or node.level:
                continue
            source_package = node.module.rsplit(".", 1)[0]
            if not node.module.startswith("lightning_info") or source_package == package:
                continue
            private = [a.name for a in node.names if a.name.startswith("_")]
            if private:
                found.append(f"{path.relative_to(PACKAGE)}: {node.module} {private}")
    return found


def test_nothing_imports_a_private_name_from_another_package():
    assert _private_imports_across_packages() == []
