"""PF-ODE likelihood, adjoint and flow-map Jacobian built on the diffusion Fisher (float64)."""

from __future__ import annotations

import math

import pytest
import torch

from lightning_info.diffusion.noise_schedules import (
    DDIMScaledLinearSchedule,
    EDMSchedule,
    SubVPSchedule,
    VESchedule,
    VPSchedule,
)
from lightning_info.diffusion.ode import odeint_fixed
from lightning_info.methods.diffusion_fisher.flow import (
    DataSetDiffusion,
    ScoreNetworkDiffusion,
    asymmetry_index,
    pf_ode_adjoint,
    pf_ode_flow_jacobian,
    pf_ode_log_likelihood,
)
from lightning_info.methods.diffusion_fisher.functional import diffusion_score

F64 = torch.float64
SCHEDULES = [VPSchedule(), SubVPSchedule(), VESchedule(), EDMSchedule(), DDIMScaledLinearSchedule()]
IDS = [s.name for s in SCHEDULES]
# the three 2-D points of the paper's OT script ("non-affine")
REFERENCE_POINTS = torch.tensor([[0.5, 0.0], [0.0, -0.5], [0.0, 0.0]], dtype=F64)


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_torch_thread):
    yield


def _randn(generator, *shape):
    return torch.randn(*shape, generator=generator, dtype=F64)


def _near_data(model, count, generator):
    """Points of q_{t_min}: noised copies of data points."""
    s, data = model.schedule, model.data
    index = torch.arange(count) % data.shape[0]
    return s.alpha(s.t_min) * data[index] + s.sigma(s.t_min) * _randn(generator, count, model.dim)


# --- solver ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "order"), [("euler", 1), ("heun", 2), ("rk4", 4)])
def test_fixed_step_solvers_have_their_order(method, order):
    """y' = -2 t y, y(0) = 1: y(1) = exp(-1); halving the step divides the error by 2^order."""
    errors = []
    for steps in (16, 32):
        times = torch.linspace(0.0, 1.0, steps + 1, dtype=F64)
        solution = odeint_fixed(
            lambda t, s: (-2 * t * s[0],), (torch.ones(1, dtype=F64),), times, method
        )
        errors.append(abs(float(solution.state[0]) - math.exp(-1)))
        assert solution.nfe == steps * {"euler": 1, "heun": 2, "rk4": 4}[method]
    assert errors[0] / errors[1] == pytest.approx(2**order, rel=0.15)


def test_solver_runs_backwards_and_returns_the_path():
    times = torch.linspace(1.0, 0.0, 21, dtype=F64)
    solution = odeint_fixed(
        lambda t, s: (s[0],), (torch.ones(2, dtype=F64),), times, return_path=True
    )
    assert solution.path[0].shape == (21, 2)
    torch.testing.assert_close(solution.state[0], torch.full((2,), math.exp(-1), dtype=F64))
    with pytest.raises(ValueError, match="method"):
        odeint_fixed(lambda t, s: s, (torch.ones(1),), times, "rk45")


# --- likelihood ------------------------------------------------------------------------------


@pytest.mark.parametrize("schedule", SCHEDULES, ids=IDS)
def test_likelihood_of_one_point_converges_to_the_gaussian_density(schedule):
    """One data point: q_t = N(alpha_t y, sigma_t^2 I) exactly; RK4 error falls ~16x per halving."""
    g = torch.Generator().manual_seed(0)
    model = DataSetDiffusion(_randn(g, 1, 3), schedule)
    x = _near_data(model, 4, g)
    exact = model.log_density(x, schedule.t_min)
    gaussian = torch.distributions.Normal(
        schedule.alpha(schedule.t_min) * model.data[0], schedule.sigma(schedule.t_min)
    )
    # (the kernel's ||x||^2 - 2 a x.y + a^2 ||y||^2 loses ~eps ||x||^2 / sigma^2 at small sigma)
    torch.testing.assert_close(exact, gaussian.log_prob(x).sum(1), rtol=1e-8, atol=0)
    errors = []
    for steps in (16, 32, 64):
        result = pf_ode_log_likelihood(x, model, steps=steps)
        errors.append(float((result.log_likelihood - exact).abs().max()))
        assert result.nfe == 4 * steps
    assert errors[0] / errors[1] > 8 and errors[1] / errors[2] > 8
    assert errors[2] < 1e-3


