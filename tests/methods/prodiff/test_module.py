"""The ProDiff LightningModule: endpoints bit-exact after both samplers, an interior that is never
read, deterministic DDIM under a seed, training that noises and scores the interior only, the
no-prototype ablation, injected networks, its errors, and the straight-line oracle (after
training, the interior error falls below the data's noise level)."""

from __future__ import annotations

import math
from dataclasses import replace

import lightning.pytorch as pl
import pytest
import torch
from torch.utils.data import DataLoader

from lightning_info.core.options import AdamWOptions
from lightning_info.core.trainers import quiet_trainer
from lightning_info.data.splits import TensorRows, gathered_batch
from lightning_info.methods.prodiff import (
    PRODIFF_OPTIMIZER,
    DiffusionOptions,
    EndpointCondition,
    GuidanceOptions,
    ProDiff,
    PrototypeOptions,
    SamplingOptions,
    SyntheticCity,
    TrajectoryDataModule,
    TrajectoryEncoder,
    TrajectoryUNet,
    WindowScaling,
)
from tests.methods.prodiff.tiny import tiny_prodiff


def _tiny(k: int = 6, **overrides) -> ProDiff:
    torch.manual_seed(0)
    return tiny_prodiff(k, **overrides).eval()


def _windows(batch: int = 5, k: int = 6, seed: int = 0) -> torch.Tensor:
    return torch.rand(batch, k, 3, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("sampler", ["ddim", "ddpm"])
@pytest.mark.parametrize("use_prototypes", [True, False])
def test_endpoints_bit_exact_and_interior_never_read(sampler, use_prototypes):
    model = _tiny(use_prototypes=use_prototypes)
    window = _windows()
    hidden = window.clone()
    hidden[:, 1:-1] = float("nan")
    out = model.impute(window, sampler=sampler, generator=torch.Generator().manual_seed(1))
    blind = model.impute(hidden, sampler=sampler, generator=torch.Generator().manual_seed(1))
    assert torch.equal(out[:, [0, -1]], window[:, [0, -1]])
    assert torch.equal(out, blind)
    assert torch.isfinite(out).all() and not torch.allclose(out[:, 1:-1], window[:, 1:-1])


def test_ddim_with_eta_zero_is_deterministic_under_a_seed():
    model = _tiny()
    window = _windows()
    a = model.impute(window, eta=0.0, generator=torch.Generator().manual_seed(7))
    b = model.impute(window, eta=0.0, generator=torch.Generator().manual_seed(7))
    c = model.impute(window, eta=0.0, generator=torch.Generator().manual_seed(8))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_the_mean_of_samples_averages_draws_of_the_same_window():
    model = _tiny()
    window = _windows(batch=3)
    mean = model.impute(window, samples=4, generator=torch.Generator().manual_seed(2))
    draws = model.impute(window.repeat(4, 1, 1), generator=torch.Generator().manual_seed(2))
    expected = draws.reshape(4, 3, 6, 3).mean(0)
    torch.testing.assert_close(mean[:, 1:-1], expected[:, 1:-1])
    assert torch.equal(mean[:, [0, -1]], window[:, [0, -1]])


@pytest.mark.parametrize("guided_training", [True, False])
def test_training_noises_and_scores_only_the_interior(monkeypatch, guided_training):
    model = _tiny(
        guidance=GuidanceOptions(guided_training=guided_training, unconditional_probability=0.0)
    )
    seen = {}
    forward = model.unet.forward

    def spy(x, steps, condition=None):
        out = forward(x, steps, condition)
        seen.update(x=x.detach().clone(), steps=steps, out=out)
        return out

    monkeypatch.setattr(model.unet, "forward", spy)
    window = _windows(batch=8)
    trainer = quiet_trainer(max_steps=1, accelerator="cpu", limit_val_batches=0)
    loader = DataLoader(
        TensorRows(window=window, raw=window.double()), batch_size=8, collate_fn=gathered_batch
    )
    model.train()
    trainer.fit(model, train_dataloaders=loader)
    x0 = window.transpose(1, 2)
    noisy, steps, out = seen["x"][:8], seen["steps"][:8], seen["out"].detach()
    if guided_training:  # one doubled batch: the conditional half, then the null-condition half
        assert torch.equal(seen["x"][8:], noisy) and torch.equal(seen["steps"][8:], steps)
        out = out[:8] + model.guidance.weight * (out[:8] - out[8:])
    assert torch.equal(noisy[:, :, [0, -1]], x0[:, :, [0, -1]])
    # the interior is x_t = sqrt(abar) x0 + sqrt(1 - abar) eps: recover eps and score it
    abar = model.schedule.alpha_bar(steps).float()[:, None, None]
    eps = (noisy - abar.sqrt() * x0) / (1 - abar).sqrt()
    expected = (out - eps)[:, :, 1:-1].abs().mean()
    logged = trainer.callback_metrics["train/diffusion"]
    torch.testing.assert_close(logged, expected, rtol=1e-4, atol=1e-5)


def test_no_prototype_ablation_has_no_encoder_and_trains():
    model = _tiny(use_prototypes=False)
    names = [name for name, _ in model.named_parameters()]
    assert not any(n.startswith(("encoder", "prototypes")) for n in names)
    assert model.condition_net.prototype is None
    full = _tiny()
    assert any(n.startswith("encoder") for n, _ in full.named_parameters())
    with pytest.raises(ValueError, match="has no encoder: pass encoder=None"):
        ProDiff(encoder=TrajectoryEncoder(16, embed_dim=8, num_heads=2), use_prototypes=False)


def test_injected_networks_built_in_order_equal_the_default_ones():
    """Built in ProDiff's order (denoiser, condition, encoder) from the same seed, injected
    networks give the default model's weights bit for bit; the hyperparameters leave the
    networks out."""
    torch.manual_seed(3)
    default = ProDiff(8)
    torch.manual_seed(3)
    unet = TrajectoryUNet(8)
    injected = ProDiff(
        denoiser=unet,
        condition=EndpointCondition(3, unet.embed_dim, 512),
        encoder=TrajectoryEncoder(8),
    )
    assert injected.window_length == injected.hparams["window_length"] == 8  # from the networks
    left, right = default.state_dict(), injected.state_dict()
    assert list(left) == list(right)
    for name in left:  # the unset scaling buffers are NaN
        torch.testing.assert_close(left[name], right[name], rtol=0, atol=0, equal_nan=True)
    assert not {"denoiser", "condition", "encoder"} & set(injected.hparams)
    assert injected.hparams["optimizer"] == AdamWOptions(
        lr=2e-4, weight_decay=0.01, warmup_fraction=0.1
    )
    assert injected.hparams["optimizer"] is PRODIFF_OPTIMIZER


def test_a_custom_encoder_sizes_the_prototypes_and_the_condition():
    model = ProDiff(
        denoiser=TrajectoryUNet(5, base_channels=8, multipliers=(1,), attention_lengths=()),
        encoder=TrajectoryEncoder(5, embed_dim=12, num_layers=1, num_heads=3),
        prototype_options=PrototypeOptions(num_prototypes=7),
    )
    assert model.window_length == 5 and model.prototypes.shape == (7, 12)
    assert model.condition_net.prototype[0].in_features == 12
    window = torch.rand(2, 5, 3, generator=torch.Generator().manual_seed(0))
    assert model.eval().impute(window).shape == (2, 5, 3)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: ProDiff(6, denoiser=TrajectoryUNet(8)), "denoiser is built for windows of 8"),
        (
            lambda: ProDiff(denoiser=TrajectoryUNet(8), encoder=TrajectoryEncoder(6)),
            "encoder is built for windows of 6 points but window_length is 8",
        ),
        (
            lambda: ProDiff(8, condition=EndpointCondition(3, 512)),
            "prototype branch must match use_prototypes",
        ),
        (
            lambda: ProDiff(8, condition=EndpointCondition(3, 512, 64)),
            "takes 64 features but the encoder gives 512",
        ),
        (lambda: ProDiff(8, denoiser=torch.nn.Identity()), "int `embed_dim`"),
        (lambda: ProDiff(8, diffusion={"num_steps": 20}), "`diffusion` must be a DiffusionOptions"),
    ],
)
def test_networks_that_do_not_fit_are_refused(build, message):
    with pytest.raises((ValueError, TypeError), match=message):
        build()


