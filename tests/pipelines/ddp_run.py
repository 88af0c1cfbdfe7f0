"""The toy SFT pipeline under ``Trainer(strategy="ddp", devices=2)`` on two CPU processes.

Run by ``test_sft.py`` as ``python -m torch.distributed.run --nproc-per-node 2 -m
tests.pipelines.ddp_run OUT``: torchrun starts both processes and each joins the process group
(gloo). Each rank appends one JSON line to ``OUT``: its rank, the world size, the selection and
the test metrics it logged.
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path

from lightning.pytorch.strategies import DDPStrategy

from tests.pipelines import toy


def main(out: str) -> None:
    root = Path(out).parent / "run"
    trainer, _, data, _, tested = toy.fit_and_test(
        root, strategy=DDPStrategy(timeout=timedelta(seconds=120)), devices=2, logger=False
    )
    line = {
        "rank": trainer.global_rank,
        "world_size": trainer.world_size,
        "selection": [int(i) for i in data.selection.indices],
        "tested": {k: float(v) for k, v in tested.items()},
    }
    with open(out, "a") as handle:
        handle.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
