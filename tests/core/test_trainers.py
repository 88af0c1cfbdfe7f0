"""``quiet_trainer``: no logger, checkpoints, progress bar or summary unless the caller asks."""

from __future__ import annotations

from lightning_info.core.trainers import quiet_trainer


def test_quiet_trainer_defaults_and_overrides(tmp_path):
    trainer = quiet_trainer(max_epochs=3, default_root_dir=tmp_path)
    assert trainer.max_epochs == 3
    assert trainer.logger is None and not trainer.checkpoint_callbacks
    assert trainer.progress_bar_callback is None
    assert not any(type(c).__name__ == "ModelSummary" for c in trainer.callbacks)
    shown = quiet_trainer(enable_progress_bar=True, default_root_dir=tmp_path)
    assert shown.progress_bar_callback is not None
