"""Noise schedules and the diffusion Fisher against closed forms and autograd (float64)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.integrate import solve_ivp

from lightning_info.diffusion.noise_schedules import (
    DDIMScaledLinearSchedule,
    EDMSchedule,
    SubVPSchedule,
    VESchedule,
    VPSchedule,
    noise_schedule,
)
from lightning_info.measures.kernel_moments import kernel_moments
from lightning_info.methods.diffusion_fisher.functional import (
    diffusion_fisher_matrix,
    diffusion_fisher_mvp,
    diffusion_fisher_terms,
    diffusion_fisher_trace,
    diffusion_log_density,
    diffusion_score,
    endpoint_fisher_mvp,
    endpoint_fisher_trace,
    score_from_epsilon,
    trace_matching_fisher_trace,
    trace_matching_loss,
)
from tests.benchmark_scripts import load_script

F64 = torch.float64
SCHEDULES = [VPSchedule(), SubVPSchedule(), VESchedule(), EDMSchedule(), DDIMScaledLinearSchedule()]
IDS = [s.name for s in SCHEDULES]


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_torch_thread):
    yield


def _randn(generator, *shape):
    return torch.randn(*shape, generator=generator, dtype=F64)


def _interior_times(schedule, count=9):
    return torch.linspace(schedule.t_min, schedule.t_max, count + 2, dtype=F64)[1:-1]


# --- noise schedules -------------------------------------------------------------------------


@pytest.mark.parametrize("schedule", SCHEDULES, ids=IDS)
def test_f_and_g2_are_the_derivatives_of_alpha_and_sigma(schedule):
    t = _interior_times(schedule)
    h = 1e-6 * schedule.t_max
    log_alpha = lambda s: torch.log(schedule.alpha(s))  # noqa: E731
    variance = lambda s: schedule.sigma(s) ** 2  # noqa: E731
    f_fd = (log_alpha(t + h) - log_alpha(t - h)) / (2 * h)
    g2_fd = (variance(t + h) - variance(t - h)) / (2 * h) - 2 * f_fd * variance(t)
    torch.testing.assert_close(schedule.f(t), f_fd, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(schedule.g2(t), g2_fd, rtol=1e-6, atol=1e-7)
    assert (schedule.g2(t) > 0).all() and (schedule.sigma(t) > 0).all()
    alpha, sigma, f, g2 = schedule.coefficients(t)
    torch.testing.assert_close(alpha, schedule.alpha(t), rtol=0, atol=0)
    torch.testing.assert_close(g2, schedule.g2(t), rtol=0, atol=0)


@pytest.mark.parametrize("schedule", SCHEDULES, ids=IDS)
def test_sde_carries_a_gaussian_to_the_marginal_variance(schedule):
    """For x_0 ~ N(0, s^2 I) the SDE variance solves dv/dt = 2 f v + g^2; q_t = N(0, v_t I) with
    v_t = alpha_t^2 s^2 + sigma_t^2 (the DDIM interpolant is only C^1: a looser solver)."""
    t0, t1 = schedule.t_min, schedule.t_max
    scales = np.array([0.5, 3.0])

    def marginal(t):
        return float(schedule.alpha(t)) ** 2 * scales**2 + float(schedule.sigma(t)) ** 2

    def lyapunov(t, v):
        return 2 * float(schedule.f(t)) * v + float(schedule.g2(t))

    rtol = 1e-8 if schedule.name == "ddim" else 1e-11
    solution = solve_ivp(lyapunov, (t0, t1), marginal(t0), rtol=rtol, atol=1e-12)
    assert solution.success
    np.testing.assert_allclose(solution.y[:, -1], marginal(t1), rtol=1e3 * rtol)


def test_closed_forms_of_the_schedules():
    vp, sub, ve, edm = VPSchedule(), SubVPSchedule(), VESchedule(), EDMSchedule()
    t = torch.tensor([0.1, 0.5, 1.0], dtype=F64)
    integral = 0.1 * t + 0.5 * 19.9 * t**2
    torch.testing.assert_close(vp.alpha(t), torch.exp(-0.5 * integral))
    torch.testing.assert_close(vp.sigma(t) ** 2 + vp.alpha(t) ** 2, torch.ones(3, dtype=F64))
    torch.testing.assert_close(sub.sigma(t), 1 - vp.alpha(t) ** 2)
    torch.testing.assert_close(ve.sigma(t), 0.01 * 5000.0**t)
    assert float(ve.sigma(0.0)) == pytest.approx(0.01) and float(ve.sigma(1.0)) == pytest.approx(50)
    torch.testing.assert_close(edm.sigma(t), t)
    torch.testing.assert_close(edm.g2(t), 2 * t)
    assert noise_schedule("sub-vp") == SubVPSchedule()
    assert noise_schedule("vp", beta_max=10.0).beta_max == 10.0


def test_ddim_schedule_is_exact_at_the_training_timesteps():
    schedule = DDIMScaledLinearSchedule()
    betas = np.linspace(0.00085**0.5, 0.012**0.5, 1000) ** 2  # diffusers' "scaled_linear"
    alphas_cumprod = torch.tensor(np.cumprod(1 - betas))
    torch.testing.assert_close(schedule.alphas_cumprod(), alphas_cumprod, rtol=1e-13, atol=0)
    k = torch.tensor([0, 1, 10, 499, 998, 999])
    t = schedule.discrete_time(k)
    torch.testing.assert_close(schedule.alpha(t) ** 2, alphas_cumprod[k], rtol=1e-13, atol=0)
    torch.testing.assert_close(schedule.sigma(t) ** 2, 1 - alphas_cumprod[k], rtol=1e-12, atol=0)
    # g^2 = -d log alpha_bar / dt is close to K * beta (continuous limit) and positive
    dense = torch.linspace(schedule.t_min, 1.0, 5001, dtype=F64)
    assert (schedule.g2(dense) > 0).all()
    # at an interior knot the slope is the mean of the neighbouring secants K log(1 - beta)
    log_keep = torch.log1p(-torch.tensor(betas))
    secant_mean = -500 * (log_keep[k[:-1]] + log_keep[k[:-1] + 1])
    torch.testing.assert_close(schedule.g2(t[:-1]), secant_mean, rtol=1e-12, atol=0)
    assert schedule.t_min == pytest.approx(1e-3) and schedule.t_max == 1.0


@pytest.mark.parametrize("schedule", SCHEDULES, ids=IDS)
def test_time_grid(schedule):
    grid = schedule.time_grid(8)
    assert grid[0] == schedule.t_min and grid[-1] == schedule.t_max and (grid.diff() > 0).all()
    levels = schedule.log_snr(grid)
    torch.testing.assert_close(levels.diff(), levels.diff().mean().expand(8), rtol=1e-9, atol=1e-9)
    backwards = schedule.time_grid(4, schedule.t_max, schedule.t_min, spacing="uniform")
    torch.testing.assert_close(
        backwards, torch.linspace(schedule.t_max, schedule.t_min, 5, dtype=F64), rtol=0, atol=1e-15
    )


def test_schedule_arguments_are_checked():
    with pytest.raises(ValueError, match="must lie in"):
        VPSchedule().time_grid(4, 0.0, 1.0)
    with pytest.raises(ValueError, match="spacing"):
        VPSchedule().time_grid(4, spacing="cosine")
    with pytest.raises(ValueError, match="Unknown noise schedule"):
        noise_schedule("cosine")
    with pytest.raises(ValueError, match="sigma_max"):
        VESchedule(sigma_min=1.0, sigma_max=0.5)
    with pytest.raises(ValueError, match="t_min"):
        EDMSchedule(t_min=0.0)
    with pytest.raises(ValueError, match="beta_min"):
        VPSchedule(beta_min=-1.0)
    with pytest.raises(TypeError, match="`t`"):
        VPSchedule().alpha("0.5")


# --- diffusion Fisher: exact oracles ---------------------------------------------------------


def _hessian_of_negative_log_density(x, data, alpha, sigma, weights=None):
    def negative_log_q(z):
        return -diffusion_log_density(z[None], data, alpha, sigma, data_weights=weights)[0]

    return torch.stack([torch.autograd.functional.hessian(negative_log_q, p) for p in x])


@pytest.mark.parametrize(
    ("seed", "n", "d", "alpha", "sigma", "weighted"),
    [
        (0, 3, 2, 0.8, 0.5, False),
        (1, 40, 5, 0.3, 0.9, True),
        (2, 7, 3, 1.0, 0.2, False),
        (3, 1, 4, 0.6, 0.7, False),
    ],
)
def test_dense_fisher_is_the_hessian_of_minus_log_density(seed, n, d, alpha, sigma, weighted):
    g = torch.Generator().manual_seed(seed)
    data = _randn(g, n, d)
    x = alpha * data[torch.arange(3) % n] + sigma * _randn(g, 3, d)
    weights = torch.rand(n, generator=g, dtype=F64) if weighted else None
    dense = diffusion_fisher_matrix(x, data, alpha, sigma, data_weights=weights)
    hessian = _hessian_of_negative_log_density(x, data, alpha, sigma, weights)
    torch.testing.assert_close(dense, hessian, rtol=0, atol=1e-10)
    torch.testing.assert_close(dense, dense.transpose(1, 2), rtol=0, atol=1e-12)
    point = x.clone().requires_grad_(True)
    log_q = diffusion_log_density(point, data, alpha, sigma, data_weights=weights)
    (gradient,) = torch.autograd.grad(log_q.sum(), point)  # the points are independent
    score = diffusion_score(x, data, alpha, sigma, data_weights=weights)
    torch.testing.assert_close(score, gradient, rtol=0, atol=1e-10)


def test_one_point_has_fisher_identity_over_sigma_squared():
    g = torch.Generator().manual_seed(0)
    data, x = _randn(g, 1, 4), _randn(g, 6, 4)
    sigma = torch.rand(6, generator=g, dtype=F64) + 0.1
    alpha = torch.rand(6, generator=g, dtype=F64)
    eye = torch.eye(4, dtype=F64).expand(6, 4, 4) / sigma[:, None, None] ** 2
    torch.testing.assert_close(diffusion_fisher_matrix(x, data, alpha, sigma), eye, rtol=0, atol=0)
    torch.testing.assert_close(diffusion_fisher_trace(x, data, alpha, sigma), 4 / sigma**2)
    score = (alpha[:, None] * data - x) / sigma[:, None] ** 2
    torch.testing.assert_close(diffusion_score(x, data, alpha, sigma), score, rtol=0, atol=1e-13)


def test_two_points_closed_form():
    """w = sigmoid((||x - a y2||^2 - ||x - a y1||^2) / 2 s^2): F = I/s^2 - a^2/s^4 w(1-w) D D^T."""
    g = torch.Generator().manual_seed(1)
    data, x = _randn(g, 2, 3), _randn(g, 5, 3)
    alpha, sigma = 0.7, 0.6
    d1 = ((x - alpha * data[0]) ** 2).sum(1)
    d2 = ((x - alpha * data[1]) ** 2).sum(1)
    w = torch.sigmoid((d2 - d1) / (2 * sigma**2))
    delta = data[0] - data[1]
    expected = torch.eye(3, dtype=F64) / sigma**2 - (alpha**2 / sigma**4) * (w * (1 - w))[
        :, None, None
    ] * torch.outer(delta, delta)
    torch.testing.assert_close(
        diffusion_fisher_matrix(x, data, alpha, sigma), expected, rtol=0, atol=1e-12
    )


def _gauss_hermite_gaussian(nodes, mean, factor):
    """Product Gauss-Hermite nodes and weights of N(mean, factor factor^T) in 2-D."""
    z, w = np.polynomial.hermite_e.hermegauss(nodes)
    grid = np.stack(np.meshgrid(z, z, indexing="ij"), -1).reshape(-1, 2)
    points = mean + torch.tensor(grid) @ factor.T
    return points, torch.tensor(np.outer(w, w).reshape(-1))


@pytest.mark.parametrize(("alpha", "sigma"), [(0.8, 0.6), (1.0, 1.0), (0.2, 0.5)])
def test_gaussian_data_gives_the_inverse_marginal_covariance(alpha, sigma):
    """q_0 = N(mu, S0) gives F_t = (alpha^2 S0 + sigma^2 I)^-1 everywhere; a 60 x 60 Gauss-Hermite
    rule as a weighted data set reproduces the Gaussian to ~1e-13."""
    mean = torch.tensor([0.5, -1.0], dtype=F64)
    factor = torch.tensor([[1.0, 0.0], [0.6, 0.5]], dtype=F64)
    data, weights = _gauss_hermite_gaussian(60, mean, factor)
    covariance = alpha**2 * factor @ factor.T + sigma**2 * torch.eye(2, dtype=F64)
    precision = torch.linalg.inv(covariance)
    x = torch.tensor([[0.0, 0.0], [1.0, -2.0], [-1.5, 0.5], [2.0, 1.0]], dtype=F64)
    terms = diffusion_fisher_terms(x, data, alpha, sigma, matrix=True, data_weights=weights)
    torch.testing.assert_close(terms.matrix, precision.expand(4, 2, 2), rtol=0, atol=1e-10)
    gaussian = torch.distributions.MultivariateNormal(alpha * mean, covariance)
    torch.testing.assert_close(terms.log_density, gaussian.log_prob(x), rtol=0, atol=1e-10)
    torch.testing.assert_close(terms.score, -(x - alpha * mean) @ precision, rtol=0, atol=1e-10)
    torch.testing.assert_close(terms.trace, precision.trace().expand(4), rtol=0, atol=1e-10)


def test_gaussian_sample_approaches_the_gaussian_fisher():
    g = torch.Generator().manual_seed(0)
    factor = torch.tensor([[1.0, 0.0], [0.5, 0.4]], dtype=F64)
    data = _randn(g, 20000, 2) @ factor.T
    alpha, sigma = 0.8, 0.7
    expected = torch.linalg.inv(alpha**2 * factor @ factor.T + sigma**2 * torch.eye(2, dtype=F64))
    x = torch.tensor([[0.0, 0.0], [0.5, -0.3]], dtype=F64)
    dense = diffusion_fisher_matrix(x, data, alpha, sigma)
    assert (dense - expected).abs().max() < 0.05 * expected.abs().max()


@pytest.mark.parametrize("seed", [0, 1])
def test_trace_and_mvp_agree_with_the_dense_matrix(seed):
    g = torch.Generator().manual_seed(seed)
    data, x, v = _randn(g, 30, 6), 2 * _randn(g, 8, 6), _randn(g, 8, 6)
    alpha = torch.rand(8, generator=g, dtype=F64) + 0.2
    sigma = torch.rand(8, generator=g, dtype=F64) + 0.2
    dense = diffusion_fisher_matrix(x, data, alpha, sigma)
    trace = diffusion_fisher_trace(x, data, alpha, sigma)
    mvp = diffusion_fisher_mvp(x, v, data, alpha, sigma)
    torch.testing.assert_close(trace, dense.diagonal(dim1=1, dim2=2).sum(1), rtol=0, atol=1e-10)
    torch.testing.assert_close(mvp, torch.einsum("bij,bj->bi", dense, v), rtol=0, atol=1e-10)
    # the note's form of the trace, d/s^2 - a^2/s^4 E||y||^2 + ||x/s^2 + s||^2
    moments = kernel_moments(x, data, alpha, sigma)
    score = diffusion_score(x, data, alpha, sigma)
    note = (
        6 / sigma**2
        - alpha**2 / sigma**4 * moments.sq_norm
        + ((x / sigma[:, None] ** 2 + score) ** 2).sum(1)
    )
    torch.testing.assert_close(trace, note, rtol=1e-10, atol=1e-10)


def test_per_point_times_equal_one_call_per_point():
    g = torch.Generator().manual_seed(2)
    data, x, v = _randn(g, 20, 3), _randn(g, 4, 3), _randn(g, 4, 3)
    alpha = torch.tensor([0.9, 0.5, 0.3, 1.0], dtype=F64)
    sigma = torch.tensor([0.3, 0.8, 1.2, 0.1], dtype=F64)
    batched = diffusion_fisher_terms(x, data, alpha, sigma, vectors=v, matrix=True)
    for b in range(4):
        single = diffusion_fisher_terms(
            x[b : b + 1], data, float(alpha[b]), float(sigma[b]), vectors=v[b : b + 1], matrix=True
        )
        for name in ("log_density", "score", "trace", "mvp", "matrix"):
            torch.testing.assert_close(getattr(batched, name)[b], getattr(single, name)[0])


def test_chunk_size_does_not_change_the_result():
    g = torch.Generator().manual_seed(3)
    data, x, v = _randn(g, 50, 4), 3 * _randn(g, 5, 4), _randn(g, 5, 4)
    reference = diffusion_fisher_terms(x, data, 0.7, 0.3, vectors=v, matrix=True, chunk_size=4096)
    for chunk in (1, 7, 50):
        terms = diffusion_fisher_terms(x, data, 0.7, 0.3, vectors=v, matrix=True, chunk_size=chunk)
        for name in ("log_density", "score", "trace", "mvp", "matrix"):
            torch.testing.assert_close(
                getattr(terms, name), getattr(reference, name), rtol=1e-11, atol=1e-11
            )


def test_float32_matches_float64_at_moderate_noise():
    g = torch.Generator().manual_seed(4)
    data, x = _randn(g, 256, 16), _randn(g, 32, 16)
    exact = diffusion_fisher_trace(x, data, 0.5, 0.8)
    single = diffusion_fisher_trace(x.float(), data.float(), 0.5, 0.8)
    assert single.dtype == torch.float32
    torch.testing.assert_close(single.double(), exact, rtol=1e-5, atol=0)


# --- network-based estimators ----------------------------------------------------------------


def _exact_networks(data, alpha, sigma):
    def score_fn(x, t):
        return diffusion_score(x, data, alpha, sigma)

    def sq_norm_fn(x, t):
        return kernel_moments(x, data, alpha, sigma).sq_norm[:, None]

    return score_fn, sq_norm_fn


def test_trace_matching_with_the_exact_networks_is_exact():
    g = torch.Generator().manual_seed(5)
    data, x = _randn(g, 25, 4), _randn(g, 6, 4)
    alpha, sigma = 0.6, 0.5
    score_fn, sq_norm_fn = _exact_networks(data, alpha, sigma)
    tm = trace_matching_fisher_trace(x, 0.3, score_fn, sq_norm_fn, alpha, sigma)
    torch.testing.assert_close(
        tm, diffusion_fisher_trace(x, data, alpha, sigma), rtol=1e-11, atol=1e-9
    )


def test_endpoint_approximation_is_exact_for_one_point():
    g = torch.Generator().manual_seed(6)
    data, x, v = _randn(g, 1, 3), _randn(g, 5, 3), _randn(g, 5, 3)
    alpha, sigma = 0.9, 0.4
    score_fn, _ = _exact_networks(data, alpha, sigma)
    endpoint = data.expand(5, 3)
    trace = endpoint_fisher_trace(x, 0.1, score_fn, endpoint, alpha, sigma)
    mvp = endpoint_fisher_mvp(x, v, 0.1, score_fn, endpoint, alpha, sigma)
    torch.testing.assert_close(
        trace, diffusion_fisher_trace(x, data, alpha, sigma), rtol=1e-12, atol=1e-10
    )
    torch.testing.assert_close(
        mvp, diffusion_fisher_mvp(x, v, data, alpha, sigma), rtol=1e-12, atol=1e-10
    )


def test_endpoint_approximation_is_trace_matching_with_the_endpoint_norm():
    g = torch.Generator().manual_seed(7)
    data, x, endpoint = _randn(g, 10, 3), _randn(g, 4, 3), _randn(g, 4, 3)
    alpha, sigma = 0.5, 0.7
    score_fn, _ = _exact_networks(data, alpha, sigma)
    ea = endpoint_fisher_trace(x, 0.2, score_fn, endpoint, alpha, sigma)
    tm = trace_matching_fisher_trace(
        x, 0.2, score_fn, lambda *_: (endpoint**2).sum(1), alpha, sigma
    )
    torch.testing.assert_close(ea, tm, rtol=0, atol=0)
    # the trace of the EA matrix-vector product (over a basis) is the EA trace
    basis = torch.eye(3, dtype=F64)
    columns = [
        endpoint_fisher_mvp(x, basis[j].expand(4, 3), 0.2, score_fn, endpoint, alpha, sigma)[:, j]
        for j in range(3)
    ]
    torch.testing.assert_close(sum(columns), ea, rtol=1e-12, atol=1e-10)


def test_score_from_epsilon():
    schedule = VPSchedule()
    t = torch.tensor([0.2, 0.7], dtype=F64)
    x = torch.ones(2, 3, dtype=F64)
    score = score_from_epsilon(lambda z, s: 2 * z, schedule)(x, t)
    torch.testing.assert_close(score, -2 * x / schedule.sigma(t)[:, None])
    scalar = score_from_epsilon(lambda z, s: z, schedule)(x, 0.5)
    torch.testing.assert_close(scalar, -x / schedule.sigma(0.5))


def test_trace_matching_loss_prefers_the_conditional_mean():
    g = torch.Generator().manual_seed(8)
    data = _randn(g, 8, 2)
    schedule = VPSchedule()
    x0 = data[torch.randint(0, 8, (4000,), generator=g)]
    t = torch.full((4000,), 0.3, dtype=F64)
    noise = _randn(g, 4000, 2)
    alpha, sigma = schedule.alpha(0.3), schedule.sigma(0.3)

    def exact(x, s):
        return kernel_moments(x, data, alpha, sigma).sq_norm

    best = trace_matching_loss(exact, x0, t, noise, schedule)
    for shift in (-0.3, 0.3):
        assert best < trace_matching_loss(
            lambda x, s, shift=shift: exact(x, s) + shift, x0, t, noise, schedule
        )


# --- argument checks -------------------------------------------------------------------------


def test_bad_inputs_raise_clear_errors():
    data, x = torch.zeros(4, 3, dtype=F64), torch.zeros(2, 3, dtype=F64)
    with pytest.raises(ValueError, match="share d"):
        diffusion_fisher_trace(torch.zeros(2, 2), data, 1.0, 1.0)
    with pytest.raises(ValueError, match="2-D"):
        diffusion_fisher_trace(torch.zeros(3), data, 1.0, 1.0)
    with pytest.raises(ValueError, match="empty"):
        diffusion_fisher_trace(x, torch.zeros(0, 3), 1.0, 1.0)
    with pytest.raises(ValueError, match="sigma"):
        diffusion_fisher_trace(x, data, 1.0, 0.0)
    with pytest.raises(ValueError, match="sigma"):
        diffusion_fisher_trace(x, data, 1.0, torch.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="alpha"):
        diffusion_fisher_trace(x, data, torch.ones(3), 1.0)
    with pytest.raises(ValueError, match="alpha"):
        diffusion_fisher_trace(x, data, math.nan, 1.0)
    with pytest.raises(ValueError, match="NaN"):
        diffusion_fisher_trace(torch.full((2, 3), math.nan), data, 1.0, 1.0)
    with pytest.raises(ValueError, match="NaN"):
        diffusion_fisher_trace(x, torch.full((4, 3), math.nan), 1.0, 1.0)
    with pytest.raises(ValueError, match="`v`"):
        diffusion_fisher_mvp(x, torch.zeros(2, 2), data, 1.0, 1.0)
    with pytest.raises(ValueError, match="NaN"):
        diffusion_fisher_mvp(x, torch.full((2, 3), math.nan), data, 1.0, 1.0)
    with pytest.raises(ValueError, match="data_weights"):
        diffusion_fisher_trace(x, data, 1.0, 1.0, data_weights=torch.zeros(4))
    with pytest.raises(ValueError, match="data_weights"):
        diffusion_fisher_trace(x, data, 1.0, 1.0, data_weights=torch.ones(3))
    with pytest.raises(ValueError, match="chunk_size"):
        diffusion_fisher_trace(x, data, 1.0, 1.0, chunk_size=0)
    with pytest.raises(TypeError, match="floating"):
        diffusion_fisher_trace(torch.zeros(2, 3, dtype=torch.long), data, 1.0, 1.0)
    score_fn = lambda z, t: z  # noqa: E731
    with pytest.raises(ValueError, match="endpoint"):
        endpoint_fisher_trace(x, 0.1, score_fn, torch.zeros(2, 2), 1.0, 1.0)
    with pytest.raises(ValueError, match="alpha"):
        endpoint_fisher_trace(x, 0.1, score_fn, x, 0.0, 1.0)
    with pytest.raises(ValueError, match="score_fn"):
        trace_matching_fisher_trace(x, 0.1, lambda z, t: z[:, :2], lambda z, t: z[:, 0], 1.0, 1.0)
    with pytest.raises(ValueError, match="sq_norm_fn"):
        trace_matching_fisher_trace(x, 0.1, score_fn, lambda z, t: z, 1.0, 1.0)


# --- benchmark smoke test --------------------------------------------------------------------


def test_benchmark_script_runs_quick():
    bench = load_script("diffusion_fisher")
    threads = torch.get_num_threads()
    out = bench.main(["--quick", "--dtype", "float64"])
    assert torch.get_num_threads() == threads
    assert [(r["N"], r["d"]) for r in out["results"]] == [(64, 2), (64, 8)]
    for r in out["results"]:
        assert r["trace_error"]["DF"] < 1e-12 and r["trace_error"]["autograd exact"] < 1e-10
        assert r["mvp_error"]["autograd HVP"] < 1e-10
        assert 0 < r["trace_error"]["Hutchinson 1"] < 1
        assert all(s > 0 for s in r["trace_seconds"].values())
