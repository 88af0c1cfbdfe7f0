"""``GameEpisodesDataModule``: an OpenSpiel game and the ids of the episodes a solver plays.

Learning under bandit feedback has no data set: the solver plays its own episodes. The loaders
yield batches of episode ids, ``episodes_per_epoch`` of them an epoch, so a Trainer's
``max_epochs`` / ``max_steps`` budget the episodes and ``batch_size`` sets the episodes per
update (per device: under DDP Lightning's ``DistributedSampler`` gives every rank its share of
each epoch's ids, so two ranks of batch ``b`` play the episodes one device of batch ``2b``
plays). The solver keys each episode's randomness by its id
(:func:`~lightning_info.methods.efg_last_iterate.functional.episode_uniforms`).
"""

from __future__ import annotations

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from lightning_info.core.resume import ResumableDataLoader
from lightning_info.core.validation import require_bool, require_int
from lightning_info.methods.efg_last_iterate.game import GameTree, game_tree, load_game

__all__ = ["GameEpisodesDataModule"]


class GameEpisodesDataModule(pl.LightningDataModule):
    """Episode ids of an OpenSpiel game (module docstring).

    Args:
        game: a ``pyspiel.load_game`` string (``"kuhn_poker"``, ``"leduc_poker"``,
            ``"liars_dice"``, ...), any two-player zero-sum sequential game.
        batch_size: episodes per update and device.
        episodes_per_epoch: episode ids per epoch (all devices together).
        sequential_shards: with ``Trainer(use_distributed_sampler=False)``, shard the ids
            in order over the ranks here.
    """

    def __init__(
        self,
        game: str = "kuhn_poker",
        batch_size: int = 256,
        episodes_per_epoch: int = 25_600,
        sequential_shards: bool = False,
    ) -> None:
        super().__init__()
        self.game = load_game(game)  # refuses unsupported games before any work
        self.game_name = game
        self.batch_size = require_int(batch_size, "batch_size", 1)
        self.episodes_per_epoch = require_int(episodes_per_epoch, "episodes_per_epoch", 1)
        if self.episodes_per_epoch < self.batch_size:
            raise ValueError(
                f"episodes_per_epoch ({episodes_per_epoch}) is below batch_size ({batch_size}):"
                " an epoch would hold no full update."
            )
        require_bool(sequential_shards, "sequential_shards")
        self.sequential_shards = sequential_shards
        self._tree: GameTree | None = None

    @property
    def tree(self) -> GameTree:
        """The game's arrays (:func:`~lightning_info.methods.efg_last_iterate.game.game_tree`)."""
        if self._tree is None:
            self._tree = game_tree(self.game_name)
        return self._tree

    def _loader(self) -> DataLoader:
        ids = TensorDataset(torch.arange(self.episodes_per_epoch))
        sampler = None
        trainer = self.trainer
        if self.sequential_shards and trainer is not None and trainer.world_size > 1:
            sampler = DistributedSampler(
                ids, num_replicas=trainer.world_size, rank=trainer.global_rank, shuffle=False
            )
        return ResumableDataLoader(
            ids, trainer=trainer, batch_size=self.batch_size, sampler=sampler, drop_last=True
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader()
