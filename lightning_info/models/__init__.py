"""Network architectures."""

from lightning_info.models.inception_time import (
    InceptionModule,
    InceptionTime,
    InceptionTimeClassifier,
    inception_kernel_sizes,
)

__all__ = ["InceptionModule", "InceptionTime", "InceptionTimeClassifier", "inception_kernel_sizes"]
