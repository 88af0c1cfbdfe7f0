"""PosthocScoring end to end on digits 0-4: its table against metrics recomputed independently."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from lightning.pytorch import LightningDataModule, Trainer, seed_everything
from lightning.pytorch.demos.boring_classes import BoringDataModule, BoringModel
from sklearn.metrics import roc_auc_score
from torch.utils.data import DataLoader, TensorDataset

from lightning_info import DigitsDataModule, MLPClassifier
from lightning_info.methods.pointwise_confidence.callback import PosthocScoring
from lightning_info.methods.pointwise_confidence.scorers import MSPScorer, PSIScorer
from lightning_info.scoring.report import collect_outputs
from tests.tiny import QUIET


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    seed_everything(0)
    data = DigitsDataModule(classes=5, test_fraction=0.5, val_fraction=0.3, batch_size=64)
    model = MLPClassifier(64, 5, hidden=[32])
    out = str(tmp_path_factory.mktemp("scoring"))
    scoring = PosthocScoring(scorers=[MSPScorer(), PSIScorer(num_directions=20)], output_dir=out)
    trainer = Trainer(
        max_epochs=4,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[scoring],
        default_root_dir=tmp_path_factory.mktemp("runs"),
    )
    trainer.fit(model, datamodule=data)
    return data, model, scoring.tables, out


def test_failure_table_matches_sklearn(trained):
    data, model, tables, _ = trained
    columns, rows = tables["failure"]
    assert [r[0] for r in rows] == ["MSP", "PSI"]
    features, logits, labels = collect_outputs(model, model.head, data.test_dataloader())
    msp = logits.softmax(1).amax(1)
    correct = (logits.argmax(1) == labels).numpy()
    assert 0 < correct.mean() < 1  # the test split has errors to predict
    expected = roc_auc_score(correct, msp.numpy())
    assert float(rows[0][columns.index("AUROC")]) == pytest.approx(expected, abs=1e-4)


def test_outputs_are_written(trained):
    *_, out = trained
    assert "failure prediction" in (Path(out) / "posthoc_scoring.md").read_text()
    assert (Path(out) / "posthoc_reliability.png").exists()


def test_bad_configuration_fails_before_training(tmp_path):
    with pytest.raises(ValueError, match="fit_on"):
        PosthocScoring(fit_on="holdout")
    scoring = PosthocScoring(head="no_such_layer")
    trainer = Trainer(max_epochs=1, logger=False, callbacks=[scoring], default_root_dir=tmp_path)
    with pytest.raises(ValueError, match="no submodule 'no_such_layer'"):
        trainer.fit(MLPClassifier(64, 5), datamodule=DigitsDataModule(classes=5))
    assert trainer.global_step == 0


class _StagedBlobs(LightningDataModule):
    """Two separated Gaussian blobs; like Lightning's BoringDataModule, each split is built only
    in ``setup`` of its own stage (the test split in ``setup("test")``)."""

    def __init__(self, gap: float) -> None:
        super().__init__()
        self.gap = gap

    def _split(self, seed: int, n: int = 60) -> TensorDataset:
        generator = torch.Generator().manual_seed(seed)
        y = torch.arange(n) % 2
        x = torch.randn(n, 6, generator=generator) + self.gap * y[:, None].float()
        return TensorDataset(x, y)

    def setup(self, stage: str) -> None:
        if stage == "fit":
            self.train_set, self.val_set = self._split(0), self._split(1)
        if stage == "test":
            self.test_set = self._split(2)

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=20)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=20)

    def test_dataloader(self):
        return DataLoader(self.test_set, batch_size=20)


def _fit_scoring(tmp_path, data, epochs=3):
    seed_everything(0)
    scoring = PosthocScoring(scorers=[MSPScorer()])
    trainer = Trainer(max_epochs=epochs, callbacks=[scoring], default_root_dir=tmp_path, **QUIET)
    trainer.fit(MLPClassifier(6, 2), datamodule=data)
    return trainer, scoring


def test_test_split_built_in_setup_test_is_read(tmp_path):
    trainer, scoring = _fit_scoring(tmp_path, _StagedBlobs(gap=1.0))
    assert trainer.state.finished
    columns, rows = scoring.tables["failure"]
    assert len(rows) == 1 and 0 <= float(rows[0][columns.index("AUROC")]) <= 1


def test_a_classifier_without_test_errors_reports_nan_and_finishes_the_run(tmp_path):
    with pytest.warns(UserWarning, match="failure-prediction AUROC is undefined"):
        trainer, scoring = _fit_scoring(tmp_path, _StagedBlobs(gap=6.0), epochs=10)
    assert trainer.state.finished and trainer.state.status == "finished"
    columns, (row,) = scoring.tables["failure"]
    assert math.isnan(float(row[columns.index("AUROC")]))
    assert math.isnan(float(row[columns.index("AUPR-error")]))
    assert float(row[columns.index("AURC")]) == 0.0  # defined: no error, no risk


def test_unlabelled_loaders_are_rejected_before_training(tmp_path):
    trainer = Trainer(
        max_epochs=1, callbacks=[PosthocScoring()], default_root_dir=tmp_path, **QUIET
    )
    with pytest.raises(ValueError, match="needs labelled batches"):
        trainer.fit(BoringModel(), datamodule=BoringDataModule())
    assert trainer.global_step == 0
