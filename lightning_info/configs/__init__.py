"""The callbacks' LightningCLI configs, shipped with the package.

Each ``callbacks/<name>.yaml`` attaches one Callback to any LightningCLI run::

    python train.py fit --trainer.callbacks+=$(python -m lightning_info.configs fisher_constraint)

``python -m lightning_info.configs`` lists them with their paths. LightningCLI also takes the class
path itself, without a file: ``--trainer.callbacks+=lightning_info.FisherConstraint
--trainer.callbacks.max_fisher=2.0``.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def callback_configs() -> dict[str, Path]:
    """``{name: path}`` of every shipped callback YAML, sorted by name."""
    folder = Path(str(resources.files(__name__) / "callbacks"))
    return {path.stem: path for path in sorted(folder.glob("*.yaml"))}


def callback_config(name: str) -> Path:
    """The path of the shipped YAML ``name`` (with or without ``.yaml``)."""
    configs = callback_configs()
    stem = name.removesuffix(".yaml")
    if stem not in configs:
        raise ValueError(f"no callback config {name!r}; shipped: {', '.join(configs)}.")
    return configs[stem]


def callback_listing() -> str:
    """One line per shipped YAML: its name, then its path (what the listing commands print)."""
    return "\n".join(f"{name:28} {path}" for name, path in callback_configs().items())
