"""Tiny models and data shared by the tests: seconds on a CPU, deterministic, no dropout."""

from __future__ import annotations

import gc

import torch
from lightning.pytorch import Callback, LightningDataModule, LightningModule
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from lightning_info.core.resume import ResumableDataLoader

QUIET = dict(
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
    accelerator="cpu",
)
"""Trainer arguments for tests: CPU, no logger, checkpoints, progress bar or summary."""


class TinyClassifier(LightningModule):
    """Two-layer MLP on ``(x, y)`` batches, SGD with momentum (so the optimizer has state)."""

    def __init__(
        self, in_features: int = 6, hidden: int = 16, num_classes: int = 3, lr: float = 0.5
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.Linear(in_features, hidden), nn.Tanh(), nn.Linear(hidden, num_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train/loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val/loss", nn.functional.cross_entropy(self(x), y))

    def test_step(self, batch, batch_idx):
        x, y = batch
        self.log("test/acc", (self(x).argmax(-1) == y).float().mean())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)


class TinyDataModule(LightningDataModule):
    """A fixed random classification set; batches are served in order (no shuffling).

    With ``sequential_shards=True`` (and ``Trainer(use_distributed_sampler=False)``) rank ``r`` of
    ``W`` gets samples ``r, r + W, ...`` in order, so that one DDP step on ``W x b`` samples sees
    exactly the first ``W * b`` samples, like one device with batch ``W * b``.
    """

    def __init__(
        self,
        batch_size: int = 8,
        num_samples: int = 64,
        in_features: int = 6,
        num_classes: int = 3,
        name: str = "tiny",
        sequential_shards: bool = False,
    ) -> None:
        super().__init__()
        self.sequential_shards = sequential_shards
        self.batch_size = batch_size
        self.name = name
        generator = torch.Generator().manual_seed(1234)
        x = torch.randn(num_samples, in_features, generator=generator) * 3
        y = torch.randint(0, num_classes, (num_samples,), generator=generator)
        self.dataset = TensorDataset(x, y)

    def train_dataloader(self):
        sampler = None
        if self.sequential_shards and self.trainer is not None and self.trainer.world_size > 1:
            sampler = DistributedSampler(
                self.dataset,
                num_replicas=self.trainer.world_size,
                rank=self.trainer.global_rank,
                shuffle=False,
            )
        return ResumableDataLoader(
            self.dataset, trainer=self.trainer, batch_size=self.batch_size, sampler=sampler
        )

    def val_dataloader(self):
        return DataLoader(self.dataset, batch_size=self.batch_size)

    def test_dataloader(self):
        return DataLoader(self.dataset, batch_size=self.batch_size)


class ReleaseProcessGroup(Callback):
    """Close the process group of a ``ddp_spawn`` child at teardown, while Python is fully alive.

    Left to interpreter exit, a gloo worker thread can still be releasing a finished collective
    (whose saved thread-local state holds a Python object) while the child's interpreter
    finalises; PyTorch then aborts the child ("terminate called without an active exception",
    SIGABRT) after a run that succeeded. Destroying the group here joins those threads first.
    """

    def teardown(self, trainer, pl_module, stage):
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            gc.collect()  # the unwrapped DDP module and its reducer hold the group
            torch.distributed.destroy_process_group()
            gc.collect()
