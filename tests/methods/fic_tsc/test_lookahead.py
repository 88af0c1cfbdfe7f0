"""Lookahead as a Callback equals the update written out by hand around plain SGD, counts
optimizer steps under gradient accumulation, and refuses a mismatched checkpoint."""

from __future__ import annotations

import pytest
import torch
from lightning.pytorch import LightningModule, Trainer
from torch.utils.data import DataLoader, TensorDataset

from lightning_info.methods.fic_tsc.callback import Lookahead

X = torch.linspace(-1, 1, 16, dtype=torch.float64).view(8, 2)
Y = X @ torch.tensor([[1.5], [-0.5]], dtype=torch.float64) + 0.3


class _Regression(LightningModule):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Linear(2, 1).double()

    def training_step(self, batch, batch_idx):
        x, y = batch
        return ((self.net(x) - y) ** 2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _fit(callbacks, accumulate=1):
    model = _Regression()
    trainer = Trainer(
        max_epochs=2,
        callbacks=callbacks,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accumulate_grad_batches=accumulate,
    )
    trainer.fit(model, DataLoader(TensorDataset(X, Y), batch_size=2))
    return model, trainer


def _by_hand(k, alpha, accumulate=1):
    model = _Regression()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    slow = [p.detach().clone() for p in model.parameters()]
    steps = 0
    for _ in range(2):
        for i in range(4):
            x, y = X[2 * i : 2 * i + 2], Y[2 * i : 2 * i + 2]
            (((model.net(x) - y) ** 2).mean() / accumulate).backward()
            if (i + 1) % accumulate:
                continue
            optimizer.step()
            optimizer.zero_grad()
            steps += 1
            if steps % k == 0:
                with torch.no_grad():
                    for p, s in zip(model.parameters(), slow):
                        s += alpha * (p - s)
                        p.copy_(s)
    return model


@pytest.mark.parametrize("accumulate", [1, 2])
def test_lookahead_equals_the_update_by_hand(accumulate):
    model, trainer = _fit([Lookahead(k=3, alpha=0.4)], accumulate)
    expected = _by_hand(3, 0.4, accumulate)
    assert trainer.global_step == 8 // accumulate
    for got, want in zip(model.parameters(), expected.parameters()):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    plain, _ = _fit([], accumulate)
    assert not torch.allclose(plain.net.weight, model.net.weight)


def test_lookahead_refuses_bad_settings_and_a_checkpoint_of_another_model():
    with pytest.raises(ValueError, match="k"):
        Lookahead(k=0)
    with pytest.raises(ValueError, match="alpha"):
        Lookahead(alpha=0.0)
    callback = Lookahead()
    callback.load_state_dict({"k": 5, "alpha": 0.5, "slow": [torch.zeros(1)], "last_step": 3})
    with pytest.raises(ValueError, match="resume the same model"):
        callback.on_fit_start(Trainer(logger=False), _Regression())
