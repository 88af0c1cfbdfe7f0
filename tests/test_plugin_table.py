"""Generic tests run over every row of the plugin table."""

from __future__ import annotations

import inspect

import pytest
import torch
import yaml
from lightning.pytorch import (
    Callback,
    LightningDataModule,
    LightningModule,
    Trainer,
    seed_everything,
)
from lightning.pytorch.cli import LightningCLI

import lightning_info
from lightning_info.configs import callback_config
from tests.discovery import classes_of_the_package
from tests.plugin_table import EXEMPT, PLUGINS, PluginCase
from tests.resume_points import RESUME_POINTS, differences, resumed_run, straight_run
from tests.tiny import QUIET, TinyClassifier, TinyDataModule

CASES = [pytest.param(case, id=case.id) for case in PLUGINS]


def _weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _fit(
    case: PluginCase,
    tmp_path,
    *,
    seed=0,
    batch_size=8,
    ckpt_path=None,
    sequential_shards=False,
    extra_callbacks=(),
    **trainer_kwargs,
):
    seed_everything(seed)
    model, callbacks = case.make_model(), [*case.make_callbacks(), *extra_callbacks]
    data = None if case.make_data is None else case.make_data(batch_size)
    if sequential_shards:
        data.sequential_shards = True
        trainer_kwargs["use_distributed_sampler"] = False
    trainer = Trainer(
        callbacks=callbacks,
        default_root_dir=tmp_path,
        **{**QUIET, **case.trainer_kwargs, **trainer_kwargs},
    )
    trainer.fit(model, datamodule=data, ckpt_path=ckpt_path)
    return trainer, model, callbacks


@pytest.mark.parametrize("case", CASES)
def test_fast_dev_run_trains(case, tmp_path):
    seed_everything(0)
    initial = _weights(case.make_model())
    trainer, model, _ = _fit(case, tmp_path, fast_dev_run=True)
    assert trainer.state.finished and trainer.global_step == 1
    changed = [k for k, v in _weights(model).items() if not torch.equal(v, initial[k])]
    assert changed, "one optimizer step left every weight unchanged"


@pytest.mark.parametrize(
    "case", [pytest.param(case, id=case.id) for case in PLUGINS if case.make_data is not None]
)
def test_a_logger_accepts_the_rows_hyperparameters(case):
    """Lightning's loggers refuse a module and a data module that record one name with two
    values (``Error while merging hparams``); the rows run with ``logger=False``, so check it."""
    seed_everything(0)
    model, data = case.make_model(), case.make_data(8)
    shared = set(model.hparams_initial) & set(data.hparams_initial)
    conflicts = {
        name: (model.hparams_initial[name], data.hparams_initial[name])
        for name in shared
        if model.hparams_initial[name] != data.hparams_initial[name]
    }
    assert not conflicts, f"module vs data module hyperparameters: {conflicts}"


_STRAIGHT: dict[str, tuple] = {}


@pytest.mark.parametrize("point", RESUME_POINTS)
@pytest.mark.parametrize("case", CASES)
def test_resume_matches_uninterrupted_run(case, point, tmp_path_factory):
    """Resumed from an epoch's end, from a mid-epoch checkpoint or after a ``max_steps`` stop
    (``tests/resume_points.py``), a row ends as its uninterrupted run."""

    def fit(folder, **kwargs):
        return _fit(case, folder, **kwargs)

    if case.id not in _STRAIGHT:  # the uninterrupted run, shared by the row's three points
        _STRAIGHT[case.id] = straight_run(fit, tmp_path_factory.mktemp(f"{case.id}-straight"))
    straight, mid_epoch, batches = _STRAIGHT[case.id]
    resumed = resumed_run(fit, tmp_path_factory.mktemp(case.id), point, mid_epoch, batches)
    assert resumed["step"] == straight["step"] > 0
    assert not differences(resumed, straight)


