"""``run_jobs``: a study's independent settings in order, in this process or in spawned ones."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from lab.study import run_jobs


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
