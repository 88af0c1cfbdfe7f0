"""Window agent state over discrete observations, encoded as one integer.

The agent state is the window of the last ``k`` observations, ``z_t = (o_{t-k+1}, ..., o_t)``,
updated by ``z_{t+1} = U(z_t, a_t, o_{t+1})`` (Lambrechts, Ernst & Mahajan, ICML 2025;
the update ignores ``a_t`` for a window of observations). Before the first observation the window
holds ``k`` copies of the blank symbol ``n`` (``n`` observations are ``0 .. n-1``), so at reset
``z_0 = U(blank window, o_0)``.

A window is encoded in base ``n + 1`` with the oldest entry as most significant digit,

    code(z) = sum_{i=0}^{k-1} z_i (n + 1)^{k-1-i},    U(code, o) = code (n + 1) mod (n + 1)^k + o,

so the update is integer arithmetic that works elementwise on numpy arrays of codes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lightning_info.core.validation import require_index, require_int

_MAX_CODE = 2**62


@dataclass(frozen=True)
class WindowEncoding:
    """Integer codes of windows of ``length`` observations from ``num_observations`` symbols."""

    num_observations: int
    length: int

    def __post_init__(self) -> None:
        require_int(self.num_observations, "num_observations", 1)
        require_int(self.length, "length", 1)
        if (self.num_observations + 1) ** (self.length + 1) > _MAX_CODE:
            raise ValueError(
                f"A window of {self.length} observations from {self.num_observations} symbols "
                "does not fit a 64-bit code; use a shorter window."
            )

    @property
    def blank(self) -> int:
        """The padding symbol that fills the window before the first observation."""
        return self.num_observations

    @property
    def size(self) -> int:
        """Number of codes, ``(n + 1)^k``, the blank-padded windows included."""
        return (self.num_observations + 1) ** self.length

    @property
    def empty(self) -> int:
        """Code of the all-blank window, from which ``U`` builds ``z_0``."""
        return self.size - 1

    def update(self, code, observation):
        """``U(z, o)``: drop the oldest entry, append ``observation``; numpy arrays elementwise."""
        return (code * (self.num_observations + 1)) % self.size + observation

    def encode(self, window: Sequence[int]) -> int:
        """Code of ``window`` (oldest first), whose entries are ints in ``0 .. n`` (``n`` =
        blank); bools, floats and strings are refused, not cast."""
        if isinstance(window, (str, bytes)):
            raise TypeError(f"`window` must be a sequence of ints, got a string {window!r}.")
        values = [
            require_index(value, f"window[{i}]", self.blank + 1) for i, value in enumerate(window)
        ]
        if len(values) != self.length:
            raise ValueError(f"A window must hold {self.length} entries, got {len(values)}.")
        code = 0
        for value in values:
            code = code * (self.num_observations + 1) + value
        return code

    def decode(self, code: int) -> np.ndarray:
        """The window (oldest first, ``int64``) whose code is the int ``code`` in ``[0, size)``."""
        code = require_index(code, "code", self.size)
        window = np.empty(self.length, dtype=np.int64)
        for i in range(self.length - 1, -1, -1):
            code, window[i] = divmod(code, self.num_observations + 1)
        return window
