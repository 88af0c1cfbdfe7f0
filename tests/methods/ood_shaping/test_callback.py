"""OODShapingReport end to end on digits 0-4: its table against the energy score recomputed
independently, and its checks before training."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from lightning.pytorch import Trainer, seed_everything
from sklearn.metrics import roc_auc_score

from lightning_info import DigitsDataModule, MLPClassifier
from lightning_info.methods.ood_shaping import FeatureShapingScorer, OODShapingReport
from lightning_info.scoring.report import collect_outputs
from tests.tiny import QUIET, TinyDataModule


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    seed_everything(0)
    data = DigitsDataModule(classes=5, test_fraction=0.5, val_fraction=0.3, batch_size=64)
    model = MLPClassifier(64, 5, hidden=[32])
    out = str(tmp_path_factory.mktemp("shaping"))
    shaping = OODShapingReport(shapers=["identity", "react"], tune_trials=5, output_dir=out)
    trainer = Trainer(
        max_epochs=4, callbacks=[shaping], default_root_dir=tmp_path_factory.mktemp("runs"), **QUIET
    )
    trainer.fit(model, datamodule=data)
    return data, model, shaping.tables, out


def test_ood_table_energy_row_matches_a_direct_computation(trained):
    data, model, tables, _ = trained
    columns, rows = tables["ood"]
    assert [r[0] for r in rows] == ["energy", "react"]
    sets, kinds = ("digits", "noise", "shuffled"), ("AUROC", "FPR@95")
    assert columns[1:] == [f"{name} {metric}" for name in sets for metric in kinds]
    id_features = collect_outputs(model, model.head, data.test_dataloader())[0]
    ood = collect_outputs(model, model.head, data.ood_dataloaders("test")["digits"])[0]
    energy_in = torch.logsumexp(model.head(id_features), 1).detach()
    energy_out = torch.logsumexp(model.head(ood), 1).detach()
    labels = [1] * len(energy_in) + [0] * len(energy_out)
    expected = roc_auc_score(labels, torch.cat([energy_in, energy_out]).numpy())
    assert float(rows[0][1]) == pytest.approx(expected, abs=1e-4)
    shaped = FeatureShapingScorer(model.head, "identity").fit_features(id_features)
    torch.testing.assert_close(shaped.score_features(id_features), energy_in)


def test_the_report_is_written(trained):
    *_, out = trained
    assert "OOD detection" in (Path(out) / "ood_shaping.md").read_text()


def test_ood_report_needs_ood_sets_before_training(tmp_path):
    trainer = Trainer(
        max_epochs=1, callbacks=[OODShapingReport()], default_root_dir=tmp_path, **QUIET
    )
    with pytest.raises(ValueError, match="needs `ood_dataloaders"):
        trainer.fit(MLPClassifier(6, 3), datamodule=TinyDataModule())
    assert trainer.global_step == 0
    with pytest.raises(ValueError, match="shapers"):
        OODShapingReport(shapers=["no_such_shaper"])
