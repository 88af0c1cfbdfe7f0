"""An arm of ``ComparisonCLI`` overrides fields of a nested option group or of an injected network
and keeps the group's other fields; every cell's data module is built through the parser, option
groups included, before any training."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import pytest
from jsonargparse import Namespace
from lightning.pytorch import Callback, LightningModule, Trainer
from torch import nn

from lab import ComparisonCLI
from lab.cli import merge_override
from lightning_info.core.options import AdamWOptions
from tests.tiny import TinyDataModule


@pytest.fixture(autouse=True)
def _argv_and_tmp_path(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "argv", ["recipe"])
    monkeypatch.chdir(tmp_path)


def test_a_mapping_merges_into_an_option_group_and_keeps_its_other_fields():
    section = Namespace(optimizer=Namespace(lr=0.1, weight_decay=0.0), hidden=8)
    merge_override(section, "optimizer", {"weight_decay": 0.5})
    assert section.optimizer == Namespace(lr=0.1, weight_decay=0.5)
    merge_override(section, "optimizer.lr", 0.2)  # a dotted name sets one field
    assert section.optimizer == Namespace(lr=0.2, weight_decay=0.5)
    merge_override(section, "hidden", 16)
    assert section.hidden == 16


def test_a_mapping_merges_into_the_init_args_of_the_same_class():
    linear = "torch.nn.Linear"
    args = Namespace(in_features=6, out_features=3, bias=True)
    section = Namespace(network=Namespace(class_path=linear, init_args=args.clone()))
    merge_override(section, "network", {"init_args": {"bias": False}})
    assert section.network.init_args == Namespace(in_features=6, out_features=3, bias=False)
    merge_override(section, "network", {"class_path": linear, "out_features": 4})
    assert section.network.class_path == linear
    assert section.network.init_args == Namespace(in_features=6, out_features=4, bias=False)


def test_another_class_replaces_the_group():
    args = Namespace(in_features=6, out_features=3)
    section = Namespace(network=Namespace(class_path="torch.nn.Linear", init_args=args))
    other = {"class_path": "torch.nn.Identity", "init_args": {}}
    merge_override(section, "network", other)
    assert section.network == other


class NetworkClassifier(LightningModule):
    """A classifier built from an injected network and an ``AdamWOptions`` group."""

    def __init__(
        self, network: nn.Module | None = None, optimizer: AdamWOptions = AdamWOptions()
    ) -> None:
        super().__init__()
        self.network = network if network is not None else nn.Linear(6, 3)
        self.optimizer_options = optimizer

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self.network(x), y)

    def test_step(self, batch, batch_idx):
        x, y = batch
        accuracy = (self.network(x).argmax(-1) == y).float().mean()
        self.log("test/acc", accuracy)

    def configure_optimizers(self):
        return self.optimizer_options.configure(self.parameters(), self.trainer)


ARMS = (
    "--compare.arms={base: {}, "
    "other: {model: {optimizer: {weight_decay: 0.5}, network: {init_args: {bias: false}}}}}"
)
QUIET = [
    "--trainer.logger=false",
    "--trainer.max_epochs=1",
    "--trainer.enable_progress_bar=false",
    "--trainer.enable_checkpointing=false",
    "--compare.seeds=[0]",
    "--compare.metric=test/acc",
]


def test_an_arm_changes_one_field_of_a_group_and_of_a_network(tmp_path):
    network = "{class_path: torch.nn.Linear, init_args: {in_features: 6, out_features: 3}}"
    args = QUIET + [
        ARMS,
        f"--compare.output_dir={tmp_path}",
        "--model.optimizer={lr: 0.1, weight_decay: 0.0}",
        f"--model.network={network}",
    ]
    cli = ComparisonCLI(NetworkClassifier, TinyDataModule, args=args)
    cli.run()
    # the last cell is the `other` arm: its model is the one left on the CLI
    assert cli.model.optimizer_options == AdamWOptions(lr=0.1, weight_decay=0.5)
    assert isinstance(cli.model.network, nn.Linear) and cli.model.network.bias is None
    assert cli.model.network.out_features == 3
    assert [r.arm for r in cli.results] == ["base", "other"]


@dataclass(frozen=True)
class SizeOptions:
    num_samples: int = 64

    def __post_init__(self) -> None:
        if self.num_samples < 1:
            raise ValueError(f"`num_samples` must be at least 1, got {self.num_samples}.")


class OptionsDataModule(TinyDataModule):
    """``TinyDataModule`` with its size in an option group."""

    def __init__(self, sizes: SizeOptions = SizeOptions(), batch_size: int = 8) -> None:
        super().__init__(batch_size=batch_size, num_samples=sizes.num_samples)


def test_a_bad_option_of_an_arms_data_group_fails_before_any_training(tmp_path, monkeypatch):
    def no_training(*args, **kwargs):
        raise AssertionError("a cell trained before the bad arm was found")

    monkeypatch.setattr(Trainer, "fit", no_training)
    arms = "--compare.arms={good: {}, bad: {data: {sizes: {num_samples: 0}}}}"
    grid = ["--compare.grid_field=batch_size", "--compare.grid=[4, 8]"]
    args = QUIET + grid + [arms, f"--compare.output_dir={tmp_path}"]
    cli = ComparisonCLI(NetworkClassifier, OptionsDataModule, args=args)
    with pytest.raises(ValueError, match="num_samples"):
        cli.run()


class Marker(Callback):
    """A callback that only carries a name."""

    def __init__(self, name: str = "arm") -> None:
        self.name = name


class OtherMarker(Marker):
    """Another callback class."""


def test_an_arm_s_callbacks_plus_joins_the_config_s_callbacks(tmp_path, monkeypatch):
    marker = "tests.experiments.test_arm_overrides.Marker"
    other = "tests.experiments.test_arm_overrides.OtherMarker"
    arms = (
        "--compare.arms={base: {}, "
        f"added: {{trainer: {{callbacks+: [{{class_path: {marker}}}]}}}}, "
        f"replaced: {{trainer: {{callbacks: [{{class_path: {other}}}]}}}}}}"
    )
    own = f"--trainer.callbacks=[{{class_path: {marker}, init_args: {{name: own}}}}]"
    args = [*QUIET, arms, f"--compare.output_dir={tmp_path}", own]
    seen = []
    fit = Trainer.fit

    def record(trainer, *args, **kwargs):
        seen.append([(type(c), c.name) for c in trainer.callbacks if isinstance(c, Marker)])
        return fit(trainer, *args, **kwargs)

    monkeypatch.setattr(Trainer, "fit", record)
    ComparisonCLI(NetworkClassifier, TinyDataModule, args=args).run()
    assert seen == [
        [(Marker, "own")],  # the config's list
        [(Marker, "own"), (Marker, "arm")],  # the config's, then the arm's
        [(OtherMarker, "arm")],  # `callbacks` replaces the list
    ]


def test_a_wrongly_typed_arm_override_is_refused_before_its_cells_train(tmp_path, monkeypatch):
    fits = []
    monkeypatch.setattr(Trainer, "fit", lambda trainer, *a, **k: fits.append(trainer))
    monkeypatch.setattr(Trainer, "test", lambda trainer, *a, **k: [{"test/acc": 1.0}])
    arms = "--compare.arms={good: {}, bad: {model: {optimizer: {lr: not-a-number}}}}"
    args = QUIET + [arms, f"--compare.output_dir={tmp_path}"]
    cli = ComparisonCLI(NetworkClassifier, TinyDataModule, args=args)
    with pytest.raises(Exception, match="lr"):  # jsonargparse's check of the arm's config
        cli.run()
    assert len(fits) == 1  # the good arm's cell only


def test_each_arm_is_checked_once_and_every_cell_saves_its_own_config(tmp_path, monkeypatch):
    import yaml
    from jsonargparse import ArgumentParser

    checked = []
    check = ArgumentParser.check_config

    def count(parser, config, *args, **kwargs):
        checked.append(config.compare.seeds)  # any cell config: counted, then checked
        return check(parser, config, *args, **kwargs)

    monkeypatch.setattr(ArgumentParser, "check_config", count)
    args = QUIET + [ARMS, f"--compare.output_dir={tmp_path}", "--compare.seeds=[0, 1, 2]"]
    network = "{class_path: torch.nn.Linear, init_args: {in_features: 6, out_features: 3}}"
    args += ["--trainer.default_root_dir=runs", f"--model.network={network}"]
    cli = ComparisonCLI(NetworkClassifier, TinyDataModule, args=args)
    cli.run()
    assert len(cli.results) == 6 and len(checked) == 2  # 2 arms x 3 seeds, one check per arm
    saved = yaml.safe_load((tmp_path / "runs" / "config.yaml").read_text())  # the last cell's
    assert saved["seed_everything"] == cli.config_dump["seed_everything"]
    assert saved["model"] == cli.config_dump["model"]
    assert saved["model"]["optimizer"]["weight_decay"] == 0.5  # the `other` arm's override
    assert cli.config_dump["seed_everything"] == 2  # the last cell's own arguments
