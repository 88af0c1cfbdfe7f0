"""``Study``: the one hook through which a recipe runs what a method measures beyond fit/test.

A study is a class with plain-valued constructor arguments and a :meth:`Study.run` method. A
recipe's YAML names its studies under ``studies``, keyed by name, as any LightningCLI class::

    studies:
      tabular:
        class_path: lab.asymmetric_ac.study.TabularStudy
        init_args: {gamma: 0.8, seeds: [0, 1, 2]}

Every argument can be overridden from the command line (``--studies.tabular.gamma=0.9``) and a
study switched off (``--studies.tabular=null``).
:class:`~lab.cli.ComparisonCLI`
runs the studies in order after the grid and does the reporting, the same for every method: each
table is printed, all of a study's tables are written to ``<output_dir>/<compare.name>_<study>.md``
and ``.json`` (with the study's records), each figure to ``<compare.name>_<study>_<key>.png``, and
tables and figures go to a W&B run ``<compare.name>-<study>`` in the recipe's group when the
trainer's logger is W&B.
"""

from __future__ import annotations

import hashlib
import pickle
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Protocol, TypeVar

from lightning.pytorch import seed_everything

from lightning_info.core.files import atomic_write_bytes
from lightning_info.core.trainers import quiet_trainer

Table = tuple[list[str], list[list]]
Job = TypeVar("Job")
Outcome = TypeVar("Outcome")


@dataclass
class StudyResult:
    """What a study hands back: titled tables ``title -> (columns, rows)``, matplotlib figures
    by key, any JSON-serialisable records worth keeping next to the tables, and line plots by
    key, ``(x name, xs, {series: ys})``, logged as native W&B line plots."""

    tables: dict[str, Table]
    figures: dict[str, Any] = field(default_factory=dict)
    records: Any = None
    line_plots: dict[str, Any] = field(default_factory=dict)


class Study:
    """Base class of a method's extra study (tables, plots) run by ``ComparisonCLI``.

    Subclasses take their settings as constructor arguments (a dataclass is simplest) and
    implement :meth:`run`. A study whose runs are independent builds one frozen dataclass per
    run from those settings, defined at module level beside its worker function, and hands
    them to :func:`run_jobs`.
    """

    def run(self, cli) -> StudyResult:
        """Measure and return the study's tables and figures.

        Args:
            cli: the recipe's ``ComparisonCLI`` after its grid: ``cli.model``,
                ``cli.datamodule`` and ``cli.trainer`` are the last grid cell's (fitted and
                tested), ``cli.results`` the grid's results, ``cli.output_dir`` the folder for any
                extra files. In a recipe without a grid (no model class) only ``cli.output_dir``
                and ``cli.config`` apply.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement `run(cli)`.")


_SAVED_JOBS: ContextVar[Path | None] = ContextVar("saved_jobs", default=None)


@contextmanager
def saved_jobs(folder: str | Path) -> Iterator[Path]:
    """Inside the block, :func:`run_jobs` keeps every job's outcome in ``folder`` as it finishes
    and takes it from there instead of running the job again (``ComparisonCLI``'s
    ``--compare.resume=true``): an interrupted study resumes where it stopped. A job is known by
    its function's name and its ``repr`` (a frozen dataclass of plain values: every setting and
    the seed), not by the code that runs it: delete the folder after changing that code."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    token = _SAVED_JOBS.set(folder)
    try:
        yield folder
    finally:
        _SAVED_JOBS.reset(token)


def _job_file(folder: Path, function: Callable, job: Any) -> Path:
    name = f"{function.__module__}.{function.__qualname__}:{job!r}"
    return folder / f"{hashlib.sha256(name.encode()).hexdigest()[:24]}.pkl"


def run_jobs(
    function: Callable[[Job], Outcome],
    jobs: Sequence[Job],
    workers: int,
    describe: Callable[[Outcome], str],
) -> list[Outcome]:
    """``function`` on every job, in order, in this process (``workers == 1``) or in that many
    spawned processes (``function`` and the jobs' class must then be importable at module level:
    a study's jobs are frozen dataclasses defined beside it); after each outcome a progress line
    ``[i/n] describe(outcome) (seconds since the start)``. Inside :func:`saved_jobs` the
    outcomes saved by an earlier run are read back (``(saved)`` in their line) and only the
    other jobs run, each outcome saved as it arrives."""
    if workers < 1:
        raise ValueError(f"`workers` must be at least 1, got {workers}.")
    folder = _SAVED_JOBS.get()
    files = [None if folder is None else _job_file(folder, function, job) for job in jobs]
    outcomes: list[Any] = [None] * len(jobs)
    for index, file in enumerate(files):
        if file is not None and file.exists():
            outcomes[index] = pickle.loads(file.read_bytes())
            print(f"[{index + 1}/{len(jobs)}] {describe(outcomes[index])} (saved)", flush=True)
    todo = [i for i, file in enumerate(files) if file is None or not file.exists()]
    start = time.perf_counter()
    pool = None
    if workers > 1 and todo:
        pool = ProcessPoolExecutor(workers, mp_context=get_context("spawn"))
    pending = [jobs[i] for i in todo]
    fresh = map(function, pending) if pool is None else pool.map(function, pending)
    try:
        for index, outcome in zip(todo, fresh):
            outcomes[index] = outcome
            if files[index] is not None:
                atomic_write_bytes(files[index], pickle.dumps(outcome))
            seconds = time.perf_counter() - start
            print(f"[{index + 1}/{len(jobs)}] {describe(outcome)} ({seconds:.0f} s)", flush=True)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return outcomes


class TrainedJob(Protocol):
    """What :func:`seeded_trainer` reads of a study's job."""

    @property
    def seed(self) -> int: ...

    @property
    def epochs(self) -> int: ...

    @property
    def root(self) -> str | None: ...


def seeded_trainer(job: TrainedJob, **settings: Any):
    """``seed_everything(job.seed)``, then the quiet Trainer of one job of a study:
    ``job.epochs`` epochs on one device (``accelerator="auto"``), no sanity validation, files
    under ``job.root``; ``settings`` add to or override these."""
    seed_everything(job.seed, verbose=False)
    return quiet_trainer(
        **{
            "max_epochs": job.epochs,
            "accelerator": "auto",
            "devices": 1,
            "num_sanity_val_steps": 0,
            "default_root_dir": job.root,
            **settings,
        }
    )
