"""``python -m lightning_info.cli``: the same as the ``lightning-info`` command."""

from lightning_info.cli import main

raise SystemExit(main())
