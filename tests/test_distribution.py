"""The wheel and the sdist a user gets, built by setuptools' PEP 517 hooks from a copy of the
repository, and the wheel installed into a fresh venv and run from outside the repository.

The copy holds the files git knows of (tracked, and untracked but not ignored, so that new files
count before their first commit), plus the leftovers a working tree gathers (byte code, run
folders), which the sdist must leave out. Nothing is downloaded: the builds use this interpreter's
setuptools, and the venv borrows this interpreter's installed dependencies. Building three times,
installing and starting the command line take up to about a minute, all of it in one
module-scoped fixture.
"""

from __future__ import annotations

import configparser
import email.message
import email.parser
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]
DIST_INFO = "lightning_info-0.1.0.dist-info/"

SDIST_TOP_FILES = {
    "CONTRIBUTING.md",
    "LICENSE",
    "MANIFEST.in",
    "README.md",
    "constraints.txt",
    "pyproject.toml",
}
SDIST_FOLDERS = {".ci", "benchmarks", "callbacks", "lightning_info", "recipes", "scripts", "tests"}
"""The sdist holds these top-level files and every repository file under these folders."""

LEFTOVERS = [
    "lightning_info/methods/fic_tsc/__pycache__/functional.cpython-311.pyc",
    "lightning_info/__pycache__/__init__.cpython-311.pyc",
    "recipes/lab/__pycache__/cli.cpython-311.pyc",
    "tests/__pycache__/tiny.cpython-311.pyc",
    "results/fic_tsc/table.md",
    "lightning_logs/version_0/hparams.yaml",
    "recipes/lightning_logs/version_0/hparams.yaml",
    "recipes/results/fic_tsc/table.md",
    "recipes/wandb/offline-run-1/files/config.yaml",
    "wandb/offline-run-1/files/config.yaml",
    ".venv/pyvenv.cfg",
]
"""What runs and tools leave in a working tree (a recipe run inside ``recipes/`` included)."""

STRAY = re.compile(r"(^|/)(__pycache__|\.venv|results|lightning_logs|wandb)/|\.py[cod]$")

BUILD = (
    "import sys\nfrom setuptools import build_meta\ngetattr(build_meta, sys.argv[1])(sys.argv[2])\n"
)
LICENSE_DEPRECATION = re.compile(
    r"SetuptoolsDeprecationWarning|licen[cs]e[^\n]*deprecat|deprecat[^\n]*licen[cs]e", re.I
)


def quiet_env(**extra: str) -> dict[str, str]:
    """This environment without what would point a child interpreter back at the repository."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV"}
    }
    return {**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", **extra}


def run(args: list, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    if done.returncode:
        pytest.fail(
            f"{args} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return done


def build(hook: str, source: Path, out: Path) -> tuple[Path, str]:
    """Run ``setuptools.build_meta.<hook>`` in ``source``; the built file and the build's stderr."""
    out.mkdir()
    # warnings shown as a build front-end shows them, whatever this environment filters
    done = run(
        [sys.executable, "-c", BUILD, hook, out], source, quiet_env(PYTHONWARNINGS="default")
    )
    (built,) = out.iterdir()
    return built, done.stderr


def repository_files() -> list[str]:
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPOSITORY,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.skip(f"the distribution is built from a git checkout's files ({err})")
    names = [n for n in listed.decode().split("\0") if n]
    return sorted(n for n in names if os.path.lexists(REPOSITORY / n))  # deleted, not staged


def copy_files(names: list[str], destination: Path) -> None:
    for name in names:
        source, target = REPOSITORY / name, destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)


@dataclass
class Built:
    repository_files: set[str]
    wheel: Path
    wheel_names: list[str]
    wheel_from_sdist_names: list[str]
    sdist: Path
    sdist_files: set[str]
    """The sdist's regular files, relative to its top folder."""
    build_stderr: dict[str, str]
    venv: Path
    scripts: Path
    venv_python: Path
    outside: Path
    """An empty folder outside the repository, the working directory of the commands."""


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    pytest.importorskip("setuptools", minversion="77", reason="pyproject.toml needs setuptools>=77")
    pytest.importorskip("pip", reason="the wheel is installed with this interpreter's pip")
    root = tmp_path_factory.mktemp("distribution").resolve()
    names = repository_files()
    source = root / "source"
    copy_files(names, source)
    for leftover in LEFTOVERS:
        (source / leftover).parent.mkdir(parents=True, exist_ok=True)
        (source / leftover).write_text("a: 1\n")

    stderr = {}
    sdist, stderr["sdist"] = build("build_sdist", source, root / "sdist")
    wheel, stderr["wheel"] = build("build_wheel", source, root / "wheel")
    with tarfile.open(sdist) as archive:
        members = archive.getmembers()
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        archive.extractall(root / "unpacked", **safe)
    (top,) = {m.name.split("/")[0] for m in members}
    sdist_files = {m.name.split("/", 1)[1] for m in members if m.isfile()}
    wheel_from_sdist, stderr["wheel from sdist"] = build(
        "build_wheel", root / "unpacked" / top, root / "wheel-from-sdist"
    )

    venv = root / "venv"
    env = quiet_env()
    run([sys.executable, "-m", "venv", "--without-pip", venv], root, env)
    venv_python = venv / "bin" / "python"
    purelib = run(
        [venv_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], root, env
    ).stdout.strip()
    # The venv gets its dependencies from this interpreter's site-packages instead of an index:
    # tests download nothing. Only the installed wheel provides lightning_info (a path listed in a
    # .pth file is appended, its own .pth files, the editable install's among them, never run).
    ours = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    (Path(purelib) / "outer-site-packages.pth").write_text("\n".join(ours) + "\n")
    pip = [sys.executable, "-m", "pip", "--python", venv_python]
    run([*pip, "install", "--no-deps", "--no-index", wheel], root, env)
    outside = root / "outside"
    outside.mkdir()
    with zipfile.ZipFile(wheel) as w, zipfile.ZipFile(wheel_from_sdist) as ws:
        return Built(
            repository_files=set(names),
            wheel=wheel,
            wheel_names=w.namelist(),
            wheel_from_sdist_names=ws.namelist(),
            sdist=sdist,
            sdist_files=sdist_files,
            build_stderr=stderr,
            venv=venv,
            scripts=venv / "bin",
            venv_python=venv_python,
            outside=outside,
        )


