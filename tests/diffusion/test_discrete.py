"""Discrete DDPM / DDIM sampling against closed forms: a point mass is recovered exactly by the
exact noise predictor, Gaussian data is sampled with its mean and variance, known entries come
back bit for bit, DDIM with eta 0 is deterministic, guidance is its formula."""

from __future__ import annotations

import pytest
import torch

from lightning_info.diffusion.discrete import (
    BetaSchedule,
    ddim_sample,
    ddim_timesteps,
    ddpm_sample,
    guided,
)

SCHEDULE = BetaSchedule.linear(500, 1e-4, 0.05)  # ProDiff's


def point_mass_denoiser(x0: torch.Tensor, schedule: BetaSchedule):
    """The exact noise of data that is always ``x0``: ``(x_t - sqrt(abar) x0) / sqrt(1 - abar)``."""

    def denoiser(x, t):
        abar = schedule.alpha_bar(t).to(x.dtype).reshape(-1, *[1] * (x.ndim - 1))
        return (x - abar.sqrt() * x0) / (1 - abar).sqrt()

    return denoiser


def gaussian_denoiser(mean: float, std: float, schedule: BetaSchedule):
    """The exact noise predictor of ``x_0 ~ N(mean, std^2)``: ``E[eps | x_t]`` in closed form,
    ``sqrt(1 - abar) (x_t - sqrt(abar) mean) / (abar std^2 + 1 - abar)``."""

    def denoiser(x, t):
        abar = schedule.alpha_bar(t).reshape(-1, *[1] * (x.ndim - 1))
        out = (1 - abar).sqrt() * (x - abar.sqrt() * mean) / (abar * std**2 + 1 - abar)
        return out.to(x.dtype)

    return denoiser


def test_linear_schedule_and_forward_noising():
    assert SCHEDULE.num_steps == 500
    assert SCHEDULE.betas[0].item() == pytest.approx(1e-4) and SCHEDULE.betas[-1] == 0.05
    assert torch.allclose(SCHEDULE.alpha_bars[3], torch.prod(1 - SCHEDULE.betas[:4]))
    x0, noise = torch.randn(4, 6, dtype=torch.float64), torch.randn(4, 6, dtype=torch.float64)
    t = torch.tensor([0, 10, 200, 499])
    xt = SCHEDULE.q_sample(x0, t, noise)
    abar = SCHEDULE.alpha_bars[t][:, None]
    assert torch.allclose(xt, abar.sqrt() * x0 + (1 - abar).sqrt() * noise)
    assert torch.allclose(SCHEDULE.predict_x0(xt, t, noise), x0)
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        BetaSchedule(torch.tensor([0.1, 1.0]))