def test_likelihood_of_a_mixture_converges_with_steps():
    g = torch.Generator().manual_seed(1)
    model = DataSetDiffusion(_randn(g, 6, 2), VPSchedule())
    x = _near_data(model, 6, g)
    exact = model.log_density(x, model.schedule.t_min)
    errors = [
        float((pf_ode_log_likelihood(x, model, steps=n).log_likelihood - exact).abs().max())
        for n in (16, 32, 64)
    ]
    assert errors[0] > errors[1] > errors[2] and errors[2] < 1e-3
    heun = [
        float(
            (pf_ode_log_likelihood(x, model, steps=n, method="heun").log_likelihood - exact)
            .abs()
            .max()
        )
        for n in (32, 64)
    ]
    assert heun[1] < heun[0] / 2


def test_hutchinson_with_rademacher_probes_is_exact_for_one_point():
    """dv/dx is a multiple of I for one data point, so eps^T (dv/dx) eps is exact for +-1 probes."""
    g = torch.Generator().manual_seed(2)
    model = DataSetDiffusion(_randn(g, 1, 4), SubVPSchedule())
    x = _near_data(model, 3, g)
    fisher = pf_ode_log_likelihood(x, model, steps=12)
    hutchinson = pf_ode_log_likelihood(
        x, model, steps=12, divergence="hutchinson", generator=torch.Generator().manual_seed(0)
    )
    torch.testing.assert_close(hutchinson.log_likelihood, fisher.log_likelihood, rtol=0, atol=1e-10)
    torch.testing.assert_close(hutchinson.x_end, fisher.x_end, rtol=0, atol=1e-12)


def test_hutchinson_is_unbiased_around_the_fisher_likelihood():
    g = torch.Generator().manual_seed(3)
    model = DataSetDiffusion(_randn(g, 5, 3), VPSchedule())
    x = _near_data(model, 2, g)
    fisher = pf_ode_log_likelihood(x, model, steps=8).log_likelihood
    estimate = pf_ode_log_likelihood(
        x,
        model,
        steps=8,
        divergence="hutchinson",
        probes=64,
        generator=torch.Generator().manual_seed(1),
    ).log_likelihood
    assert float((estimate - fisher).abs().max()) < 0.02 * float(fisher.abs().max())


def test_gaussian_prior_is_close_to_the_mixture_at_the_end_of_vp():
    g = torch.Generator().manual_seed(4)
    model = DataSetDiffusion(_randn(g, 5, 2), VPSchedule())
    x = _near_data(model, 3, g)
    mixture = pf_ode_log_likelihood(x, model, steps=16)
    gaussian = pf_ode_log_likelihood(x, model, steps=16, prior="gaussian")
    torch.testing.assert_close(gaussian.divergence_integral, mixture.divergence_integral)
    torch.testing.assert_close(gaussian.log_likelihood, mixture.log_likelihood, rtol=0, atol=1e-2)


def _network_of(model):
    """The exact data-set score and E_w||y||^2 as callables, as a trained network would give."""
    from lightning_info.measures.kernel_moments import kernel_moments

    s = model.schedule

    def score_fn(x, t):
        return diffusion_score(x, model.data, s.alpha(t).to(x.dtype), s.sigma(t).to(x.dtype))

    def sq_norm_fn(x, t):
        return kernel_moments(x, model.data, s.alpha(t), s.sigma(t)).sq_norm

    return ScoreNetworkDiffusion(
        score_fn, s, sq_norm_fn=sq_norm_fn, second_moment=model.prior_second_moment()
    )


def test_network_model_with_exact_networks_reproduces_the_data_set_model():
    g = torch.Generator().manual_seed(11)
    model = DataSetDiffusion(_randn(g, 5, 2), EDMSchedule())
    network = _network_of(model)
    x = _near_data(model, 3, g)
    for divergence in ("fisher", "hutchinson"):
        kwargs = dict(steps=8, prior="gaussian", divergence=divergence)
        exact = pf_ode_log_likelihood(
            x, model, generator=torch.Generator().manual_seed(0), **kwargs
        )
        ours = pf_ode_log_likelihood(
            x, network, generator=torch.Generator().manual_seed(0), **kwargs
        )
        torch.testing.assert_close(ours.log_likelihood, exact.log_likelihood, rtol=0, atol=1e-9)
    a = _randn(g, 3, 2)
    kwargs = dict(t_from=0.01, t_to=1.0, steps=4, vjp="autograd")
    torch.testing.assert_close(
        pf_ode_adjoint(x, a, network, **kwargs).adjoint_path,
        pf_ode_adjoint(x, a, model, **kwargs).adjoint_path,
        rtol=1e-10,
        atol=0,
    )
    with pytest.raises(NotImplementedError, match="vjp='autograd'"):
        pf_ode_adjoint(x, a, network, t_from=0.01, t_to=1.0, steps=2)
    with pytest.raises(NotImplementedError, match="dense"):
        pf_ode_flow_jacobian(x, network, steps=2)
    with pytest.raises(ValueError, match="prior='gaussian'"):
        pf_ode_log_likelihood(x, network, steps=2)
    bare = ScoreNetworkDiffusion(network.score_fn, EDMSchedule())
    with pytest.raises(NotImplementedError, match="trace-matching"):
        pf_ode_log_likelihood(x, bare, steps=2, prior="gaussian")
    with pytest.raises(ValueError, match="second_moment"):
        pf_ode_log_likelihood(x, bare, steps=2, prior="gaussian", divergence="hutchinson")


