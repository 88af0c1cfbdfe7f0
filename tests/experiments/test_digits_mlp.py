"""The shared settings of the studies that train the digits MLP once per seed."""

from __future__ import annotations

import pytest

from lab.digits_mlp import DigitsMLPStudy


def test_seed_jobs_give_one_job_per_seed_with_the_settings():
    study = DigitsMLPStudy(seeds=[4, 2], epochs=3)
    jobs = study.seed_jobs()
    assert [job["seed"] for job in jobs] == [4, 2]
    assert all(job["root"] is None for job in jobs)
    assert jobs[0]["settings"]["epochs"] == 3
    assert DigitsMLPStudy(**jobs[0]["settings"]) == study


@pytest.mark.parametrize(
    ("settings", "message"),
    [({"seeds": []}, "seeds"), ({"seeds": [1, 1]}, "distinct"), ({"epochs": 0}, "epochs")],
)
def test_bad_settings_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        DigitsMLPStudy(**settings)
