"""ROME recipe: robust dataset distillation vs a random real subset vs distribution matching.

Distils sklearn's bundled digits (8x8, pixels in [0, 1]) into ``images_per_class`` images per
class from the same seed and initial images, then trains a fresh network on each set and tests
it clean and under FGSM, PGD (L-inf) and PGD (L2), untargeted and targeted:

- ``random real``: the initial images themselves (no distillation step);
- ``DM``: plain distribution matching (``attack.robust=false, distillation.alpha=1``);
- ``ROME``: feature alignment with targeted-PGD reals (``c -> c + 1``) plus the performance term;
- ``ROME, untargeted`` and ``ROME, rotating map``: the same with other attacks in the alignment
  and the pool's training (beyond the paper).

Any LightningCLI flag overrides ``recipes/rome.yaml``, e.g.::

    python recipes/rome.py --compare.seeds='[0]' --trainer.max_steps=50
    python recipes/rome.py --compare.grid='[1, 10]' --trainer.logger=CSVLogger
    python recipes/rome.py --model.net.init_args.width=32 --model.attack.eps=0.05
"""

from pathlib import Path

import torch

from lab import ComparisonCLI
from lightning_info import DigitsDataModule, ROMEDistillation


def main(args=None):
    # Conv nets on 8x8 images: one thread is faster than several sharing small kernels.
    torch.set_num_threads(1)
    cli = ComparisonCLI(
        ROMEDistillation,
        DigitsDataModule,
        links={
            "data.train_images": "model.real_images",
            "data.train_labels": "model.real_labels",
            "data.num_classes": "model.num_classes",
        },
        default_config=Path(__file__).with_suffix(".yaml"),
        args=args,
    )
    cli.run()
    return cli


if __name__ == "__main__":
    main()
