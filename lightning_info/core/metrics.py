"""A torchmetrics ``Metric`` base whose ``dtype`` survives device moves."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from torch import Tensor
from torchmetrics import Metric


class DtypeKeepingMetric(Metric):
    """A ``Metric`` whose :meth:`set_dtype` holds after ``.to(device)``.

    torchmetrics resets ``Metric.dtype`` to the default float32 on every device move (Lightning
    moves each module's metrics to its device before the first step), while ``dtype`` is what a
    state stored in it is cast to, and what a process with an empty ``cat`` list sends to the
    gather in place of its rows. A metric that keeps float64 rows then stored float32 inside a
    LightningModule, and under DDP an empty process sent float32 beside float64 rows.
    """

    def _apply(self, fn: Callable[[Tensor], Tensor], exclude_state: Sequence[str] = "") -> Metric:
        dtype = self._dtype
        this = super()._apply(fn, exclude_state)
        if not self._dtype_convert:  # a device move, not set_dtype
            this._dtype = dtype
        return this
