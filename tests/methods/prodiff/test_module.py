"""The ProDiff LightningModule: endpoints bit-exact after both samplers, an interior that is never
read, deterministic DDIM under a seed, training that noises and scores the interior only, the
no-prototype ablation, its errors, and the straight-line oracle (after training, the interior
error falls below the data's noise level)."""

from __future__ import annotations

import math

import lightning.pytorch as pl
import pytest
import torch
from torch.utils.data import DataLoader

from lightning_info.core.trainers import quiet_trainer
from lightning_info.data.splits import TensorRows, gathered_batch
from lightning_info.methods.prodiff import ProDiff, TrajectoryDataModule

TINY = dict(
    embed_dim=16,
    encoder_layers=1,
    encoder_heads=2,
    encoder_feedforward=16,
    unet_channels=8,
    unet_multipliers=(1, 2),
    unet_res_blocks=1,
    attention_lengths=(),
    num_steps=20,
    sampling_steps=5,
    num_prototypes=4,
)


def _tiny(k: int = 6, **overrides) -> ProDiff:
    torch.manual_seed(0)
    return ProDiff(k, **{**TINY, **overrides}).eval()


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
    model = _tiny(guided_training=guided_training, unconditional_probability=0.0)
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
        out = out[:8] + model.guidance_weight * (out[:8] - out[8:])
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


def test_setup_takes_the_data_modules_scaling_and_checks_the_window_length():
    data = TrajectoryDataModule(num_trajectories=40, window_length=6, batch_size=8)
    model = _tiny(6)
    trainer = quiet_trainer(max_steps=1, accelerator="cpu", limit_val_batches=0)
    trainer.fit(model, datamodule=data)
    torch.testing.assert_close(model.scale_low, data.scaling.low.double())
    torch.testing.assert_close(model.scale_span, data.scaling.span.double())
    raw = data.windows["test"]
    torch.testing.assert_close(model.unscale(data.scale(raw)), raw)
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
        ProDiff(6, **{**TINY, "sampling_steps": 21})
    with pytest.raises(ValueError, match="`sampler`"):
        ProDiff(6, **{**TINY, "sampler": "euler"})
    with pytest.raises(ValueError, match="window_length"):
        ProDiff(2, **TINY)


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
    settings = {"num_steps": 100, "sampling_steps": 20, "lr": 3e-3, "clip_x0": (-0.5, 1.5)}
    model = ProDiff(k, **{**TINY, **settings, "unet_channels": 16, "prediction": "x0"})
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