# --- adjoint ---------------------------------------------------------------------------------


@pytest.mark.parametrize("schedule", SCHEDULES, ids=IDS)
def test_fisher_adjoint_equals_the_autograd_vjp_at_every_step(schedule):
    g = torch.Generator().manual_seed(5)
    model = DataSetDiffusion(_randn(g, 6, 3), schedule)
    x = _near_data(model, 3, g)
    a = _randn(g, 3, 3)
    kwargs = dict(t_from=schedule.t_min, t_to=schedule.t_max, steps=10)
    fisher = pf_ode_adjoint(x, a, model, **kwargs)
    autograd = pf_ode_adjoint(x, a, model, vjp="autograd", **kwargs)
    assert fisher.adjoint_path.shape == (11, 3, 3)
    scale = float(autograd.adjoint_path.abs().max())
    torch.testing.assert_close(
        fisher.adjoint_path, autograd.adjoint_path, rtol=0, atol=1e-8 * scale
    )
    torch.testing.assert_close(fisher.x_path, autograd.x_path, rtol=0, atol=1e-12)


def test_adjoint_is_the_gradient_of_the_flow_map():
    """a(t_max) from a(t_min) = c is d <c, x_{t_min}> / d x_{t_max}, up to the solver error."""
    g = torch.Generator().manual_seed(6)
    schedule = VPSchedule()
    model = DataSetDiffusion(_randn(g, 4, 2), schedule)
    noise = _randn(g, 2, 2)
    c = _randn(g, 2, 2)
    times = schedule.time_grid(200, schedule.t_max, schedule.t_min)
    start = noise.clone().requires_grad_(True)
    end = odeint_fixed(lambda t, s: (model.velocity(s[0], t),), (start,), times).state[0]
    (gradient,) = torch.autograd.grad((c * end).sum(), start)
    adjoint = pf_ode_adjoint(
        end.detach(), c, model, t_from=schedule.t_min, t_to=schedule.t_max, steps=200
    )
    torch.testing.assert_close(adjoint.x, noise, rtol=0, atol=1e-6)
    torch.testing.assert_close(adjoint.adjoint, gradient, rtol=1e-5, atol=1e-7)


# --- flow-map Jacobian and the OT check ------------------------------------------------------


@pytest.mark.parametrize("schedule", SCHEDULES, ids=IDS)
def test_velocity_jacobian_is_the_autograd_jacobian(schedule):
    g = torch.Generator().manual_seed(7)
    model = DataSetDiffusion(_randn(g, 5, 3), schedule)
    x = _randn(g, 2, 3)
    t = 0.5 * (schedule.t_min + schedule.t_max)
    ours = model.velocity_jacobian(x, t)
    for b in range(2):
        jacobian = torch.autograd.functional.jacobian(lambda z: model.velocity(z[None], t)[0], x[b])
        torch.testing.assert_close(ours[b], jacobian, rtol=0, atol=1e-10 * float(ours.abs().max()))


@pytest.mark.parametrize("method", ["euler", "rk4"])
def test_flow_jacobian_is_the_jacobian_of_the_discrete_flow_map(method):
    g = torch.Generator().manual_seed(8)
    schedule = EDMSchedule()
    model = DataSetDiffusion(REFERENCE_POINTS, schedule)
    x = schedule.t_max * _randn(g, 2, 2)
    result = pf_ode_flow_jacobian(x, model, steps=12, method=method)
    times = schedule.time_grid(12, schedule.t_max, schedule.t_min)

    def flow_map(z):
        return odeint_fixed(lambda t, s: (model.velocity(s[0], t),), (z[None],), times, method)

    for b in range(2):
        jacobian = torch.autograd.functional.jacobian(lambda z: flow_map(z).state[0][0], x[b])
        torch.testing.assert_close(result.jacobian[b], jacobian, rtol=0, atol=1e-10)
        torch.testing.assert_close(result.x[b], flow_map(x[b]).state[0][0], rtol=0, atol=1e-12)


