"""Bad input to the diffusion-Fisher entry points fails early with a message naming the argument:
a ``sigma`` whose square is not a normal number of the dtype, a time outside the schedule's
range (``t = 0`` has ``sigma_0 = 0`` and no score), a noise network with the wrong call
signature, and malformed constructor arguments."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lightning_info.diffusion.noise_schedules import noise_schedule
from lightning_info.methods.diffusion_fisher.flow import DataSetDiffusion
from lightning_info.methods.diffusion_fisher.functional import (
    diffusion_fisher_trace,
    score_from_epsilon,
)
from lightning_info.methods.diffusion_fisher.module import DiffusionModel

DATA = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
X = torch.tensor([[0.1, 0.0]])
OUT_OF_RANGE = r"`t` must lie in \[0.001, 1\] for the vp schedule, got"


def _model() -> DiffusionModel:
    return DiffusionModel(dim=2, hidden=8, layers=1)


BAD_INPUT = [
    pytest.param(
        lambda: diffusion_fisher_trace(X, DATA, 1.0, 1e-20),
        ValueError,
        r"`sigma` must be >= 1.08e-19 in torch.float32 .*got 1e-20; pass a larger sigma or float64",
        id="trace-sigma-below-float32-minimum",
    ),
    pytest.param(
        lambda: diffusion_fisher_trace(X.double(), DATA.double(), 1.0, 1e-160),
        ValueError,
        r"`sigma` must be >= 1.49e-154 in torch.float64",
        id="trace-sigma-below-float64-minimum",
    ),
    pytest.param(
        lambda: diffusion_fisher_trace(X * 1e10, DATA * 1e10, 1.0, 1e-12),
        ValueError,
        r"overflowed torch.float32 .*use float64 points or a larger sigma",
        id="trace-logits-overflow",
    ),
    pytest.param(
        lambda: diffusion_fisher_trace(torch.empty(1, 2, device="meta"), DATA, 1.0, 1.0),
        ValueError,
        r"`x` is on the meta device",
        id="trace-meta-x",
    ),
    pytest.param(
        lambda: _model().score(torch.zeros(3, 2), 0.0),
        ValueError,
        OUT_OF_RANGE + r" 0.0",
        id="model-score-t-zero",
    ),
    pytest.param(
        lambda: _model().score(torch.zeros(3, 2), 2.0),
        ValueError,
        OUT_OF_RANGE + r" 2.0",
        id="model-score-t-above-one",
    ),
    pytest.param(
        lambda: _model().score(torch.zeros(3, 2), torch.tensor([0.5, 0.0, 0.5])),
        ValueError,
        OUT_OF_RANGE + r" 0.0",
        id="model-score-t-tensor-with-zero",
    ),
    pytest.param(
        lambda: _model().score(torch.zeros(3, 2), True),
        TypeError,
        r"`t` must be a real number, got True",
        id="model-score-t-bool",
    ),
    pytest.param(
        lambda: _model().expected_sq_norm(torch.zeros(3, 2), 0.0),
        ValueError,
        OUT_OF_RANGE,
        id="model-trace-head-t-zero",
    ),
    pytest.param(
        lambda: _model().score(torch.zeros(3, 5), 0.5),
        ValueError,
        r"`x` must be \(B, 2\) points, got \(3, 5\)",
        id="model-score-x-wrong-width",
    ),
    pytest.param(
        lambda: DiffusionModel(eps_net=nn.Linear(2, 2)),
        ValueError,
        r"`eps_net` must take \(B, 2\) points and \(B,\) times, called as "
        r"eps_net\(x_t, log_sigma_t\).*nn.Linear takes one input",
        id="model-eps-net-linear",
    ),
    pytest.param(
        lambda: DiffusionModel(schedule=3),
        TypeError,
        r"`schedule` must be a schedule name such as 'vp', got int",
        id="model-schedule-not-a-name",
    ),
    pytest.param(
        lambda: DiffusionModel(hidden=0),
        ValueError,
        r"`hidden` must be >= 1, got 0",
        id="model-hidden-zero",
    ),
    pytest.param(
        lambda: DiffusionModel(hidden=2.5),
        TypeError,
        r"`hidden` must be an int, got 2.5",
        id="model-hidden-float",
    ),
    pytest.param(
        lambda: DiffusionModel(layers=-1),
        ValueError,
        r"`layers` must be >= 0, got -1",
        id="model-layers-negative",
    ),
    pytest.param(
        lambda: DiffusionModel(trace_matching="no"),
        TypeError,
        r"`trace_matching` must be True or False, got 'no'",
        id="model-trace-matching-string",
    ),
    pytest.param(
        lambda: DataSetDiffusion(DATA, noise_schedule("vp")).fisher_trace(X, -1.0),
        ValueError,
        OUT_OF_RANGE + r" -1.0",
        id="data-set-trace-t-negative",
    ),
    pytest.param(
        lambda: DataSetDiffusion(DATA, noise_schedule("vp")).score(X, 2.0),
        ValueError,
        OUT_OF_RANGE + r" 2.0",
        id="data-set-score-t-above-one",
    ),
    pytest.param(
        lambda: score_from_epsilon(lambda x, t: x, noise_schedule("vp"))(X, 0.0),
        ValueError,
        OUT_OF_RANGE + r" 0.0",
        id="score-from-epsilon-t-zero",
    ),
]
