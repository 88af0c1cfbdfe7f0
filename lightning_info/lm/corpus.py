"""Offline instruction text: docstrings of Python's own standard library.

Every Python installation carries a few megabytes of carefully written English prose about
code: the docstrings of its standard library. :func:`stdlib_docstrings` collects them as
``(qualified name, docstring)`` pairs, :func:`instruction_dataset` turns the pairs into
prompt/response rows ("Explain json.dumps." / the docstring of ``json.dumps``), and
:func:`split_corpus` carves disjoint pretraining / fine-tuning pool / held-out sets by
module, so that held-out questions are about modules the model has not been tuned on.

Nothing is downloaded; the text is fixed for a given Python version.
"""

from __future__ import annotations

import importlib
import inspect
import math
import random
import re
import zlib
from collections.abc import Sequence
from typing import Any

from lightning_info.core.validation import require_int, require_positive

__all__ = [
    "DEFAULT_MODULES",
    "PROMPT_TEMPLATES",
    "instruction_dataset",
    "module_of",
    "split_corpus",
    "stdlib_docstrings",
]

DEFAULT_MODULES: tuple[str, ...] = (
    "argparse",
    "base64",
    "bisect",
    "calendar",
    "cmd",
    "collections",
    "colorsys",
    "configparser",
    "contextlib",
    "copy",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "difflib",
    "enum",
    "fnmatch",
    "fractions",
    "functools",
    "graphlib",
    "heapq",
    "html",
    "inspect",
    "ipaddress",
    "json",
    "logging",
    "numbers",
    "optparse",
    "pathlib",
    "pprint",
    "queue",
    "random",
    "shlex",
    "statistics",
    "string",
    "tarfile",
    "textwrap",
    "threading",
    "typing",
    "urllib.parse",
    "weakref",
    "zipfile",
)
"""Standard-library modules read by default: pure Python (or with a C accelerator whose
docstrings are fixed), quick to import, free of import side effects, platform independent,
and rich in docstrings. Each has a distinct top-level package, which :func:`module_of`
returns."""

PROMPT_TEMPLATES: tuple[str, ...] = (
    "Explain {name}.",
    "What does {name} do?",
    "Describe the Python object {name}.",
    "Write the documentation of {name}.",
)
"""Prompt templates of :func:`instruction_dataset`; ``{name}`` is the qualified name."""

_SENTENCE_END = re.compile(r"[.!?:](?=\s)")


def module_of(name: str) -> str:
    """Top-level package of a qualified name: ``"urllib.parse.quote"`` -> ``"urllib"``."""
    if not isinstance(name, str):
        raise TypeError(f"`name` must be a qualified name (str), got {name!r}.")
    return name.partition(".")[0]


def stdlib_docstrings(
    modules: Sequence[str] | None = None, min_chars: int = 40, max_chars: int = 1500
) -> list[tuple[str, str]]:
    """``(qualified name, docstring)`` pairs of public standard-library objects, sorted by name.

    For each module in ``modules`` (default :data:`DEFAULT_MODULES`) the module itself, its
    public classes and routines, and the public methods and properties that a class defines
    itself are read. An attribute counts as the module's when its ``__module__`` is the module,
    a submodule of it (``json.decoder.JSONDecoder`` for ``json``), or its C accelerator
    (``_heapq`` for ``heapq``); re-exports from elsewhere are skipped. Names start with the
    module as imported: ``json.JSONDecoder.decode``.

    Only an object's own ``__doc__`` is used (cleaned with :func:`inspect.cleandoc`), never a
    docstring inherited from a base class, so that each text documents its own name;
    signatures that ``dataclass``/``namedtuple`` generate in place of a missing docstring are
    skipped. Texts longer than ``max_chars`` are cut at the last paragraph break, else the last
    sentence end, else the last whitespace before ``max_chars``; texts shorter than
    ``min_chars`` are dropped. Identical texts are kept once, under the first name in sorted
    order. The result is deterministic for a given Python version.
    """
    min_chars = require_int(min_chars, "min_chars", 1)
    max_chars = require_int(max_chars, "max_chars", min_chars)
    if isinstance(modules, str):
        raise TypeError(
            f"`modules` must be a sequence of module names, got the single string {modules!r}; "
            "wrap it in a list: [name]."
        )
    modules = DEFAULT_MODULES if modules is None else tuple(modules)
    if not modules:
        raise ValueError("`modules` is empty; pass at least one module name.")
    named: dict[str, str] = {}
    for module_name in modules:
        if not isinstance(module_name, str):
            raise TypeError(f"Module names must be strings, got {module_name!r}.")
        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            raise ValueError(f"Cannot import standard-library module {module_name!r}.") from err
        for name, obj in _public_objects(module_name, module):
            text = _own_doc(obj)
            if text is None:
                continue
            text = _truncate(text, max_chars)
            if len(text) >= min_chars:
                named.setdefault(name, text)
    seen: set[str] = set()
    pairs = []
    for name in sorted(named):
        if named[name] not in seen:
            seen.add(named[name])
            pairs.append((name, named[name]))
    return pairs


