"""DiffusionModel: the denoising and trace-matching heads learn their targets on a ring mixture."""

import pytest
import torch
from lightning.pytorch import Trainer

from lightning_info.data.synthetic import GaussianMixtureDataModule, ring_mixture
from lightning_info.measures.kernel_moments import kernel_moments
from lightning_info.methods.diffusion_fisher.functional import (
    diffusion_fisher_trace,
    trace_matching_fisher_trace,
)
from lightning_info.methods.diffusion_fisher.module import DiffusionModel, TimeConditionedMLP


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_torch_thread):
    """One torch thread (``tests/conftest.py``)."""


def _train(target: str, root):
    data = GaussianMixtureDataModule(num_samples=2000, batch_size=256)
    model = DiffusionModel(hidden=64, layers=2, lr=3e-3, trace_target=target)
    trainer = Trainer(
        max_steps=600,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        default_root_dir=root,
    )
    trainer.fit(model, datamodule=data)
    return data, model.eval()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return _train("denoising_error", tmp_path_factory.mktemp("diffusion"))


@pytest.fixture(scope="module")
def trained_second_moment(tmp_path_factory):
    return _train("second_moment", tmp_path_factory.mktemp("diffusion"))


def _noised(data, model, t, n=400, seed=1):
    g = torch.Generator().manual_seed(seed)
    x0 = data.train_data[torch.randint(len(data.train_data), (n,), generator=g)]
    s = model.schedule
    alpha, sigma = float(s.alpha(t)), float(s.sigma(t))
    return alpha * x0 + sigma * torch.randn(x0.shape, generator=g), alpha, sigma


def _trace_error(data, model, t) -> float:
    """Median relative error of the network's DF-TM trace against the exact data-set trace."""
    xt, alpha, sigma = _noised(data, model, t)
    exact = diffusion_fisher_trace(xt.double(), data.train_data.double(), alpha, sigma)
    with torch.no_grad():
        estimate = trace_matching_fisher_trace(
            xt.double(),
            t,
            lambda x, s: model.score(x.float(), s).double(),
            lambda x, s: model.expected_sq_norm(x.float(), s).double(),
            alpha,
            sigma,
        )
    return float(((estimate - exact).abs() / exact.abs().clamp_min(1.0)).median())


@pytest.mark.parametrize("t", [0.3, 0.6])
def test_learned_score_and_trace_match_the_exact_data_posterior(trained, t):
    """At moderate noise the empirical-data posterior is smooth, so a trained network should
    match it (at small t it memorises single points, which a network need not)."""
    data, model = trained
    xt, alpha, sigma = _noised(data, model, t)
    exact = kernel_moments(xt.double(), data.train_data.double(), alpha, sigma)
    exact_score = (alpha * exact.mean - xt.double()) / sigma**2
    with torch.no_grad():
        score = model.score(xt, t).double()
    score_error = (score - exact_score).norm(dim=1) / exact_score.norm(dim=1).clamp_min(1e-3)
    assert score_error.median() < 0.25, score_error.median()
    assert _trace_error(data, model, t) < 0.15


def test_denoising_error_head_keeps_the_trace_usable_at_small_noise(trained, trained_second_moment):
    """DF-TM subtracts two O(1/sigma^4) terms when the head regresses ||x_0||^2 directly."""
    small = _trace_error(*trained, 0.05)
    direct = _trace_error(*trained_second_moment, 0.05)
    assert small < direct / 5, (small, direct)
    assert _trace_error(*trained_second_moment, 0.6) < 0.05  # fine at large noise


def test_an_untrained_model_is_far_from_the_targets(trained):
    data, _ = trained
    model = DiffusionModel(hidden=64, layers=2).eval()
    xt, _, _ = _noised(data, model, 0.5)
    exact = kernel_moments(
        xt.double(),
        data.train_data.double(),
        float(model.schedule.alpha(0.5)),
        float(model.schedule.sigma(0.5)),
    )
    with torch.no_grad():
        relative = (
            (model.expected_sq_norm(xt, 0.5).double() - exact.sq_norm).abs() / exact.sq_norm
        ).median()
    assert relative > 0.5


def test_injected_eps_net_is_the_default_one_when_built_alike():
    torch.manual_seed(5)
    eps_net = TimeConditionedMLP(2, 2, 16, 2)
    injected = DiffusionModel(eps_net=eps_net, hidden=16, layers=2, seed=5)
    default = DiffusionModel(hidden=16, layers=2, seed=5)
    assert injected.eps_net is eps_net and "eps_net" not in injected.hparams
    for (name, a), (_, b) in zip(
        default.eps_net.state_dict().items(), eps_net.state_dict().items()
    ):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)
    x = torch.randn(4, 2)
    torch.testing.assert_close(injected.score(x, 0.5), default.score(x, 0.5), rtol=0, atol=0)


def test_bad_batches_and_missing_head():
    model = DiffusionModel(dim=2, trace_matching=False)
    with pytest.raises(ValueError, match=r"\(B, 2\)"):
        model.losses(torch.zeros(4, 3), torch.Generator())
    with pytest.raises(RuntimeError, match="trace_matching=True"):
        model.expected_sq_norm(torch.zeros(4, 2), 0.5)
    with pytest.raises(ValueError, match="trace_target"):
        DiffusionModel(trace_target="variance")
    with pytest.raises(ValueError, match="Unknown noise schedule"):
        DiffusionModel(schedule="cosine")
    with pytest.raises(ValueError, match=r"`eps_net` must predict \(B, 2\) noise"):
        DiffusionModel(eps_net=TimeConditionedMLP(2, 3, 8, 1))
    with pytest.raises(ValueError, match=r"`eps_net` must take \(B, 3\) points"):
        DiffusionModel(dim=3, eps_net=TimeConditionedMLP(2, 3, 8, 1))
    assert ring_mixture(10, seed=1).shape == (10, 2)
