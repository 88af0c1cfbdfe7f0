"""FisherSFT's feature sketch: a pool too wide to hold, projected on the way in.

Every token row is multiplied by one seeded Gaussian matrix ``S`` in ``R^{d x k}`` with entries
``N(0, 1/k)``. By Sylvester's identity ``F(S) = d log(lambda) + log det(I + V V^T / lambda)`` for
the stacked rows ``V`` of the subset, so (FSFT-1) depends on the rows only through their Gram
matrix ``V V^T``, which ``V S`` keeps in expectation (``E[S S^T] = I_d``) and up to ``1 +- eps``
for ``k`` of order ``log(rows) / eps^2`` (Johnson-Lindenstrauss): the greedy runs in ``k``
dimensions on ``k / d`` of the memory.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from lightning_info.core.blocks import TokenBlocks
from lightning_info.core.validation import require_int, require_real_floating
from lightning_info.methods.fisher_sft.pool import _require_float_dtype, as_token_blocks


def gaussian_sketch(
    dim: int,
    sketch_dim: int,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> Tensor:
    """The ``(dim, sketch_dim)`` matrix ``S`` of :class:`FeatureSketch`, entries ``N(0, 1 /
    sketch_dim)`` so that ``E[S S^T] = I``: drawn on the CPU from a generator seeded with ``seed``
    (the same matrix on every device and process), then moved to ``device``."""
    require_int(dim, "dim", 1)
    require_int(sketch_dim, "sketch_dim", 1)
    _require_float_dtype(dtype)
    generator = torch.Generator().manual_seed(require_int(seed, "seed", 0))
    matrix = torch.randn(dim, sketch_dim, generator=generator, dtype=torch.float64)
    return (matrix / math.sqrt(sketch_dim)).to(dtype=dtype, device=device)


@dataclass(frozen=True)
class FeatureSketch:
    """Token rows ``(n, d) -> (n, sketch_dim)``, times :func:`gaussian_sketch` ``(d, sketch_dim,
    seed)``: pass it as ``project`` to :func:`~lightning_info.lm.features.response_features` so
    the pool is held at ``sketch_dim`` columns, or apply :func:`sketch_features` to features held.
    The matrix is built once per width, dtype and device."""

    sketch_dim: int
    seed: int = 0
    _matrices: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        require_int(self.sketch_dim, "sketch_dim", 1)
        require_int(self.seed, "seed", 0)

    def __call__(self, rows: Tensor) -> Tensor:
        require_real_floating(rows, "rows")
        key = (rows.shape[-1], rows.dtype, rows.device)
        if key not in self._matrices:
            self._matrices[key] = gaussian_sketch(
                rows.shape[-1], self.sketch_dim, self.seed, rows.dtype, rows.device
            )
        return rows @ self._matrices[key]


def sketch_features(
    features: TokenBlocks | Sequence[Tensor], sketch: FeatureSketch, chunk_rows: int = 65536
) -> TokenBlocks:
    """``features`` with every token row sketched (:class:`FeatureSketch`), ``chunk_rows`` rows
    at a time; the blocks keep their lengths."""
    blocks = as_token_blocks(features)
    require_int(chunk_rows, "chunk_rows", 1)
    values = torch.cat([sketch(chunk) for chunk in blocks.values.split(chunk_rows)])
    return TokenBlocks(values, blocks.offsets)
