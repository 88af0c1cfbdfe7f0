"""One short FisherMonitor run, for the two-process test.

``python monitor_run.py {ddp,model_parallel,single} OUT.json`` trains the sharded test's MLP for
4 steps on 32 samples: on 2 CPU processes under DDP or under ``ModelParallelStrategy`` (every
layer and the root ``fully_shard``-ed: FSDP2, DTensor gradients), each rank with batch 4 of
samples ``r, r + 2, ...``, or in one process with batch 8 (the same samples per step). It writes
the monitor's groups, step count and running sums, and the per-layer traces logged at each step.
Lightning starts the second process by running this script again.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from lightning.pytorch import Callback, Trainer, seed_everything
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.strategies import ModelParallelStrategy

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from lightning_info import FisherMonitor  # noqa: E402
from tests.methods.fic_tsc.sharded_run import (  # noqa: E402
    ShardedClassifier,
    leave_distributed_run,
)
from tests.tiny import QUIET, TinyDataModule  # noqa: E402


class Record(Callback):
    def __init__(self, monitor: FisherMonitor):
        self.monitor, self.logged = monitor, []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        logged = self.monitor.last_logged
        self.logged.append([logged[f"fisher_monitor/{g}/trace"] for g in ("net.0", "net.2")])


def main(strategy_name: str, out: str) -> None:
    seed_everything(0)
    model = ShardedClassifier()
    devices, batch_size, strategy = 2, 4, strategy_name
    if strategy_name == "model_parallel":
        strategy = ModelParallelStrategy(data_parallel_size=2, tensor_parallel_size=1)
    elif strategy_name == "single":
        devices, batch_size, strategy = 1, 8, "auto"
    monitor = FisherMonitor(every_n_steps=1)
    record = Record(monitor)
    trainer = Trainer(
        **{**QUIET, "accelerator": "cpu", "logger": CSVLogger(Path(out).parent / strategy_name)},
        devices=devices,
        strategy=strategy,
        max_steps=4,
        log_every_n_steps=1,
        callbacks=[monitor, record],
        use_distributed_sampler=False,
    )
    data = TinyDataModule(batch_size=batch_size, num_samples=32, sequential_shards=True)
    trainer.fit(model, datamodule=data)
    state = monitor.state_dict()
    if trainer.is_global_zero:
        result = {
            "groups": state["group_names"],
            "num_steps": state["num_steps"],
            "sums": state["trace_sums"],
            "logged": record.logged,
        }
        Path(out).write_text(json.dumps(result))
    if devices == 1:
        return
    leave_distributed_run(trainer)


if __name__ == "__main__":
    main(*sys.argv[1:3])
