"""Diffusion-Fisher recipe: a small diffusion model on a 2-D ring mixture, then likelihoods by the
PF-ODE with the diffusion-Fisher trace vs Hutchinson (error and time) and the OT check (the
``likelihoods`` study).

Any LightningCLI flag overrides ``recipes/diffusion_fisher.yaml``, e.g.::

    python recipes/diffusion_fisher.py --trainer.max_steps=500 --studies.likelihoods.steps=16
"""

from pathlib import Path

import torch

from lightning_info import DiffusionModel, GaussianMixtureDataModule
from lightning_info.experiments import ComparisonCLI


def main(args=None):
    torch.set_num_threads(1)  # 2-D points and a small MLP: one thread is fastest
    cli = ComparisonCLI(
        DiffusionModel,
        GaussianMixtureDataModule,
        links={"data.seed": "model.seed"},
        default_config=Path(__file__).with_suffix(".yaml"),
        args=args,
    )
    cli.run()
    return cli


if __name__ == "__main__":
    main()
