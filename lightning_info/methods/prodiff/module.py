"""``ProDiff``: prototype-guided diffusion for trajectory imputation from two endpoints (Bu et
al., ICML 2025).

A window ``x_0`` of ``k`` scaled (time, lat, lng) points (``TrajectoryDataModule``'s
``"window"``) is generated from its first and last point only.

**Prototypes.** The encoder (:class:`~lightning_info.methods.prodiff.encoder.TrajectoryEncoder`)
maps the full training window to a feature ``f``; ``K`` learnable prototypes ``P`` (Xavier
uniform) are trained by ``L_ce`` against k-means pseudo-labels of the batch's detached features
(matched to the prototypes, see :func:`~lightning_info.methods.prodiff.functional.match_clusters`)
and by the contrastive ``L_con`` (both in :mod:`~lightning_info.methods.prodiff.functional`).
The query ``q`` is the encoder's feature of the endpoints-only window, computed without
gradient; the condition's prototype is ``p~ = softmax(cos(q, P) / sqrt(D)) P``.

**Diffusion.** ``T`` linear betas (``1e-4 -> 0.05``, ``T = 500``), epsilon prediction by the
conditional 1-D UNet (:mod:`~lightning_info.methods.prodiff.denoiser`) with the condition
``MLP(start) + MLP(end) + MLP(p~)`` added to its timestep embedding. Training noises only the
interior (``x_t = sqrt(abar_t) x_0 + sqrt(1 - abar_t) eps`` there, the endpoints left as they
are) and scores ``L_diff = mean |eps_hat - eps|`` over the interior points only. The total loss
is ``L = L_diff + w_ce L_ce + w_con L_con`` (``w_ce = 0.1``, ``w_con = 1``); AdamW, ``lr`` 2e-4
with a warmup and cosine decay over the run.

**Guidance.** Classifier-free guidance ``eps = eps_c + w (eps_c - eps_u)`` (``w = 2``), the
unconditional branch being the UNet with a learned null condition. By default
(``guided_training``, the reference's scheme) the training loss is taken on the guided output
itself, both branches in one doubled batch, so sampling uses exactly what was trained; with
``guided_training=False`` training is standard classifier-free (the condition dropped to the
null one with probability ``unconditional_probability``) and the guidance acts at sampling
only.

**Prediction.** ``prediction="epsilon"`` (the paper) trains the UNet's output against the noise;
``"x0"`` (the reference code's ``predict_epsilon=False``) against the clean window, the noise
the sampler needs being ``(x_t - sqrt(abar_t) x0_hat) / sqrt(1 - abar_t)``.

**Sampling.** DDPM over all ``T`` steps or DDIM over ``sampling_steps`` (``eta``) from the shared
:mod:`lightning_info.diffusion.discrete` samplers, both endpoints re-pinned after every step, so
they come back bit for bit. With ``use_prototypes=False`` (the paper's ablation) there is no
encoder, no prototype loss and the condition is the endpoints' alone.

All randomness of a training step (steps, noise, condition dropout, k-means seeding) comes from
``keyed_generator(seed, global_step, rank)``, so a resumed run repeats it. Validation and test
sample with DDIM (seeded per batch), unscale with the data module's training-split scaling
(stored in the module and its checkpoints) and log ``{val,test}/mtd``, ``maxtd``,
``time_mae``, ``tc@{t}km`` and ``tc_mean`` in metres (:func:`trajectory_metrics`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor, nn

from lightning_info.core.sampling import keyed_generator
from lightning_info.core.schedules import warmup_cosine_config
from lightning_info.core.validation import (
    all_finite,
    require_fraction,
    require_int,
    require_non_negative,
    require_positive,
)
from lightning_info.diffusion.discrete import BetaSchedule, ddim_sample, ddpm_sample, guided
from lightning_info.methods.prodiff.denoiser import EndpointCondition, TrajectoryUNet
from lightning_info.methods.prodiff.encoder import TrajectoryEncoder
from lightning_info.methods.prodiff.functional import (
    endpoints_only,
    kmeans,
    match_clusters,
    prototype_attention,
    prototype_contrastive_loss,
    prototype_cross_entropy,
)
from lightning_info.methods.prodiff.metrics import trajectory_metrics

__all__ = ["PREDICTIONS", "SAMPLERS", "ProDiff", "check_window"]

SAMPLERS = ("ddim", "ddpm")
PREDICTIONS = ("epsilon", "x0")
_VALIDATION, _TEST, _PREDICT = 1, 2, 3  # generator keys of the evaluation stages


def check_window(window: Tensor, length: int, *, interior: bool = True) -> None:
    """Refuse what ProDiff would silently learn or condition on nonsense from: a shape other
    than ``(B, length, 3)``, or NaN / infinity in the endpoints (and, with ``interior``, in
    the rest of the window)."""
    if window.ndim != 3 or window.shape[1:] != (length, 3) or window.shape[0] == 0:
        raise ValueError(
            f"ProDiff takes (B >= 1, {length}, 3) windows of scaled (time, lat, lng), got "
            f"{tuple(window.shape)}: build the model with this window_length or cut windows of "
            f"{length} points."
        )
    checked = window if interior else window[:, [0, -1]]
    if not all_finite(checked):
        what = "windows" if interior else "endpoints"
        raise ValueError(f"the {what} hold NaN or infinity: drop or repair those points.")


class ProDiff(pl.LightningModule):
    """Prototype-guided endpoint-conditioned trajectory diffusion (see the module docstring).

    Args:
        window_length: ``k``, points per window (two endpoints and ``k - 2`` to generate).
        use_prototypes: ProDiff (``True``) or the no-prototype ablation.
        num_prototypes, embed_dim: ``K`` prototypes of dimension ``D`` (20 x 512).
        encoder_layers, encoder_heads, encoder_feedforward, encoder_dropout: the encoder's.
        unet_channels, unet_multipliers, unet_res_blocks, attention_lengths, unet_dropout: the
            UNet's (paper: 128, (1, 2, 2, 2), 2, (16,), 0.1).
        num_steps, beta_start, beta_end: the linear beta schedule (500, 1e-4, 0.05).
        guidance_weight: ``w`` of classifier-free guidance (0: conditional only).
        guided_training: train the guided output ``eps_c + w (eps_c - eps_u)`` itself (the
            reference's scheme; two UNet passes a step); ``False``: standard classifier-free
            training, the condition dropped to the null one with probability
            ``unconditional_probability``, the guidance applied at sampling only.
        unconditional_probability: see ``guided_training``.
        ce_weight, contrastive_weight, margin: the prototype losses' weights and margin.
        kmeans_iterations: Lloyd iterations of the per-batch pseudo-labels.
        match_pseudo_labels: label each k-means cluster with its matched prototype (``False``:
            the reference's arbitrary cluster numbers).
        lr, weight_decay, warmup_fraction, schedule_steps: AdamW and its warmup-cosine
            schedule (``schedule_steps=None``: the trainer's estimated steps).
        sampler, sampling_steps, eta: how validation, test and :meth:`impute` sample.
        clip_x0: the range each sampling step's clean estimate is clamped to, in scaled units
            (the training windows span ``[0, 1]``; ``None``: no clamp), see
            :mod:`lightning_info.diffusion.discrete`.
        scale_low, scale_span: the per-channel min-max scaling of the windows (``None``: taken
            from the data module's ``scaling`` at ``setup``); needed to score in metres.
        seed: keys every random draw.
    """

    def __init__(
        self,
        window_length: int = 16,
        use_prototypes: bool = True,
        num_prototypes: int = 20,
        embed_dim: int = 512,
        encoder_layers: int = 4,
        encoder_heads: int = 8,
        encoder_feedforward: int = 256,
        encoder_dropout: float = 0.1,
        unet_channels: int = 128,
        unet_multipliers: Sequence[int] = (1, 2, 2, 2),
        unet_res_blocks: int = 2,
        attention_lengths: Sequence[int] = (16,),
        unet_dropout: float = 0.1,
        num_steps: int = 500,
        beta_start: float = 1e-4,
        beta_end: float = 0.05,
        prediction: str = "epsilon",
        guidance_weight: float = 2.0,
        guided_training: bool = True,
        unconditional_probability: float = 0.1,
        ce_weight: float = 0.1,
        contrastive_weight: float = 1.0,
        margin: float = 1.0,
        kmeans_iterations: int = 20,
        match_pseudo_labels: bool = True,
        lr: float = 2e-4,
        weight_decay: float = 0.01,
        warmup_fraction: float = 0.1,
        schedule_steps: int | None = None,
        sampler: str = "ddim",
        sampling_steps: int = 50,
        eta: float = 0.0,
        clip_x0: Sequence[float] | None = (-1.0, 2.0),
        scale_low: Sequence[float] | None = None,
        scale_span: Sequence[float] | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.window_length = require_int(window_length, "window_length", 3)
        self.num_prototypes = require_int(num_prototypes, "num_prototypes", 1)
        if sampler not in SAMPLERS:
            raise ValueError(f"`sampler` must be one of {SAMPLERS}, got {sampler!r}.")
        if prediction not in PREDICTIONS:
            raise ValueError(f"`prediction` must be one of {PREDICTIONS}, got {prediction!r}.")
        if beta_end < beta_start:
            raise ValueError(f"`beta_end` ({beta_end}) must be >= `beta_start` ({beta_start}).")
        self.schedule = BetaSchedule.linear(num_steps, beta_start, beta_end)
        require_int(sampling_steps, "sampling_steps", 1)
        if sampling_steps > num_steps:
            raise ValueError(
                f"{sampling_steps} sampling steps exceed the schedule's {num_steps} steps."
            )
        self.guidance_weight = require_non_negative(guidance_weight, "guidance_weight")
        self.unconditional_probability = require_fraction(
            unconditional_probability, "unconditional_probability"
        )
        self.ce_weight = require_non_negative(ce_weight, "ce_weight")
        self.contrastive_weight = require_non_negative(contrastive_weight, "contrastive_weight")
        self.lr = require_positive(lr, "lr")
        self.warmup_fraction = require_fraction(warmup_fraction, "warmup_fraction")
        self.seed = require_int(seed, "seed", 0)
        self.use_prototypes = bool(use_prototypes)
        self.save_hyperparameters()

        self.unet = TrajectoryUNet(
            self.window_length,
            3,
            unet_channels,
            tuple(unet_multipliers),
            unet_res_blocks,
            tuple(attention_lengths),
            unet_dropout,
        )
        width = self.unet.embed_dim
        self.condition_net = EndpointCondition(3, width, embed_dim if use_prototypes else None)
        self.null_condition = nn.Parameter(torch.zeros(width))
        if self.use_prototypes:
            self.encoder = TrajectoryEncoder(
                self.window_length,
                3,
                embed_dim,
                encoder_layers,
                encoder_heads,
                encoder_feedforward,
                encoder_dropout,
            )
            self.prototypes = nn.Parameter(
                nn.init.xavier_uniform_(torch.empty(num_prototypes, embed_dim))
            )
        self.register_buffer("scale_low", self._scaling(scale_low, "scale_low"))
        self.register_buffer("scale_span", self._scaling(scale_span, "scale_span"))
        self.val_metrics = trajectory_metrics(prefix="val/")
        self.test_metrics = trajectory_metrics(prefix="test/")

    @staticmethod
    def _scaling(values: Sequence[float] | None, name: str) -> Tensor:
        if values is None:
            return torch.full((3,), float("nan"), dtype=torch.float64)
        tensor = torch.as_tensor(values, dtype=torch.float64).flatten()
        if tensor.numel() != 3 or not torch.isfinite(tensor).all():
            raise ValueError(f"`{name}` must hold 3 finite numbers (time, lat, lng).")
        return tensor

    def setup(self, stage: str) -> None:
        """Take the data module's scaling at every ``fit`` (its batches are scaled by it, so
        metres are right on a second data set too); refuse to validate, test or predict with a
        data module that scales differently from the stored scaling."""
        data = getattr(self.trainer, "datamodule", None)
        window = getattr(data, "window_length", self.window_length)
        if window != self.window_length:
            raise ValueError(
                f"the data module cuts windows of {window} points but this ProDiff was built "
                f"for {self.window_length}: set window_length={window}."
            )
        scaling = getattr(data, "scaling", None)
        if scaling is None:
            return
        low = torch.as_tensor(scaling.low).flatten().double().to(self.scale_low.device)
        span = torch.as_tensor(scaling.span).flatten().double().to(self.scale_span.device)
        if stage != "fit" and not torch.isnan(self.scale_low).any():
            stored = torch.cat([self.scale_low, self.scale_span])
            rtol = max(1e-6, 2 * torch.finfo(stored.dtype).eps)  # buffers cast by a precision
            if not torch.allclose(torch.cat([low, span]), stored.double(), rtol=rtol, atol=0.0):
                raise ValueError(
                    f"the data module scales windows by low {low.tolist()}, span "
                    f"{span.tolist()}, but this ProDiff was trained with low "
                    f"{self.scale_low.tolist()}, span {self.scale_span.tolist()}: its metres "
                    "would be wrong. Evaluate on a data module built like the training one, "
                    "or fit on this one first."
                )
            return
        self.scale_low.copy_(low)
        self.scale_span.copy_(span)
        self.hparams["scale_low"] = self.scale_low.tolist()
        self.hparams["scale_span"] = self.scale_span.tolist()

    # ----------------------------------------------------------------------------- pieces
    def query_prototype(self, window: Tensor) -> Tensor:
        """``p~ = softmax(cos(q, P) / sqrt(D)) P`` with ``q`` the encoder's feature of the
        endpoints-only window, computed without gradient (the prototypes keep theirs)."""
        with torch.no_grad():
            query = self.encoder(endpoints_only(window))
        return prototype_attention(query, self.prototypes)

    def condition(self, window: Tensor) -> Tensor:
        """``(B, 4 ch)`` condition from the window's two endpoints (and their prototype)."""
        prototype = self.query_prototype(window) if self.use_prototypes else None
        return self.condition_net(window[:, 0], window[:, -1], prototype)

    def prototype_losses(self, window: Tensor, generator: torch.Generator) -> dict[str, Tensor]:
        """``L_ce`` against the batch's (matched) k-means pseudo-labels and ``L_con``."""
        features = self.encoder(window)
        clusters = min(self.num_prototypes, features.shape[0])
        labels, centres = kmeans(
            features.detach(), clusters, self.hparams.kmeans_iterations, generator
        )
        if self.hparams.match_pseudo_labels:
            labels = match_clusters(centres, self.prototypes)[labels]
        return {
            "ce": prototype_cross_entropy(features, self.prototypes, labels),
            "contrastive": prototype_contrastive_loss(
                features, self.prototypes, self.hparams.margin
            ),
        }

    def _endpoint_mask(self, like: Tensor) -> Tensor:
        mask = torch.zeros(1, 1, self.window_length, dtype=torch.bool, device=like.device)
        mask[..., [0, -1]] = True
        return mask

    # ---------------------------------------------------------------------------- training
    def training_step(self, batch: dict[str, Tensor], batch_index: int) -> Tensor:
        window = batch["window"]
        check_window(window, self.window_length)
        generator = keyed_generator(self.seed, self.global_step, self.global_rank)
        size = window.shape[0]
        x0 = window.transpose(1, 2)
        steps = torch.randint(self.schedule.num_steps, (size,), generator=generator)
        noise = torch.randn(x0.shape, generator=generator, dtype=x0.dtype).to(x0.device)
        dropped = torch.rand(size, generator=generator) < self.unconditional_probability
        endpoints = self._endpoint_mask(x0)
        noise = noise.masked_fill(endpoints, 0.0)
        steps = steps.to(x0.device)
        noisy = torch.where(endpoints, x0, self.schedule.q_sample(x0, steps, noise))

        losses = self.prototype_losses(window, generator) if self.use_prototypes else {}
        condition = self.condition(window)
        null = self.null_condition.expand_as(condition)
        if self.hparams.guided_training:
            both = self.unet(
                torch.cat([noisy, noisy]), torch.cat([steps, steps]), torch.cat([condition, null])
            )
            conditional, unconditional = both.chunk(2)
            predicted = conditional + self.guidance_weight * (conditional - unconditional)
        else:
            condition = torch.where(dropped.to(x0.device)[:, None], null, condition)
            predicted = self.unet(noisy, steps, condition)
        target = noise if self.hparams.prediction == "epsilon" else x0
        losses["diffusion"] = (predicted - target)[:, :, 1:-1].abs().mean()
        loss = losses["diffusion"]
        if self.use_prototypes:
            loss = loss + self.ce_weight * losses["ce"]
            loss = loss + self.contrastive_weight * losses["contrastive"]
        logged = dict(on_step=False, on_epoch=True, batch_size=size, sync_dist=True)
        self.log("train/loss", loss, prog_bar=True, **logged)
        for name, value in losses.items():
            self.log(f"train/{name}", value, **logged)
        return loss

    # ---------------------------------------------------------------------------- sampling
    @torch.no_grad()
    def impute(
        self,
        window: Tensor,
        *,
        sampler: str | None = None,
        sampling_steps: int | None = None,
        eta: float | None = None,
        guidance_weight: float | None = None,
        samples: int = 1,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Scaled ``(B, k, 3)`` windows generated from the given windows' two endpoints (the
        interior is never read, NaN included); the endpoints come back bit for bit. Defaults
        are the module's ``sampler``, ``sampling_steps``, ``eta`` and ``guidance_weight``; draws
        come from ``generator`` (CPU). ``samples > 1`` returns the mean of that many draws per
        window (an estimate of the conditional mean, the point estimate of least squared
        error). Call ``.eval()`` first outside a Trainer."""
        check_window(window, self.window_length, interior=False)
        samples = require_int(samples, "samples", 1)
        if samples > 1:
            draws = self.impute(
                window.repeat(samples, 1, 1),
                sampler=sampler,
                sampling_steps=sampling_steps,
                eta=eta,
                guidance_weight=guidance_weight,
                generator=generator,
            )
            mean = draws.reshape(samples, *window.shape).mean(0)
            return torch.where(self._endpoint_mask(mean).transpose(1, 2), window, mean)
        sampler = self.hparams.sampler if sampler is None else sampler
        if sampler not in SAMPLERS:
            raise ValueError(f"`sampler` must be one of {SAMPLERS}, got {sampler!r}.")
        weight = self.guidance_weight if guidance_weight is None else guidance_weight
        weight = require_non_negative(weight, "guidance_weight")  # NaN would skip the guidance
        values = endpoints_only(window).transpose(1, 2)
        condition = self.condition(values.transpose(1, 2))
        null = self.null_condition.expand_as(condition)

        def conditional(x: Tensor, t: Tensor) -> Tensor:
            return self._noise(x, t, condition)

        def unconditional(x: Tensor, t: Tensor) -> Tensor:
            return self._noise(x, t, null)

        denoiser = guided(conditional, unconditional, weight) if weight > 0 else conditional
        known = self._endpoint_mask(values).expand_as(values)
        clip = self.hparams.clip_x0
        common = dict(
            clip_x0=None if clip is None else tuple(clip),
            known=known,
            values=values,
            generator=generator,
            device=values.device,
            dtype=values.dtype,
        )
        if sampler == "ddpm":
            sample = ddpm_sample(denoiser, self.schedule, tuple(values.shape), **common)
        else:
            sample = ddim_sample(
                denoiser,
                self.schedule,
                tuple(values.shape),
                self.hparams.sampling_steps if sampling_steps is None else sampling_steps,
                self.hparams.eta if eta is None else eta,
                **common,
            )
        return sample.transpose(1, 2)

    def _noise(self, x: Tensor, steps: Tensor, condition: Tensor) -> Tensor:
        """The UNet's noise estimate; an ``x0`` model's output is turned into the noise it
        implies, ``eps = (x_t - sqrt(abar_t) x0_hat) / sqrt(1 - abar_t)``."""
        output = self.unet(x, steps, condition)
        if self.hparams.prediction == "epsilon":
            return output
        abar = self.schedule.alpha_bar(steps).to(x.dtype).to(x.device)[:, None, None]
        return (x - abar.sqrt() * output) / (1 - abar).sqrt()

    def unscale(self, window: Tensor) -> Tensor:
        """Scaled windows back to (time, lat, lng) in float64 by the stored scaling."""
        if torch.isnan(self.scale_low).any():
            raise RuntimeError(
                "ProDiff has no scaling to return to degrees: pass scale_low / scale_span, or "
                "fit it with a TrajectoryDataModule (its training-split scaling is stored)."
            )
        return window.double() * self.scale_span + self.scale_low

    # -------------------------------------------------------------------------- evaluation
    def _generated(self, batch: dict[str, Tensor], batch_index: int, stage: int) -> Tensor:
        """Generated windows in degrees, on the globe: an untrained model's samples can leave
        it, so latitudes are clamped to [-90, 90] and longitudes wrapped into [-180, 180)
        (a sample that far off is scored as the gross error it is, not refused)."""
        generator = keyed_generator(self.seed, stage, batch_index, self.global_rank)
        degrees = self.unscale(self.impute(batch["window"], generator=generator))
        latitude = degrees[..., 1].clamp(-90.0, 90.0)
        longitude = torch.remainder(degrees[..., 2] + 180.0, 360.0) - 180.0
        return torch.stack([degrees[..., 0], latitude, longitude], dim=-1)

    def validation_step(self, batch: dict[str, Tensor], batch_index: int) -> None:
        self.val_metrics.update(self._generated(batch, batch_index, _VALIDATION), batch["raw"])

    def test_step(self, batch: dict[str, Tensor], batch_index: int) -> None:
        self.test_metrics.update(self._generated(batch, batch_index, _TEST), batch["raw"])

    def _log_metrics(self, metrics) -> None:
        self.log_dict({k: v.float() for k, v in metrics.compute().items()})
        metrics.reset()

    def on_validation_epoch_end(self) -> None:
        self._log_metrics(self.val_metrics)

    def on_test_epoch_end(self) -> None:
        self._log_metrics(self.test_metrics)

    def predict_step(self, batch: dict[str, Tensor], batch_index: int) -> Tensor:
        """Generated windows in (time, lat, lng) degrees, float64."""
        return self._generated(batch, batch_index, _PREDICT)

    def configure_optimizers(self) -> dict[str, Any]:
        optimizer = torch.optim.AdamW(
            self.parameters(), lr=self.lr, weight_decay=self.hparams.weight_decay
        )
        return warmup_cosine_config(
            optimizer, self.trainer, self.warmup_fraction, self.hparams.schedule_steps
        )