def _belongs(obj: Any, module_name: str) -> bool:
    owner = getattr(obj, "__module__", None)
    if not isinstance(owner, str):
        return False
    return owner in (module_name, "_" + module_name) or owner.startswith(module_name + ".")


def _public_objects(module_name: str, module: Any) -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = [(module_name, module)]
    for attr, obj in sorted(vars(module).items()):
        if attr.startswith("_") or not _belongs(obj, module_name):
            continue
        if inspect.isclass(obj):
            found.append((f"{module_name}.{attr}", obj))
            for member, value in sorted(vars(obj).items()):
                if member.startswith("_"):
                    continue
                if isinstance(value, (classmethod, staticmethod)):
                    value = value.__func__
                if inspect.isroutine(value) or isinstance(value, property):
                    found.append((f"{module_name}.{attr}.{member}", value))
        elif inspect.isroutine(obj):
            found.append((f"{module_name}.{attr}", obj))
    return found


def _own_doc(obj: Any) -> str | None:
    doc = vars(obj).get("__doc__") if inspect.isclass(obj) else getattr(obj, "__doc__", None)
    if not isinstance(doc, str):
        return None
    doc = inspect.cleandoc(doc).strip()
    if inspect.isclass(obj) and "\n" not in doc and doc.startswith(f"{obj.__name__}("):
        return None
    return doc or None


def _truncate(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    head = text[: max_chars + 1]
    paragraph = head.rfind("\n\n")
    if paragraph >= max_chars // 2:
        return head[:paragraph].rstrip()
    ends = [m.end() for m in _SENTENCE_END.finditer(head)]
    if ends and ends[-1] >= max_chars // 2:
        return head[: ends[-1]].rstrip()
    space = max((head.rfind(c) for c in " \n\t"), default=-1)
    cut = space if space > 0 else max_chars
    return head[:cut].rstrip()


def instruction_dataset(pairs: Sequence[tuple[str, str]], seed: int = 0) -> Any:
    """A :class:`datasets.Dataset` of prompt/response rows, one per ``(name, text)`` pair.

    Columns: ``prompt`` (one of :data:`PROMPT_TEMPLATES` filled with the name), ``response``
    (the text) and ``name``. The template of a row is chosen by a CRC-32 of ``seed`` and the
    name, so it does not depend on the order of ``pairs`` or on Python's hash seed.
    """
    import datasets

    seed = require_int(seed, "seed", 0)
    if len(pairs) == 0:
        raise ValueError("`pairs` is empty; there is nothing to build a dataset from.")
    names, prompts, responses = [], [], []
    for row, pair in enumerate(pairs):
        if len(pair) != 2 or not all(isinstance(part, str) for part in pair):
            raise TypeError(f"Pair {row} must be (name: str, text: str), got {pair!r}.")
        name, text = pair
        choice = zlib.crc32(f"{seed}:{name}".encode()) % len(PROMPT_TEMPLATES)
        names.append(name)
        prompts.append(PROMPT_TEMPLATES[choice].format(name=name))
        responses.append(text)
    return datasets.Dataset.from_dict({"prompt": prompts, "response": responses, "name": names})


def split_corpus(
    pairs: Sequence[tuple[str, str]],
    fractions: Sequence[float] = (0.5, 0.4, 0.1),
    seed: int = 0,
) -> tuple[list[tuple[str, str]], ...]:
    """Split ``pairs`` into ``len(fractions)`` disjoint parts, whole modules at a time.

    All pairs of one top-level package (:func:`module_of`) go to the same part, so no two parts
    share a module. Modules are visited in an order shuffled by ``seed``, and each goes to the
    part furthest below its share, the part ``j`` maximising
    ``fractions[j] * (n_assigned + n_module) - n_j`` (counts of pairs), except that the last
    modules are kept for parts that are still empty. The default fractions are meant as
    pretraining text / fine-tuning pool / held-out set. Each part is sorted by name.
    """
    fractions = [require_positive(f, f"fractions[{i}]") for i, f in enumerate(fractions)]
    seed = require_int(seed, "seed", 0)
    if not fractions:
        raise ValueError("`fractions` is empty; pass one fraction per part.")
    if not math.isclose(sum(fractions), 1.0, abs_tol=1e-6):
        raise ValueError(f"`fractions` must sum to 1, got {sum(fractions)!r}.")
    groups: dict[str, list[tuple[str, str]]] = {}
    for name, text in sorted(pairs):
        groups.setdefault(module_of(name), []).append((name, text))
    if len(groups) < len(fractions):
        raise ValueError(
            f"Cannot split {len(groups)} module(s) into {len(fractions)} non-empty parts."
        )
    order = sorted(groups)
    random.Random(seed).shuffle(order)
    parts: list[list[tuple[str, str]]] = [[] for _ in fractions]
    assigned = 0
    for position, module in enumerate(order):
        size = len(groups[module])
        empty = [j for j, part in enumerate(parts) if not part]
        candidates = empty if len(order) - position <= len(empty) else range(len(parts))
        target = max(candidates, key=lambda j: fractions[j] * (assigned + size) - len(parts[j]))
        parts[target].extend(groups[module])
        assigned += size
    return tuple(sorted(part) for part in parts)
