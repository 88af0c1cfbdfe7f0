"""Generic tests over every row of the metric table (``tests/metric_table.py``)."""

from __future__ import annotations

import pytest
import torch
from lightning.pytorch import Trainer
from torchmetrics import Metric, MetricCollection

from tests.discovery import classes_of_the_package
from tests.metric_table import (
    EXEMPT,
    METRICS,
    MetricCase,
    MetricLogger,
    SaveLoggedValues,
    object_keys,
    one_process_values,
)
from tests.tiny import QUIET, ReleaseProcessGroup

CASES = [pytest.param(case, id=case.id) for case in METRICS]


def _states(metric: Metric | MetricCollection) -> dict[str, torch.Tensor]:
    members = metric.values() if isinstance(metric, MetricCollection) else [metric]
    states = {}
    for index, member in enumerate(members):
        for name in member._defaults:
            value = getattr(member, name)
            tensors = value if isinstance(value, list) else [value]
            states |= {f"{index}.{name}.{i}": t for i, t in enumerate(tensors)}
    return states


@pytest.mark.parametrize("case", CASES)
def test_update_never_changes_a_state_tensor_in_place(case):
    metric = case.make()
    first, *rest = case.batches()
    metric.update(*first)
    held = _states(metric)
    copies = {name: tensor.clone() for name, tensor in held.items()}
    for args in rest:
        metric.update(*args)
    changed = [name for name, tensor in held.items() if not torch.equal(tensor, copies[name])]
    assert not changed, (
        f"update() changed the states {changed} in place; assign a new tensor "
        "(`self.total = self.total + x`): ddp_spawn shares CPU tensors between processes"
    )


def _check_logged(result: dict, case: MetricCase, oracle: dict[str, torch.Tensor]) -> None:
    for key, expected in oracle.items():
        torch.testing.assert_close(
            result["computed"][key].double(), expected.double(), rtol=1e-9, atol=1e-12, msg=key
        )
        if expected.numel() == 1:
            logged = result["logged"][key]
            torch.testing.assert_close(logged.double(), expected.double(), rtol=1e-6, atol=1e-9)
    for key, name in object_keys(case).items():
        torch.testing.assert_close(
            result["logged"][key].double(), oracle[name].double(), rtol=1e-6, atol=1e-9, msg=key
        )


def _run_metric_logger(tmp_path, **trainer_kwargs) -> list[dict]:
    trainer = Trainer(
        callbacks=[SaveLoggedValues(str(tmp_path)), ReleaseProcessGroup()],
        use_distributed_sampler=False,
        **{**QUIET, **trainer_kwargs},
    )
    trainer.test(MetricLogger(METRICS), verbose=False)
    ranks = trainer_kwargs.get("devices", 1)
    return [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(ranks)]


@pytest.fixture(scope="module")
def spawned(tmp_path_factory):
    """Every row logged under ``ddp_spawn`` with 2 CPU processes, one launch."""
    return _run_metric_logger(tmp_path_factory.mktemp("spawn"), strategy="ddp_spawn", devices=2)


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    return _run_metric_logger(tmp_path_factory.mktemp("single"))


@pytest.mark.parametrize("case", CASES)
def test_logged_on_one_process_equals_the_metric_on_all_batches(case, single):
    _check_logged(single[0], case, one_process_values(case))


@pytest.mark.parametrize("case", CASES)
def test_logged_under_ddp_spawn_on_uneven_shards_equals_one_process(case, spawned):
    oracle = one_process_values(case)
    for rank_result in spawned:
        _check_logged(rank_result, case, oracle)


@pytest.mark.parametrize("case", CASES)
def test_logged_under_torchrun_ddp_on_uneven_shards_equals_one_process(case, ddp_rows):
    oracle = one_process_values(case)
    for rank in (0, 1):
        _check_logged(torch.load(ddp_rows / f"metrics-rank{rank}.pt"), case, oracle)


def test_every_metric_of_the_package_has_a_row_or_an_exemption():
    defined = classes_of_the_package((Metric,), private=False)
    covered = set()
    for case in METRICS:
        made = case.make()
        members = made.values() if isinstance(made, MetricCollection) else [made]
        covered |= {type(member) for member in members}
    missing = {cls.__qualname__ for cls in defined - covered} - set(EXEMPT)
    assert not missing, f"add a metric-table row or an EXEMPT entry for {sorted(missing)}"
    stale = set(EXEMPT) - {cls.__qualname__ for cls in defined - covered}
    assert not stale, f"EXEMPT lists metrics that have a row or no longer exist: {sorted(stale)}"
