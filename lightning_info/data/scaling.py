"""Min-max scaling per channel (the last axis), fit on the values a split marks as observed."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

__all__ = ["MinMaxScaling"]


class MinMaxScaling:
    """``(x - low) / span`` per channel, ``low`` and ``high`` the minimum and maximum of the
    fitted values where ``observed`` (every value by default); a constant channel has span 1.

    ``low``, ``high`` and ``span`` are float64 tensors; :meth:`forward` and :meth:`inverse` give
    float64 of the input's kind: a numpy array for an array, a tensor on the input's device for a
    tensor.
    """

    def __init__(self, values, observed=None) -> None:
        table = torch.as_tensor(np.asarray(values) if not isinstance(values, Tensor) else values)
        flat = table.double().reshape(-1, table.shape[-1])
        mask = (
            torch.ones_like(flat, dtype=torch.bool)
            if observed is None
            else torch.as_tensor(observed).reshape(flat.shape)
        )
        self.low = torch.where(mask, flat, torch.inf).amin(0)
        self.high = torch.where(mask, flat, -torch.inf).amax(0)
        span = self.high - self.low
        self.span = torch.where(span > 0, span, torch.ones_like(span))

    def _parameters(self, x):
        if isinstance(x, Tensor):
            return x.double(), self.low.to(x.device), self.span.to(x.device)
        return np.asarray(x, dtype=np.float64), self.low.numpy(), self.span.numpy()

    def forward(self, x):
        x, low, span = self._parameters(x)
        return (x - low) / span

    def inverse(self, scaled):
        scaled, low, span = self._parameters(scaled)
        return scaled * span + low