def wheel_text(built: Built, name: str) -> str:
    with zipfile.ZipFile(built.wheel) as wheel:
        return wheel.read(DIST_INFO + name).decode()


def metadata(built: Built) -> email.message.Message:
    return email.parser.Parser().parsestr(wheel_text(built, "METADATA"))


def package_files(names) -> set[str]:
    return {n for n in names if n.startswith("lightning_info/")}


# --- the wheel ---------------------------------------------------------------------------------


def test_wheel_holds_only_the_package_and_its_metadata(built):
    outside_package = [
        n for n in built.wheel_names if not n.startswith(("lightning_info/", DIST_INFO))
    ]
    assert outside_package == []
    forbidden = re.compile(r"(^|/)(recipes|tests|lab|__pycache__)/|\.py[cod]$|\.egg-info/")
    assert [n for n in built.wheel_names if forbidden.search(n)] == []


def test_wheel_holds_every_module_stub_and_packaged_yaml(built):
    expected = {
        n
        for n in built.repository_files
        if n.startswith("lightning_info/") and n.endswith((".py", ".pyi", ".yaml", "py.typed"))
    }
    assert expected <= package_files(built.wheel_names), expected - set(built.wheel_names)
    for name in ("py.typed", "__init__.pyi", "functional.pyi"):
        assert f"lightning_info/{name}" in built.wheel_names
    yamls = {
        n for n in built.wheel_names if re.fullmatch(r"lightning_info/configs/callbacks/.*", n)
    }
    shipped = {
        f"lightning_info/configs/callbacks/{p.name}" for p in (REPOSITORY / "callbacks").iterdir()
    }
    assert yamls == shipped and len(shipped) >= 7


def test_wheel_metadata_declares_the_license_as_an_spdx_expression(built):
    meta = metadata(built)
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta.get_all("License-File") == ["LICENSE"]
    assert meta["License"] is None  # the deprecated free-text field
    assert not [c for c in meta.get_all("Classifier") if c.startswith("License ::")]
    shipped = wheel_text(built, "licenses/LICENSE")
    assert shipped == (REPOSITORY / "LICENSE").read_text()
    assert "Apache License" in shipped and "Version 2.0, January 2004" in shipped
    assert "END OF TERMS AND CONDITIONS" in shipped


def test_wheel_metadata_names_authors_links_and_classifiers(built):
    meta = metadata(built)
    assert meta["Author"] == "The lightning-info authors"
    home = "https://github.com/lightning-info/lightning-info"
    assert dict(u.split(", ", 1) for u in meta.get_all("Project-URL")) == {
        "Homepage": home,
        "Documentation": f"{home}/blob/main/README.md",
        "Issues": f"{home}/issues",
        "Source": home,
    }
    classifiers = set(meta.get_all("Classifier"))
    for version in ("3.10", "3.11", "3.12"):
        assert f"Programming Language :: Python :: {version}" in classifiers
    assert {
        "Development Status :: 3 - Alpha",
        "Intended Audience :: Science/Research",
        "Intended Audience :: Developers",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    } <= classifiers
    assert meta["Keywords"] and meta["Requires-Python"] == ">=3.10"


def test_wheel_declares_the_lightning_info_command(built):
    entry_points = configparser.ConfigParser()
    entry_points.read_string(wheel_text(built, "entry_points.txt"))
    assert dict(entry_points["console_scripts"]) == {"lightning-info": "lightning_info.cli:main"}


def test_a_wheel_built_from_the_sdist_equals_the_wheel_built_from_the_tree(built):
    assert sorted(built.wheel_from_sdist_names) == sorted(built.wheel_names)


# --- the sdist ---------------------------------------------------------------------------------