@pytest.mark.parametrize("schedule", SCHEDULES, ids=IDS)
def test_flow_map_of_a_rotated_product_set_is_symmetric(schedule):
    """Data R (A x B): q_t factorises in the rotated basis, every F_t = R D_t R^T, all commute."""
    side_a = torch.tensor([-1.0, 0.2, 0.9], dtype=F64)
    side_b = torch.tensor([-0.3, 0.5], dtype=F64)
    grid = torch.cartesian_prod(side_a, side_b)
    angle = 0.7
    rotation = torch.tensor(
        [[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]], dtype=F64
    )
    model = DataSetDiffusion(grid @ rotation.T, schedule)
    g = torch.Generator().manual_seed(9)
    x = float(schedule.sigma(schedule.t_max)) * _randn(g, 3, 2)
    result = pf_ode_flow_jacobian(x, model, steps=16)
    assert (result.asymmetry < 1e-10).all()
    # the map is not a multiple of the identity: the test is not vacuous
    off = result.jacobian - result.jacobian.diagonal(dim1=1, dim2=2).mean(1)[
        :, None, None
    ] * torch.eye(2, dtype=F64)
    assert float(off.abs().max()) > 1e-3 * float(result.jacobian.abs().max())


@pytest.mark.parametrize("schedule", SCHEDULES, ids=IDS)
def test_flow_map_of_the_reference_points_is_not_symmetric(schedule):
    g = torch.Generator().manual_seed(10)
    model = DataSetDiffusion(REFERENCE_POINTS, schedule)
    x = float(schedule.sigma(schedule.t_max)) * _randn(g, 8, 2)
    result = pf_ode_flow_jacobian(x, model, steps=20)
    assert float(result.asymmetry.max()) > 1e-3
    one_point = pf_ode_flow_jacobian(x, DataSetDiffusion(REFERENCE_POINTS[:1], schedule), steps=20)
    assert float(one_point.asymmetry.max()) < 1e-12


def test_asymmetry_index():
    symmetric = torch.tensor([[2.0, 1.0], [1.0, 3.0]])
    antisymmetric = torch.tensor([[0.0, 1.0], [-1.0, 0.0]])
    assert float(asymmetry_index(symmetric)) == 0.0
    assert float(asymmetry_index(antisymmetric)) == pytest.approx(math.sqrt(2))
    assert float(asymmetry_index(torch.zeros(2, 2))) == 0.0
    upper = torch.tensor([[1.0, 1.0], [0.0, 1.0]])
    assert float(asymmetry_index(upper)) == pytest.approx(
        math.sqrt(2) / (math.sqrt(2) * math.sqrt(3))
    )
    assert float(asymmetry_index(upper, off_diagonal=True)) == pytest.approx(1.0)
    assert asymmetry_index(torch.stack([symmetric, upper])).shape == (2,)
    with pytest.raises(ValueError, match="square"):
        asymmetry_index(torch.zeros(2, 3))


# --- argument checks -------------------------------------------------------------------------


def test_bad_inputs_raise_clear_errors():
    model = DataSetDiffusion(torch.zeros(3, 2, dtype=F64), VPSchedule())
    x = torch.zeros(2, 2, dtype=F64)
    with pytest.raises(ValueError, match=r"shape \(B, 2\)"):
        model.score(torch.zeros(2, 3, dtype=F64), 0.5)
    with pytest.raises(ValueError, match="NaN"):
        pf_ode_log_likelihood(torch.full((2, 2), math.nan, dtype=F64), model)
    with pytest.raises(ValueError, match="divergence"):
        pf_ode_log_likelihood(x, model, divergence="exact")
    with pytest.raises(ValueError, match="prior"):
        pf_ode_log_likelihood(x, model, prior="standard")
    with pytest.raises(ValueError, match="probe"):
        pf_ode_log_likelihood(x, model, divergence="hutchinson", probe="sphere")
    with pytest.raises(ValueError, match="t_start"):
        pf_ode_log_likelihood(x, model, t_start=0.0)
    with pytest.raises(ValueError, match="vjp"):
        pf_ode_adjoint(x, x, model, t_from=0.5, t_to=1.0, vjp="jvp")
    with pytest.raises(ValueError, match="adjoint"):
        pf_ode_adjoint(x, torch.zeros(3, 2), model, t_from=0.5, t_to=1.0)
    with pytest.raises(ValueError, match="empty"):
        DataSetDiffusion(torch.zeros(0, 2), VPSchedule())
    with pytest.raises(TypeError, match="NoiseSchedule"):
        DataSetDiffusion(torch.zeros(3, 2), "vp")
    with pytest.raises(TypeError, match="`model`"):
        pf_ode_flow_jacobian(x, object())
