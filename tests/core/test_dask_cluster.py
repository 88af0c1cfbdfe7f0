"""``local_cluster``: Dask's LocalCluster whose worker processes start with glibc's mmap and
trim thresholds fixed (the nanny's ``MALLOC_TRIM_THRESHOLD_=65536`` turns the dynamic mmap
threshold off and trims the heap after every free)."""

from __future__ import annotations

import os
import resource

import numpy as np
import pytest

from lightning_info.core.dask_cluster import (
    MMAP_THRESHOLD,
    TRIM_THRESHOLD,
    WORKER_MALLOC_CONFIG,
    local_cluster,
)

distributed = pytest.importorskip("distributed")


def _environment() -> dict[str, str | None]:
    return {
        name: os.environ.get(name)
        for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "OMP_NUM_THREADS")
    }


def test_worker_processes_start_with_the_mmap_threshold_and_keep_dask_s_environment():
    import dask

    before = _environment()
    configured = {key: dask.config.get(key, None) for key in WORKER_MALLOC_CONFIG}
    with (
        local_cluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        (seen,) = client.run(_environment).values()
    assert seen["MALLOC_MMAP_THRESHOLD_"] == str(MMAP_THRESHOLD) == str(32 * 1024 * 1024)
    assert seen["MALLOC_TRIM_THRESHOLD_"] == str(TRIM_THRESHOLD) == str(64 * 1024 * 1024)
    assert seen["OMP_NUM_THREADS"] == "1"  # the rest of the nanny's environment is Dask's
    # the setting holds for the workers' start only: this process's configuration and
    # environment are as they were (the nanny passes its spawn environment through os.environ)
    assert {key: dask.config.get(key, None) for key in WORKER_MALLOC_CONFIG} == configured
    assert _environment() == before


def _reuse_faults() -> int:
    """Minor page faults of 50 allocations of 1 MiB, each freed before the next."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(50):
        block = np.ones(1 << 17)
        del block
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_a_worker_reuses_freed_memory_without_faulting_it_in_again():
    """Oracle: 1 MiB is 256 pages; with the nanny's 64 KiB trim threshold each of the 50
    allocations faults its pages in again (11,200 faults measured, of 12,800 pages), here none."""
    with (
        local_cluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        client.run(_reuse_faults)  # the heap grows once
        (faults,) = client.run(_reuse_faults).values()
    assert faults < 50 * 256 // 4
