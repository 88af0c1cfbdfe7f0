"""Collectives over Lightning's strategy for ragged per-example data (every rank must call them)."""

from __future__ import annotations

import torch
from lightning.pytorch.strategies import Strategy

from lightning_info.core.blocks import TokenBlocks


def strided_shard(num_rows: int, rank: int, world_size: int) -> list[int]:
    """Rows ``rank, rank + W, rank + 2W, ...``: balanced shards whose union is every row once."""
    return list(range(rank, num_rows, world_size))


def gather_strided_blocks(
    strategy: Strategy, local: TokenBlocks, num_rows: int, rank: int, world_size: int
) -> TokenBlocks:
    """Reassemble the full :class:`TokenBlocks` from the strided shards held by each rank.

    ``strategy.all_gather`` needs equal shapes on every rank, so token rows and block lengths are
    zero-padded to the largest shard, gathered, then trimmed and interleaved back into row order.
    """
    if world_size == 1:
        return local
    device = strategy.root_device
    lengths = local.lengths.to(device)
    counts = strategy.all_gather(torch.tensor([local.values.shape[0]], device=device)).flatten()
    max_rows = (num_rows + world_size - 1) // world_size
    padded_lengths = torch.zeros(max_rows, dtype=torch.long, device=device)
    padded_lengths[: lengths.numel()] = lengths
    padded_values = local.values.new_zeros(int(counts.max()), local.dim).to(device)
    padded_values[: local.values.shape[0]] = local.values.to(device)
    all_lengths = strategy.all_gather(padded_lengths).cpu()
    all_values = strategy.all_gather(padded_values).cpu()
    blocks: list[torch.Tensor | None] = [None] * num_rows
    for source in range(world_size):
        rows = strided_shard(num_rows, source, world_size)
        sizes = all_lengths[source, : len(rows)].tolist()
        values = all_values[source, : int(counts[source])]
        for row, block in zip(rows, torch.split(values, sizes)):
            blocks[row] = block
    return TokenBlocks.from_list(blocks)
