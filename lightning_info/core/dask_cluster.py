"""A local Dask cluster whose worker processes allocate memory as a plain Python process does.

Dask's nanny starts every worker process with ``MALLOC_TRIM_THRESHOLD_=65536``
(``distributed.nanny.pre-spawn-environ``) so that freed memory goes back to the system. Setting
any ``M_TRIM_THRESHOLD`` also turns off glibc's dynamic mmap threshold (``mallopt(3)``): the
threshold then stays at 128 KiB, every tensor above it is mapped on allocation and unmapped on
free, and each reuse page-faults its memory in again. FisherSFT's two-round selection in one
worker took 2x the same code in the client process (18.5 s against 10.9 s at 100,000
candidates; 3.7 to 7.3 million minor page faults against 0.26 million). With the mmap threshold
fixed at glibc's dynamic maximum, 32 MiB, the 64 KiB trim threshold still hands the top of the
heap back after a free, and the next allocation faults it in again: the eight shard selections
at 100,000 candidates took 11.6-12.3 s in the worker against 9.4-10.6 s in the client (1.0-1.1
million faults against 88,000). With the trim threshold at 64 MiB as well (what glibc's dynamic
rule sets beside a 32 MiB mmap threshold: twice it) the worker took 9.8-9.9 s with the client's
88,000 faults; a worker keeps at most 64 MiB of freed heap. glibc reads these variables once, at
process start, so they must be in the environment the nanny spawns the worker with: a worker's
``env`` (set after start) is too late.

A cluster of your own gets the same by setting both in Dask's configuration before its workers
start, e.g. ``DASK_DISTRIBUTED__NANNY__PRE_SPAWN_ENVIRON__MALLOC_MMAP_THRESHOLD_=33554432`` and
``DASK_DISTRIBUTED__NANNY__PRE_SPAWN_ENVIRON__MALLOC_TRIM_THRESHOLD_=67108864`` in the
environment of ``dask worker``, or :data:`WORKER_MALLOC_CONFIG` in ``dask.config.set``.
"""

from __future__ import annotations

import os
from typing import Any

from lightning_info.core.optional import require_extra

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "WORKER_MALLOC_CONFIG", "local_cluster"]

MMAP_THRESHOLD = 32 << 20
"""glibc's largest dynamic mmap threshold on 64-bit systems (``DEFAULT_MMAP_THRESHOLD_MAX``)."""

TRIM_THRESHOLD = 2 * MMAP_THRESHOLD
"""The trim threshold glibc's dynamic rule sets beside :data:`MMAP_THRESHOLD` (twice it)."""

WORKER_MALLOC_CONFIG = {
    "distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_": MMAP_THRESHOLD,
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": TRIM_THRESHOLD,
}
"""The Dask configuration that fixes the workers' mmap and trim thresholds (for
``dask.config.set``)."""


def local_cluster(**kwargs: Any) -> Any:
    """``distributed.LocalCluster(**kwargs)`` whose worker processes start with
    ``MALLOC_MMAP_THRESHOLD_`` at :data:`MMAP_THRESHOLD` and ``MALLOC_TRIM_THRESHOLD_`` at
    :data:`TRIM_THRESHOLD` (see the module's docstring); the rest of the nanny's environment is
    Dask's. Threads-only clusters (``processes=False``) run in this process and are unaffected.

    The nanny writes its spawn environment into this process's ``os.environ`` to pass it on;
    those variables get their earlier values back once the workers have started, so this
    process's own subprocesses do not inherit them."""
    dask = require_extra("dask", "audit", "Local Dask clusters")
    distributed = require_extra("distributed", "audit", "Local Dask clusters")
    with dask.config.set(WORKER_MALLOC_CONFIG):
        names = list(dask.config.get("distributed.nanny.pre-spawn-environ"))
        before = {name: os.environ.get(name) for name in names}
        try:
            return distributed.LocalCluster(**kwargs)
        finally:
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
