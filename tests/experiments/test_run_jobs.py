"""``run_jobs``: a study's independent settings in order, in this process or in spawned ones."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from lab.study import run_jobs, saved_jobs


@dataclass(frozen=True)
class SquareJob:
    x: int


def square(job: SquareJob) -> dict:
    return {"x": job.x, "square": job.x**2}


@pytest.mark.parametrize("workers", [1, 2])
def test_run_jobs_keeps_the_order_and_reports_progress(workers, capsys):
    jobs = [SquareJob(x) for x in (3, 1, 2)]
    records = run_jobs(square, jobs, workers, lambda r: f"x={r['x']}")
    assert records == [{"x": 3, "square": 9}, {"x": 1, "square": 1}, {"x": 2, "square": 4}]
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" (")[0] for line in lines] == ["[1/3] x=3", "[2/3] x=1", "[3/3] x=2"]


def test_run_jobs_refuses_no_workers():
    with pytest.raises(ValueError, match="at least 1"):
        run_jobs(square, [SquareJob(1)], 0, str)


@dataclass(frozen=True)
class FlakyJob:
    """A job that fails while ``marker`` exists (an interruption), and appends its ``x`` to
    ``log`` each time it runs."""

    x: int
    log: str
    marker: str


def flaky_square(job: FlakyJob) -> dict:
    with open(job.log, "a") as handle:
        handle.write(f"{job.x}\n")
    if job.x == 3 and Path(job.marker).exists():
        raise KeyboardInterrupt("interrupted")
    return {"x": job.x, "square": job.x**2}


@pytest.mark.parametrize("workers", [1, 2])
def test_an_interrupted_study_resumes_from_its_saved_jobs(tmp_path, workers, capsys):
    log, marker = tmp_path / "runs.log", tmp_path / "interrupt"
    marker.touch()
    jobs = [FlakyJob(x, str(log), str(marker)) for x in (1, 2, 3, 4)]
    uninterrupted = [{"x": x, "square": x * x} for x in (1, 2, 3, 4)]
    with saved_jobs(tmp_path / "jobs"), pytest.raises(KeyboardInterrupt):
        run_jobs(flaky_square, jobs[:], workers, lambda r: f"x={r['x']}")
    ran_first = log.read_text().split()
    assert {"1", "2"} <= set(ran_first)
    saved = len(list((tmp_path / "jobs").glob("*.pkl")))
    marker.unlink()
    log.write_text("")
    capsys.readouterr()
    with saved_jobs(tmp_path / "jobs"):
        assert run_jobs(flaky_square, jobs, workers, lambda r: f"x={r['x']}") == uninterrupted
    ran_again = log.read_text().split()
    assert "1" not in ran_again and "2" not in ran_again and "3" in ran_again
    assert len(ran_again) == 4 - saved
    lines = capsys.readouterr().out.splitlines()
    assert sum(line.endswith("(saved)") for line in lines) == saved >= 2
    # another setting is another job; without the block nothing is read or written
    assert run_jobs(flaky_square, jobs[:1], 1, str) == uninterrupted[:1]
    assert len(list((tmp_path / "jobs").glob("*.pkl"))) == 4
