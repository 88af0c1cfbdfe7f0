"""The toy SFT pipeline under ``Trainer(strategy="ddp", devices=2)`` on two CPU processes.

Run by ``test_sft.py`` as ``python -m torch.distributed.run --nproc-per-node 2 -m
tests.pipelines.ddp_run OUT``: torchrun starts both processes and each joins the process group
(gloo). Each rank appends one JSON line to ``OUT``: its rank, the world size, the selection and
the test metrics it logged, the audit's queries it scored and, on global rank 0, the largest
gap between the audit's scores (shards scored on both ranks) and one process's audit of the same
trained model.
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
    trainer, module, data, callbacks, tested = toy.fit_and_test(
        root, strategy=DDPStrategy(timeout=timedelta(seconds=120)), devices=2, logger=False
    )
    audit = callbacks[1]
    line = {
        "rank": trainer.global_rank,
        "world_size": trainer.world_size,
        "selection": [int(i) for i in data.selection.indices],
        "tested": {k: float(v) for k, v in tested.items()},
        "scored_queries": audit.scored_queries,
        "queries": len(audit.attack_set),
    }
    if trainer.is_global_zero:
        line["audit_gap"] = _gap_to_one_process(audit, module, trainer)
    with open(out, "a") as handle:
        handle.write(json.dumps(line) + "\n")


def _gap_to_one_process(audit, module, trainer) -> float:
    """The largest absolute difference between the DDP audit's scores, log-probabilities and
    metrics and those of one process scoring every query with the same models."""
    import numpy as np

    from lightning_info.methods.prism.auditor import FragmentAuditor

    alone = FragmentAuditor(
        module.model, audit.shadow, audit.world_models, audit._tokenizer(trainer), audit.options
    ).run(audit.attack_set)
    gaps = [
        float(np.nanmax(np.abs(alone.scores[name] - audit.report.scores[name])))
        for name in alone.scores
    ]
    gaps += [
        float(np.max(np.abs(alone.log_probs[name] - audit.report.log_probs[name])))
        for name in alone.log_probs
    ]
    gaps += [
        abs(value - audit.report.metrics[name][key])
        for name, metrics in alone.metrics.items()
        for key, value in metrics.items()
    ]
    return max(gaps)


if __name__ == "__main__":
    main(sys.argv[1])
