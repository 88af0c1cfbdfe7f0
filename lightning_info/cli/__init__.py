"""``lightning-info``: the data tasks that need no training loop, on a user's own files.

Each command is one function in its own module, its signature and docstring read by jsonargparse
(so every command takes ``--help``, ``--config FILE.yaml`` and ``--print_config``)::

    lightning-info callbacks                 # the packaged callback YAMLs
    lightning-info overlap --help            # train-test overlap / decontamination
    lightning-info select --help             # FisherSFT selection from a pool file
    lightning-info audit --help              # membership audit of a fine-tuned model folder

A command returns its exit status; a bad file raises :class:`BadInput` (printed as
``lightning-info: error: FILE:LINE: what is wrong``, exit status 2) before any output is written.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence

COMMANDS = {
    "audit": "lightning_info.cli.audit",
    "callbacks": "lightning_info.cli.callbacks",
    "overlap": "lightning_info.cli.overlap",
    "select": "lightning_info.cli.select",
}
"""Command name -> the module whose function of the same name implements it."""


class BadInput(ValueError):
    """A file or argument a command cannot use; the message names the file (and line)."""


def _command(name: str) -> Callable[..., int | None]:
    return getattr(importlib.import_module(COMMANDS[name]), name)


def main(argv: Sequence[str] | None = None) -> int:
    """The ``lightning-info`` console entry point; returns the exit status."""
    from jsonargparse import CLI

    args = list(sys.argv[1:] if argv is None else argv)
    components = {name: _command(name) for name in COMMANDS}
    try:
        status = CLI(components, args=args, prog="lightning-info", as_positional=False)
    except BadInput as err:
        print(f"lightning-info: error: {err}", file=sys.stderr)
        return 2
    return int(status or 0)


if __name__ == "__main__":
    raise SystemExit(main())
