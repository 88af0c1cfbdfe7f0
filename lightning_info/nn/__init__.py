"""Networks used by several methods."""

from lightning_info.nn.mlp import MLPClassifier

__all__ = ["MLPClassifier"]
