"""Data-audit recipe: (1) a HELM-style train-test overlap report between offline text corpora
with planted contamination, (2) fragment-extraction attacks (PRISM) on tiny causal LMs trained
locally on synthetic records, for several target epoch counts.

Every field of ``recipes/data_audit.yaml`` can be overridden, e.g.::

    python recipes/data_audit.py --prism.target_epochs='[1, 8]' --overlap.n=9
    python recipes/data_audit.py --prism.enabled=false --logger=false
"""

from pathlib import Path

import torch
from jsonargparse import ArgumentParser

from lightning_info.core.logging import default_wandb_logger_config, finish_wandb_runs
from lightning_info.recipes.data_audit import OverlapStudy, PrismStudy, run_data_audit


def main(args=None):
    torch.set_num_threads(1)  # tiny models: one thread is fastest
    parser = ArgumentParser(default_config_files=[str(Path(__file__).with_suffix(".yaml"))])
    parser.add_argument("--config", action="config")
    parser.add_class_arguments(OverlapStudy, "overlap")
    parser.add_class_arguments(PrismStudy, "prism")
    parser.add_argument("--output_dir", type=str, default="results")
    parser.add_argument("--logger", type=bool, default=True, help="log the tables to W&B")
    config = parser.parse_args(args)
    logger = None
    if config.logger:
        from lightning.pytorch.loggers import WandbLogger

        init = default_wandb_logger_config()["init_args"]
        logger = WandbLogger(name="data_audit", group="data_audit", **init)
    try:
        return run_data_audit(
            OverlapStudy(**vars(config.overlap)),
            PrismStudy(**vars(config.prism)),
            config.output_dir,
            logger,
        )
    finally:
        if logger is not None:
            finish_wandb_runs([logger])


if __name__ == "__main__":
    main()
