"""A Lightning ``Trainer`` for fits that run inside something else (a study, a scikit-learn
estimator, a benchmark): no logger, checkpoints, progress bar or model summary unless asked; and a
block in which Lightning's per-run notices are not printed."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
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


class _LightningNotices(logging.Filter):
    """Drops INFO records that Lightning's own code logged (by the file that called the logger:
    ``rank_zero_info`` passes its caller's frame), so a plugin's ``rank_zero_info`` reports
    still show."""

    def __init__(self) -> None:
        super().__init__()
        import lightning

        self.package = str(Path(lightning.__file__).parent)

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or not record.pathname.startswith(self.package)


_NOTICE_LOGGERS = (
    "lightning.pytorch.utilities.rank_zero",
    "lightning.fabric.utilities.rank_zero",
    "lightning.fabric.utilities.seed",
)


@contextmanager
def lightning_notices_hidden() -> Iterator[None]:
    """Lightning's INFO notices (the accelerator found, "Seed set to", where checkpoints are
    restored from, tips) are not printed inside the block; its warnings and the INFO reports of
    other code still are. A recipe that runs dozens of fits prints its own progress line per fit
    instead."""
    notices = _LightningNotices()
    loggers = [logging.getLogger(name) for name in _NOTICE_LOGGERS]
    for logger in loggers:
        logger.addFilter(notices)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(notices)
