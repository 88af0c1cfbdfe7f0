"""Post-hoc scoring recipe: confidence (MSP, temperature, PMI, PVI, PSI) and OOD shaping.

Trains an MLP on sklearn's bundled digits 0-4, then the ``PosthocScoring`` callback fits every
confidence scorer on the validation split and reports the failure-prediction table on the test
split, and ``OODShapingReport`` the OOD table (energy, ReAct, VRA, PLF; OOD = digits 5-9, noise,
pixel-shuffled digits). Any
LightningCLI flag overrides ``recipes/posthoc_scoring.yaml``, e.g.::

    python recipes/posthoc_scoring.py --trainer.max_epochs=10 --trainer.logger=CSVLogger
"""

import torch
from lightning.pytorch.cli import LightningCLI

from lightning_info import DigitsDataModule, MLPClassifier
from lightning_info.core.logging import finish_wandb_runs
from lightning_info.recipes.cli import recipe_cli
from lightning_info.scoring import PosthocReport


class ScoringCLI(LightningCLI):
    def add_arguments_to_parser(self, parser):
        parser.link_arguments("data.num_classes", "model.num_classes", apply_on="instantiate")


def main(args=None):
    torch.set_num_threads(1)  # a small MLP on 8x8 images: one thread is fastest
    cli = recipe_cli(ScoringCLI, MLPClassifier, DigitsDataModule, __file__, args)
    try:
        cli.trainer.fit(cli.model, datamodule=cli.datamodule)
        cli.trainer.test(cli.model, datamodule=cli.datamodule)
    finally:
        finish_wandb_runs(cli.trainer.loggers)
    reports = [cb for cb in cli.trainer.callbacks if isinstance(cb, PosthocReport)]
    return {name: table for report in reports for name, table in report.tables.items()}


if __name__ == "__main__":
    main()
