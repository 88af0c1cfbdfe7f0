"""``python -m lightning_info.configs [NAME]``: the path of a shipped callback YAML, or all."""

from __future__ import annotations

import sys

from lightning_info.configs import callback_config, callback_configs


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args:
        try:
            print(callback_config(args[0]))
        except ValueError as err:
            print(err, file=sys.stderr)
            return 2
        return 0
    for name, path in callback_configs().items():
        print(f"{name:28} {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
