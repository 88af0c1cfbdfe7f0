"""``local_cluster``: Dask's LocalCluster whose worker processes start with glibc's mmap
threshold fixed (the nanny's ``MALLOC_TRIM_THRESHOLD_`` turns the dynamic one off)."""

from __future__ import annotations

import os

import pytest

from lightning_info.core.dask_cluster import MMAP_THRESHOLD, WORKER_MALLOC_CONFIG, local_cluster

distributed = pytest.importorskip("distributed")


def _environment() -> dict[str, str | None]:
    return {
        name: os.environ.get(name) for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
    }


def test_worker_processes_start_with_the_mmap_threshold_and_keep_dask_s_environment():
    import dask

    before = _environment()
    with (
        local_cluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        (seen,) = client.run(_environment).values()
    assert seen["MALLOC_MMAP_THRESHOLD_"] == str(MMAP_THRESHOLD) == str(32 * 1024 * 1024)
    trim = dask.config.get("distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_")
    assert seen["MALLOC_TRIM_THRESHOLD_"] == str(trim)  # the nanny's own setting is kept
    # the setting holds for the workers' start only: this process's configuration and
    # environment are as they were (the nanny passes its spawn environment through os.environ)
    key = next(iter(WORKER_MALLOC_CONFIG))
    assert dask.config.get(key, None) is None
    assert _environment() == before
