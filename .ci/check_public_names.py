"""Resolve every public name of lightning_info in this environment.

Each name must import, or raise an ImportError that names the extra to install
(``pip install 'lightning-info[<extra>]'``) for an extra whose packages are absent here.
Exits non-zero otherwise; prints one line per name that needs a missing extra.
"""

from __future__ import annotations

import importlib.util
import re
import sys

import lightning_info
from lightning_info.core.optional import EXTRAS as EXTRA_MODULES


def installed(extra: str) -> bool:
    return all(importlib.util.find_spec(module) for module in EXTRA_MODULES[extra])


def main() -> int:
    problems = []
    for name in lightning_info.__all__:
        try:
            getattr(lightning_info, name)
        except ImportError as err:
            named = re.findall(r"lightning-info\[(\w+)\]", str(err))
            if len(named) != 1 or named[0] not in EXTRA_MODULES or installed(named[0]):
                problems.append(f"{name}: {err}")
            else:
                print(f"{name}: needs the [{named[0]}] extra")
    present = [extra for extra in EXTRA_MODULES if installed(extra)]
    checked = len(lightning_info.__all__)
    print(f"{checked} public names checked; extras present: {present or 'none'}")
    for problem in problems:
        print(f"FAIL {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
