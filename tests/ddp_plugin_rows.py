"""Every plugin-table row under DDP on two CPU processes, in one launch.

Run by ``test_plugin_table.py`` as ``python -m torch.distributed.run --nproc-per-node 2 -m
tests.ddp_plugin_rows OUT``: torchrun starts the two processes, as a cluster launcher does, and
each row's ``Trainer(strategy="ddp", devices=2)`` joins the same process group, so the rows share
one interpreter start instead of paying two per row. Rank 0 saves, per row, the initial and final
weights and the trainer's world size, or the error that stopped the row.
"""

from __future__ import annotations

import os
import sys
import traceback
from datetime import timedelta
from pathlib import Path

import torch
from lightning.pytorch import Trainer, seed_everything
from lightning.pytorch.strategies import DDPStrategy

from tests.plugin_table import PLUGINS, PluginCase
from tests.tiny import QUIET


def _weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def fit_row(case: PluginCase, root: Path) -> dict:
    """One row: 3 steps of per-device batch 4 on 2 processes (in-order shards where the row must
    match one device)."""
    seed_everything(0)
    initial = _weights(case.make_model())
    seed_everything(0)
    model, callbacks = case.make_model(), case.make_callbacks()
    data = None if case.make_data is None else case.make_data(4)
    kwargs = {**QUIET, **case.trainer_kwargs}
    if case.ddp_matches_single_device:
        data.sequential_shards = True
        kwargs["use_distributed_sampler"] = False
    trainer = Trainer(
        callbacks=callbacks,
        default_root_dir=root / case.id,
        strategy=DDPStrategy(timeout=timedelta(seconds=120)),
        devices=2,
        max_steps=3,
        **kwargs,
    )
    trainer.fit(model, datamodule=data)
    return {
        "initial": initial,
        "final": _weights(model),
        "world_size": trainer.world_size,
        "finished": trainer.state.finished,
    }


def main(out: str) -> None:
    root = Path(out)
    for case in PLUGINS:
        try:
            result = fit_row(case, root)
        except Exception:  # recorded for the row's test; the other rows still run
            result = {"error": traceback.format_exc()}
        if os.environ["RANK"] == "0":
            torch.save(result, root / f"{case.id}.pt")
    if torch.distributed.is_initialized():
        # joined here, while Python is fully alive: left to interpreter exit, a gloo thread still
        # releasing a collective can abort the process after a run that succeeded
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
