"""Inputs that used to give a silently wrong report now give the right one (checked against an
independent computation), a warning, or an error; none alters the caller's objects."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from lightning.pytorch import LightningModule, Trainer, seed_everything
from sklearn.metrics import roc_auc_score
from torch import nn

from lightning_info import DigitsDataModule, MLPClassifier
from lightning_info.methods.pointwise_confidence import callback as callback_module
from lightning_info.methods.pointwise_confidence.callback import (
    PosthocScoring,
    default_scorers,
    failure_row,
)
from lightning_info.methods.pointwise_confidence.metrics import FailureAUROC
from lightning_info.methods.pointwise_confidence.scorers import MSPScorer
from lightning_info.scoring.report import collect_outputs, find_head
from tests.tiny import QUIET


class _OutputRegisteredFirst(LightningModule):
    """Registers its output layer ``out`` before the hidden layer ``hidden`` (the last
    ``nn.Linear`` registered is not the output layer)."""

    def __init__(self, in_features: int = 64, classes: int = 5) -> None:
        super().__init__()
        self.out = nn.Linear(32, classes)
        self.hidden = nn.Linear(in_features, 32)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x.flatten(1))))

    def training_step(self, batch, batch_idx):
        return nn.functional.cross_entropy(self(batch[0]), batch[1])

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-2)


def _fit(tmp_path, model, data, scoring, epochs=2):
    seed_everything(0)
    trainer = Trainer(max_epochs=epochs, callbacks=[scoring], default_root_dir=tmp_path, **QUIET)
    trainer.fit(model, datamodule=data)
    return trainer


def test_the_output_layer_is_found_when_it_is_not_the_last_registered(tmp_path):
    data = DigitsDataModule(classes=5, test_fraction=0.5, val_fraction=0.3, batch_size=64)
    model = _OutputRegisteredFirst()
    scoring = PosthocScoring(scorers=[MSPScorer()])
    _fit(tmp_path, model, data, scoring)
    assert scoring._found_head == "out"
    columns, (row,) = scoring.tables["failure"]
    # oracle: the max softmax of the model's own output on the test split
    model.eval()
    with torch.no_grad():
        logits = torch.cat([model(x) for x, _ in data.test_dataloader()])
    correct = (logits.argmax(1) == data.test_labels).numpy()
    expected = roc_auc_score(correct, logits.softmax(1).amax(1).numpy())
    assert float(row[columns.index("AUROC")]) == pytest.approx(expected, abs=1e-4)


def test_find_head_takes_the_last_layer_of_the_output_width_when_the_output_is_transformed():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.logits = nn.Linear(8, 3)
            self.hidden = nn.Linear(4, 8)
            self.extra = nn.Linear(4, 3)  # runs first, same width: not the output layer

        def forward(self, x):
            self.extra(x)
            return self.logits(torch.tanh(self.hidden(x))).log_softmax(1)

    model = Scaled().train()
    assert find_head(model, torch.randn(5, 4)) == "logits"
    assert model.training  # the mode is restored


def test_find_head_reads_the_logits_out_of_a_returned_dict():
    class DictOutput(nn.Module):
        def __init__(self):
            super().__init__()
            self.out = nn.Linear(8, 3)
            self.hidden = nn.Linear(4, 8)

        def forward(self, x):
            hidden = self.hidden(x)
            return {"logits": self.out(torch.relu(hidden)), "features": hidden}

    model = DictOutput()
    with pytest.raises(ValueError, match=r"several nn.Linear layers \['hidden', 'out'\]"):
        find_head(model, torch.randn(5, 4))  # both returned: ambiguous
    model.forward = lambda x: {"logits": model.out(torch.relu(model.hidden(x)))}
    assert find_head(model, torch.randn(5, 4)) == "out"


def test_a_validation_split_that_is_the_test_split_is_named_and_warned(tmp_path):
    data = DigitsDataModule(classes=3, batch_size=64)  # val_fraction=0: val is the test split
    scoring = PosthocScoring(scorers=[MSPScorer()])
    with pytest.warns(UserWarning, match="'val' and 'test' loaders .* serve the same inputs"):
        _fit(tmp_path, MLPClassifier(64, 3, hidden=[8]), data, scoring, epochs=1)
    assert scoring.fit_description == "val, the same data as test"
    title = "failure prediction on test (scorers fit on val, the same data as test)"
    assert scoring.fit_description in title  # the printed title names the data actually used


def test_a_figure_that_fails_at_the_end_warns_and_the_run_goes_on(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no display")

    monkeypatch.setattr(callback_module, "reliability_diagram", broken)
    data = DigitsDataModule(classes=3, val_fraction=0.3, batch_size=64)
    model = MLPClassifier(64, 3, hidden=[8])
    scoring = PosthocScoring(scorers=[MSPScorer()], output_dir=str(tmp_path / "out"))
    with pytest.warns(UserWarning, match="figures could not be made .*no display"):
        trainer = _fit(tmp_path, model, data, scoring, epochs=1)
    assert trainer.state.status == "finished"
    assert "failure prediction" in (Path(tmp_path) / "out" / "posthoc_scoring.md").read_text()
    assert not (Path(tmp_path) / "out" / "posthoc_reliability.png").exists()
    assert trainer.test(model, datamodule=data, verbose=False)  # the test phase still runs


def test_nan_logits_are_refused_not_counted_as_class_zero():
    logits = torch.tensor([[float("nan"), 0.0], [0.0, 1.0], [1.0, 0.0]])
    labels = torch.tensor([0, 1, 0])
    scorer = MSPScorer().fit(
        torch.zeros(3, 1), torch.tensor([[1.0, 0], [0, 1.0], [1.0, 0]]), labels
    )
    assert torch.isnan(logits).any() and logits.argmax(1)[0] == 0  # argmax would count it right
    with pytest.raises(ValueError, match="`logits` holds NaN"):
        failure_row(scorer, torch.zeros(3, 1), logits, labels)
    metric = FailureAUROC()
    with pytest.raises(ValueError, match="contains 1 NaN"):
        metric.update(torch.tensor([float("nan"), 0.5]), torch.tensor([True, False]))


def test_collect_outputs_refuses_a_head_that_runs_twice_or_never():
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.head = nn.Linear(4, 3)

        def forward(self, x):
            return self.head(x) + self.head(x)

    model = Twice()
    loader = [(torch.randn(5, 4), torch.arange(5) % 3)]
    with pytest.raises(ValueError, match="ran 2 times in one forward"):
        collect_outputs(model, model.head, loader)
    with pytest.raises(ValueError, match="ran 0 times in one forward"):
        collect_outputs(model, nn.Linear(4, 3), loader)
    layer = nn.Linear(4, 3)
    with pytest.raises(ValueError, match="1 of the loader's 2 batches carry labels"):
        collect_outputs(layer, layer, [loader[0], (torch.randn(2, 4),)])


def test_loading_a_scorer_leaves_the_saved_one_and_its_inputs_alone(tmp_path):
    generator = torch.Generator().manual_seed(0)
    features, logits = (
        torch.randn(40, 4, generator=generator),
        torch.randn(40, 3, generator=generator),
    )
    labels = torch.arange(40) % 3
    copies = features.clone(), logits.clone(), labels.clone()
    scorer = MSPScorer(temperature_scaled=True).fit(features, logits, labels)
    scorer.save(tmp_path / "msp.pt")
    loaded = MSPScorer(temperature_scaled=True).load(tmp_path / "msp.pt")
    assert loaded.temperature == scorer.temperature
    for before, after in zip(copies, (features, logits, labels)):
        assert torch.equal(before, after)


def test_default_scorers_are_fresh_on_every_call():
    """Fitting a scorer of one ``default_scorers()`` list leaves the next list unfitted (no
    scorer is shared between reports)."""
    first = default_scorers()
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(12, 3, generator=generator)
    first[1].fit(torch.randn(12, 4, generator=generator), logits, torch.arange(12) % 3)
    first.append(MSPScorer())
    second = default_scorers()
    assert [s.name for s in second] == ["MSP", "MSP (temperature)", "PMI", "PVI", "PSI"]
    assert first[1].fitted and not any(scorer.fitted for scorer in second)
    assert not any(a is b for a in first for b in second)
