"""FIC-TSC recipe: InceptionTime with and without the Fisher-information constraint.

Runs the grid of ``recipes/fic_tsc.yaml`` (bundled UCR/UEA data sets x seeds x {baseline, FIC})
and prints the test-accuracy table. Any LightningCLI flag overrides the config, e.g.::

    python recipes/fic_tsc.py --compare.seeds='[0]' --trainer.max_epochs=20
    python recipes/fic_tsc.py --compare.grid='[JapaneseVowels, ArrowHead]'
    python recipes/fic_tsc.py --trainer.logger=CSVLogger
"""

from pathlib import Path

from lab import ComparisonCLI
from lightning_info import InceptionTimeClassifier, UCRUEADataModule


def main(args=None):
    cli = ComparisonCLI(
        InceptionTimeClassifier,
        UCRUEADataModule,
        links={"data.num_channels": "model.in_channels", "data.num_classes": "model.num_classes"},
        default_config=Path(__file__).with_suffix(".yaml"),
        args=args,
    )
    cli.run()
    return cli


if __name__ == "__main__":
    main()
