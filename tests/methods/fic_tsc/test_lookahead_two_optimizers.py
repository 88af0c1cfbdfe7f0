"""Lookahead with two optimizers counts each optimizer's own steps (issue 35: it counted the
steps of both together, so each synchronised on the wrong steps). Against the update written
out by hand, and a resumed run against the uninterrupted one."""

from __future__ import annotations

import pytest
import torch
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from lightning_info.methods.fic_tsc.callback import Lookahead

X = torch.linspace(-1, 1, 16, dtype=torch.float64).view(8, 2)
Y = X @ torch.tensor([[1.5], [-0.5]], dtype=torch.float64) + 0.3
K, ALPHA = 3, 0.4


def _nets():
    torch.manual_seed(0)
    return nn.Linear(2, 2).double(), nn.Linear(2, 1).double()


def _optimizers(a, b):
    return torch.optim.SGD(a.parameters(), lr=0.1), torch.optim.SGD(b.parameters(), lr=0.05)


class _TwoOptimizers(LightningModule):
    """Optimizer ``a`` steps on every batch, ``b`` on every other one."""

    def __init__(self):
        super().__init__()
        self.a, self.b = _nets()
        self.automatic_optimization = False

    def training_step(self, batch, batch_idx):
        opt_a, opt_b = self.optimizers()
        x, y = batch
        opt_a.zero_grad()
        opt_b.zero_grad()
        self.manual_backward(((self.b(self.a(x)) - y) ** 2).mean())
        opt_a.step()
        if batch_idx % 2 == 0:
            opt_b.step()

    def configure_optimizers(self):
        return list(_optimizers(self.a, self.b))


def _by_hand(epochs=2):
    a, b = _nets()
    opt_a, opt_b = _optimizers(a, b)
    slow = {net: [p.detach().clone() for p in net.parameters()] for net in (a, b)}
    count = {a: 0, b: 0}

    def step(net, optimizer):
        optimizer.step()
        count[net] += 1
        if count[net] % K == 0:  # this optimizer's own k-th step syncs its own parameters
            with torch.no_grad():
                for p, s in zip(net.parameters(), slow[net]):
                    s += ALPHA * (p - s)
                    p.copy_(s)

    for _ in range(epochs):
        for i in range(4):
            x, y = X[2 * i : 2 * i + 2], Y[2 * i : 2 * i + 2]
            opt_a.zero_grad()
            opt_b.zero_grad()
            ((b(a(x)) - y) ** 2).mean().backward()
            step(a, opt_a)
            if i % 2 == 0:
                step(b, opt_b)
    return a, b, count, slow[a] + slow[b]


def _trainer(tmp_path, epochs, callbacks):
    return Trainer(
        max_epochs=epochs,
        callbacks=callbacks,
        logger=False,
        accelerator="cpu",
        default_root_dir=tmp_path,
        enable_progress_bar=False,
        enable_model_summary=False,
    )


def _loader():
    return DataLoader(TensorDataset(X, Y), batch_size=2)


def test_each_optimizer_synchronises_on_its_own_kth_step(tmp_path):
    model, callback = _TwoOptimizers(), Lookahead(k=K, alpha=ALPHA)
    _trainer(tmp_path, 2, [callback]).fit(model, _loader())
    a, b, count, slow = _by_hand()
    assert callback.steps == [count[a], count[b]] == [8, 4]
    for got, want in zip(model.parameters(), [*a.parameters(), *b.parameters()]):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    for got, want in zip(callback.slow, slow):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert not callback._handles  # the step hooks are removed after fit


def test_a_resumed_run_continues_the_counts_exactly(tmp_path):
    whole = _TwoOptimizers()
    _trainer(tmp_path / "whole", 2, [Lookahead(k=K, alpha=ALPHA)]).fit(whole, _loader())

    first = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)
    _trainer(tmp_path, 1, [Lookahead(k=K, alpha=ALPHA), first]).fit(_TwoOptimizers(), _loader())
    saved = torch.load(first.last_model_path, weights_only=False)
    state = next(v for key, v in saved["callbacks"].items() if key.startswith("Lookahead"))
    assert state["steps"] == [4, 2]  # neither a multiple of k: a lost count would shift syncs

    resumed, callback = _TwoOptimizers(), Lookahead(k=K, alpha=ALPHA)
    _trainer(tmp_path, 2, [callback]).fit(resumed, _loader(), ckpt_path=first.last_model_path)
    assert callback.steps == [8, 4]
    for got, want in zip(resumed.parameters(), whole.parameters()):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_a_checkpoint_of_another_optimizer_count_is_refused(tmp_path):
    callback = Lookahead(k=K, alpha=ALPHA)
    model = _TwoOptimizers()
    callback.load_state_dict(
        {
            "k": K,
            "alpha": ALPHA,
            "last_step": 5,  # the old format
            "slow": [p.detach().clone() for p in model.parameters()],
        }
    )
    assert callback.steps == [5]
    with pytest.raises(ValueError, match=r"steps of 1 optimizer\(s\), but the module configures 2"):
        _trainer(tmp_path, 1, [callback]).fit(model, _loader())
