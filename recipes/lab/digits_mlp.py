"""The digits MLP that the post-hoc scoring studies train once per seed, a callback attached,
and the settings those studies share."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch

from lab.study import Study, seeded_trainer
from lightning_info.data.digits import DigitsDataModule
from lightning_info.nn.mlp import MLPClassifier

__all__ = ["DigitsMLPStudy", "SeedJob", "fit_digits_mlp"]


@dataclass
class DigitsMLPStudy(Study):
    """The settings of a study that trains :func:`fit_digits_mlp` once per seed.

    Args:
        seeds: each seeds the split, the MLP's initialisation and its batch order.
        classes, test_fraction, val_fraction, batch_size: the ``DigitsDataModule``.
        hidden, lr, weight_decay, epochs: the ``MLPClassifier`` and its training.
        workers: processes running seeds side by side; threads: torch threads in each.
    """

    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    classes: int = 5
    test_fraction: float = 0.5
    val_fraction: float = 0.3
    batch_size: int = 64
    hidden: list[int] = field(default_factory=lambda: [64, 32])
    lr: float = 1e-3
    weight_decay: float = 1e-4
    epochs: int = 15
    workers: int = 1
    threads: int = 1

    def __post_init__(self) -> None:
        if not self.seeds or len(set(self.seeds)) < len(self.seeds):
            raise ValueError(f"`seeds` must be non-empty and distinct, got {self.seeds}.")
        if self.epochs < 1:
            raise ValueError(f"`epochs` must be at least 1, got {self.epochs}.")

    def seed_jobs(self, cli=None) -> list[SeedJob]:
        """One job per seed, each carrying (a copy of) the study's settings and the recipe's
        output folder."""
        root = str(cli.output_dir) if cli is not None else None
        settings = copy.deepcopy(self)
        return [SeedJob(seed=s, settings=settings, root=root) for s in self.seeds]


@dataclass(frozen=True)
class SeedJob:
    """One seed of a :class:`DigitsMLPStudy` (or a subclass): the seed, the study's settings and
    the folder of the run's files."""

    seed: int
    settings: DigitsMLPStudy
    root: str | None

    @property
    def epochs(self) -> int:
        return self.settings.epochs


def fit_digits_mlp(job: SeedJob, callbacks: list) -> tuple[DigitsDataModule, dict]:
    """Train an ``MLPClassifier`` on sklearn's digits for ``job``'s seed and test it.

    ``job.settings`` carries the ``DigitsDataModule`` fields (``classes``, ``test_fraction``,
    ``val_fraction``, ``batch_size``), the network's (``hidden``, ``lr``, ``weight_decay``),
    ``epochs`` and ``threads``; the seed splits the data and seeds the initialisation and batch
    order. Returns the data module and the test metrics.
    """
    config = job.settings
    torch.set_num_threads(config.threads)
    trainer = seeded_trainer(job, accelerator="cpu", callbacks=callbacks)
    data = DigitsDataModule(
        classes=config.classes,
        test_fraction=config.test_fraction,
        batch_size=config.batch_size,
        split_seed=job.seed,
        val_fraction=config.val_fraction,
    )
    model = MLPClassifier(
        8 * 8,
        data.num_classes,
        hidden=config.hidden,
        lr=config.lr,
        weight_decay=config.weight_decay,
    )
    trainer.fit(model, datamodule=data)
    (logged,) = trainer.test(model, datamodule=data, verbose=False)
    return data, logged
