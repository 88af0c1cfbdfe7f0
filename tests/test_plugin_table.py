"""Generic tests run over every row of the plugin table."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import socket
import subprocess
import sys
from pathlib import Path

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
from tests.plugin_table import EXEMPT, PLUGINS, PluginCase
from tests.tiny import QUIET, TinyClassifier, TinyDataModule

ROOT = Path(__file__).resolve().parents[1]
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
    **trainer_kwargs,
):
    seed_everything(seed)
    model, callbacks = case.make_model(), case.make_callbacks()
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


@pytest.mark.parametrize("case", CASES)
def test_resume_matches_uninterrupted_run(case, tmp_path):
    straight_trainer, straight, straight_callbacks = _fit(case, tmp_path / "a", max_epochs=4)

    first, _, _ = _fit(case, tmp_path / "b", max_epochs=2)
    checkpoint = tmp_path / "half.ckpt"
    first.save_checkpoint(checkpoint)
    # A different seed: everything that matters must come from the checkpoint.
    resumed_trainer, resumed, resumed_callbacks = _fit(
        case, tmp_path / "c", seed=123, max_epochs=4, ckpt_path=checkpoint
    )

    assert resumed_trainer.global_step == straight_trainer.global_step > first.global_step > 0
    expected = _weights(straight)
    for name, value in _weights(resumed).items():
        torch.testing.assert_close(value, expected[name], rtol=0, atol=0, msg=name)
    for a, b in zip(straight_callbacks, resumed_callbacks):
        assert _same_state(a.state_dict(), b.state_dict())


def _same_state(a, b) -> bool:
    """Equal plugin states, tensors compared exactly (``==`` cannot compare them)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_state(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_state(x, y) for x, y in zip(a, b))
    return a == b


@pytest.fixture(scope="module")
def ddp_rows(tmp_path_factory):
    """Every row under ``Trainer(strategy="ddp", devices=2)`` in two CPU processes started once by
    torchrun (``tests/ddp_plugin_rows.py``); the folder of rank 0's results per row."""
    out = tmp_path_factory.mktemp("ddp_rows")
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    command += ["--master-port", str(_free_port()), "-m", "tests.ddp_plugin_rows", str(out)]
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    assert exported <= in_table, f"callbacks without a row: {exported - in_table}"


def test_every_lightning_class_of_the_package_has_a_row_or_an_exemption():
    lightning_types = (Callback, LightningModule, LightningDataModule)
    defined = set()
    for info in pkgutil.walk_packages(lightning_info.__path__, "lightning_info."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        defined |= {
            obj
            for obj in vars(module).values()
            if inspect.isclass(obj)
            and obj.__module__ == module.__name__
            and issubclass(obj, lightning_types)
        }
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
