"""lightning-info: information-theoretic training methods as PyTorch Lightning plugins.

Every public name of the method packages (and of ``core``, ``data``, ``lm``, ``nn``,
``pipelines`` and ``scoring``) is importable from here (``from lightning_info import
FisherConstraint``). The one list of them is each package's ``__all__``; ``_public_names.py`` and
the stub ``__init__.pyi`` (which type checkers and IDEs read) are written from those by
``scripts/public_names.py``.
The names are resolved on first use (PEP 562), so ``import lightning_info`` loads neither
Lightning's heavier dependencies nor an optional extra; a plugin whose extra is missing raises an
``ImportError`` naming the extra to install when it is first touched.
"""

from __future__ import annotations

import importlib
from typing import Any

from lightning_info._public_names import TOP_LEVEL

__version__ = "0.1.0"

_MODULE_OF = {name: module for module, names in TOP_LEVEL.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'lightning_info' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
