"""InceptionTime, the time-series feature extractor of Ismail Fawaz et al., "InceptionTime:
Finding AlexNet for Time Series Classification", Data Mining and Knowledge Discovery 34 (2020).

The FIC-TSC classifier built on it is
:class:`~lightning_info.methods.fic_tsc.module.InceptionTimeClassifier`.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from lightning_info.core.validation import require_bool, require_int

__all__ = ["InceptionModule", "InceptionTime", "inception_kernel_sizes"]


def inception_kernel_sizes(kernel_size: int) -> tuple[int, int, int]:
    """Kernel sizes of the three parallel convolutions of an Inception module.

    ``[kernel_size // 2**i for i in (0, 1, 2)]`` with every even size reduced by one, so each
    convolution has a centre tap and 'same' padding is symmetric: 40 gives ``(39, 19, 9)``.
    """
    require_int(kernel_size, "kernel_size", 4)
    k1, k2, k3 = (k if k % 2 == 1 else k - 1 for k in (kernel_size // 2**i for i in range(3)))
    return k1, k2, k3


def _odd_kernel_sizes(kernel_sizes: object) -> tuple[int, ...]:
    """``kernel_sizes`` as a non-empty tuple of odd ints >= 1, or a clear error."""
    if isinstance(kernel_sizes, (int, str)) or not hasattr(kernel_sizes, "__iter__"):
        raise TypeError(
            f"`kernel_sizes` must be a sequence of odd ints, got {kernel_sizes!r}; e.g. "
            "inception_kernel_sizes(40) = (39, 19, 9)."
        )
    sizes = tuple(kernel_sizes)
    if not sizes:
        raise ValueError("`kernel_sizes` must hold at least one kernel size.")
    for position, size in enumerate(sizes):
        require_int(size, f"kernel_sizes[{position}]", 1)
        if size % 2 == 0:
            raise ValueError(
                f"`kernel_sizes[{position}]` must be odd so 'same' padding keeps the length, got "
                f"{size}; use {size - 1} or {size + 1}."
            )
    return sizes


def _check_input(x: torch.Tensor, channels: int, weights: torch.dtype, owner: str) -> None:
    """Refuse (reading metadata only) input that is not ``(batch, channels, length >= 1)`` or
    whose dtype differs from the weights' outside autocast."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{owner} expects a torch.Tensor, got {type(x).__name__}.")
    if x.ndim != 3 or x.shape[1] != channels or x.shape[2] < 1:
        raise ValueError(
            f"{owner} expects input of shape (batch, {channels}, length) with length >= 1, got "
            f"{tuple(x.shape)}."
        )
    check_input_dtype(x, weights)


def check_input_dtype(x: torch.Tensor, weights: torch.dtype) -> None:
    """Refuse inputs the layers cannot take: another dtype than the weights' outside autocast,
    and float64 under autocast (which casts float32 inputs only). Reads metadata only."""
    if torch.is_autocast_enabled(x.device.type):
        wrong = not x.is_floating_point() or (x.dtype == torch.float64 and weights != x.dtype)
    else:
        wrong = x.dtype != weights
    if wrong:
        raise TypeError(
            f"`x` has dtype {x.dtype} but the model's weights are {weights}; pass "
            f"`x.to({weights})`, or train under a Trainer precision that converts both "
            "(precision='64-true' for float64)."
        )


class InceptionModule(nn.Module):
    """One Inception module (Ismail Fawaz et al., 2020, Fig. 1).

    ``z = bottleneck(x)`` (a 1x1 convolution to ``bottleneck_channels``, used only when the
    input has more than one channel), then
    ``concat(conv_k1(z), conv_k2(z), conv_k3(z), conv_1x1(maxpool_3(x)))`` followed by
    BatchNorm and ReLU. Every convolution has stride 1, 'same' padding and no bias, so the
    output is ``(batch, 4 * num_filters, length)`` (``len(kernel_sizes) + 1`` branches in all).
    ``kernel_sizes`` must be odd (a centre tap keeps the length), e.g.
    :func:`inception_kernel_sizes`.
    """

    def __init__(
        self,
        in_channels: int,
        num_filters: int,
        kernel_sizes: tuple[int, ...],
        bottleneck_channels: int,
    ) -> None:
        super().__init__()
        self.in_channels = require_int(in_channels, "in_channels", 1)
        require_int(num_filters, "num_filters", 1)
        require_int(bottleneck_channels, "bottleneck_channels", 1)
        kernel_sizes = _odd_kernel_sizes(kernel_sizes)
        self.use_bottleneck = in_channels > 1
        if self.use_bottleneck:
            self.bottleneck: nn.Module = nn.Conv1d(
                in_channels, bottleneck_channels, kernel_size=1, bias=False
            )
            branch_in = bottleneck_channels
        else:
            self.bottleneck = nn.Identity()
            branch_in = in_channels
        self.convs = nn.ModuleList(
            nn.Conv1d(branch_in, num_filters, kernel_size=k, padding=k // 2, bias=False)
            for k in kernel_sizes
        )
        self.pool = nn.MaxPool1d(kernel_size=3, stride=1, padding=1)
        self.pool_conv = nn.Conv1d(in_channels, num_filters, kernel_size=1, bias=False)
        self.bn = nn.BatchNorm1d(num_filters * (len(kernel_sizes) + 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` of shape ``(batch, in_channels, length)`` in the weights' dtype."""
        _check_input(x, self.in_channels, self.pool_conv.weight.dtype, "InceptionModule")
        z = self.bottleneck(x)
        branches = [conv(z) for conv in self.convs]
        branches.append(self.pool_conv(self.pool(x)))
        return F.relu(self.bn(torch.cat(branches, dim=1)))


class _Shortcut(nn.Module):
    """Residual shortcut: 1x1 convolution + BatchNorm, or BatchNorm alone when widths agree."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        if in_channels != out_channels:
            self.proj: nn.Module = nn.Conv1d(in_channels, out_channels, kernel_size=1, bias=False)
        else:
            self.proj = nn.Identity()
        self.bn = nn.BatchNorm1d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.proj(x))


class InceptionTime(nn.Module):
    """InceptionTime feature extractor (Ismail Fawaz et al., 2020).

    ``depth`` Inception modules; after every third one the input of that group of three is
    added back through a shortcut and passed through ReLU:
    ``h_{3j+3} = ReLU(M_{3j+3}(M_{3j+2}(M_{3j+1}(h_{3j}))) + shortcut_j(h_{3j}))``.
    The features are the global average over time of the last feature map, of size
    ``4 * num_filters``.

    Args:
        in_channels: Number of input channels ``C`` of inputs shaped ``(batch, C, length)``.
        num_filters: Filters per branch; each module outputs ``4 * num_filters`` channels.
        depth: Number of Inception modules.
        kernel_size: Longest kernel; see :func:`inception_kernel_sizes`.
        bottleneck_channels: Width of the 1x1 bottleneck in front of the long convolutions.
        use_residual: Add the shortcut after every third module.
    """

    def __init__(
        self,
        in_channels: int,
        num_filters: int = 32,
        depth: int = 6,
        kernel_size: int = 40,
        bottleneck_channels: int = 32,
        use_residual: bool = True,
    ) -> None:
        super().__init__()
        self.in_channels = require_int(in_channels, "in_channels", 1)
        self.num_filters = require_int(num_filters, "num_filters", 1)
        self.depth = require_int(depth, "depth", 1)
        self.bottleneck_channels = require_int(bottleneck_channels, "bottleneck_channels", 1)
        self.kernel_sizes = inception_kernel_sizes(kernel_size)
        self.use_residual = require_bool(use_residual, "use_residual")
        self.out_features = 4 * self.num_filters

        self.blocks = nn.ModuleList()
        self.shortcuts = nn.ModuleList()
        channels = self.in_channels
        residual_channels = self.in_channels
        for index in range(self.depth):
            self.blocks.append(
                InceptionModule(
                    channels, self.num_filters, self.kernel_sizes, self.bottleneck_channels
                )
            )
            channels = self.out_features
            if self.use_residual and index % 3 == 2:
                self.shortcuts.append(_Shortcut(residual_channels, channels))
                residual_channels = channels

    @property
    def residual_after(self) -> tuple[int, ...]:
        """Zero-based indices of the modules whose output receives a shortcut."""
        if not self.use_residual:
            return ()
        return tuple(i for i in range(self.depth) if i % 3 == 2)

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        """Last feature map before pooling, shaped ``(batch, 4 * num_filters, length)``."""
        weights = self.blocks[0].pool_conv.weight.dtype
        _check_input(x, self.in_channels, weights, "InceptionTime")
        residual = x
        shortcuts = iter(self.shortcuts)
        for index, module in enumerate(self.blocks):
            x = module(x)
            if self.use_residual and index % 3 == 2:
                x = F.relu(x + next(shortcuts)(residual))
                residual = x
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Features ``mean_t feature_map(x)[:, :, t]``, shaped ``(batch, 4 * num_filters)``."""
        return self.feature_map(x).mean(dim=-1)
