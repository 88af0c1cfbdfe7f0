"""``lightning-info callbacks``: the packaged callback YAMLs."""

from __future__ import annotations

from lightning_info.cli import BadInput
from lightning_info.configs import callback_config, callback_listing


def callbacks(name: str | None = None) -> int:
    """List the callback YAMLs shipped with the package, or print the path of one.

    Each attaches one Callback to any LightningCLI run:
    ``--trainer.callbacks+=$(lightning-info callbacks --name fisher_constraint)``.

    Args:
        name: a YAML's name (``fisher_constraint`` or ``fisher_constraint.yaml``); none: list all.
    """
    if name is not None:
        try:
            print(callback_config(name))
        except ValueError as err:
            raise BadInput(str(err)) from err
        return 0
    print(callback_listing())
    return 0
