"""``python -m lightning_info.configs [NAME]``: the path of a shipped callback YAML, or all of them
(as ``lightning-info callbacks [--name NAME]``)."""

from __future__ import annotations

import argparse
import sys

from lightning_info.configs import callback_config, callback_listing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lightning_info.configs", description=__doc__.split("\n")[0]
    )
    parser.add_argument("name", nargs="?", help="a YAML's name; none: list them all")
    args = parser.parse_args(argv)
    if args.name is not None:
        try:
            print(callback_config(args.name))
        except ValueError as err:
            print(err, file=sys.stderr)
            return 2
        return 0
    print(callback_listing())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
