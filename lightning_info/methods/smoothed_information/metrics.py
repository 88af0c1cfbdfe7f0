"""torchmetrics ``Metric``s of the smoothed-density estimators: a seeded reservoir of samples
gathered across batches and processes (``SampleReservoir``) and the Fisher information, entropy
and mutual information of its contents (the functions of ``functional``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor
from torchmetrics.utilities.data import dim_zero_cat

from lightning_info.core.metrics import DtypeKeepingMetric
from lightning_info.core.validation import require_finite_tensor, require_int
from lightning_info.methods.smoothed_information.functional import (
    SmoothedEstimatorOptions,
    check_estimator_options,
    check_sample_dtype,
    check_times,
    smoothed_entropy,
    smoothed_fisher_information,
    smoothed_mutual_information,
)


def _world_rank() -> int:
    distributed = torch.distributed
    if distributed.is_available() and distributed.is_initialized():
        return distributed.get_rank()
    return 0


class SampleReservoir(DtypeKeepingMetric):
    """Samples ``(B, d)`` concatenated over batches and processes; ``compute()`` returns them.

    With ``max_samples`` each row gets a random key (seeded per process) and only the rows with
    the ``max_samples`` smallest keys are kept, on each process and once more after the gather,
    so the result is a uniform random subset of all rows seen, without replacement, and memory
    stays ``O(max_samples)`` per process. :meth:`restart_keys` makes the next keys start from the
    seed again.

    States are float64 (``set_dtype`` changes that); a process that saw no rows takes part in the
    gather with an empty state.

    Args:
        max_samples: cap on the rows kept, ``None`` keeps all.
        seed: seed of the keys (process ``r`` uses ``seed + r``).
        **kwargs: passed to :class:`torchmetrics.Metric`.
    """

    is_differentiable = False
    full_state_update = False

    rows: list[Tensor] | Tensor
    keys: list[Tensor] | Tensor
    dim: Tensor

    def __init__(self, max_samples: int | None = None, seed: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_samples = (
            None if max_samples is None else require_int(max_samples, "max_samples", 1)
        )
        self.seed = require_int(seed, "seed", 0)
        # rows are stored flattened, so an empty process sends a 1-D empty tensor like the others
        self.add_state("rows", default=[], dist_reduce_fx="cat")
        self.add_state("keys", default=[], dist_reduce_fx="cat")
        self.add_state("dim", default=torch.tensor(0), dist_reduce_fx="max")
        self.set_dtype(torch.float64)
        self._generator: torch.Generator | None = None

    def restart_keys(self) -> None:
        """Draw the next keys from the seed again (e.g. at the start of every epoch), so that the
        same rows in the same order give the same subset."""
        self._generator = None

    def update(self, samples: Tensor) -> None:
        """Add a batch of samples, ``(B,)`` (``d = 1``) or ``(B, d)``, of real numbers (not bool
        or complex)."""
        check_sample_dtype(samples)
        if samples.dim() == 1:
            samples = samples[:, None]
        if samples.dim() != 2:
            raise ValueError(
                f"`samples` must have shape (B,) or (B, d), got {tuple(samples.shape)}; flatten "
                "each sample first."
            )
        require_finite_tensor(samples, "samples")
        dim = samples.shape[1]
        if int(self.dim) not in (0, dim):
            raise ValueError(f"`samples` must keep d={int(self.dim)} across updates, got d={dim}.")
        self.dim = torch.full_like(self.dim, dim)  # keeps the dtype every process gathers
        self.rows.append(samples.detach().to(self.dtype).reshape(-1))
        if self.max_samples is None:
            return
        if self._generator is None:
            self._generator = torch.Generator().manual_seed(self.seed + _world_rank())
        keys = torch.rand(samples.shape[0], generator=self._generator, dtype=torch.float64)
        self.keys.append(keys.to(device=samples.device, dtype=self.dtype))
        if sum(k.numel() for k in self.keys) > 2 * self.max_samples:  # prune when twice over
            rows, keys = self._smallest_keys(dim_zero_cat(self.rows), dim_zero_cat(self.keys))
            self.rows, self.keys = [rows], [keys]

    def _smallest_keys(self, rows: Tensor, keys: Tensor) -> tuple[Tensor, Tensor]:
        if keys.numel() <= self.max_samples:
            return rows, keys
        kept = keys.topk(self.max_samples, largest=False).indices.sort().values
        return rows.reshape(-1, int(self.dim))[kept].reshape(-1), keys[kept]

    def samples(self) -> Tensor:
        """All rows (or the ``max_samples`` subset), ``(n, d)``, as held now (no sync)."""
        if isinstance(self.rows, list) and not self.rows:
            raise ValueError(
                f"{type(self).__name__} has no samples: call `update(samples)` before `compute()`."
            )
        rows = dim_zero_cat(self.rows)
        if self.max_samples is not None:
            rows, _ = self._smallest_keys(rows, dim_zero_cat(self.keys))
        dim = int(self.dim)
        if dim == 0 or rows.numel() == 0:
            raise ValueError(f"{type(self).__name__} has no samples on any process.")
        return rows.reshape(-1, dim)

    def compute(self) -> Tensor:
        return self.samples()


class _SmoothedMetric(SampleReservoir):
    """A functional of ``f_t`` on the accumulated samples; ``compute()`` runs it with a generator
    seeded by ``seed``, so that every process gets the same value from the same gathered rows.

    Args:
        t: noise variance(s); ``compute()`` returns a 0-dim tensor, or ``(K,)`` for ``K`` of them.
        options: the estimator's :class:`SmoothedEstimatorOptions`.
        max_samples, seed, **kwargs: as in :class:`SampleReservoir`.
    """

    higher_is_better = None

    def __init__(
        self,
        t: float | Sequence[float],
        options: SmoothedEstimatorOptions = SmoothedEstimatorOptions(),
        *,
        max_samples: int | None = None,
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(max_samples=max_samples, seed=seed, **kwargs)
        check_times(t)
        self.t = t
        self.options = check_estimator_options(options)

    def _seeded_generator(self) -> torch.Generator:
        return torch.Generator().manual_seed(self.seed)


class SmoothedFisherInformation(_SmoothedMetric):
    """:func:`smoothed_fisher_information` of all samples seen (see :class:`SampleReservoir`);
    arguments as in :class:`_SmoothedMetric` (``options``: ``method``, ``num_mc``, ``grid``,
    ``mc_estimator``)."""

    def compute(self) -> Tensor:
        return smoothed_fisher_information(
            self.samples(), self.t, self.options, generator=self._seeded_generator()
        )


class SmoothedEntropy(_SmoothedMetric):
    """:func:`smoothed_entropy` of all samples seen (see :class:`SampleReservoir`); arguments as
    in :class:`_SmoothedMetric` (``options``: ``estimator``, ``method``, ``num_mc``, ``grid``,
    ``log_step``, ``tail_factor``)."""

    def compute(self) -> Tensor:
        return smoothed_entropy(
            self.samples(), self.t, self.options, generator=self._seeded_generator()
        )


class SmoothedMutualInformation(_SmoothedMetric):
    """:func:`smoothed_mutual_information` ``I(X; X + sqrt(t) Z)`` of all samples seen; arguments
    as in :class:`SmoothedEntropy`."""

    def compute(self) -> Tensor:
        return smoothed_mutual_information(
            self.samples(), self.t, self.options, generator=self._seeded_generator()
        )