def test_setup_takes_the_data_modules_scaling_and_checks_the_window_length():
    data = TrajectoryDataModule(
        window_length=6, synthetic=SyntheticCity(num_trajectories=40), batch_size=8
    )
    model = _tiny(6)
    trainer = quiet_trainer(max_steps=1, accelerator="cpu", limit_val_batches=0)
    trainer.fit(model, datamodule=data)
    torch.testing.assert_close(model.scale_low, data.scaling.low.double())
    torch.testing.assert_close(model.scale_span, data.scaling.span.double())
    raw = data.windows["test"]
    torch.testing.assert_close(model.unscale(data.scale(raw)), raw)
    given = WindowScaling(tuple(data.scaling.low.tolist()), tuple(data.scaling.span.tolist()))
    assert model.hparams["scaling"] == given
    torch.testing.assert_close(tiny_prodiff(scaling=given).unscale(data.scale(raw)), raw)
    with pytest.raises(ValueError, match="window_length=6"):
        quiet_trainer(max_steps=1, accelerator="cpu").fit(_tiny(7), datamodule=data)


def test_bad_input_is_refused_with_a_message():
    model = _tiny()
    with pytest.raises(ValueError, match=r"\(B >= 1, 6, 3\)"):
        model.impute(torch.rand(2, 5, 3))
    endpoint = _windows()
    endpoint[0, -1, 1] = float("nan")
    with pytest.raises(ValueError, match="endpoints hold NaN"):
        model.impute(endpoint)
    with pytest.raises(RuntimeError, match="no scaling"):
        model.unscale(_windows())
    with pytest.raises(ValueError, match="sampling steps exceed"):
        tiny_prodiff(sampling_steps=21)
    with pytest.raises(ValueError, match="`sampling.sampler` must be one of"):
        SamplingOptions(sampler="euler")
    with pytest.raises(ValueError, match="`sampler` must be one of"):
        model.impute(_windows(), sampler="euler")
    with pytest.raises(ValueError, match="window_length"):
        ProDiff(2)
    with pytest.raises(ValueError, match="beta_end"):
        DiffusionOptions(beta_start=0.02, beta_end=0.01)
    with pytest.raises(ValueError, match="`diffusion.prediction`"):
        DiffusionOptions(prediction="v")
    with pytest.raises(ValueError, match="`sampling.eta` must lie in"):
        SamplingOptions(eta=1.5)
    with pytest.raises(ValueError, match="`sampling.clip_x0` must be"):
        SamplingOptions(clip_x0=(1.0, 0.0))
    with pytest.raises(ValueError, match="`guidance.unconditional_probability`"):
        GuidanceOptions(unconditional_probability=1.0)
    with pytest.raises(ValueError, match="`prototype_options.num_prototypes`"):
        PrototypeOptions(num_prototypes=0)
    with pytest.raises(ValueError, match="`scaling.span` must be > 0"):
        WindowScaling((0.0, 0.0, 0.0), (1.0, 0.0, 1.0))
    with pytest.raises(ValueError, match="`scaling.low` must hold 3 finite"):
        WindowScaling((0.0, float("nan"), 0.0), (1.0, 1.0, 1.0))


