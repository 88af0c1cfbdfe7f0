"""LastIterateSolver through a Trainer: it makes the TabularSolver's updates on the data
module's episode ids, logs the last iterate's NashConv, and refuses what it cannot run."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspiel")

import torch  # noqa: E402
from lightning.pytorch import Trainer  # noqa: E402

from lightning_info.methods.efg_last_iterate import (  # noqa: E402
    GameEpisodesDataModule,
    LastIterateSolver,
    TabularSolver,
    game_tree,
    nash_conv,
)
from tests.tiny import QUIET, TinyDataModule  # noqa: E402


def _fit(model, data, **kwargs):
    trainer = Trainer(**{**QUIET, **kwargs})
    trainer.fit(model, datamodule=data)
    return trainer


@pytest.mark.parametrize("method", ["virtual_transition", "balanced_omd"])
def test_training_steps_are_the_solver_updates_on_the_epoch_ids(method, tmp_path):
    data = GameEpisodesDataModule("kuhn_poker", batch_size=16, episodes_per_epoch=64)
    model = LastIterateSolver(method=method, seed=4, nash_conv_every=3)
    trainer = _fit(model, data, max_epochs=2, default_root_dir=tmp_path)
    assert trainer.global_step == 8 and int(model.episodes) == 128
    solver = TabularSolver(game_tree("kuhn_poker"), method, seed=4)
    for _ in range(8):  # epoch e plays ids 64 e .. 64 e + 63 in batches of 16
        solver.step(16)
    torch.testing.assert_close(model.policy, solver.policy, rtol=0, atol=1e-13)
    # the last logged NashConv (step 6) is the last iterate's after 6 updates
    replay = TabularSolver(game_tree("kuhn_poker"), method, seed=4)
    for _ in range(6):
        replay.step(16)
    logged = trainer.callback_metrics["solver/nash_conv"].item()
    assert logged == pytest.approx(replay.nash_conv(), rel=1e-6)
    gap = trainer.callback_metrics["solver/ne_gap"].item()
    assert gap == pytest.approx(replay.nash_conv() / 4, rel=1e-6)  # Kuhn's payoffs span 4
    assert nash_conv(game_tree("kuhn_poker"), model.policy) < 11 / 12


def test_bad_setups_are_refused_before_any_update(tmp_path):
    with pytest.raises(ValueError, match="GameEpisodesDataModule"):
        _fit(LastIterateSolver(), TinyDataModule(), max_steps=1, default_root_dir=tmp_path)
    with pytest.raises(ValueError, match="method"):
        LastIterateSolver(method="cfr")
    with pytest.raises(ValueError, match="episodes_per_epoch"):
        GameEpisodesDataModule("kuhn_poker", batch_size=64, episodes_per_epoch=32)
    with pytest.raises(ValueError, match="players"):
        GameEpisodesDataModule("kuhn_poker(players=3)")


def test_a_table_of_another_game_is_refused(tmp_path):
    kuhn = LastIterateSolver()
    _fit(kuhn, GameEpisodesDataModule("kuhn_poker", 8, 16), max_steps=1, default_root_dir=tmp_path)
    leduc = LastIterateSolver()
    leduc.load_state_dict(kuhn.state_dict())
    with pytest.raises(ValueError, match="another game"):
        _fit(
            leduc,
            GameEpisodesDataModule("leduc_poker", 8, 16),
            max_steps=1,
            default_root_dir=tmp_path,
        )
