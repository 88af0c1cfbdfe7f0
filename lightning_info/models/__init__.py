"""Network architectures."""

from lightning_info.models.inception_time import (
    InceptionModule,
    InceptionTime,
    InceptionTimeClassifier,
    inception_kernel_sizes,
)
from lightning_info.models.mlp import MLPClassifier

__all__ = [
    "InceptionModule",
    "InceptionTime",
    "InceptionTimeClassifier",
    "MLPClassifier",
    "inception_kernel_sizes",
]
