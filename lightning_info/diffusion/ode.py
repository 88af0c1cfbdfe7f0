"""Fixed-step explicit ODE integration (Euler, Heun, RK4) of a tuple of tensors: the stepper of the
probability-flow ODE tools, and of any sampler that integrates a learned velocity."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

State = tuple[Tensor, ...]

# Butcher tableaux of the explicit methods: (stage coefficients a_ij, weights b_i, nodes c_i)
TABLEAUS: dict[str, tuple[list[list[float]], list[float], list[float]]] = {
    "euler": ([], [1.0], [0.0]),
    "heun": ([[1.0]], [0.5, 0.5], [0.0, 1.0]),
    "rk4": (
        [[0.5], [0.0, 0.5], [0.0, 0.0, 1.0]],
        [1 / 6, 1 / 3, 1 / 3, 1 / 6],
        [0.0, 0.5, 0.5, 1.0],
    ),
}


@dataclass(frozen=True)
class ODESolution:
    """Result of :func:`odeint_fixed`.

    Attributes:
        state: the state at ``times[-1]``.
        path: the state at every time (each entry stacked over ``times``), when asked for.
        nfe: right-hand-side evaluations.
    """

    state: State
    path: State | None
    nfe: int


def odeint_fixed(
    rhs: Callable[[Tensor, State], State],
    state: Sequence[Tensor],
    times: Tensor,
    method: str = "rk4",
    *,
    return_path: bool = False,
) -> ODESolution:
    """Solve ``dy/dt = rhs(t, y)`` on the grid ``times`` with a fixed-step explicit method.

    ``state`` is a tuple of tensors, ``rhs(t, state)`` returns one derivative per tensor, with
    ``t`` a 0-dim float64 tensor. ``times`` is increasing or decreasing; each step is

        k_i = rhs(t + c_i h, y + h sum_j a_ij k_j),   y <- y + h sum_i b_i k_i

    with the tableau of ``method``: ``"euler"`` (order 1), ``"heun"`` (order 2), ``"rk4"``.
    """
    if method not in TABLEAUS:
        raise ValueError(f"`method` must be one of {sorted(TABLEAUS)}, got {method!r}.")
    times = torch.as_tensor(times, dtype=torch.float64)
    if times.dim() != 1 or times.numel() < 2:
        raise ValueError("`times` must be 1-D with at least two entries.")
    a, b, c = TABLEAUS[method]
    state = tuple(state)
    path = [state] if return_path else None
    nfe = 0
    for t0, t1 in zip(times[:-1], times[1:]):
        h = float(t1 - t0)
        stages: list[State] = []
        for i, node in enumerate(c):
            stage_state = state
            for j, coefficient in enumerate(a[i - 1] if i else []):
                if coefficient:
                    stage_state = tuple(
                        y + (h * coefficient) * k for y, k in zip(stage_state, stages[j])
                    )
            stages.append(tuple(rhs(t0 + node * h, stage_state)))
            nfe += 1
        state = tuple(
            y + h * sum(weight * k[n] for weight, k in zip(b, stages) if weight)
            for n, y in enumerate(state)
        )
        if path is not None:
            path.append(state)
    stacked = None if path is None else tuple(torch.stack(p) for p in zip(*path))
    return ODESolution(state, stacked, nfe)
