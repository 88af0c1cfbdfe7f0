"""One short FisherConstraint run on 2 processes, for the sharded-strategy test.

``python sharded_run.py {ddp,model_parallel,fsdp} OUT.json [cpu|cuda]`` trains a small MLP for 4
steps with a bound that every step exceeds, under DDP, under ``ModelParallelStrategy`` with
every layer and the root ``fully_shard``-ed (FSDP2, DTensor gradients) or under ``FSDPStrategy``
(FSDP1; Lightning runs it on GPUs only), and writes the logged traces and the final parameters.
Lightning starts the second process by running this script again. On a machine with 2 GPUs,
``python sharded_run.py fsdp fsdp.json cuda`` and ``python sharded_run.py ddp ddp.json cuda``
must give the same traces and parameters (``test_strategies.py`` checks model_parallel on CPU).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
from lightning.pytorch import Callback, Trainer, seed_everything
from lightning.pytorch.strategies import FSDPStrategy, ModelParallelStrategy

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from lightning_info import FisherConstraint  # noqa: E402
from tests.tiny import QUIET, TinyClassifier, TinyDataModule  # noqa: E402


class ShardedClassifier(TinyClassifier):
    def configure_model(self):
        if isinstance(self.trainer.strategy, ModelParallelStrategy):
            from torch.distributed.fsdp import fully_shard

            mesh = self.device_mesh["data_parallel"]
            for layer in (self.net[0], self.net[2]):
                fully_shard(layer, mesh=mesh)
            fully_shard(self.net, mesh=mesh)  # the root group, as FSDP2 expects

    def configure_optimizers(self):  # plain SGD: the same update for whole and sharded tensors
        return torch.optim.SGD(self.parameters(), lr=0.5)


class Record(Callback):
    def __init__(self):
        self.traces = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        metrics = trainer.callback_metrics
        self.traces.append(
            [float(metrics["fisher/trace_before"]), float(metrics["fisher/trace_after"])]
        )


def main(strategy_name: str, out: str, accelerator: str = "cpu") -> None:
    seed_everything(0)
    model = ShardedClassifier()
    if strategy_name == "model_parallel":  # two data-parallel shards (the default is 2-way TP)
        strategy = ModelParallelStrategy(data_parallel_size=2, tensor_parallel_size=1)
    elif strategy_name == "fsdp":
        strategy = FSDPStrategy()
    else:
        strategy = "ddp"
    record = Record()
    trainer = Trainer(
        **{**QUIET, "accelerator": accelerator},
        devices=2,
        strategy=strategy,
        max_steps=4,
        callbacks=[FisherConstraint(max_fisher=1e-4), record],
        use_distributed_sampler=False,  # the data module shards: the same batches in both runs
    )
    data = TinyDataModule(batch_size=4, num_samples=32, sequential_shards=True)
    trainer.fit(model, datamodule=data)
    params = {}
    for name, parameter in model.named_parameters():
        value = parameter.full_tensor() if hasattr(parameter, "full_tensor") else parameter
        params[name] = value.detach().cpu().flatten().tolist()
    if trainer.is_global_zero:
        Path(out).write_text(json.dumps({"traces": record.traces, "params": params}))
    leave_distributed_run(trainer)


def leave_distributed_run(trainer: Trainer) -> None:
    """End a worker whose results are written: tear the process group down (gloo's threads still
    running at exit can abort the process, "terminate called without an active exception",
    after a run that succeeded), then leave without the interpreter's finalisation, since
    tearing down alone was not always enough under load."""
    trainer.strategy.barrier()
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(*sys.argv[1:4])
