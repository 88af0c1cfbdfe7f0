"""The package's public surface: light to import, every public name resolves, optional extras
are needed only by what uses them (each missing extra simulated by blocking its imports)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import lightning_info
from lightning_info._public_names import TOP_LEVEL
from lightning_info.core.optional import EXTRAS

README = Path(__file__).resolve().parents[1] / "README.md"

BLOCKER = """
import importlib.metadata as metadata
import sys

for module in BLOCKED:
    sys.modules[module] = None  # import fails, find_spec gives None


def hide(lookup):
    def hidden(name):
        if name.lower() in BLOCKED:  # the distribution and module names agree for the extras
            raise metadata.PackageNotFoundError(name)
        return lookup(name)

    return hidden


metadata.version, metadata.distribution = hide(metadata.version), hide(metadata.distribution)
"""
"""Makes the ``BLOCKED`` modules look uninstalled: no module and no distribution metadata."""


def run_python(code: str, blocked: list[str] = ()) -> dict:
    """Run ``code`` in a fresh interpreter (optionally with modules blocked); it prints JSON."""
    source = f"BLOCKED = {list(blocked)!r}\n{BLOCKER}\n{code}"
    out = subprocess.run(
        [sys.executable, "-c", source], capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_import_loads_no_heavy_or_optional_module():
    loaded = run_python(
        "import json, sys, lightning_info\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    heavy = {"torch", "lightning", "transformers", "datasets", "peft", "wandb", "sklearn"}
    optional = {module for modules in EXTRAS.values() for module in modules}
    assert not (heavy | optional) & set(loaded)


RESOLVE_WITHOUT_EACH_EXTRA = """
import importlib, json, sys
from lightning_info.core.optional import EXTRAS


def ours(name):
    return name.split(".")[0] == "lightning_info"


def resolve():
    import lightning_info

    failures = {}
    for name in lightning_info.__all__:
        try:
            getattr(lightning_info, name)
        except ImportError as err:
            failures[name] = str(err)
    return failures


results = {"": resolve()}  # everything installed: every third-party module is now loaded
for extra, modules in EXTRAS.items():
    saved = {m: sys.modules[m] for m in list(sys.modules) if m.split(".")[0] in modules}
    for name in [m for m in sys.modules if ours(m) or m in saved]:
        del sys.modules[name]
    BLOCKED[:] = list(modules)
    sys.modules.update(dict.fromkeys(modules))  # None: the import fails
    importlib.invalidate_caches()
    results[extra] = resolve()
    BLOCKED[:] = []
    for name in [m for m in sys.modules if ours(m) or m in modules]:
        del sys.modules[name]
    sys.modules.update(saved)
print(json.dumps(results))
"""
"""In one interpreter: every public name resolved with everything installed, then once per extra
with that extra blocked and the package re-imported (the third-party modules it does not block stay
loaded, so each pass re-executes only lightning_info). ``.ci/extras`` checks the same with real
installs, one extra at a time."""


@pytest.fixture(scope="module")
def failures_without_each_extra() -> dict[str, dict[str, str]]:
    for modules in EXTRAS.values():
        for module in modules:
            pytest.importorskip(module)
    return run_python(RESOLVE_WITHOUT_EACH_EXTRA, blocked=[])


def test_every_public_name_resolves_with_every_extra_installed(failures_without_each_extra):
    assert failures_without_each_extra[""] == {}
    assert set(dir(lightning_info)) >= set(lightning_info.__all__)
    with pytest.raises(AttributeError, match="no attribute 'NoSuchPlugin'"):
        lightning_info.NoSuchPlugin  # noqa: B018


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_without_an_extra_only_its_users_fail_and_the_error_names_it(
    extra, failures_without_each_extra
):
    failures = failures_without_each_extra[extra]
    for name, message in failures.items():
        assert f"pip install 'lightning-info[{extra}]'" in message, (name, message)
    # the actor-critic package subclasses gymnasium's classes; UCRUEADataModule imports without aeon
    # (building one needs it, below) and plots are drawn on demand
    # and the graph extra only the PyG transform
    needs = {
        "control": set(TOP_LEVEL["lightning_info.methods.asymmetric_ac"]),
        "graph": {"NeighbourhoodDifferentiation"},
    }
    assert set(failures) == needs.get(extra, set())


def test_extras_are_needed_when_used_not_on_import():
    errors = run_python(
        "import json\n"
        "from lightning_info import UCRUEADataModule\n"
        "from lightning_info.core.plotting import pyplot\n"
        "from lightning_info.methods.train_test_overlap.sharded import overlap_with_dask\n"
        "errors = {}\n"
        "for key, call in (('tsc', lambda: UCRUEADataModule('GunPoint').setup('fit')),\n"
        "                  ('plots', pyplot), ('audit', lambda: overlap_with_dask([], None))):\n"
        "    try:\n"
        "        call()\n"
        "    except ImportError as err:\n"
        "        errors[key] = str(err)\n"
        "print(json.dumps(errors))",
        blocked=["aeon", "matplotlib", "dask"],
    )
    assert "lightning-info[tsc]" in errors["tsc"]
    assert "lightning-info[plots]" in errors["plots"]
    assert "lightning-info[audit]" in errors["audit"]


def test_every_plugin_in_the_readme_table_is_importable_from_the_top_level():
    text = README.read_text()
    blocks = text[text.index("## Methods") :].split("\n\n")
    table = next(block for block in blocks if block.startswith("| paper"))
    named = set()
    for row in table.splitlines()[2:]:
        plugin_column = row.split("|")[2]
        named |= set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", plugin_column))
    assert named, "the README's method table lists no plugins"
    assert named <= set(lightning_info.__all__), named - set(lightning_info.__all__)


def test_extras_table_matches_pyproject():
    import tomllib

    pyproject = tomllib.loads((README.parent / "pyproject.toml").read_text())
    declared = pyproject["project"]["optional-dependencies"]
    for extra, modules in EXTRAS.items():
        requirements = {
            re.split(r"[<>=\[ ]", r)[0].lower().replace("-", "_") for r in declared[extra]
        }
        assert set(modules) <= requirements, (extra, requirements)