@pytest.mark.parametrize("sampler", ["ddpm", "ddim"])
def test_the_exact_noise_of_a_point_mass_recovers_it(sampler):
    x0 = torch.randn(3, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    denoiser = point_mass_denoiser(x0, SCHEDULE)
    g = torch.Generator().manual_seed(1)
    if sampler == "ddpm":
        out = ddpm_sample(denoiser, SCHEDULE, x0.shape, generator=g, dtype=torch.float64)
    else:
        out = ddim_sample(denoiser, SCHEDULE, x0.shape, 50, 0.5, generator=g, dtype=torch.float64)
    assert torch.allclose(out, x0, atol=1e-8)


def test_ddpm_samples_gaussian_data_with_its_mean_and_variance():
    denoiser = gaussian_denoiser(1.5, 0.5, SCHEDULE)  # abar_T = 4e-6: x_T ~ N(0, 1) is exact
    g = torch.Generator().manual_seed(2)
    out = ddpm_sample(denoiser, SCHEDULE, (40000, 1), generator=g, dtype=torch.float64)
    assert out.mean().item() == pytest.approx(1.5, abs=0.01)
    assert out.std().item() == pytest.approx(0.5, abs=0.01)


def test_ddim_with_eta_one_over_every_step_is_ddpm():
    # DDIM's sigma at eta = 1 is DDPM's posterior variance, and both draw x_T then one noise
    # per step t = T-1 .. 1 from the generator: the same samples
    denoiser = gaussian_denoiser(1.5, 0.5, SCHEDULE)
    ddpm = ddpm_sample(
        denoiser, SCHEDULE, (64, 2), generator=torch.Generator().manual_seed(4), dtype=torch.float64
    )
    ddim = ddim_sample(
        denoiser,
        SCHEDULE,
        (64, 2),
        500,
        1.0,
        generator=torch.Generator().manual_seed(4),
        dtype=torch.float64,
    )
    assert torch.allclose(ddim, ddpm, atol=1e-9, rtol=0)


def test_deterministic_ddim_keeps_the_mean_and_converges_in_the_variance():
    denoiser = gaussian_denoiser(1.5, 0.5, SCHEDULE)
    errors = []
    for steps in (50, 100, 500):
        out = ddim_sample(
            denoiser,
            SCHEDULE,
            (40000, 1),
            steps,
            0.0,
            generator=torch.Generator().manual_seed(2),
            dtype=torch.float64,
        )
        assert out.mean().item() == pytest.approx(1.5, abs=0.01)
        errors.append(abs(out.std().item() - 0.5))
    assert errors[0] > errors[1] > errors[2] and errors[1] < 0.025  # the ODE's step error


@pytest.mark.parametrize("sampler", ["ddpm", "ddim"])
def test_known_entries_are_returned_bit_for_bit(sampler):
    g = torch.Generator().manual_seed(3)
    values = torch.rand(5, 7, 3)
    known = torch.zeros(5, 7, 3, dtype=torch.bool)
    known[:, [0, -1]] = True  # a trajectory's two endpoints

    def noisy_denoiser(x, t):
        return torch.sin(x) + t[:, None, None] * 1e-3  # any prediction

    kwargs = {"known": known, "values": values, "generator": g}
    if sampler == "ddpm":
        out = ddpm_sample(noisy_denoiser, SCHEDULE, values.shape, **kwargs)
    else:
        out = ddim_sample(noisy_denoiser, SCHEDULE, values.shape, 50, 1.0, **kwargs)
    assert torch.equal(out[known], values[known])
    assert not torch.equal(out[~known], values[~known])
    with pytest.raises(ValueError, match="both"):
        ddim_sample(noisy_denoiser, SCHEDULE, values.shape, known=known)


def test_ddim_with_eta_zero_is_deterministic_given_the_seed():
    def denoiser(x, t):
        return 0.3 * x

    runs = [
        ddim_sample(denoiser, SCHEDULE, (4, 6), 25, 0.0, generator=torch.Generator().manual_seed(7))
        for _ in range(2)
    ]
    assert torch.equal(runs[0], runs[1])
    other = ddim_sample(
        denoiser, SCHEDULE, (4, 6), 25, 0.0, generator=torch.Generator().manual_seed(8)
    )
    assert not torch.equal(runs[0], other)
    stochastic = [
        ddim_sample(denoiser, SCHEDULE, (4, 6), 25, 1.0, generator=torch.Generator().manual_seed(7))
        for _ in range(2)
    ]
    assert torch.equal(stochastic[0], stochastic[1])  # eta > 0: its noise comes from the seed too


def test_ddim_timesteps_span_the_schedule_and_guidance_is_its_formula():
    assert ddim_timesteps(500, 50)[0] == 499 and ddim_timesteps(500, 50)[-1] == 0
    assert len(set(ddim_timesteps(500, 50))) == 50
    assert ddim_timesteps(10, 10) == list(range(9, -1, -1))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ddim_sample(lambda x, t: x, SCHEDULE, (1, 1), 5, 1.5)
    with pytest.raises(ValueError, match="exceed"):
        ddim_timesteps(10, 11)
    x, t = torch.randn(2, 3), torch.zeros(2, dtype=torch.long)
    eps = guided(lambda x, t: 2 * x, lambda x, t: x, 2.0)(x, t)
    assert torch.allclose(eps, 2 * x + 2.0 * (2 * x - x))
    assert torch.equal(guided(lambda x, t: 2 * x, lambda x, t: x, 0.0)(x, t), 2 * x)


def _noisy_denoiser(x0: torch.Tensor, schedule: BetaSchedule, error: float):
    """The point mass's exact noise plus a constant error (a biased noise predictor)."""
    exact = point_mass_denoiser(x0, schedule)
    return lambda x, t: exact(x, t) + error


@pytest.mark.parametrize("sampler", ["ddpm", "ddim"])
def test_clipping_bounds_each_clean_estimate_and_leaves_an_exact_model_alone(sampler):
    x0 = torch.full((64, 6), 0.5, dtype=torch.float64)

    def run(denoiser, clip):
        g = torch.Generator().manual_seed(2)
        if sampler == "ddpm":
            return ddpm_sample(
                denoiser, SCHEDULE, x0.shape, generator=g, dtype=torch.float64, clip_x0=clip
            )
        return ddim_sample(
            denoiser, SCHEDULE, x0.shape, 50, 0.0, generator=g, dtype=torch.float64, clip_x0=clip
        )

    exact = point_mass_denoiser(x0, SCHEDULE)
    assert torch.allclose(run(exact, (0.0, 1.0)), x0, atol=1e-8)
    torch.testing.assert_close(run(exact, (-1e9, 1e9)), run(exact, None))
    # a biased predictor: every clean estimate is off by error * sqrt((1 - abar) / abar),
    # hundreds at the first steps; the clamp keeps the sample inside the range
    biased = _noisy_denoiser(x0, SCHEDULE, 0.05)
    clipped, unclipped = run(biased, (0.0, 1.0)), run(biased, None)
    assert clipped.min() >= 0.0 and clipped.max() <= 1.0
    assert (unclipped - x0).abs().mean() > (clipped - x0).abs().mean()


def test_clipping_range_must_be_ordered():
    with pytest.raises(ValueError, match="low < high"):
        ddim_sample(lambda x, t: x, SCHEDULE, (2, 3), 5, clip_x0=(1.0, 0.0))
