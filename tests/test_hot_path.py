"""No host synchronisation in the training hot path.

Every row of the plugin table trains a few CPU batches while the tensor methods that read a
device value back to the host (``item``, ``tolist``, ``cpu``, ``numpy``, ``__bool__``,
``__int__``, ``__float__``) are counted whenever the innermost calling frame outside torch's own
package is library code, and only while Lightning runs a per-batch hook. On a GPU each such call
waits for the queued kernels to finish; a training step of the library makes none, except where
the method is a host-side solver by nature (``HOST_BOUND``) or a read is needed for the step's
result (``UNAVOIDABLE``, by function, each with its reason). Per-batch value checks sit behind a
``validate_args`` switch that is off by default. The method tests import :func:`count_host_reads`
and :func:`train_counting` to check their own switches.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import pytest
import torch
from lightning.pytorch import LightningModule, Trainer, seed_everything
from lightning.pytorch.trainer import call

import lightning_info
from tests.plugin_table import PLUGINS
from tests.tiny import QUIET, TinyDataModule

SYNCING_METHODS = ("item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__")
"""Tensor methods that copy a value from the device to the host."""

PER_BATCH_HOOKS = frozenset(
    {
        # Names the training loops of Lightning 2.6 pass to ``_call_callback_hooks``,
        # ``_call_lightning_module_hook`` and ``_call_strategy_hook`` once per batch
        # (loops/training_epoch_loop.py, loops/optimization/automatic.py and manual.py,
        # plugins/precision/precision.py).
        "on_train_batch_start",
        "training_step",
        "on_before_backward",
        "backward",
        "on_after_backward",
        "on_before_optimizer_step",
        "configure_gradient_clipping",
        "optimizer_step",
        "on_before_zero_grad",
        "optimizer_zero_grad",
        "on_train_batch_end",
    }
)

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_LIBRARY_DIR = os.path.dirname(lightning_info.__file__) + os.sep


def in_library(filename: str) -> bool:
    """The default frame filter: a file of the installed ``lightning_info`` package."""
    return filename.startswith(_LIBRARY_DIR)


HOST_BOUND = {
    "AncestralGraphSearch-BayesianNetworkDataModule": "a training step is one move of a greedy "
    "combinatorial search over ancestral graphs: it scores candidate edge changes, picks the best "
    "one and stops when none improves, a data-dependent control flow on the host by nature",
    "LastIterateSolver-GameEpisodesDataModule": "a training step samples episodes of an "
    "extensive-form game by walking its game tree (which history, which infoset, which action "
    "next) and applies one tabular update whose episode count is a host integer; the solver's "
    "state is a small table, so the step is a host-side solver by nature",
    "AsymmetricActorCritic-CartPole": "a training step rolls out Gymnasium environments, which "
    "take actions as NumPy values and return NumPy observations and rewards: every environment "
    "step is a host round trip by nature",
    "LinearAsymmetricActorCritic-TMaze": "a training step rolls out a tabular T-maze POMDP on the "
    "host (environment steps take integer actions) and fits its linear critic by SGD over the "
    "collected episodes: an environment rollout by nature",
}
"""Rows whose training step is a host-side solver by nature, and why."""

UNAVOIDABLE = {
    "ProDiff-TrajectoryDataModule": {
        (
            "lightning_info/methods/prodiff/functional.py",
            "match_clusters",
        ): "with match_pseudo_labels (the default) each step labels its k-means clusters by the "
        "prototypes they are matched to, a linear assignment solved by SciPy's Hungarian method "
        "on the host: the (m, K) cost matrix is copied to the host once per step, and the step's "
        "loss depends on the answer. An exact assignment on the device would be a sequential "
        "O(K^3) loop of small kernels, slower than the one copy; match_pseudo_labels=False "
        "(the reference's arbitrary cluster numbers) reads nothing",
    },
}
"""Host reads a row still makes, by (file, function), and why they cannot go without changing
its results; each must still happen (an entry that no longer applies fails the test)."""


class Site(NamedTuple):
    """Where a host read happened: the innermost frame outside torch (file, line, function),
    the tensor method called, and the first caller in another accepted file, if any."""

    file: str
    line: int
    function: str
    method: str
    caller: str

    def __str__(self) -> str:
        via = f" (from {self.caller})" if self.caller else ""
        return f"{self.file}:{self.line} {self.method} in {self.function}{via}"


class HostReads:
    """Calls of :data:`SYNCING_METHODS` made from accepted frames inside per-batch hooks:
    ``calls`` counts them by :class:`Site`, ``batches`` counts the ``training_step`` calls."""

    def __init__(self) -> None:
        self.calls: Counter[Site] = Counter()
        self.batches = 0

    @property
    def total(self) -> int:
        return sum(self.calls.values())

    def describe(self) -> str:
        return "\n".join(f"    {n} x {site}" for site, n in self.calls.most_common())


def _caller_outside_torch(frame):
    while frame is not None and frame.f_code.co_filename.startswith(_TORCH_DIR):
        frame = frame.f_back
    return frame


def _site(frame, name: str, accept: Callable[[str], bool]) -> Site:
    """The :class:`Site` of ``frame``; its caller is the first one in another accepted file (a
    shared helper such as ``core/validation.py`` is then traced to the method that called it)."""
    filename = frame.f_code.co_filename
    caller = frame.f_back
    while caller is not None and caller.f_code.co_filename == filename:
        caller = caller.f_back
    via = ""
    if caller is not None and accept(caller.f_code.co_filename):
        via = f"{_short(caller.f_code.co_filename)}:{caller.f_lineno}"
    return Site(_short(filename), frame.f_lineno, frame.f_code.co_name, name, via)


@contextmanager
def count_host_reads(accept: Callable[[str], bool] = in_library) -> Iterator[HostReads]:
    """Count the syncing tensor calls whose innermost non-torch frame's file ``accept`` takes,
    made while Lightning runs one of :data:`PER_BATCH_HOOKS`."""
    reads = HostReads()
    depth = [0]

    def scoped(original, counts_batches):
        def run(trainer, hook_name, *args, **kwargs):
            per_batch = hook_name in PER_BATCH_HOOKS
            reads.batches += counts_batches and hook_name == "training_step"
            depth[0] += per_batch
            try:
                return original(trainer, hook_name, *args, **kwargs)
            finally:
                depth[0] -= per_batch

        return run

    def counted(name, original):
        def method(self, *args, **kwargs):
            if depth[0]:
                frame = _caller_outside_torch(sys._getframe(1))
                if frame is not None and accept(frame.f_code.co_filename):
                    reads.calls[_site(frame, name, accept)] += 1
            return original(self, *args, **kwargs)

        return method

    with pytest.MonkeyPatch.context() as patch:
        for hook in ("_call_callback_hooks", "_call_lightning_module_hook"):
            patch.setattr(call, hook, scoped(getattr(call, hook), False))
        patch.setattr(call, "_call_strategy_hook", scoped(call._call_strategy_hook, True))
        for name in SYNCING_METHODS:
            patch.setattr(torch.Tensor, name, counted(name, getattr(torch.Tensor, name)))
        yield reads


def _short(filename: str) -> str:
    for root in (_LIBRARY_DIR, str(Path(__file__).parent) + os.sep):
        if filename.startswith(root):
            return os.path.relpath(filename, os.path.dirname(root.rstrip(os.sep)))
    return filename


def train_counting(
    make_model,
    make_callbacks=list,
    make_data=None,
    *,
    accept: Callable[[str], bool] = in_library,
    steps: int = 3,
    **trainer_kwargs,
) -> HostReads:
    """``steps`` training batches of a fresh model on the CPU, counting host reads."""
    seed_everything(0)
    model, callbacks = make_model(), make_callbacks()
    data = None if make_data is None else make_data(8)
    trainer = Trainer(
        max_steps=steps,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        callbacks=callbacks,
        **{**QUIET, **trainer_kwargs},
    )
    with count_host_reads(accept) as reads:
        trainer.fit(model, datamodule=data)
    assert reads.batches > 0, "no training step ran"
    return reads


@pytest.mark.parametrize("case", [pytest.param(case, id=case.id) for case in PLUGINS])
def test_no_host_reads_in_the_training_hot_path(case, one_torch_thread):
    reads = train_counting(
        case.make_model, case.make_callbacks, case.make_data, **case.trainer_kwargs
    )
    if case.id in HOST_BOUND:  # it must still be: an entry that no longer applies goes
        assert reads.total > 0, f"{case.id} reads nothing back now: take it out of HOST_BOUND"
        return
    known = UNAVOIDABLE.get(case.id, {})
    unexpected = {s: n for s, n in reads.calls.items() if (s.file, s.function) not in known}
    assert not unexpected, (
        f"{case.id}: {sum(unexpected.values())} host reads in {reads.batches} training "
        f"batches:\n" + "\n".join(f"    {n} x {site}" for site, n in unexpected.items())
    )
    hit = {(site.file, site.function) for site in reads.calls}
    assert set(known) <= hit, f"{case.id}: no longer reads at {sorted(set(known) - hit)}"


def test_the_exceptions_name_rows_of_the_table():
    rows = {case.id for case in PLUGINS}
    assert set(HOST_BOUND) <= rows and set(UNAVOIDABLE) <= rows
    assert not set(HOST_BOUND) & set(UNAVOIDABLE)


class _ReadsTheLoss(LightningModule):
    """Calls ``.item()`` on its loss once per training step, reads a flag inside torch's
    ``clip_grad_norm_(error_if_nonfinite=True)`` after each backward, and reads the loss once
    more at the end of each epoch (outside the per-batch hooks)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Linear(6, 3)
        self.seen: list[float] = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.net(x), y)
        self.seen.append(loss.item())
        return loss

    def on_after_backward(self):
        torch.nn.utils.clip_grad_norm_(self.parameters(), 1.0, error_if_nonfinite=True)

    def on_train_epoch_end(self):
        self.seen.append(torch.tensor(self.seen).mean().item())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_the_counter_counts_each_read_of_a_batch_when_the_filter_accepts_the_caller():
    this_file = os.path.abspath(__file__)
    reads = train_counting(_ReadsTheLoss, make_data=TinyDataModule, accept=lambda f: f == this_file)
    assert reads.batches == 3
    by_function = Counter()
    for site, n in reads.calls.items():
        assert site.file == "tests/test_hot_path.py"
        by_function[site.function, site.method] += n
    # the read inside torch is charged to its caller; the epoch-end read is not counted
    assert by_function == {("training_step", "item"): 3, ("on_after_backward", "__bool__"): 3}


def test_the_counter_ignores_callers_the_filter_refuses():
    reads = train_counting(_ReadsTheLoss, make_data=TinyDataModule)
    assert reads.batches == 3 and reads.total == 0