def _straight_lines(count: int, k: int, noise: float, seed: int):
    """Constant-speed straight lines at regular times in scaled units, and their noisy fixes."""
    g = torch.Generator().manual_seed(seed)
    start, end = (
        0.1 + 0.8 * torch.rand(count, 2, generator=g),
        0.1 + 0.8 * torch.rand(count, 2, generator=g),
    )
    fraction = torch.linspace(0, 1, k)[None, :, None]
    points = start[:, None] + fraction * (end - start)[:, None]
    times = fraction.expand(count, k, 1)
    clean = torch.cat([times, points], -1)
    noisy = clean.clone()
    noisy[..., 1:] += noise * torch.randn(count, k, 2, generator=g)
    return clean, noisy


def test_oracle_interior_error_falls_below_the_noise_level_on_straight_lines(one_torch_thread):
    """Trained on noisy straight lines (x0 prediction, the recipe's), one sample's interior
    lies closer to the true line than the data's own fixes do (about 17 s)."""
    k, noise = 8, 0.02
    _, train = _straight_lines(1024, k, noise, seed=0)
    clean, test = _straight_lines(256, k, noise, seed=1)
    pl.seed_everything(0, verbose=False)
    model = tiny_prodiff(
        k,
        channels=16,
        diffusion=DiffusionOptions(num_steps=100, prediction="x0"),
        sampling=SamplingOptions(steps=20, clip_x0=(-0.5, 1.5)),
        optimizer=replace(PRODIFF_OPTIMIZER, lr=3e-3),
    )
    loader = DataLoader(
        TensorRows(window=train, raw=train.double()),
        batch_size=64,
        shuffle=True,
        collate_fn=gathered_batch,
    )

    def interior_error(windows):
        return (windows[:, 1:-1, 1:] - clean[:, 1:-1, 1:]).norm(dim=-1).mean().item()

    noise_level = interior_error(test)  # the data's own distance from the line
    assert noise_level == pytest.approx(noise * math.sqrt(math.pi / 2), rel=0.05)
    untrained = interior_error(
        model.eval().impute(test, generator=torch.Generator().manual_seed(0))
    )
    trainer = quiet_trainer(max_epochs=40, accelerator="cpu", limit_val_batches=0)
    trainer.fit(model.train(), train_dataloaders=loader)
    model.eval()
    trained = interior_error(model.impute(test, generator=torch.Generator().manual_seed(0)))
    assert untrained > 5 * noise_level
    assert trained < noise_level, (trained, noise_level)
