"""Every shipped callback YAML attaches, from a folder outside the repository, to Lightning's own
``BoringModel`` + ``BoringDataModule`` through LightningCLI.

Where a callback needs what those lack (labels, text, a causal LM), the test shows that it stops
in ``setup`` / at fit start, before the first optimizer step, with a message saying what to do,
and that the YAML then works on a model and data that have it.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from lightning.pytorch import Callback, LightningModule
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.demos.boring_classes import BoringDataModule, BoringModel
from transformers import AutoModelForCausalLM

import lightning_info
from lightning_info import DigitsDataModule, MLPClassifier
from lightning_info.configs import callback_config, callback_configs
from lightning_info.lm.tiny_lm import tiny_causal_lm
from lightning_info.methods.prism.auditor import ATTACKS
from lightning_info.methods.prism.fragments import build_attack_set, synthetic_records
from tests import tiny_lm
from tests.plugin_table import EXEMPT
from tests.tiny import TinyClassifier, TinyDataModule

REPOSITORY = Path(__file__).resolve().parents[1]
QUIET_ARGS = [
    "--trainer.logger=false",
    "--trainer.enable_progress_bar=false",
    "--trainer.enable_model_summary=false",
    "--trainer.enable_checkpointing=false",
    "--trainer.accelerator=cpu",
]


@pytest.fixture(autouse=True)
def outside_the_repository(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert not Path.cwd().is_relative_to(REPOSITORY)


def cli(name, *args, model=BoringModel, data=BoringDataModule):
    """LightningCLI with the shipped YAML ``name`` appended to the trainer's callbacks."""
    return LightningCLI(
        model,
        data,
        run=False,
        args=[f"--trainer.callbacks+={callback_config(name)}", *QUIET_ARGS, *args],
    )


def attached(run, cls):
    (callback,) = [cb for cb in run.trainer.callbacks if isinstance(cb, cls)]
    return callback


def fit(run):
    run.trainer.fit(run.model, datamodule=run.datamodule)
    return run.trainer


def test_fisher_constraint():
    run = cli("fisher_constraint", "--trainer.fast_dev_run=true")
    assert attached(run, lightning_info.FisherConstraint).max_fisher(0) == 2.0
    assert fit(run).global_step == 1


def test_fisher_monitor():
    run = cli("fisher_monitor", "--trainer.max_steps=2", "--trainer.limit_val_batches=0")
    monitor = attached(run, lightning_info.FisherMonitor)
    assert (monitor.every_n_steps, monitor.max_fisher(0)) == (50, 2.0)
    assert fit(run).global_step == 2 and monitor.num_steps == 2
    assert set(monitor.trace_means) == {"layer"}  # BoringModel's one Linear


def test_fisher_reselection_attaches_and_names_the_data_module_it_needs():
    run = cli(
        "fisher_reselection",
        "--trainer.max_steps=1",
        "--trainer.reload_dataloaders_every_n_epochs=1",
    )
    callback = attached(run, lightning_info.FisherReselection)
    assert (callback.every_n_epochs, callback.exclude_served) == (1, False)
    with pytest.raises(TypeError, match="selects through a FisherSubsetDataModule"):
        fit(run)
    assert run.trainer.global_step == 0


def test_lookahead_slows_the_weights_every_k_steps():
    run = cli("lookahead", "--trainer.max_steps=5", "--trainer.limit_val_batches=0")
    callback = attached(run, lightning_info.Lookahead)
    assert (callback.k, callback.alpha) == (5, 0.5)
    trainer = fit(run)
    assert trainer.global_step == 5 and callback.steps == [5]
    for slow, fast in zip(callback.slow, run.model.parameters()):  # step 5 synced them
        assert torch.equal(slow, fast.detach())


def test_smoothed_information_reads_the_last_linear_input_by_default():
    run = cli(
        "smoothed_information",
        "--trainer.max_epochs=1",
        "--trainer.limit_train_batches=2",
        "--trainer.limit_val_batches=32",
        "--trainer.num_sanity_val_steps=0",
    )
    assert attached(run, lightning_info.SmoothedInformationMonitor).layers is None
    logged = fit(run).callback_metrics
    for symbol in ("j", "h", "i"):  # BoringModel's last (and only) Linear is `layer`
        assert math.isfinite(float(logged[f"info/input_of_layer/{symbol}_t_0.1"]))


def test_posthoc_scoring_refuses_unlabelled_batches_then_scores_a_classifier():
    run = cli("posthoc_scoring", "--trainer.fast_dev_run=true")
    with pytest.raises(ValueError, match="needs labelled batches"):
        fit(run)
    assert run.trainer.global_step == 0
    run = cli(
        "posthoc_scoring",
        "--trainer.max_epochs=1",
        model=TinyClassifier,
        data=TinyDataModule,
    )
    callback = attached(run, lightning_info.PosthocScoring)
    assert fit(run).state.finished
    scorers = [row[0] for row in callback.tables["failure"][1]]
    assert scorers == ["MSP", "MSP (temperature)", "PMI", "PVI", "PSI"]


def test_ood_shaping_needs_ood_sets_then_reports_on_digits():
    run = cli("ood_shaping", "--trainer.fast_dev_run=true")
    with pytest.raises(ValueError, match="needs `ood_dataloaders"):
        fit(run)
    assert run.trainer.global_step == 0
    run = cli(
        "ood_shaping",
        "--trainer.max_epochs=1",
        "--trainer.callbacks.tune_trials=2",
        "--model.input_dim=64",
        "--model.num_classes=3",
        "--data.classes=3",
        model=MLPClassifier,
        data=DigitsDataModule,
    )
    callback = attached(run, lightning_info.OODShapingReport)
    assert fit(run).state.finished
    assert [row[0] for row in callback.tables["ood"][1]] == ["energy", "react", "vra", "plf"]


