"""The small ConvNet of the pool and of the evaluation, and a context that trains one net."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import Tensor, nn

from lightning_info.core.validation import (
    require_int,
)

NetFactory = Callable[[int, int, int], nn.Module]
"""``factory(in_channels, num_classes, image_size)`` builds a network with ``features(x)`` and
``forward(x)``: a class such as :class:`SmallConvNet`, ``functools.partial(SmallConvNet,
width=16)``, or in a LightningCLI YAML ``{class_path: ..., init_args: {width: 16}}`` (the class's
other arguments)."""


class SmallConvNet(nn.Module):
    """Two conv blocks (3x3 conv, group norm with one group per channel, ReLU, 2x2 average pool)
    and a linear classifier.

    ``features(x)`` is the flattened output of the conv blocks, of size
    ``width * (image_size // 4) ** 2``; ``forward(x)`` gives the logits. Group norm with one
    channel per group is instance norm with an affine map, so the features of an image do not
    depend on the rest of its batch (as in the ConvNets of dataset distillation).
    """

    def __init__(self, in_channels: int, num_classes: int, image_size: int, width: int = 32):
        super().__init__()
        require_int(in_channels, "in_channels", 1)
        require_int(num_classes, "num_classes", 2)
        require_int(image_size, "image_size", 4)
        require_int(width, "width", 1)
        blocks: list[nn.Module] = []
        channels = in_channels
        for _ in range(2):
            blocks += [
                nn.Conv2d(channels, width, kernel_size=3, padding=1),
                nn.GroupNorm(width, width),
                nn.ReLU(),
                nn.AvgPool2d(2),
            ]
            channels = width
        self.in_channels, self.image_size = in_channels, image_size
        self.body = nn.Sequential(*blocks)
        self.feature_dim = width * (image_size // 4) ** 2
        self.classifier = nn.Linear(self.feature_dim, num_classes)

    def features(self, x: Tensor) -> Tensor:
        """Refuses (reading metadata only) inputs of another shape than
        ``(N, in_channels, image_size, image_size)`` or another dtype than the weights'."""
        expected = (self.in_channels, self.image_size, self.image_size)
        if x.dim() != 4 or tuple(x.shape[1:]) != expected:
            raise ValueError(
                f"SmallConvNet expects images of shape (N, {', '.join(map(str, expected))}), got "
                f"{tuple(x.shape)}; build it with the data's channels and image size."
            )
        weights = self.classifier.weight.dtype
        if x.dtype != weights and not torch.is_autocast_enabled(x.device.type):
            raise TypeError(
                f"`x` has dtype {x.dtype} but the network's weights are {weights}; pass "
                f"`x.to({weights})`."
            )
        return self.body(x).flatten(1)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x))


@contextmanager
def trainable(net: nn.Module) -> Iterator[None]:
    """Let ``net``'s parameters take gradients while it trains, then freeze them again."""
    net.requires_grad_(True)
    try:
        yield
    finally:
        net.requires_grad_(False)
        net.zero_grad(set_to_none=True)
