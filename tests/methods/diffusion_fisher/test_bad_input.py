"""Bad input to the diffusion-Fisher entry points fails early with a message naming the argument:
a ``sigma`` whose square is not a normal number of the dtype, a time outside the schedule's
range (``t = 0`` has ``sigma_0 = 0`` and no score), a noise network with the wrong call
signature, and malformed constructor arguments; the PF-ODE tools refuse unknown options (also
those the chosen path would not read), non-bool switches, and non-finite or non-float matrices."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lightning_info.diffusion.noise_schedules import noise_schedule
from lightning_info.methods.diffusion_fisher.flow import (
    DataSetDiffusion,
    ScoreNetworkDiffusion,
    asymmetry_index,
    pf_ode_adjoint,
    pf_ode_flow_jacobian,
    pf_ode_log_likelihood,
)
from lightning_info.methods.diffusion_fisher.functional import (
    diffusion_fisher_trace,
    diffusion_log_density,
    diffusion_score,
    endpoint_fisher_mvp,
    endpoint_fisher_trace,
    score_from_epsilon,
    trace_matching_fisher_trace,
)
from lightning_info.methods.diffusion_fisher.module import DiffusionModel, TimeConditionedMLP

DATA = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
X = torch.tensor([[0.1, 0.0]])
OUT_OF_RANGE = r"`t` must lie in \[0.001, 1\] for the vp schedule, got"


def _model() -> DiffusionModel:
    return DiffusionModel(dim=2, hidden=8, layers=1)


def _data_set() -> DataSetDiffusion:
    return DataSetDiffusion(DATA, noise_schedule("vp"))


def _network(**kwargs) -> ScoreNetworkDiffusion:
    return ScoreNetworkDiffusion(_score, noise_schedule("vp"), **kwargs)


def _score(x, t):
    return -x


def _sq_norm(x, t):
    return (x * x).sum(1)


NAN_MATRIX = torch.tensor([[float("nan"), 0.0], [1.0, 1.0]])


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
    pytest.param(
        lambda: diffusion_log_density(X, DATA, 1.0, True),
        TypeError,
        r"`sigma` must be a number or a tensor, got bool",
        id="log-density-sigma-bool",
    ),
    pytest.param(
        lambda: diffusion_log_density(X, DATA, 1.0, 1.0, data_weights=torch.tensor([1.0])),
        ValueError,
        r"`data_weights` must be a tensor of shape \(2,\)",
        id="log-density-weights-wrong-length",
    ),
    pytest.param(
        lambda: diffusion_log_density(X, DATA, 1.0, 1.0, chunk_size=2.0),
        TypeError,
        r"`chunk_size` must be an int, got 2.0",
        id="log-density-chunk-size-float",
    ),
    pytest.param(
        lambda: diffusion_log_density(torch.empty(0, 2), DATA, 1.0, 1.0),
        ValueError,
        r"`x` is empty",
        id="log-density-x-empty",
    ),
    pytest.param(
        lambda: diffusion_score(X, torch.zeros(2, 3), 1.0, 1.0),
        ValueError,
        r"`x` \(B, d\) and `data` \(N, d\) must share d",
        id="score-dimension-mismatch",
    ),
    pytest.param(
        lambda: diffusion_score(torch.tensor([[0, 1]]), DATA, 1.0, 1.0),
        TypeError,
        r"`x` must be a floating-point tensor, got torch.int64",
        id="score-x-int",
    ),
    pytest.param(
        lambda: diffusion_score(X, DATA, torch.tensor([1.0, 1.0]), 1.0),
        ValueError,
        r"`alpha` must be a scalar or have shape \(1,\), got \(2,\)",
        id="score-alpha-wrong-length",
    ),
    pytest.param(
        lambda: trace_matching_fisher_trace(X, 0.5, 3, _sq_norm, 1.0, 1.0),
        TypeError,
        r"`score_fn` must be a callable \(x, t\) -> Tensor, got int",
        id="trace-matching-score-fn-not-callable",
    ),
    pytest.param(
        lambda: trace_matching_fisher_trace(X, 0.5, _score, None, 1.0, 1.0),
        TypeError,
        r"`sq_norm_fn` must be a callable \(x, t\) -> Tensor, got NoneType",
        id="trace-matching-sq-norm-fn-none",
    ),
    pytest.param(
        lambda: trace_matching_fisher_trace(X, 0.5, _score, lambda x, t: x, 1.0, 1.0),
        ValueError,
        r"`sq_norm_fn\(x, t\)` must give one value per point",
        id="trace-matching-sq-norm-per-coordinate",
    ),
    pytest.param(
        lambda: trace_matching_fisher_trace(X, 0.5, _score, _sq_norm, float("nan"), 1.0),
        ValueError,
        r"`alpha` must be finite",
        id="trace-matching-alpha-nan",
    ),
    pytest.param(
        lambda: endpoint_fisher_trace(X, 0.5, _score, torch.zeros(2, 2), 1.0, 1.0),
        ValueError,
        r"`endpoint` must be a tensor with the shape of `x` \(1, 2\)",
        id="endpoint-trace-endpoint-wrong-shape",
    ),
    pytest.param(
        lambda: endpoint_fisher_trace(X, 0.5, _score, X * float("nan"), 1.0, 1.0),
        ValueError,
        r"`endpoint` contains 2 NaN/inf",
        id="endpoint-trace-endpoint-nan",
    ),
    pytest.param(
        lambda: endpoint_fisher_mvp(X, torch.zeros(3), 0.5, _score, X, 1.0, 1.0),
        ValueError,
        r"`v` must be a tensor with the shape of `x` \(1, 2\)",
        id="endpoint-mvp-v-wrong-shape",
    ),
    pytest.param(
        lambda: endpoint_fisher_mvp(X, X, 0.5, _score, X, "1", 1.0),
        TypeError,
        r"`alpha` must be a number or a tensor, got str",
        id="endpoint-mvp-alpha-string",
    ),
    pytest.param(
        lambda: pf_ode_log_likelihood(X, object()),
        TypeError,
        r"`model` must be a DataSetDiffusion or a ScoreNetworkDiffusion, got object",
        id="likelihood-model-not-a-diffusion",
    ),
    pytest.param(
        lambda: pf_ode_log_likelihood(X, _data_set(), steps=True),
        TypeError,
        r"`steps` must be an int, got True",
        id="likelihood-steps-bool",
    ),
    pytest.param(
        lambda: pf_ode_log_likelihood(X, _data_set(), steps=2, probe="normal"),
        ValueError,
        r"`probe` must be 'rademacher' or 'gaussian', got 'normal'",
        id="likelihood-unknown-probe-with-fisher-divergence",
    ),
    pytest.param(
        lambda: pf_ode_log_likelihood(X, _data_set(), steps=2, t_start=float("nan")),
        ValueError,
        r"`t_start` must be finite, got nan",
        id="likelihood-t-start-nan",
    ),
    pytest.param(
        lambda: pf_ode_log_likelihood(torch.zeros(1, 3), _data_set(), steps=2),
        ValueError,
        r"`x` must have shape \(B, 2\), got \(1, 3\)",
        id="likelihood-x-wrong-width",
    ),
    pytest.param(
        lambda: pf_ode_log_likelihood(X, _network(sq_norm_fn=_sq_norm), steps=2),
        ValueError,
        r"prior='mixture' needs the exact log-density of a DataSetDiffusion",
        id="likelihood-network-mixture-prior",
    ),
    pytest.param(
        lambda: pf_ode_log_likelihood(X, _network(sq_norm_fn=_sq_norm), steps=2, prior="gaussian"),
        ValueError,
        r"prior='gaussian' needs E\|\|x_0\|\|\^2 / d: give ScoreNetworkDiffusion a `second_moment`",
        id="likelihood-network-gaussian-prior-without-moment",
    ),
    pytest.param(
        lambda: pf_ode_adjoint(X, torch.zeros(2, 2), _data_set(), t_from=0.01, t_to=0.9),
        ValueError,
        r"`adjoint` must be a tensor with the shape of `x` \(1, 2\)",
        id="adjoint-wrong-shape",
    ),
    pytest.param(
        lambda: pf_ode_adjoint(X, X, _data_set(), t_from=True, t_to=0.9, steps=2),
        TypeError,
        r"`t_start` must be a real number, got True",
        id="adjoint-t-from-bool",
    ),
    pytest.param(
        lambda: pf_ode_adjoint(X, X, _data_set(), t_from=0.01, t_to=0.9, vjp="exact"),
        ValueError,
        r"`vjp` must be 'fisher' or 'autograd', got 'exact'",
        id="adjoint-unknown-vjp",
    ),
    pytest.param(
        lambda: pf_ode_flow_jacobian(X, _data_set(), steps=2, off_diagonal="no"),
        TypeError,
        r"`off_diagonal` must be True or False, got 'no'",
        id="flow-jacobian-off-diagonal-string",
    ),
    pytest.param(
        lambda: pf_ode_flow_jacobian(X, _data_set(), steps=-1),
        ValueError,
        r"`steps` must be >= 1, got -1",
        id="flow-jacobian-steps-negative",
    ),
    pytest.param(
        lambda: pf_ode_flow_jacobian(X, _network(sq_norm_fn=_sq_norm), steps=2),
        NotImplementedError,
        r"ScoreNetworkDiffusion has no dense diffusion Fisher",
        id="flow-jacobian-network",
    ),
    pytest.param(
        lambda: asymmetry_index(NAN_MATRIX),
        ValueError,
        r"`matrix` contains 1 NaN/inf",
        id="asymmetry-nan-matrix",
    ),
    pytest.param(
        lambda: asymmetry_index(torch.tensor([[1, 2], [0, 1]])),
        TypeError,
        r"`matrix` must be a real floating-point tensor, got dtype torch.int64",
        id="asymmetry-int-matrix",
    ),
    pytest.param(
        lambda: asymmetry_index(torch.eye(2, dtype=torch.complex64)),
        TypeError,
        r"`matrix` must be a real floating-point tensor, got dtype torch.complex64",
        id="asymmetry-complex-matrix",
    ),
    pytest.param(
        lambda: asymmetry_index(torch.eye(2), off_diagonal="no"),
        TypeError,
        r"`off_diagonal` must be True or False, got 'no'",
        id="asymmetry-off-diagonal-string",
    ),
    pytest.param(
        lambda: asymmetry_index(torch.zeros(2, 3)),
        ValueError,
        r"`matrix` must be a tensor of square matrices",
        id="asymmetry-not-square",
    ),
    pytest.param(
        lambda: ScoreNetworkDiffusion(_score, "vp"),
        TypeError,
        r"`schedule` must be a NoiseSchedule, got str",
        id="network-schedule-name",
    ),
    pytest.param(
        lambda: _network(second_moment=True),
        TypeError,
        r"`second_moment` must be a real number, got True",
        id="network-second-moment-bool",
    ),
    pytest.param(
        lambda: _network(second_moment=float("nan")),
        ValueError,
        r"`second_moment` must be finite, got nan",
        id="network-second-moment-nan",
    ),
    pytest.param(
        lambda: _network().score(X, 0.0),
        ValueError,
        OUT_OF_RANGE + r" 0.0",
        id="network-score-t-zero",
    ),
    pytest.param(
        lambda: _network().fisher_trace(X, 0.5),
        NotImplementedError,
        r"ScoreNetworkDiffusion has no trace-matching network \(`sq_norm_fn`\)",
        id="network-trace-without-trace-head",
    ),
    pytest.param(
        lambda: TimeConditionedMLP(0, 2, 8, 1),
        ValueError,
        r"`dim` must be >= 1, got 0",
        id="mlp-dim-zero",
    ),
    pytest.param(
        lambda: TimeConditionedMLP(2, 2, 8.5, 1),
        TypeError,
        r"`hidden` must be an int, got 8.5",
        id="mlp-hidden-float",
    ),
    pytest.param(
        lambda: TimeConditionedMLP(2, 2, True, 1),
        TypeError,
        r"`hidden` must be an int, got True",
        id="mlp-hidden-bool",
    ),
    pytest.param(
        lambda: TimeConditionedMLP(2, 2, 8, -1),
        ValueError,
        r"`layers` must be >= 0, got -1",
        id="mlp-layers-negative",
    ),
    pytest.param(
        lambda: TimeConditionedMLP(2, 2, 8, 1, frequencies=-1),
        ValueError,
        r"`frequencies` must be >= 0, got -1",
        id="mlp-frequencies-negative",
    ),
    pytest.param(
        lambda: TimeConditionedMLP(2, 0, 8, 1),
        ValueError,
        r"`out` must be >= 1, got 0",
        id="mlp-out-zero",
    ),
    pytest.param(
        lambda: TimeConditionedMLP(2, 2, 8, 1)(torch.zeros(3, 5), torch.zeros(3)),
        ValueError,
        r"`x` must be \(B, 2\) points, got \(3, 5\)",
        id="mlp-forward-x-wrong-width",
    ),
    pytest.param(
        lambda: TimeConditionedMLP(2, 2, 8, 1)(torch.zeros(3, 2), torch.tensor(0.5)),
        ValueError,
        r"`time_feature` must have shape \(3,\), one value per point, got \(\)",
        id="mlp-forward-scalar-time",
    ),
]


from lightning_info.methods.diffusion_fisher import functional as _core  # noqa: E402

_VP = noise_schedule("vp")
_X0 = torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
_NOISE = torch.zeros(3, 2)


def _sq_norm(x, t):
    return (x * x).sum(1)


BAD_INPUT += [
    pytest.param(
        lambda: _core.check_data(DATA, torch.tensor([-1.0, 2.0])),
        ValueError,
        r"`data_weights` must be non-negative and not all zero",
        id="check-data-negative-weight",
    ),
    pytest.param(
        lambda: _core.check_data(DATA.long()),
        TypeError,
        r"`data` must be a floating-point tensor, got torch.int64",
        id="check-data-integer",
    ),
    pytest.param(
        lambda: _core.trace_matching_loss(
            _sq_norm, _X0, torch.tensor([True, False, True]), _NOISE, _VP
        ),
        TypeError,
        r"`t` must be a real floating-point tensor, got dtype torch.bool",
        id="trace-matching-loss-bool-times",
    ),
    pytest.param(
        lambda: _core.trace_matching_loss(_sq_norm, _X0, torch.tensor([0, 1, 1]), _NOISE, _VP),
        TypeError,
        r"`t` must be a real floating-point tensor, got dtype torch.int64",
        id="trace-matching-loss-integer-times",
    ),
    pytest.param(
        lambda: _core.trace_matching_loss(_sq_norm, _X0, torch.full((3,), 0.5), _NOISE, "vp"),
        TypeError,
        r"`schedule` must be a NoiseSchedule, got str",
        id="trace-matching-loss-schedule-name",
    ),
    pytest.param(
        lambda: _core.trace_matching_loss(_sq_norm, _X0, torch.full((2,), 0.5), _NOISE, _VP),
        ValueError,
        r"`t` must be a tensor of shape \(3,\)",
        id="trace-matching-loss-times-shape",
    ),
    pytest.param(
        lambda: _core.trace_matching_loss(
            lambda x, t: torch.zeros(3, 2), _X0, torch.full((3,), 0.5), _NOISE, _VP
        ),
        ValueError,
        r"`sq_norm_fn\(x_t, t\)` must give one value per point",
        id="trace-matching-loss-network-shape",
    ),
]


def test_trace_matching_loss_matches_closed_form():
    """With zero noise and ``T(x, t) = ||x||^2``: ``x_t = alpha x_0``, so the loss is
    ``mean ((alpha^2 - 1) ||x_0||^2)^2`` (float64 oracle)."""
    t = torch.full((3,), 0.5)
    loss = _core.trace_matching_loss(_sq_norm, _X0, t, _NOISE, _VP)
    alpha = float(_VP.alpha(torch.tensor(0.5, dtype=torch.float64)))
    norms = (_X0.double() ** 2).sum(1)
    expected = (((alpha**2 - 1) * norms) ** 2).mean()
    assert float(loss) == pytest.approx(float(expected), rel=1e-5)


def test_diffusion_fisher_terms_keeps_the_given_tensors():
    """The result record stores what it is given, unchanged and uncopied."""
    parts = [torch.zeros(1), torch.ones(1, 2), torch.full((1, 2), 2.0), torch.tensor([3.0])]
    terms = _core.DiffusionFisherTerms(*parts)
    kept = [terms.log_density, terms.posterior_mean, terms.score, terms.trace]
    assert all(a is b for a, b in zip(kept, parts))
    assert terms.mvp is None and terms.matrix is None
