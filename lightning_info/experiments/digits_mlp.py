"""The digits MLP that the post-hoc scoring studies train once per seed, a callback attached."""

from __future__ import annotations

from typing import Any

from lightning_info.experiments.study import seeded_trainer

__all__ = ["fit_digits_mlp"]


def fit_digits_mlp(job: dict[str, Any], config: Any, callbacks: list) -> tuple[Any, dict]:
    """Train an ``MLPClassifier`` on sklearn's digits for ``job``'s seed and test it.

    ``config`` carries the ``DigitsDataModule`` fields (``classes``, ``test_fraction``,
    ``val_fraction``, ``batch_size``), the network's (``hidden``, ``lr``, ``weight_decay``),
    ``epochs`` and ``threads``; the seed splits the data and seeds the initialisation and batch
    order. Returns the data module and the test metrics.
    """
    import torch

    from lightning_info.data.digits import DigitsDataModule
    from lightning_info.nn.mlp import MLPClassifier

    torch.set_num_threads(config.threads)
    trainer = seeded_trainer(
        {**job, "epochs": config.epochs}, accelerator="cpu", callbacks=callbacks
    )
    data = DigitsDataModule(
        classes=config.classes,
        test_fraction=config.test_fraction,
        batch_size=config.batch_size,
        split_seed=job["seed"],
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