@pytest.mark.parametrize("case", CASES)
def test_ddp_two_cpu_processes(case, ddp_rows, tmp_path):
    result = torch.load(ddp_rows / f"{case.id}.pt", weights_only=False)
    assert "error" not in result, result.get("error")
    assert result["world_size"] == 2 and result["finished"]
    initial, ddp_weights = result["initial"], result["final"]
    assert any(not torch.equal(v, initial[k]) for k, v in ddp_weights.items())
    if case.ddp_matches_single_device:
        _, single, _ = _fit(case, tmp_path / "single", batch_size=8, max_steps=3, devices=1)
        for name, value in _weights(single).items():
            torch.testing.assert_close(ddp_weights[name], value, rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("case", CASES)
def test_resume_under_ddp_matches_uninterrupted_run(case, ddp_rows):
    """The three resume points under ``Trainer(strategy="ddp", devices=2)``."""
    result = torch.load(ddp_rows / f"resume-{case.id}.pt", weights_only=False)
    assert "error" not in result, result.get("error")
    assert result["step"] > 0
    for point in RESUME_POINTS:
        assert not result[point], f"{point}: {result[point]} differ"


YAML_CASES = [pytest.param(c, id=c.id) for c in PLUGINS if c.callback_yaml]


@pytest.mark.parametrize("case", YAML_CASES)
def test_callback_yaml_attaches_through_lightning_cli(case, tmp_path):
    path = callback_config(case.callback_yaml)
    spec = yaml.safe_load(path.read_text())
    cli = LightningCLI(
        TinyClassifier,
        TinyDataModule,
        run=False,
        args=[
            f"--trainer.callbacks+={path}",
            "--trainer.fast_dev_run=true",
            "--trainer.logger=false",
            "--trainer.enable_progress_bar=false",
            "--trainer.accelerator=cpu",
            f"--trainer.default_root_dir={tmp_path}",
        ],
    )
    attached = [cb for cb in cli.trainer.callbacks if isinstance(cb, case.expected_callback)]
    assert len(attached) == 1
    signature = inspect.signature(case.expected_callback)
    for key, value in spec.get("init_args", {}).items():
        assert key in signature.parameters
        assert _config_value(getattr(attached[0], key)) == value, key
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    assert cli.trainer.global_step == 1


def _config_value(value):
    """A plugin attribute as it was written in YAML (schedules are stored as callables)."""
    return value(0) if callable(value) else value


def test_every_exported_callback_has_a_table_row():
    exported = {
        obj
        for name in lightning_info.__all__
        if inspect.isclass(obj := getattr(lightning_info, name)) and issubclass(obj, Callback)
    }
    in_table = {case.expected_callback for case in PLUGINS}
    bases_of_rows = {base for cls in in_table if cls is not None for base in cls.__mro__[1:]}
    # a base class is exercised through its subclasses' rows; EXEMPT says why a class has none
    missing = {
        cls
        for cls in exported - in_table
        if cls not in bases_of_rows and cls.__qualname__ not in EXEMPT
    }
    assert not missing, f"callbacks without a row: {missing}"


def test_every_lightning_class_of_the_package_has_a_row_or_an_exemption():
    lightning_types = (Callback, LightningModule, LightningDataModule)
    defined = classes_of_the_package(lightning_types)
    covered = set()
    for case in PLUGINS:
        built = [case.make_model(), *case.make_callbacks()]
        if case.make_data is not None:
            built.append(case.make_data(8))
        covered |= {cls for obj in built for cls in type(obj).__mro__}
    missing = {cls.__qualname__ for cls in defined - covered} - set(EXEMPT)
    assert not missing, f"add a plugin-table row or an EXEMPT entry for {sorted(missing)}"
    stale = set(EXEMPT) - {cls.__qualname__ for cls in defined - covered}
    assert not stale, f"EXEMPT lists classes that have a row or no longer exist: {sorted(stale)}"
