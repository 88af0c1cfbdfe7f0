"""The classes the package defines, found by walking it (as Composer's algorithm tests do)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import lightning_info


def classes_of_the_package(bases: tuple[type, ...], *, private: bool = True) -> set[type]:
    """Every class defined in a module of ``lightning_info`` that subclasses one of ``bases``
    (``private=False`` leaves out names that start with ``_``)."""
    defined = set()
    for info in pkgutil.walk_packages(lightning_info.__path__, "lightning_info."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        defined |= {
            obj
            for obj in vars(module).values()
            if inspect.isclass(obj)
            and obj.__module__ == module.__name__
            and issubclass(obj, bases)
            and (private or not obj.__name__.startswith("_"))
        }
    return defined
