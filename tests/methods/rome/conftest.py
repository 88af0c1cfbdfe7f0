"""Shared set-up of the bottleneck tests: one torch thread, sklearn's digits in [0, 1]."""

from functools import partial

import lightning.pytorch as pl
import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_torch_thread):
    """Every test here runs on one torch thread (``tests/conftest.py``)."""


def shuffled_digits(max_class: int = 9) -> tuple[torch.Tensor, torch.Tensor]:
    """sklearn's bundled 8x8 digits of classes ``0..max_class``, flat, pixels scaled to [0, 1],
    in a fixed shuffled order (seed 0)."""
    from sklearn.datasets import load_digits

    features, labels = load_digits(return_X_y=True)
    keep = labels <= max_class
    x = torch.tensor(features[keep] / 16.0, dtype=torch.float32)
    y = torch.tensor(labels[keep])
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    return x[order], y[order]


def quiet_trainer(steps: int, **kwargs) -> pl.Trainer:
    """A CPU trainer for ``steps`` steps without logger, checkpoints or progress output."""
    options = dict(
        max_steps=steps,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    options.update(kwargs)
    return pl.Trainer(**options)


def small_rome(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    distillation: dict | None = None,
    attack: dict | None = None,
    pool: dict | None = None,
    evaluation: dict | None = None,
    **kwargs,
):
    """A ``ROMEDistillation`` at toy sizes: one fixed ``SmallConvNet`` of width 8, no
    augmentation. ``distillation``, ``attack``, ``pool`` and ``evaluation`` override fields of
    the toy options; ``kwargs`` override any other argument."""
    from lightning_info.methods.rome import (
        AttackOptions,
        DistillationOptions,
        NetworkPoolOptions,
        RobustEvaluationOptions,
        ROMEDistillation,
        SmallConvNet,
    )

    options = dict(
        images_per_class=2,
        net=partial(SmallConvNet, width=8),
        distillation=DistillationOptions(
            **{"real_batch": 32, "dsa_strategy": None, **(distillation or {})}
        ),
        attack=AttackOptions(**{"steps": 2, "eps": 0.1, **(attack or {})}),
        pool=NetworkPoolOptions(
            **{"num_nets": 1, "refresh_every": 0, "add_every": 0, **(pool or {})}
        ),
        evaluation=RobustEvaluationOptions(**(evaluation or {})),
    )
    options.update(kwargs)
    return ROMEDistillation(x, y, **options)
