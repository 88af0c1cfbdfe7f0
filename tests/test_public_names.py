"""One list of public names: each package's ``__all__``. The top level, the functional namespace
and the stubs type checkers read are written from it by ``scripts/public_names.py``."""

from __future__ import annotations

import importlib
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import jedi
import pytest

import lightning_info
from lightning_info._public_names import TOP_LEVEL

ROOT = Path(__file__).resolve().parents[1]


def load_generator(root: Path = ROOT):
    spec = importlib.util.spec_from_file_location("public_names", ROOT / "scripts/public_names.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.ROOT, module.PACKAGE = root, root / "lightning_info"
    return module


def test_the_generated_lists_and_stubs_are_current():
    out = subprocess.run(
        [sys.executable, "scripts/public_names.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr


@pytest.fixture
def package_copy(tmp_path):
    """The files the generator reads and writes, copied so that a test may edit them."""
    for path in ROOT.glob("lightning_info/**/*"):
        if (
            path.name in ("__init__.py", "functional.py", "_public_names.py")
            or path.suffix == ".pyi"
        ):
            target = tmp_path / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
    return tmp_path


def test_a_name_added_to_a_method_s_all_makes_the_check_fail_until_regenerated(package_copy):
    generator = load_generator(package_copy)
    assert generator.main(["--check"]) == 0
    init = package_copy / "lightning_info/methods/cacti/__init__.py"
    init.write_text(init.read_text().replace("__all__ = [", '__all__ = [\n    "NewPlugin",'))
    assert generator.main(["--check"]) == 1
    assert generator.main([]) == 0
    assert generator.main(["--check"]) == 0
    assert (
        "from lightning_info.methods.cacti import ("
        in (package_copy / "lightning_info/__init__.pyi").read_text()
    )
    assert (
        "    NewPlugin as NewPlugin," in (package_copy / "lightning_info/__init__.pyi").read_text()
    )
    assert "NewPlugin" in generator.top_level()["lightning_info.methods.cacti"]


def test_a_name_exported_by_two_packages_is_refused(package_copy):
    generator = load_generator(package_copy)
    init = package_copy / "lightning_info/methods/sdcib/__init__.py"
    init.write_text(init.read_text().replace("__all__ = [", '__all__ = [\n    "CACTI",'))
    with pytest.raises(SystemExit, match="`CACTI` is exported by both"):
        generator.top_level()


def test_a_package_without_a_literal_all_is_refused(package_copy):
    generator = load_generator(package_copy)
    init = package_copy / "lightning_info/methods/prism/__init__.py"
    init.write_text('__all__ = sorted(["prism_score"])\n')
    with pytest.raises(SystemExit, match="must be a literal list"):
        generator.top_level()


@pytest.mark.parametrize("module", sorted(TOP_LEVEL))
def test_every_name_of_a_package_s_all_is_the_same_object_at_the_top_level(module):
    package = importlib.import_module(module)
    assert set(TOP_LEVEL[module]) == set(package.__all__)
    for name in package.__all__:
        assert getattr(lightning_info, name) is getattr(package, name)


@pytest.mark.parametrize(
    ("code", "name", "kind", "defined_in"),
    [
        (
            "from lightning_info import FisherConstraint\nFisherConstraint\n",
            "FisherConstraint",
            "class",
            "lightning_info/methods/fic_tsc/callback.py",
        ),
        (
            "import lightning_info\nlightning_info.CACTI\n",
            "CACTI",
            "class",
            "lightning_info/methods/cacti/module.py",
        ),
        (
            "import lightning_info.functional as F\nF.prism_score\n",
            "prism_score",
            "function",
            "lightning_info/methods/prism/functional.py",
        ),
    ],
)
def test_an_ide_resolves_a_public_name_to_its_definition(code, name, kind, defined_in):
    """jedi (the engine behind IPython's and many editors' completion) follows the stubs."""
    script = jedi.Script(code, path=str(ROOT / "example.py"), project=jedi.Project(str(ROOT)))
    last = code.splitlines()[-1]
    found = script.infer(2, len(last))
    assert [(d.name, d.type) for d in found] == [(name, kind)]
    assert Path(found[0].module_path) == ROOT / defined_in


def test_the_package_ships_its_stubs_and_py_typed():
    package = ROOT / "lightning_info"
    assert (package / "py.typed").exists()
    assert (package / "__init__.pyi").exists() and (package / "functional.pyi").exists()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"lightning_info" = ["py.typed", "*.pyi"]' in pyproject


def test_importing_the_package_loads_no_method_and_no_torch():
    code = (
        "import json, sys, lightning_info, lightning_info.functional\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('torch', 'lightning.', "
        "'lightning_info.methods')))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"
