"""A Lightning ``Trainer`` for fits that run inside something else (a study, a scikit-learn
estimator, a benchmark): no logger, checkpoints, progress bar or model summary unless asked."""

from __future__ import annotations

from typing import Any

QUIET: dict[str, Any] = {
    "logger": False,
    "enable_checkpointing": False,
    "enable_progress_bar": False,
    "enable_model_summary": False,
}


def quiet_trainer(**settings: Any):
    """``lightning.pytorch.Trainer(**QUIET, **settings)``; ``settings`` override ``QUIET``."""
    import lightning.pytorch as pl

    return pl.Trainer(**{**QUIET, **settings})
