"""``python -m lightning_info.configs [NAME]``: the path of a shipped callback YAML, or all of them
(the same as ``lightning-info callbacks [--name NAME]``)."""

from __future__ import annotations

import sys

from lightning_info.cli import main as cli_main


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if args and not args[0].startswith("-"):
        args = ["--name", *args]
    return cli_main(["callbacks", *args])


if __name__ == "__main__":
    raise SystemExit(main())
