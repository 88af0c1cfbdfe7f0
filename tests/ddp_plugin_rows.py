"""Every plugin-table row under DDP on two CPU processes, in one launch.

Run by the ``ddp_rows`` fixture (``tests/conftest.py``) as ``python -m torch.distributed.run
--nproc-per-node 2 -m tests.ddp_plugin_rows OUT``: torchrun starts the two processes, as a
cluster launcher does, and each row's ``Trainer(strategy="ddp", devices=2)`` joins the same
process group, so the rows share one interpreter start instead of paying two per row. Rank 0
saves, per row, the initial and final weights and the trainer's world size, or the error that
stopped the row, and per resume point of ``tests/resume_points.py`` what differs from the
uninterrupted run. Then the metric table (``tests/metric_table.py``) is logged on uneven shards and
each rank saves what it logged.
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

from tests.metric_table import METRICS, MetricLogger, SaveLoggedValues
from tests.plugin_table import PLUGINS, PluginCase
from tests.resume_points import RESUME_POINTS, differences, resumed_run, straight_run
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


def _ddp_fit(case: PluginCase, folder: Path, *, seed=0, ckpt_path=None, extra_callbacks=(), **kw):
    seed_everything(seed)
    model, callbacks = case.make_model(), [*case.make_callbacks(), *extra_callbacks]
    data = None if case.make_data is None else case.make_data(4)
    trainer = Trainer(
        callbacks=callbacks,
        default_root_dir=folder,
        strategy=DDPStrategy(timeout=timedelta(seconds=120)),
        devices=2,
        **{**QUIET, **case.trainer_kwargs, **kw},
    )
    trainer.fit(model, datamodule=data, ckpt_path=ckpt_path)
    return trainer, model, callbacks


def resume_row(case: PluginCase, root: Path) -> dict:
    """The row's resume points (``tests/resume_points.py``) under DDP: per point, the parts of
    the resumed run's state (rank 0's) that differ from the uninterrupted run's."""

    def fit(folder, **kwargs):
        return _ddp_fit(case, folder, **kwargs)

    folder = root / f"resume-{case.id}"
    straight, mid_epoch, batches = straight_run(fit, folder / "straight")
    result = {"batches_per_epoch": batches, "step": straight["step"]}
    for point in RESUME_POINTS:
        resumed = resumed_run(fit, folder / point, point, mid_epoch, batches)
        result[point] = differences(resumed, straight)
    return result


def log_metric_table(root: Path) -> None:
    """The metric table logged on uneven shards; each rank saves ``metrics-rank{r}.pt``."""
    trainer = Trainer(
        callbacks=[SaveLoggedValues(str(root), prefix="metrics-")],
        strategy=DDPStrategy(timeout=timedelta(seconds=120)),
        devices=2,
        use_distributed_sampler=False,
        **QUIET,
    )
    trainer.test(MetricLogger(METRICS), verbose=False)


def main(out: str) -> None:
    root = Path(out)
    for case in PLUGINS:
        for run, name in ((fit_row, case.id), (resume_row, f"resume-{case.id}")):
            try:
                result = run(case, root)
            except Exception:  # recorded for the row's test; the other rows still run
                result = {"error": traceback.format_exc()}
            if os.environ["RANK"] == "0":
                torch.save(result, root / f"{name}.pt")
    log_metric_table(root)
    if torch.distributed.is_initialized():
        # joined here, while Python is fully alive: left to interpreter exit, a gloo thread still
        # releasing a collective can abort the process after a run that succeeded
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
