"""Diffusion-Fisher recipe: a small diffusion model on a 2-D ring mixture, then likelihoods by the
PF-ODE with the diffusion-Fisher trace vs Hutchinson (error and time) and the OT check.

Any LightningCLI flag overrides ``recipes/diffusion_fisher.yaml``, e.g.::

    python recipes/diffusion_fisher.py --trainer.max_steps=500 --evaluation.steps=16
"""

import torch

from lightning_info.core.logging import finish_wandb_runs
from lightning_info.data.synthetic import GaussianMixtureDataModule
from lightning_info.methods.diffusion_fisher.module import DiffusionModel
from lightning_info.methods.diffusion_fisher.study import DiffusionFisherCLI
from lightning_info.recipes.cli import recipe_cli


def main(args=None):
    torch.set_num_threads(1)  # 2-D points and a small MLP: one thread is fastest
    cli = recipe_cli(DiffusionFisherCLI, DiffusionModel, GaussianMixtureDataModule, __file__, args)
    try:
        cli.trainer.fit(cli.model, datamodule=cli.datamodule)
        return cli.evaluate()
    finally:
        finish_wandb_runs(cli.trainer.loggers)


if __name__ == "__main__":
    main()
