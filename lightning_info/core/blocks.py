"""Ragged per-example blocks of token features, stored flat (CSR layout)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class TokenBlocks:
    """Example ``i`` owns rows ``values[offsets[i]:offsets[i + 1]]`` of a ``(T, d)`` matrix.

    This is the pool representation of information-gain selection: ``X_i`` is the ``(m_i, d)``
    block of example ``i`` (e.g. last-layer hidden states at its response tokens).
    """

    values: Tensor
    offsets: Tensor

    def __post_init__(self) -> None:
        if self.values.dim() != 2:
            raise ValueError(
                f"`values` must be (tokens, dim), got shape {tuple(self.values.shape)}."
            )
        offsets = self.offsets
        if offsets.dim() != 1 or offsets.numel() < 1 or offsets.dtype != torch.long:
            raise ValueError("`offsets` must be a 1-D long tensor [0, m_0, m_0 + m_1, ...].")
        if offsets[0] != 0 or offsets[-1] != self.values.shape[0]:
            raise ValueError(
                f"`offsets` must run from 0 to the number of rows ({self.values.shape[0]}), "
                f"got {offsets[0].item()} ... {offsets[-1].item()}."
            )
        if (offsets[1:] < offsets[:-1]).any():
            raise ValueError("`offsets` must be non-decreasing.")

    @classmethod
    def from_list(cls, blocks: list[Tensor]) -> TokenBlocks:
        """Stack a list of ``(m_i, d)`` tensors."""
        if not blocks:
            raise ValueError("Need at least one example block.")
        lengths = torch.tensor([b.shape[0] for b in blocks], dtype=torch.long)
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
        return cls(torch.cat(list(blocks), dim=0), offsets)

    def __len__(self) -> int:
        return self.offsets.numel() - 1

    @property
    def dim(self) -> int:
        return self.values.shape[1]

    @property
    def lengths(self) -> Tensor:
        return self.offsets[1:] - self.offsets[:-1]

    def block(self, index: int) -> Tensor:
        return self.values[self.offsets[index] : self.offsets[index + 1]]

    def to_list(self) -> list[Tensor]:
        return [self.block(i) for i in range(len(self))]


POOLINGS = ("mean", "sum")


def pooled_features(blocks: TokenBlocks, pooling: str = "mean") -> Tensor:
    """One vector per example: ``x_i = sum_t X_i[t]`` (``"sum"``) or that over ``m_i`` (``"mean"``).

    Returns an ``(N, d)`` tensor of the dtype and device of ``blocks.values``; ``"mean"`` raises
    ``ValueError`` when a block has no rows.
    """
    if pooling not in POOLINGS:
        raise ValueError(f"`pooling` must be one of {POOLINGS}, got {pooling!r}.")
    lengths = blocks.lengths.to(blocks.values.device)
    owner = torch.repeat_interleave(torch.arange(len(blocks), device=lengths.device), lengths)
    sums = blocks.values.new_zeros(len(blocks), blocks.dim).index_add_(0, owner, blocks.values)
    if pooling == "sum":
        return sums
    if (lengths == 0).any():
        empty = torch.nonzero(lengths == 0).flatten().tolist()
        raise ValueError(
            f"Mean pooling needs at least one row per block; blocks {empty} are empty."
        )
    return sums / lengths.unsqueeze(1).to(sums.dtype)
