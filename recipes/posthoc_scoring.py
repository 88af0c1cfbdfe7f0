"""Post-hoc scoring recipe: confidence (MSP, temperature, PMI, PVI, PSI) and OOD shaping.

Trains an MLP on sklearn's bundled digits 0-4 (one grid cell), then the ``PosthocScoring``
callback fits every confidence scorer on the validation split and reports the failure-prediction
table on the test split, and ``OODShapingReport`` the OOD table (energy, ReAct, VRA, PLF; OOD =
digits 5-9, noise, pixel-shuffled digits). Any LightningCLI flag overrides
``recipes/posthoc_scoring.yaml``, e.g.::

    python recipes/posthoc_scoring.py --trainer.max_epochs=10 --trainer.logger=CSVLogger
"""

from pathlib import Path

import torch

from lightning_info import DigitsDataModule, MLPClassifier
from lightning_info.experiments import ComparisonCLI


def main(args=None):
    torch.set_num_threads(1)  # a small MLP on 8x8 images: one thread is fastest
    cli = ComparisonCLI(
        MLPClassifier,
        DigitsDataModule,
        links={"data.num_classes": "model.num_classes"},
        default_config=Path(__file__).with_suffix(".yaml"),
        args=args,
    )
    cli.run()
    return cli


if __name__ == "__main__":
    main()
