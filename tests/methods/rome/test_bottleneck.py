"""InformationBottleneckMixin on a tiny encoder-head classifier, trained by a real Trainer."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
from lightning.pytorch import Callback, LightningModule, Trainer, seed_everything
from torch import nn

from lightning_info.core.schedules import LinearSchedule
from lightning_info.methods.rome.bottleneck import GaussianBottleneck, InformationBottleneckMixin
from tests.methods.rome.tiny_ib import TinyEncoderClassifier, TinyIBClassifier
from tests.tiny import QUIET, TinyDataModule


class Recorder(Callback):
    """Before each step: the loss recomputed by a fresh copy of the module (same weights and noise
    counter, loaded from the ``state_dict``); after it: what the mixin returned and logged."""

    def __init__(self) -> None:
        self.rows: list[dict] = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        replica = type(pl_module)()
        replica.load_state_dict(pl_module.state_dict())
        replica.train()
        x, y = batch
        with torch.no_grad():
            distortion = nn.functional.cross_entropy(replica(x), y)
        rate = replica.ib_bottleneck.kl().mean()
        self.rows.append({"step": trainer.global_step, "distortion": distortion, "rate": rate})

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        metrics = trainer.callback_metrics
        self.rows[-1].update(
            loss=outputs["loss"],
            logged_rate=metrics["ib/rate"].clone(),
            logged_distortion=metrics["ib/distortion"].clone(),
            logged_beta=metrics["ib/beta"].item(),
            logged_loss=metrics["ib/loss"].clone(),
        )


def _fit(model, tmp_path=None, max_steps=4, callbacks=()):
    trainer = Trainer(
        max_steps=max_steps, callbacks=list(callbacks), default_root_dir=tmp_path, **QUIET
    )
    trainer.fit(model, datamodule=TinyDataModule())
    return trainer


def test_loss_is_host_loss_plus_beta_times_rate(tmp_path):
    seed_everything(0)
    recorder = Recorder()
    _fit(TinyIBClassifier(), tmp_path, callbacks=[recorder])
    assert len(recorder.rows) == 4
    for row in recorder.rows:
        assert row["logged_beta"] == pytest.approx(0.1)
        expected = row["distortion"] + 0.1 * row["rate"]
        torch.testing.assert_close(row["logged_distortion"], row["distortion"])
        torch.testing.assert_close(row["logged_rate"], row["rate"])
        torch.testing.assert_close(row["loss"], expected)
        torch.testing.assert_close(row["logged_loss"], expected)
        assert row["rate"] > 0


class ScheduledIB(TinyIBClassifier):
    ib_beta = LinearSchedule(0.0, 1.0, 4)


def test_beta_schedule_follows_global_step(tmp_path):
    seed_everything(0)
    recorder = Recorder()
    _fit(ScheduledIB(), tmp_path, max_steps=6, callbacks=[recorder])
    assert [row["step"] for row in recorder.rows] == list(range(6))
    for row in recorder.rows:
        beta = ScheduledIB.ib_beta(row["step"])
        assert row["logged_beta"] == pytest.approx(beta)
        torch.testing.assert_close(row["loss"], row["distortion"] + beta * row["rate"])


class NoPressureIB(TinyIBClassifier):
    ib_beta = 0.0


def test_zero_beta_gives_the_host_loss(tmp_path):
    seed_everything(0)
    recorder = Recorder()
    _fit(NoPressureIB(), tmp_path, callbacks=[recorder])
    for row in recorder.rows:
        assert row["rate"] > 0
        torch.testing.assert_close(row["loss"], row["distortion"], rtol=0, atol=0)


def test_eval_is_deterministic_and_uses_the_mean():
    seed_everything(0)
    model = TinyIBClassifier().eval()
    x = torch.randn(5, 6)
    out = model(x)
    torch.testing.assert_close(model(x), out, rtol=0, atol=0)
    bottleneck = model.ib_bottleneck
    h = torch.tanh(model.encoder[0](x))
    torch.testing.assert_close(out, model.head(bottleneck.mean(h)), rtol=0, atol=0)
    assert bottleneck.draws == 0

    model.train()
    assert not torch.equal(model(x), out)
    assert bottleneck.draws == 1


def test_bottleneck_is_optimised(tmp_path):
    seed_everything(0)
    model = TinyIBClassifier()
    initial = {k: v.clone() for k, v in model.ib_bottleneck.state_dict().items()}
    grads: list[dict[str, torch.Tensor]] = []

    class GradProbe(Callback):
        def on_after_backward(self, trainer, pl_module):
            grads.append({n: p.grad.clone() for n, p in pl_module.ib_bottleneck.named_parameters()})

    trainer = _fit(model, tmp_path, max_steps=2, callbacks=[GradProbe()])
    optimised = {id(p) for group in trainer.optimizers[0].param_groups for p in group["params"]}
    names = [n for n, _ in model.ib_bottleneck.named_parameters()]
    assert names == ["mean.weight", "mean.bias", "raw_std.weight", "raw_std.bias"]
    assert all(id(p) in optimised for p in model.ib_bottleneck.parameters())
    assert len(grads) == 2
    for name in names:
        assert grads[0][name].abs().sum() > 0, name
        assert not torch.equal(model.ib_bottleneck.state_dict()[name], initial[name]), name


def test_checkpoint_round_trip_restores_the_bottleneck(tmp_path):
    seed_everything(0)
    model = TinyIBClassifier()
    trainer = _fit(model, tmp_path, max_steps=3)
    path = tmp_path / "ib.ckpt"
    trainer.save_checkpoint(path)

    seed_everything(123)
    restored = TinyIBClassifier.load_from_checkpoint(path)
    expected = model.state_dict()
    assert restored.state_dict().keys() == expected.keys()
    for name, value in restored.state_dict().items():
        torch.testing.assert_close(value, expected[name], rtol=0, atol=0, msg=name)
    assert (restored.ib_bottleneck.seed, restored.ib_bottleneck.draws) == (
        model.ib_bottleneck.seed,
        3,
    )
    x = torch.randn(4, 6)
    model.eval(), restored.eval()
    torch.testing.assert_close(restored(x), model(x), rtol=0, atol=0)
    # Training noise continues where it stopped.
    model.train(), restored.train()
    torch.testing.assert_close(restored(x), model(x), rtol=0, atol=0)


def test_copies_keep_the_bottleneck_on_their_own_encoder():
    seed_everything(0)
    model = TinyIBClassifier().eval()
    x = torch.randn(3, 6)
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        torch.testing.assert_close(clone(x), model(x), rtol=0, atol=0)
        with torch.no_grad():
            clone.ib_bottleneck.mean.bias.add_(1.0)
        assert not torch.equal(clone(x), model(x))


def test_host_without_mixin_is_unchanged():
    seed_everything(0)
    host = TinyEncoderClassifier(latent_dim=16)
    assert not any("ib_" in name for name in host.state_dict())
    assert host(torch.randn(2, 6)).shape == (2, 3)


def test_noise_differs_between_streams_and_repeats_for_a_seed():
    a, b = GaussianBottleneck(3, 2, seed=7), GaussianBottleneck(3, 2, seed=7)
    b.load_state_dict(a.state_dict())
    h = torch.randn(4, 3)
    torch.testing.assert_close(a(h), b(h), rtol=0, atol=0)
    b.noise_stream = 1
    assert not torch.equal(a(h), b(h))
    assert a.kl().shape == (4,)


def test_gaussian_bottleneck_rejects_bad_input():
    with pytest.raises(ValueError, match="min_std"):
        GaussianBottleneck(3, 2, min_std=0.0)
    with pytest.raises(ValueError, match="3 input features"):
        GaussianBottleneck(3, 2)(torch.randn(2, 4))
    with pytest.raises(RuntimeError, match="forward call"):
        GaussianBottleneck(3, 2).kl()


class NoEncoder(InformationBottleneckMixin, TinyEncoderClassifier):
    ib_encoder = "backbone"


class OpaqueHost(LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Identity()


class UnsizedIB(InformationBottleneckMixin, OpaqueHost):
    pass


class SizedIB(InformationBottleneckMixin, OpaqueHost):
    ib_input_dim = 6
    ib_latent_dim = 2


class NegativeBeta(TinyIBClassifier):
    ib_beta = -1.0


def test_configuration_errors_are_clear():
    with pytest.raises(AttributeError, match="self.backbone"):
        NoEncoder()
    with pytest.raises(ValueError, match="ib_input_dim"):
        UnsizedIB()
    with pytest.raises(ValueError, match="ib_beta"):
        NegativeBeta()
    assert SizedIB().encoder(torch.randn(5, 6)).shape == (5, 2)


class ManualIB(TinyIBClassifier):
    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False


def test_manual_optimization_is_refused(tmp_path):
    with pytest.raises(RuntimeError, match="manual optimization"):
        _fit(ManualIB(), tmp_path, max_steps=1)


class DottedPathIB(TinyIBClassifier):
    """The same encoder named by its dotted path inside ``net`` (``net.0`` is ``encoder``)."""

    ib_encoder = "net.0"


def test_a_dotted_encoder_path_trains_like_the_attribute_name(tmp_path):
    trained = {}
    for cls in (TinyIBClassifier, DottedPathIB):
        seed_everything(0)
        model = cls()
        assert model.get_submodule(cls.ib_encoder) is model.encoder
        initial = model.ib_bottleneck.mean.weight.detach().clone()
        _fit(model, tmp_path / cls.__name__, max_steps=3)
        assert not torch.equal(model.ib_bottleneck.mean.weight, initial)  # the rate was trained
        trained[cls] = model.state_dict()
    for name, value in trained[TinyIBClassifier].items():
        torch.testing.assert_close(trained[DottedPathIB][name], value, rtol=0, atol=0, msg=name)