def test_sdist_holds_what_a_source_build_and_a_reader_need(built):
    files = built.sdist_files
    assert files >= SDIST_TOP_FILES
    assert {"PKG-INFO", "lightning_info.egg-info/SOURCES.txt"} <= files
    callbacks = {f"callbacks/{p.name}" for p in (REPOSITORY / "callbacks").iterdir()}
    assert callbacks and callbacks <= files
    recipes = {n for n in built.repository_files if re.fullmatch(r"recipes/[^/]+\.(py|yaml)", n)}
    assert recipes and recipes <= files
    lab = {n for n in built.repository_files if n.startswith("recipes/lab/")}
    assert any(n.endswith("NOTES.md") for n in lab) and lab <= files
    assert "lightning_info/py.typed" in files and "lightning_info/functional.pyi" in files
    assert "lightning_info/methods/fisher_sft/README.md" in files


def test_sdist_holds_every_repository_file_it_covers_and_nothing_else(built):
    """A file git knows of under a covered folder that the sdist lacks (a new data file in the
    package, say) would also be missing from the wheel: MANIFEST.in must name its kind."""
    covered = {
        n
        for n in built.repository_files
        if n in SDIST_TOP_FILES or n.split("/", 1)[0] in SDIST_FOLDERS
    }
    setuptools_metadata = {
        n
        for n in built.sdist_files
        if n in {"PKG-INFO", "setup.cfg"} or n.startswith("lightning_info.egg-info/")
    }
    assert built.sdist_files - setuptools_metadata == covered


def test_sdist_leaves_out_what_runs_leave_behind(built):
    assert not set(LEFTOVERS) & built.sdist_files
    assert [n for n in built.sdist_files if STRAY.search(n)] == []
    egg_info = {n.split(".egg-info/")[0] for n in built.sdist_files if ".egg-info/" in n}
    assert egg_info == {"lightning_info"}  # setuptools' own metadata, at the top only


# --- the build's warnings ----------------------------------------------------------------------


def test_builds_print_no_license_deprecation(built):
    for build_name, stderr in built.build_stderr.items():
        assert not LICENSE_DEPRECATION.search(stderr), (build_name, stderr[-3000:])


@pytest.mark.parametrize(
    "license_fields",
    [
        'license = { text = "Apache-2.0" }',
        'classifiers = ["License :: OSI Approved :: Apache Software License"]',
    ],
    ids=["license-table", "license-classifier"],
)
def test_the_warning_check_catches_the_deprecated_license_forms(tmp_path, license_fields):
    pytest.importorskip("setuptools", minversion="77", reason="the SPDX form needs setuptools>=77")
    (tmp_path / "pyproject.toml").write_text(
        "[build-system]\n"
        'requires = ["setuptools>=77"]\n'
        'build-backend = "setuptools.build_meta"\n'
        "[project]\n"
        'name = "deprecated-license"\n'
        'version = "0.0.1"\n'
        f"{license_fields}\n"
        "[tool.setuptools]\n"
        "py-modules = []\n"
    )
    _, stderr = build("build_sdist", tmp_path, tmp_path / "out")
    assert LICENSE_DEPRECATION.search(stderr)


# --- the installed wheel, used from outside the repository --------------------------------------


@pytest.mark.parametrize(
    "args",
    [["--help"], ["callbacks"], ["overlap", "--help"], ["select", "--help"], ["audit", "--help"]],
    ids=lambda args: " ".join(args),
)
def test_installed_command_runs_from_outside_the_repository(built, args):
    done = run([built.scripts / "lightning-info", *args], built.outside, quiet_env())
    assert done.stdout.strip()


def test_installed_callbacks_command_lists_the_yamls_inside_the_venv(built):
    done = run([built.scripts / "lightning-info", "callbacks"], built.outside, quiet_env())
    listed = dict(line.split(maxsplit=1) for line in done.stdout.splitlines())
    assert set(listed) == {p.stem for p in (REPOSITORY / "callbacks").iterdir()}
    for path in map(Path, listed.values()):
        assert path.is_file() and path.resolve().is_relative_to(built.venv), path


def test_installed_package_imports_from_the_venv_not_the_repository(built):
    code = (
        "import inspect, json, lightning_info\n"
        "print(json.dumps([lightning_info.__file__, "
        "inspect.getfile(lightning_info.FisherConstraint)]))"
    )
    done = run([built.venv_python, "-c", code], built.outside, quiet_env())
    for path in map(Path, json.loads(done.stdout.splitlines()[-1])):
        assert path.resolve().is_relative_to(built.venv), path
        assert not path.resolve().is_relative_to(REPOSITORY), path


# --- what the wheel leaves to the sdist ---------------------------------------------------------


def test_wheel_leaves_the_method_cards_to_the_sdist(built):
    cards = [n for n in built.wheel_names if n.endswith(".md")]
    assert cards == [], (
        "the sdist's MANIFEST.in brings the method cards in as package data; keep them out of the "
        'wheel with [tool.setuptools.exclude-package-data] "*" = ["README.md"] in pyproject.toml'
    )
