"""The shared settings of the studies that train the digits MLP once per seed."""

from __future__ import annotations

import pickle
from dataclasses import FrozenInstanceError

import pytest

from lab.digits_mlp import DigitsMLPStudy


def test_seed_jobs_give_one_job_per_seed_with_the_settings():
    study = DigitsMLPStudy(seeds=[4, 2], epochs=3)
    jobs = study.seed_jobs()
    assert [job.seed for job in jobs] == [4, 2]
    assert all(job.root is None for job in jobs)
    assert jobs[0].settings.epochs == jobs[0].epochs == 3
    assert jobs[0].settings == study
    assert jobs[0].settings is not study  # a copy: later changes to the study leave it alone


def test_a_seed_job_is_frozen_and_survives_the_trip_to_a_spawned_worker():
    (job,) = DigitsMLPStudy(seeds=[3], hidden=[8]).seed_jobs()
    with pytest.raises(FrozenInstanceError):
        job.seed = 4
    assert pickle.loads(pickle.dumps(job)) == job


@pytest.mark.parametrize(
    ("settings", "message"),
    [({"seeds": []}, "seeds"), ({"seeds": [1, 1]}, "distinct"), ({"epochs": 0}, "epochs")],
)
def test_bad_settings_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        DigitsMLPStudy(**settings)
