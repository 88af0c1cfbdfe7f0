"""Fit a causal LM with :class:`CausalLMFineTuner` on a quiet single-process Trainer: the one
training helper of the recipes and studies that build their own small models."""

from __future__ import annotations

from typing import Any

from lightning.pytorch import LightningDataModule, Trainer, seed_everything
from torch.utils.data import DataLoader

from lightning_info.core.options import AdamWOptions
from lightning_info.lm.fine_tuner import CausalLMFineTuner


def fit_causal_lm(
    model: Any,
    data: DataLoader | LightningDataModule,
    *,
    epochs: int,
    lr: float,
    seed: int = 0,
    progress_bar: bool = False,
    root: str | None = None,
) -> Any:
    """Train ``model`` on ``data`` (a loader of causal-LM batches or a data module) for ``epochs``
    epochs from ``seed_everything(seed)``, on one device, without logger or checkpoints; returns
    the model in eval mode."""
    module = CausalLMFineTuner(model, optimizer=AdamWOptions(lr=lr))
    seed_everything(seed, verbose=False)
    trainer = Trainer(
        max_epochs=epochs,
        accelerator="auto",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=progress_bar,
        enable_model_summary=False,
        default_root_dir=root,
    )
    if isinstance(data, LightningDataModule):
        trainer.fit(module, datamodule=data)
    else:
        trainer.fit(module, train_dataloaders=data)
    return module.model.eval()
