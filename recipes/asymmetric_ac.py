"""Asymmetric actor-critic recipe (Lambrechts, Ernst & Mahajan, ICML 2025).

1. Deep: CartPole with the velocities hidden from the actor, asymmetric vs symmetric critic.
2. Tabular (the ``tabular`` study): on a T-maze with a window agent state, the asymmetric critic
   Q(s, z, a) converges to the exact Q^pi while the symmetric Q(z, a) stops at an aliasing floor
   that shrinks with the window k and the TD horizon m; natural actor-critic with each critic.

Any LightningCLI flag overrides ``recipes/asymmetric_ac.yaml``, e.g.::

    python recipes/asymmetric_ac.py --studies.tabular=null --compare.seeds='[0]'
    python recipes/asymmetric_ac.py --trainer.max_steps=600 --trainer.logger=CSVLogger
"""

from pathlib import Path

import torch

from lab import ComparisonCLI
from lightning_info import AsymmetricActorCritic


def main(args=None):
    # Small MLPs stepping gymnasium environments: one thread beats several.
    torch.set_num_threads(1)
    cli = ComparisonCLI(
        AsymmetricActorCritic, None, default_config=Path(__file__).with_suffix(".yaml"), args=args
    )
    cli.run()
    return cli


if __name__ == "__main__":
    main()