def test_train_test_overlap_reads_files_named_in_the_config(tmp_path):
    run = cli("train_test_overlap", "--trainer.fast_dev_run=true")
    with pytest.raises(ValueError, match="cannot read input field 'input'.*test_files"):
        fit(run)
    assert run.trainer.global_step == 0
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("one two three four five six seven eight nine ten eleven")
    (tmp_path / "bench.jsonl").write_text(
        json.dumps({"input": "three four five six seven", "references": ["eight"]})
        + "\n"
        + json.dumps({"input": "nothing from the corpus at all", "references": ["no"]})
        + "\n"
    )
    run = cli(
        "train_test_overlap",
        "--trainer.fast_dev_run=true",
        "--trainer.callbacks.train_files=[corpus]",
        "--trainer.callbacks.test_files=[bench.jsonl]",
        "--trainer.callbacks.options.n=5",
        "--trainer.callbacks.options.n_values=[5]",
    )
    callback = attached(run, lightning_info.TrainTestOverlap)
    assert fit(run).global_step == 1
    assert callback.report.summary["bench"]["input_binary"] == 0.5  # one of two instances
    assert (tmp_path / "overlap" / "overlap.json").exists()


class CausalLMHost(LightningModule):
    """A causal LM loaded from a local folder, trained on one fixed sequence."""

    def __init__(self, model_path: str) -> None:
        super().__init__()
        self.model = AutoModelForCausalLM.from_pretrained(model_path)

    def training_step(self, batch, batch_idx):
        ids = torch.arange(2, 14).unsqueeze(0)
        return self.model(input_ids=ids, labels=ids).loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def test_fragment_extraction_audit_names_everything_on_disk(tmp_path):
    tokenizer = tiny_lm.tokenizer()
    for seed, name in enumerate(("target", "shadow", "world")):
        model = tiny_causal_lm(tokenizer, n_layer=1, n_embd=16, n_head=2, seed=seed)
        model.save_pretrained(tmp_path / name)
        tokenizer.save_pretrained(tmp_path / name)
    records = synthetic_records(12, seed=0)
    build_attack_set(records[:6], records[6:], n_unseen=2, seed=0).save(tmp_path / "attack.json")
    files = [
        "--trainer.callbacks.attack_set=attack.json",
        "--trainer.callbacks.shadow=shadow",
        "--trainer.callbacks.world_models=[world]",
        "--trainer.callbacks.tokenizer=target",
        "--trainer.callbacks.options.n_splits=2",
        "--trainer.fast_dev_run=true",
    ]
    run = cli("fragment_extraction_audit", *files)
    with pytest.raises(TypeError, match="Expected a transformers causal language model"):
        fit(run)
    assert run.trainer.global_step == 0
    run = cli("fragment_extraction_audit", *files, "--model.model_path=target", model=CausalLMHost)
    callback = attached(run, lightning_info.FragmentExtractionAudit)
    assert fit(run).global_step == 1
    assert list(callback.report.metrics) == list(ATTACKS)  # the paper's four and the field's five
    assert all(0 <= m["auc"] <= 1 for m in callback.report.metrics.values())


YAML_TESTS = {
    "fisher_constraint": test_fisher_constraint,
    "fisher_monitor": test_fisher_monitor,
    "fisher_reselection": test_fisher_reselection_attaches_and_names_the_data_module_it_needs,
    "lookahead": test_lookahead_slows_the_weights_every_k_steps,
    "smoothed_information": test_smoothed_information_reads_the_last_linear_input_by_default,
    "posthoc_scoring": test_posthoc_scoring_refuses_unlabelled_batches_then_scores_a_classifier,
    "ood_shaping": test_ood_shaping_needs_ood_sets_then_reports_on_digits,
    "train_test_overlap": test_train_test_overlap_reads_files_named_in_the_config,
    "fragment_extraction_audit": test_fragment_extraction_audit_names_everything_on_disk,
}


def test_every_shipped_yaml_is_tested_here_and_every_callback_has_one():
    assert set(YAML_TESTS) == set(callback_configs())
    callbacks = {
        obj
        for name in lightning_info.__all__
        if isinstance(obj := getattr(lightning_info, name), type) and issubclass(obj, Callback)
    }
    bases = {base for cls in callbacks for base in cls.__mro__[1:]}
    # base classes are attached through their subclasses; EXEMPT says why a class has no YAML
    exported = {
        f"lightning_info.{cls.__name__}"
        for cls in callbacks
        if cls not in bases and cls.__qualname__ not in EXEMPT
    }
    targets = {yaml.safe_load(p.read_text())["class_path"] for p in callback_configs().values()}
    assert exported == targets


def test_source_checkout_callbacks_folder_holds_the_shipped_files():
    shipped = callback_configs()
    checkout = {p.stem: p for p in (REPOSITORY / "callbacks").glob("*.yaml")}
    assert set(checkout) == set(shipped)
    for name, path in checkout.items():
        assert path.read_text() == shipped[name].read_text(), name


def test_module_entry_point_prints_the_path_from_any_folder(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "lightning_info.configs", "posthoc_scoring"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(out) == callback_config("posthoc_scoring") and Path(out).is_file()
    unknown = subprocess.run(
        [sys.executable, "-m", "lightning_info.configs", "nope"], cwd=tmp_path, capture_output=True
    )
    assert unknown.returncode == 2 and b"fisher_constraint" in unknown.stderr
