"""Gathering ragged strided shards with Lightning's all_gather under ddp_spawn."""

from __future__ import annotations

import json

import torch
from lightning.pytorch import Callback, Trainer

from lightning_info.core.blocks import TokenBlocks
from lightning_info.core.distributed import gather_strided_blocks, strided_shard
from tests.tiny import QUIET, ReleaseProcessGroup, TinyClassifier, TinyDataModule

NUM_ROWS = 11


def _full_pool() -> TokenBlocks:
    generator = torch.Generator().manual_seed(0)
    lengths = torch.randint(0, 5, (NUM_ROWS,), generator=generator)  # includes empty blocks
    return TokenBlocks.from_list([torch.randn(int(m), 3, generator=generator) for m in lengths])


class GatherProbe(Callback):
    def __init__(self, out_dir):
        self.out_dir = out_dir

    def setup(self, trainer, pl_module, stage):
        pool = _full_pool()
        rows = strided_shard(NUM_ROWS, trainer.global_rank, trainer.world_size)
        local = TokenBlocks.from_list([pool.block(r) for r in rows])
        gathered = gather_strided_blocks(
            trainer.strategy, local, NUM_ROWS, trainer.global_rank, trainer.world_size
        )
        record = {
            "rows": rows,
            "equal": torch.equal(gathered.values, pool.values)
            and torch.equal(gathered.offsets, pool.offsets),
        }
        (self.out_dir / f"rank{trainer.global_rank}.json").write_text(json.dumps(record))


def test_strided_shards_cover_every_row_once():
    shards = [strided_shard(10, r, 3) for r in range(3)]
    assert sorted(sum(shards, [])) == list(range(10))
    assert [len(s) for s in shards] == [4, 3, 3]


def test_gather_reassembles_the_pool_on_every_rank(tmp_path):
    trainer = Trainer(
        callbacks=[GatherProbe(tmp_path), ReleaseProcessGroup()],
        strategy="ddp_spawn",
        devices=2,
        max_steps=1,
        **QUIET,
    )
    trainer.fit(TinyClassifier(), datamodule=TinyDataModule())
    records = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["rows"] for r in records] == [[0, 2, 4, 6, 8, 10], [1, 3, 5, 7, 9]]
    assert all(r["equal"] for r in records)
