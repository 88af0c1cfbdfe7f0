"""ProDiff's noise predictor: a conditional 1-D UNet over a window's points.

The network is the DDPM UNet (Ho et al., 2020) in one dimension, as ProDiff uses it: the window
``(B, C, k)`` (channels time, lat, lng along the points) goes through ``Conv1d(C -> ch)``, then
per level ``res_blocks`` residual blocks of ``ch * multiplier`` channels (GroupNorm, SiLU,
Conv1d, plus the projected embedding, GroupNorm, SiLU, dropout, Conv1d; a 1x1 shortcut where the
width changes), self-attention where the length is in ``attention_lengths``, and a stride-2
convolution between levels; a middle block (residual, attention, residual); the mirrored up
path with skip connections and nearest-neighbour upsampling plus a convolution; and GroupNorm,
SiLU, ``Conv1d(ch -> C)`` out, the predicted noise.

The embedding added in every residual block is ``MLP(sinusoid(t)) + condition`` with
``sinusoid(t) = [sin(t w_j), cos(t w_j)]``, ``w_j = 10000^(-j / (ch/2 - 1))``, and the
condition ``MLP(start) + MLP(end) + MLP(p~)`` of the window's two endpoints and its matched
prototype (:class:`EndpointCondition`), each MLP ``Linear, ReLU, Linear`` to ``4 ch``.
Everything is built on the input's device: the reference builds the sinusoid on CUDA
unconditionally and so cannot run on a CPU.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lightning_info.core.validation import require_fraction, require_int

__all__ = ["EndpointCondition", "TrajectoryUNet", "timestep_embedding"]


def timestep_embedding(steps: Tensor, dim: int) -> Tensor:
    """``(B, dim)`` sinusoids ``[sin(t w_j), cos(t w_j)]`` of step indices ``(B,)`` (module
    docstring), zero-padded to an odd ``dim``, on ``steps``' device."""
    if steps.ndim != 1:
        raise ValueError(f"`steps` must be 1-D (B,), got shape {tuple(steps.shape)}.")
    half = require_int(dim, "dim", 0) // 2
    if half < 2:
        raise ValueError(f"a timestep embedding needs dim >= 4, got {dim}.")
    rate = -math.log(10000.0) / (half - 1)
    frequencies = torch.exp(torch.arange(half, dtype=torch.float32, device=steps.device) * rate)
    angles = steps.float()[:, None] * frequencies[None, :]
    embedding = torch.cat([angles.sin(), angles.cos()], dim=1)
    return F.pad(embedding, (0, dim % 2))


def _mlp(inputs: int, width: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inputs, width), nn.ReLU(), nn.Linear(width, width))


class EndpointCondition(nn.Module):
    """``MLP(start) + MLP(end) [+ MLP(prototype)]``: ``(B, C)`` endpoints and an optional
    ``(B, D)`` prototype to a ``(B, width)`` condition (ProDiff's WideAndDeep)."""

    def __init__(self, channels: int, width: int, prototype_dim: int | None = None) -> None:
        super().__init__()
        channels, width = require_int(channels, "channels", 1), require_int(width, "width", 1)
        if prototype_dim is not None:
            require_int(prototype_dim, "prototype_dim", 1)
        self.channels = channels
        self.start = _mlp(channels, width)
        self.end = _mlp(channels, width)
        self.prototype = None if prototype_dim is None else _mlp(prototype_dim, width)

    def forward(self, start: Tensor, end: Tensor, prototype: Tensor | None = None) -> Tensor:
        if start.shape != end.shape or start.shape[-1:] != (self.channels,):
            raise ValueError(
                f"`start` and `end` must both be (B, {self.channels}), got {tuple(start.shape)} "
                f"and {tuple(end.shape)}."
            )
        condition = self.start(start) + self.end(end)
        if self.prototype is not None:
            if prototype is None:
                raise ValueError("this condition was built with prototypes: pass `prototype`.")
            condition = condition + self.prototype(prototype)
        return condition


