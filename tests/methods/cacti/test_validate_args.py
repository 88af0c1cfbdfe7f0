"""CACTI's training step reads nothing back from the device: its layout is drawn on the host
before the batch moves (the same layout the step would draw), the loss's empty terms are 0 by
arithmetic, and the finiteness of observed values sits behind ``validate_args``."""

from __future__ import annotations

import copy

import lightning.pytorch as pl
import pytest
import torch

from lightning_info.methods.cacti.functional import reconstruction_loss
from tests.methods.cacti.test_module import loader, table, tiny
from tests.test_hot_path import count_host_reads
from tests.tiny import QUIET


def _fit(model, values, observed, steps=2, callbacks=()):
    pl.seed_everything(0)
    trainer = pl.Trainer(max_steps=steps, callbacks=list(callbacks), **QUIET)
    with count_host_reads() as reads:
        trainer.fit(model.train(), train_dataloaders=loader(values, observed, 8))
    return reads


@pytest.mark.parametrize("masking", ["copy", "random"])
def test_a_training_step_reads_nothing_without_the_switch(masking):
    model = tiny(masking=masking)
    assert model.validate_args is False
    reads = _fit(model, *table(rows=16))
    assert reads.batches == 2 and reads.total == 0, reads.describe()


def test_with_the_switch_nan_at_an_observed_entry_is_refused():
    values, observed = table(rows=16)
    values[2, 4], observed[2, 4] = torch.nan, True
    with pytest.raises(ValueError, match="NaN or infinity at entries `observed` marks"):
        _fit(tiny(validate_args=True), values, observed, steps=1)
    with pytest.raises(TypeError, match="validate_args"):
        tiny(validate_args=1)


class _Losses(pl.Callback):
    def __init__(self):
        self.losses = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.losses.append((outputs["loss"].detach().clone(), batch))


def test_the_layout_drawn_before_the_transfer_is_the_one_the_step_draws():
    model = tiny()
    before = copy.deepcopy(model).train()
    record = _Losses()
    _fit(model, *table(rows=16), steps=1, callbacks=[record])
    ((loss, batch),) = record.losses
    assert "training_positions" in batch  # the hook drew it
    plain = {key: batch[key] for key in ("values", "observed")}
    assert torch.equal(before.training_step(plain, 0), loss)  # drawn in the step instead


def _with_branches(prediction, values, observed, kept):
    """The loss as written with a branch on each term's count (a host read each)."""
    squared = torch.where(observed, prediction - values, 0.0) ** 2
    loss = prediction.new_zeros(())
    for where in (kept & observed, observed & ~kept):
        count = where.sum()
        if count > 0:
            loss = loss + torch.where(where, squared, 0.0).sum() / count
    return loss


@pytest.mark.parametrize("case", ["both", "nothing hidden", "nothing kept", "nothing observed"])
def test_an_empty_term_of_the_loss_is_zero(case):
    g = torch.Generator().manual_seed(0)
    prediction = torch.rand(5, 4, generator=g, requires_grad=True)
    values = torch.rand(5, 4, generator=g)
    observed = torch.rand(5, 4, generator=g) > 0.3
    kept = torch.rand(5, 4, generator=g) > 0.5
    if case == "nothing hidden":
        kept = torch.ones_like(kept)
    elif case == "nothing kept":
        kept = torch.zeros_like(kept)
    elif case == "nothing observed":
        observed = torch.zeros_like(observed)
    ours = reconstruction_loss(prediction, values, observed, kept)
    theirs = _with_branches(prediction, values, observed, kept)
    assert torch.equal(ours, theirs)
    if case != "nothing observed":
        (a,) = torch.autograd.grad(ours, prediction)
        (b,) = torch.autograd.grad(theirs, prediction)
        assert torch.equal(a, b)


def test_a_user_script_fitting_cacti_beside_a_data_module_shows_no_transfer_hook_notice():
    """The module filters Lightning's notice about its transfer hook (that message only) for a
    script that imports it; a pytest test cannot see the filter, which pytest resets per test."""
    import subprocess
    import sys
    from pathlib import Path

    script = (
        "import lightning.pytorch as pl\n"
        "from tests.plugin_table import tiny_cacti, tiny_tabular_imputation\n"
        "pl.Trainer(max_steps=1, logger=False, enable_checkpointing=False, "
        "enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0)"
        ".fit(tiny_cacti(), datamodule=tiny_tabular_imputation(8))\n"
    )
    root = Path(__file__).resolve().parents[3]
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=root)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stderr.count("You have overridden `on_before_batch_transfer`") == 0