def _norm(channels: int, groups: int) -> nn.GroupNorm:
    """GroupNorm with at most ``groups`` groups of at least 4 channels each (the paper's 32
    groups of 128 channels). A group of one channel would be an instance norm, which removes
    any per-channel constant -- and with it the step-and-condition embedding added just before
    the second norm of every residual block."""
    count = max(
        (d for d in range(1, groups + 1) if channels % d == 0 and channels // d >= 4), default=1
    )
    return nn.GroupNorm(count, channels, eps=1e-6)


class _ResidualBlock(nn.Module):
    def __init__(self, inputs: int, outputs: int, embed: int, dropout: float, groups: int):
        super().__init__()
        self.norm1 = _norm(inputs, groups)
        self.conv1 = nn.Conv1d(inputs, outputs, 3, padding=1)
        self.embed = nn.Linear(embed, outputs)
        self.norm2 = _norm(outputs, groups)
        self.dropout = nn.Dropout(dropout)
        self.conv2 = nn.Conv1d(outputs, outputs, 3, padding=1)
        self.shortcut = nn.Identity() if inputs == outputs else nn.Conv1d(inputs, outputs, 1)

    def forward(self, x: Tensor, embedding: Tensor) -> Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.embed(F.silu(embedding))[:, :, None]
        h = self.conv2(self.dropout(F.silu(self.norm2(h))))
        return self.shortcut(x) + h


class _Attention(nn.Module):
    """Single-head self-attention over the points, residual."""

    def __init__(self, channels: int, groups: int):
        super().__init__()
        self.norm = _norm(channels, groups)
        self.qkv = nn.Conv1d(channels, 3 * channels, 1)
        self.out = nn.Conv1d(channels, channels, 1)

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self.qkv(self.norm(x)).transpose(1, 2).chunk(3, dim=2)
        return x + self.out(F.scaled_dot_product_attention(q, k, v).transpose(1, 2))


class _Level(nn.Module):
    def __init__(self, blocks: list[nn.Module], attentions: list[nn.Module]):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.attentions = nn.ModuleList(attentions)

    def step(self, index: int, x: Tensor, embedding: Tensor) -> Tensor:
        x = self.blocks[index](x, embedding)
        return self.attentions[index](x) if len(self.attentions) else x


class TrajectoryUNet(nn.Module):
    """``eps_hat = unet(x_t (B, C, k), t (B,), condition (B, 4 ch))`` (module docstring).

    Args:
        length: ``k``, the window length (any ``k >= 1``; odd lengths are cropped back after
            upsampling).
        channels: ``C`` (3: time, lat, lng).
        base_channels: ``ch`` (128 in the paper).
        multipliers: channel multipliers per level (``(1, 2, 2, 2)`` in the paper).
        res_blocks: residual blocks per level on the way down (one more on the way up).
        attention_lengths: lengths at which the levels attend (``(16,)`` in the paper).
        dropout: in the residual blocks.
        groups: the most GroupNorm groups (fewer where a width has too few channels to give
            every group 4).
    """

    def __init__(
        self,
        length: int,
        channels: int = 3,
        base_channels: int = 128,
        multipliers: tuple[int, ...] = (1, 2, 2, 2),
        res_blocks: int = 2,
        attention_lengths: tuple[int, ...] = (16,),
        dropout: float = 0.1,
        groups: int = 32,
    ) -> None:
        super().__init__()
        self.length = require_int(length, "length", 1)
        self.channels = require_int(channels, "channels", 1)
        ch = require_int(base_channels, "base_channels", 2)
        res_blocks = require_int(res_blocks, "res_blocks", 1)
        dropout = require_fraction(dropout, "dropout")
        multipliers = tuple(require_int(m, "multipliers", 1) for m in multipliers)
        if not multipliers:
            raise ValueError("`multipliers` must name at least one level.")
        groups = require_int(groups, "groups", 1)
        if isinstance(attention_lengths, str):
            raise TypeError(
                "`attention_lengths` must be a tuple of ints, got the string "
                f"{attention_lengths!r}."
            )
        attention_lengths = tuple(require_int(n, "attention_lengths", 1) for n in attention_lengths)
        self.base_channels, self.embed_dim = ch, 4 * ch
        embed, attend = self.embed_dim, set(attention_lengths)
        self.time = nn.Sequential(nn.Linear(ch, embed), nn.SiLU(), nn.Linear(embed, embed))
        self.conv_in = nn.Conv1d(self.channels, ch, 3, padding=1)

        widths, skips, sizes = [ch], [ch], [self.length]
        self.down, self.downsample = nn.ModuleList(), nn.ModuleList()
        for level, multiplier in enumerate(multipliers):
            blocks, attentions, size = [], [], sizes[level]
            for _ in range(res_blocks):
                blocks.append(_ResidualBlock(widths[-1], ch * multiplier, embed, dropout, groups))
                widths.append(ch * multiplier)
                if size in attend:
                    attentions.append(_Attention(ch * multiplier, groups))
                skips.append(widths[-1])
            self.down.append(_Level(blocks, attentions))
            if level < len(multipliers) - 1:
                self.downsample.append(nn.Conv1d(widths[-1], widths[-1], 3, stride=2))
                skips.append(widths[-1])
                sizes.append((size + 1) // 2)
        width = widths[-1]
        self.middle = nn.ModuleList(
            [
                _ResidualBlock(width, width, embed, dropout, groups),
                _Attention(width, groups),
                _ResidualBlock(width, width, embed, dropout, groups),
            ]
        )
        self.up, self.upsample = nn.ModuleList(), nn.ModuleList()
        for level in reversed(range(len(multipliers))):
            blocks, attentions = [], []
            for _ in range(res_blocks + 1):
                out = ch * multipliers[level]
                blocks.append(_ResidualBlock(width + skips.pop(), out, embed, dropout, groups))
                width = out
                if sizes[level] in attend:
                    attentions.append(_Attention(width, groups))
            self.up.append(_Level(blocks, attentions))
            if level > 0:
                self.upsample.append(nn.Conv1d(width, width, 3, padding=1))
        self.norm_out = _norm(width, groups)
        self.conv_out = nn.Conv1d(width, self.channels, 3, padding=1)

    def forward(self, x: Tensor, steps: Tensor, condition: Tensor | None = None) -> Tensor:
        if x.ndim != 3 or x.shape[1:] != (self.channels, self.length):
            raise ValueError(
                f"the UNet takes (B, {self.channels}, {self.length}) inputs, got {tuple(x.shape)}."
            )
        if steps.shape != x.shape[:1]:
            raise ValueError(
                f"`steps` must be ({x.shape[0]},), one step per input, got {tuple(steps.shape)}."
            )
        embedding = self.time(timestep_embedding(steps, self.base_channels))
        if condition is not None:
            embedding = embedding + condition
        hidden = [self.conv_in(x)]
        for level, down in enumerate(self.down):
            for index in range(len(down.blocks)):
                hidden.append(down.step(index, hidden[-1], embedding))
            if level < len(self.downsample):
                hidden.append(self.downsample[level](F.pad(hidden[-1], (1, 1))))
        h = self.middle[0](hidden[-1], embedding)
        h = self.middle[2](self.middle[1](h), embedding)
        for level, up in enumerate(self.up):
            for index in range(len(up.blocks)):
                h = up.step(index, torch.cat([h, hidden.pop()], dim=1), embedding)
            if level < len(self.upsample):
                h = F.interpolate(h, scale_factor=2.0, mode="nearest")
                h = self.upsample[level](h[..., : hidden[-1].shape[-1]])
        return self.conv_out(F.silu(self.norm_out(h)))
