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
is ``L = L_diff + w_ce L_ce + w_con L_con`` (``w_ce = 0.1``, ``w_con = 1``; ``L_diff`` is
:func:`~lightning_info.methods.prodiff.functional.interior_l1_loss`); AdamW, ``lr`` 2e-4 with a
warmup and cosine decay over the run.

**Guidance.** Classifier-free guidance ``eps = eps_c + w (eps_c - eps_u)`` (``w = 2``), the
unconditional branch being the UNet with a learned null condition (:class:`GuidanceOptions`).
By default (``guided_training``, the reference's scheme) the training loss is taken on the
guided output itself, both branches in one doubled batch, so sampling uses exactly what was
trained; with ``guided_training=False`` training is standard classifier-free (the condition
dropped to the null one with probability ``unconditional_probability``) and the guidance acts
at sampling only.

**Prediction.** ``DiffusionOptions(prediction="epsilon")`` (the paper) trains the UNet's output
against the noise; ``"x0"`` (the reference code's ``predict_epsilon=False``) against the clean
window, the noise the sampler needs being ``(x_t - sqrt(abar_t) x0_hat) / sqrt(1 - abar_t)``
(:func:`~lightning_info.methods.prodiff.functional.epsilon_from_x0`).

**Sampling.** DDPM over all ``T`` steps or DDIM over ``steps`` (``eta``, :class:`SamplingOptions`)
from the shared :mod:`lightning_info.diffusion.discrete` samplers, both endpoints re-pinned after
every step, so they come back bit for bit. With ``use_prototypes=False`` (the paper's ablation)
there is no encoder, no prototype loss and the condition is the endpoints' alone.

**Networks.** The denoiser, the condition network and the encoder are constructor arguments
(``None`` builds the paper's); the model reads the window length and the widths from them.

All randomness of a training step (steps, noise, condition dropout, k-means seeding) comes from
``keyed_generator(seed, global_step, rank)``, so a resumed run repeats it. Validation and test
sample with DDIM (seeded per batch), unscale with the data module's training-split scaling
(stored in the module and its checkpoints) and log ``{val,test}/mtd``, ``maxtd``,
``time_mae``, ``tc_at_{t}km`` (the score ``tc@{t}km`` of :func:`trajectory_metrics` through
:func:`~lightning_info.core.logging.metric_key`) and ``tc_mean``, distances in metres.

**Host reads.** A training step checks the window's shape and dtype (metadata); with
``validate_args=True`` also that the windows and the encoder's features are finite (host reads
of values, a device synchronisation each on an accelerator). The k-means runs on the device
without reading a value back. The one read left, with ``match_pseudo_labels`` (the default), is
the ``(m, K)`` centre-prototype cost matrix that SciPy's Hungarian method matches on the host
(:func:`~lightning_info.methods.prodiff.functional.match_clusters`): the step's labels depend on
it. ``match_pseudo_labels=False`` (the reference's arbitrary cluster numbers) reads nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, get_args

import lightning.pytorch as pl
import numpy as np
import torch
from torch import Tensor, nn

from lightning_info.core.logging import metric_key
from lightning_info.core.options import AdamWOptions
from lightning_info.core.sampling import keyed_generator
from lightning_info.core.validation import (
    all_finite,
    require_bool,
    require_choice,
    require_finite,
    require_fraction,
    require_int,
    require_non_negative,
    require_real_floating,
)
from lightning_info.diffusion.discrete import BetaSchedule, ddim_sample, ddpm_sample, guided
from lightning_info.methods.prodiff.denoiser import EndpointCondition, TrajectoryUNet
from lightning_info.methods.prodiff.encoder import DEFAULT_EMBED_DIM, TrajectoryEncoder
from lightning_info.methods.prodiff.functional import (
    classifier_free_guidance,
    endpoints_only,
    epsilon_from_x0,
    interior_l1_loss,
    kmeans,
    match_clusters,
    prototype_contrastive_loss,
    prototype_cross_entropy,
)
from lightning_info.methods.prodiff.metrics import _PrototypeUsage, trajectory_metrics
from lightning_info.methods.prodiff.prototypes import prototype_weights

__all__ = [
    "PREDICTIONS",
    "PRODIFF_OPTIMIZER",
    "SAMPLERS",
    "DiffusionOptions",
    "GuidanceOptions",
    "ProDiff",
    "PrototypeOptions",
    "SamplingOptions",
    "WindowScaling",
    "check_window",
]

Sampler = Literal["ddim", "ddpm"]
Prediction = Literal["epsilon", "x0"]
SAMPLERS: tuple[str, ...] = get_args(Sampler)
PREDICTIONS: tuple[str, ...] = get_args(Prediction)
DEFAULT_WINDOW_LENGTH = 16
#: ProDiff's AdamW: lr 2e-4, weight decay 0.01, a warmup over the first 10% of the steps, then
#: a cosine decay.
PRODIFF_OPTIMIZER = AdamWOptions(lr=2e-4, weight_decay=0.01, warmup_fraction=0.1)
_VALIDATION, _TEST, _PREDICT = 1, 2, 3  # generator keys of the evaluation stages
_DIAGNOSTICS = 4  # generator key of prototype_gradient_norms' default draws


@dataclass(frozen=True)
class DiffusionOptions:
    """The linear beta schedule ``linspace(beta_start, beta_end, num_steps)`` (the paper's
    500 steps, 1e-4 to 0.05) and what the UNet predicts: ``"epsilon"`` (the paper), the noise,
    or ``"x0"`` (the reference code's ``predict_epsilon=False``), the clean window."""

    num_steps: int = 500
    beta_start: float = 1e-4
    beta_end: float = 0.05
    prediction: Prediction = "epsilon"

    def __post_init__(self) -> None:
        require_int(self.num_steps, "diffusion.num_steps", 1)
        require_fraction(self.beta_start, "diffusion.beta_start", inclusive_zero=False)
        require_fraction(self.beta_end, "diffusion.beta_end", inclusive_zero=False)
        if self.beta_end < self.beta_start:
            raise ValueError(
                f"`diffusion.beta_end` ({self.beta_end}) must be >= `diffusion.beta_start` "
                f"({self.beta_start})."
            )
        require_choice(self.prediction, "diffusion.prediction", PREDICTIONS)


@dataclass(frozen=True)
class GuidanceOptions:
    """Classifier-free guidance ``eps = eps_c + weight (eps_c - eps_u)`` (0: conditional only).

    ``guided_training`` trains the guided output itself (the reference's scheme; two UNet
    passes a step, in one doubled batch); ``False``: standard classifier-free training, the
    condition dropped to the null one with probability ``unconditional_probability``, the
    guidance applied at sampling only.
    """

    weight: float = 2.0
    guided_training: bool = True
    unconditional_probability: float = 0.1

    def __post_init__(self) -> None:
        require_non_negative(self.weight, "guidance.weight")
        require_fraction(self.unconditional_probability, "guidance.unconditional_probability")


@dataclass(frozen=True)
class PrototypeOptions:
    """``K = num_prototypes`` learnable prototypes and their losses: ``L_ce`` weighted by
    ``ce_weight`` against the batch's k-means pseudo-labels (``kmeans_iterations`` Lloyd
    iterations; ``match_pseudo_labels`` labels each cluster with its matched prototype,
    ``False`` keeps the reference's arbitrary cluster numbers) and ``L_con`` weighted by
    ``contrastive_weight`` with ``margin`` (see
    :mod:`~lightning_info.methods.prodiff.functional`). ``attention_temperature`` ``tau`` of
    the endpoint query's ``softmax(cos(q, P) / tau)``: ``None`` is the paper's ``sqrt(D)``,
    under which every weight stays within a factor ``e^(2 / sqrt(D))`` of ``1 / K`` (nearly
    uniform); a smaller value lets a query pick its prototypes."""

    num_prototypes: int = 20
    ce_weight: float = 0.1
    contrastive_weight: float = 1.0
    margin: float = 1.0
    kmeans_iterations: int = 20
    match_pseudo_labels: bool = True
    attention_temperature: float | None = None

    def __post_init__(self) -> None:
        require_bool(self.match_pseudo_labels, "prototype_options.match_pseudo_labels")
        require_non_negative(self.margin, "prototype_options.margin")
        require_int(self.num_prototypes, "prototype_options.num_prototypes", 1)
        require_non_negative(self.ce_weight, "prototype_options.ce_weight")
        require_non_negative(self.contrastive_weight, "prototype_options.contrastive_weight")
        require_finite(self.margin, "prototype_options.margin")
        require_int(self.kmeans_iterations, "prototype_options.kmeans_iterations", 0)
        if self.attention_temperature is not None:
            tau = require_finite(
                self.attention_temperature, "prototype_options.attention_temperature"
            )
            if tau <= 0:
                raise ValueError(
                    f"`prototype_options.attention_temperature` must be > 0 (or None: sqrt(D)), "
                    f"got {self.attention_temperature}."
                )


@dataclass(frozen=True)
class SamplingOptions:
    """How validation, test and :meth:`ProDiff.impute` sample: DDPM over all ``T`` steps or
    DDIM over ``steps`` with ``eta`` in [0, 1] (0: deterministic); each step's clean estimate
    clamped to ``clip_x0 = (low, high)`` in scaled units (the training windows span
    ``[0, 1]``; ``None``: no clamp), see :mod:`lightning_info.diffusion.discrete`."""

    sampler: Sampler = "ddim"
    steps: int = 50
    eta: float = 0.0
    clip_x0: tuple[float, float] | None = (-1.0, 2.0)

    def __post_init__(self) -> None:
        require_choice(self.sampler, "sampling.sampler", SAMPLERS)
        require_int(self.steps, "sampling.steps", 1)
        if require_non_negative(self.eta, "sampling.eta") > 1:
            raise ValueError(f"`sampling.eta` must lie in [0, 1], got {self.eta}.")
        if self.clip_x0 is not None:
            clip = tuple(require_finite(v, "sampling.clip_x0") for v in self.clip_x0)
            if len(clip) != 2 or not clip[0] < clip[1]:
                raise ValueError(
                    f"`sampling.clip_x0` must be (low, high) with low < high, got {self.clip_x0}."
                )
            object.__setattr__(self, "clip_x0", clip)


@dataclass(frozen=True)
class WindowScaling:
    """The per-channel min-max scaling of the windows: ``scaled = (x - low) / span`` for the
    channels (time, lat, lng); a :class:`TrajectoryDataModule`'s ``scaling`` has the same
    ``low`` and ``span``."""

    low: tuple[float, float, float]
    span: tuple[float, float, float]

    def __post_init__(self) -> None:
        for name in ("low", "span"):
            items = getattr(self, name)
            listed = items.tolist() if hasattr(items, "tolist") else items
            if isinstance(items, str) or (
                isinstance(listed, (list, tuple))
                and any(isinstance(v, (bool, np.bool_, str)) for v in listed)
            ):
                raise TypeError(
                    f"`scaling.{name}` must hold 3 numbers (time, lat, lng), got {items!r}."
                )
            given = torch.as_tensor(items, dtype=torch.float64)
            values = tuple(given.flatten().tolist())
            if len(values) != 3 or not all(math.isfinite(v) for v in values):
                raise ValueError(
                    f"`scaling.{name}` must hold 3 finite numbers (time, lat, lng), got "
                    f"{getattr(self, name)}."
                )
            object.__setattr__(self, name, values)
        if min(self.span) <= 0:
            raise ValueError(f"`scaling.span` must be > 0 in every channel, got {self.span}.")


# checkpoints hold the options in their hyperparameters; ``weights_only`` loading needs them
torch.serialization.add_safe_globals(
    [
        AdamWOptions,
        DiffusionOptions,
        GuidanceOptions,
        PrototypeOptions,
        SamplingOptions,
        WindowScaling,
    ]
)


def check_window(
    window: Tensor, length: int, *, interior: bool = True, validate_args: bool = True
) -> None:
    """Refuse what ProDiff would silently learn or condition on nonsense from: a shape other
    than ``(B, length, 3)``, or an integer dtype, and with ``validate_args`` NaN / infinity in
    the endpoints (and, with ``interior``, in the rest of the window: one host read)."""
    length = require_int(length, "length", 3)
    require_real_floating(window, "window")
    if window.ndim != 3 or window.shape[1:] != (length, 3) or window.shape[0] == 0:
        raise ValueError(
            f"ProDiff takes (B >= 1, {length}, 3) windows of scaled (time, lat, lng), got "
            f"{tuple(window.shape)}: build the model with this window_length or cut windows of "
            f"{length} points."
        )
    if not validate_args:
        return
    checked = window if interior else window[:, [0, -1]]
    if not all_finite(checked):
        what = "windows" if interior else "endpoints"
        raise ValueError(f"the {what} hold NaN or infinity: drop or repair those points.")


def _network_length(window_length: int | None, networks: dict[str, int | None]) -> int:
    """The window length: the given one, else the networks', else the default; every network
    that states a length must agree with it."""
    stated = {name: length for name, length in networks.items() if length is not None}
    if window_length is None:
        window_length = next(iter(stated.values()), DEFAULT_WINDOW_LENGTH)
    window_length = require_int(window_length, "window_length", 3)
    for name, length in stated.items():
        if length != window_length:
            raise ValueError(
                f"the {name} is built for windows of {length} points but window_length is "
                f"{window_length}: build it with this length or leave window_length unset."
            )
    return window_length


class ProDiff(pl.LightningModule):
    """Prototype-guided endpoint-conditioned trajectory diffusion (see the module docstring).

    Args:
        window_length: ``k``, points per window (two endpoints and ``k - 2`` to generate);
            ``None``: the given denoiser's (or encoder's) ``length``, else 16.
        denoiser: the noise predictor ``denoiser(x_t (B, 3, k), t (B,), condition (B, E)) ->
            (B, 3, k)`` with an ``embed_dim`` attribute ``E``; ``None`` builds the paper's
            :class:`~lightning_info.methods.prodiff.denoiser.TrajectoryUNet` (``k``, 128
            channels x (1, 2, 2, 2), 2 residual blocks, attention at length 16, dropout 0.1).
        condition: ``condition(start (B, 3), end (B, 3), prototype (B, D) | None) -> (B, E)``;
            ``None`` builds :class:`~lightning_info.methods.prodiff.denoiser.EndpointCondition`
            (with a prototype branch when ``use_prototypes``).
        encoder: the prototype encoder, windows ``(B, k, 3)`` to features ``(B, D)`` with an
            ``embed_dim`` attribute ``D``; ``None`` builds the paper's
            :class:`~lightning_info.methods.prodiff.encoder.TrajectoryEncoder` (``D`` = 512,
            4 layers of 8 heads, feed-forward 256, dropout 0.1) when ``use_prototypes``.
        use_prototypes: ProDiff (``True``) or the paper's no-prototype ablation (``False``: no
            encoder -- pass ``encoder=None`` --, no prototypes, no prototype losses).
        diffusion: the beta schedule and the prediction target, :class:`DiffusionOptions`.
        guidance: classifier-free guidance, :class:`GuidanceOptions`.
        prototype_options: the prototypes' number and losses, :class:`PrototypeOptions`.
        sampling: how validation, test and :meth:`impute` sample, :class:`SamplingOptions`.
        optimizer: AdamW and its warmup-cosine schedule
            (:class:`~lightning_info.core.options.AdamWOptions`; :data:`PRODIFF_OPTIMIZER`: lr
            2e-4, weight decay 0.01, 10% warmup -- ``dataclasses.replace`` it to change one
            field).
        scaling: the windows' min-max scaling (``None``: taken from the data module's
            ``scaling`` at ``setup``), needed to score in metres, :class:`WindowScaling`.
        seed: keys every random draw.
        validate_args: check that every training window and the encoder's features are
            finite (module docstring, "Host reads"); default ``False``. Validation, test and
            :meth:`impute` always check their windows.

    Networks are built in the order ``denoiser``, ``condition``, ``encoder``, then the
    prototypes; the module's hyperparameters leave the networks out
    (``load_from_checkpoint`` needs them passed again when they are not the defaults).
    """

    def __init__(
        self,
        window_length: int | None = None,
        denoiser: nn.Module | None = None,
        condition: nn.Module | None = None,
        encoder: nn.Module | None = None,
        use_prototypes: bool = True,
        diffusion: DiffusionOptions = DiffusionOptions(),
        guidance: GuidanceOptions = GuidanceOptions(),
        prototype_options: PrototypeOptions = PrototypeOptions(),
        sampling: SamplingOptions = SamplingOptions(),
        optimizer: AdamWOptions = PRODIFF_OPTIMIZER,
        scaling: WindowScaling | None = None,
        seed: int = 0,
        validate_args: bool = False,
    ) -> None:
        super().__init__()
        self.use_prototypes = bool(use_prototypes)
        if encoder is not None and not self.use_prototypes:
            raise ValueError(
                "the no-prototype ablation (use_prototypes=False) has no encoder: pass "
                "encoder=None, or use_prototypes=True to use it."
            )
        self.window_length = _network_length(
            window_length,
            {
                "denoiser": getattr(denoiser, "length", None),
                "encoder": getattr(encoder, "window_length", None),
            },
        )
        for name, value, kind in (
            ("diffusion", diffusion, DiffusionOptions),
            ("guidance", guidance, GuidanceOptions),
            ("prototype_options", prototype_options, PrototypeOptions),
            ("sampling", sampling, SamplingOptions),
            ("optimizer", optimizer, AdamWOptions),
        ):
            if not isinstance(value, kind):
                raise TypeError(f"`{name}` must be a {kind.__name__}, got {value!r}.")
        if scaling is not None and not isinstance(scaling, WindowScaling):
            raise TypeError(f"`scaling` must be a WindowScaling or None, got {scaling!r}.")
        if sampling.steps > diffusion.num_steps:
            raise ValueError(
                f"{sampling.steps} sampling steps exceed the schedule's {diffusion.num_steps} "
                "steps."
            )
        self.diffusion, self.guidance, self.sampling = diffusion, guidance, sampling
        self.prototype_options, self.optimizer_options = prototype_options, optimizer
        self.schedule = BetaSchedule.linear(
            diffusion.num_steps, diffusion.beta_start, diffusion.beta_end
        )
        self.seed = require_int(seed, "seed", 0)
        self.validate_args = require_bool(validate_args, "validate_args")
        # recorded as resolved (also when read from the networks): loggers compare it with the
        # data module's window_length
        window_length = self.window_length
        self.save_hyperparameters(ignore=["denoiser", "condition", "encoder"])

        self.unet = TrajectoryUNet(self.window_length) if denoiser is None else denoiser
        width = getattr(self.unet, "embed_dim", None)
        if not isinstance(width, int):
            raise TypeError(
                "the denoiser must have an int `embed_dim`, the width of the condition it adds "
                "to its step embedding (TrajectoryUNet has one)."
            )
        if condition is None:
            feature = getattr(encoder, "embed_dim", DEFAULT_EMBED_DIM)
            condition = EndpointCondition(3, width, feature if self.use_prototypes else None)
        elif isinstance(condition, EndpointCondition) and (
            (condition.prototype is None) == self.use_prototypes
        ):
            raise ValueError(
                "the condition's prototype branch must match use_prototypes: build "
                "EndpointCondition(3, width, prototype_dim) with prototype_dim=None exactly "
                "when use_prototypes=False."
            )
        self.condition_net = condition
        self.null_condition = nn.Parameter(torch.zeros(width))
        if self.use_prototypes:
            self.encoder = TrajectoryEncoder(self.window_length) if encoder is None else encoder
            feature = getattr(self.encoder, "embed_dim", None)
            if not isinstance(feature, int):
                raise TypeError(
                    "the encoder must have an int `embed_dim`, the prototypes' dimension "
                    "(TrajectoryEncoder has one)."
                )
            branch = getattr(self.condition_net, "prototype", None)
            if isinstance(branch, nn.Sequential) and branch[0].in_features != feature:
                raise ValueError(
                    f"the condition's prototype branch takes {branch[0].in_features} features "
                    f"but the encoder gives {feature}: build EndpointCondition(3, width, "
                    f"{feature})."
                )
            self.prototypes = nn.Parameter(
                nn.init.xavier_uniform_(torch.empty(prototype_options.num_prototypes, feature))
            )
        self.register_buffer("scale_low", self._scaling(scaling, "low"))
        self.register_buffer("scale_span", self._scaling(scaling, "span"))
        self.val_metrics = trajectory_metrics(prefix="val/")
        self.test_metrics = trajectory_metrics(prefix="test/")
        if self.use_prototypes:  # diagnostics: how the endpoint queries use the prototypes
            self.val_prototype_usage = _PrototypeUsage(prototype_options.num_prototypes)
            self.test_prototype_usage = _PrototypeUsage(prototype_options.num_prototypes)

    @staticmethod
    def _scaling(scaling: WindowScaling | None, name: str) -> Tensor:
        if scaling is None:
            return torch.full((3,), float("nan"), dtype=torch.float64)
        return torch.tensor(getattr(scaling, name), dtype=torch.float64)

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
        self.hparams["scaling"] = WindowScaling(
            tuple(self.scale_low.tolist()), tuple(self.scale_span.tolist())
        )

    # ----------------------------------------------------------------------------- pieces
    def prototype_weights(self, window: Tensor) -> Tensor:
        """``(B, K)`` attention ``softmax(cos(q, P) / tau)`` (``tau``: ``prototype_options.
        attention_temperature``, ``None``: ``sqrt(D)``) with ``q`` the encoder's feature of the
        endpoints-only window, computed without gradient (the prototypes keep theirs)."""
        if not self.use_prototypes:
            raise RuntimeError("the no-prototype ablation (use_prototypes=False) has none.")
        with torch.no_grad():
            query = self.encoder(endpoints_only(window))
        return prototype_weights(
            query, self.prototypes, self.prototype_options.attention_temperature
        )

    def query_prototype(self, window: Tensor) -> Tensor:
        """``p~ = softmax(cos(q, P) / tau) P``, the weights of :meth:`prototype_weights`."""
        return self.prototype_weights(window) @ self.prototypes

    def condition(self, window: Tensor) -> Tensor:
        """``(B, 4 ch)`` condition from the window's two endpoints (and their prototype)."""
        prototype = self.query_prototype(window) if self.use_prototypes else None
        return self.condition_net(window[:, 0], window[:, -1], prototype)

    def prototype_losses(self, window: Tensor, generator: torch.Generator) -> dict[str, Tensor]:
        """``L_ce`` against the batch's (matched) k-means pseudo-labels and ``L_con``."""
        options = self.prototype_options
        features = self.encoder(window)
        clusters = min(options.num_prototypes, features.shape[0])
        labels, centres = kmeans(
            features.detach(),
            clusters,
            options.kmeans_iterations,
            generator,
            validate_args=self.validate_args,
        )
        if options.match_pseudo_labels:
            labels = match_clusters(centres, self.prototypes)[labels]
        return {
            "ce": prototype_cross_entropy(features, self.prototypes, labels),
            "contrastive": prototype_contrastive_loss(features, self.prototypes, options.margin),
        }

    def _endpoint_mask(self, like: Tensor) -> Tensor:
        mask = torch.zeros(1, 1, self.window_length, dtype=torch.bool, device=like.device)
        mask[..., [0, -1]] = True
        return mask

    # ---------------------------------------------------------------------------- training
    def training_step(self, batch: dict[str, Tensor], batch_index: int) -> Tensor:
        window = batch["window"]
        check_window(window, self.window_length, validate_args=self.validate_args)
        generator = keyed_generator(self.seed, self.global_step, self.global_rank)
        losses = self.losses(window, generator)
        loss = losses["diffusion"]
        if self.use_prototypes:
            loss = loss + self.prototype_options.ce_weight * losses["ce"]
            loss = loss + self.prototype_options.contrastive_weight * losses["contrastive"]
        logged = dict(on_step=False, on_epoch=True, batch_size=window.shape[0], sync_dist=True)
        self.log("train/loss", loss, prog_bar=True, **logged)
        for name, value in losses.items():
            self.log(f"train/{name}", value, **logged)
        return loss

    def losses(self, window: Tensor, generator: torch.Generator) -> dict[str, Tensor]:
        """The unweighted losses of one training step on scaled windows ``(B, k, 3)``:
        ``diffusion`` and, with prototypes, ``ce`` and ``contrastive``; every draw from
        ``generator``."""
        size = window.shape[0]
        x0 = window.transpose(1, 2)
        steps = torch.randint(self.schedule.num_steps, (size,), generator=generator)
        noise = torch.randn(x0.shape, generator=generator, dtype=x0.dtype).to(x0.device)
        dropped = torch.rand(size, generator=generator) < self.guidance.unconditional_probability
        endpoints = self._endpoint_mask(x0)
        noise = noise.masked_fill(endpoints, 0.0)
        steps = steps.to(x0.device)
        noisy = torch.where(endpoints, x0, self.schedule.q_sample(x0, steps, noise))

        losses = self.prototype_losses(window, generator) if self.use_prototypes else {}
        condition = self.condition(window)
        null = self.null_condition.expand_as(condition)
        if self.guidance.guided_training:
            both = self.unet(
                torch.cat([noisy, noisy]), torch.cat([steps, steps]), torch.cat([condition, null])
            )
            conditional, unconditional = both.chunk(2)
            predicted = classifier_free_guidance(conditional, unconditional, self.guidance.weight)
        else:
            condition = torch.where(dropped.to(x0.device)[:, None], null, condition)
            predicted = self.unet(noisy, steps, condition)
        target = noise if self.diffusion.prediction == "epsilon" else x0
        losses["diffusion"] = interior_l1_loss(predicted, target)
        return losses

    def prototype_gradient_norms(
        self, window: Tensor, generator: torch.Generator | None = None
    ) -> dict[str, float]:
        """Diagnostics: the norm of the gradient each weighted loss term of a training step on
        ``window`` sends to the prototypes (``diffusion``, through the endpoint query's
        mixture; ``contrastive``; ``ce``, zero by construction: that loss detaches them) and
        of their sum (``total``), plus ``encoder_total``, the sum's gradient norm over the
        encoder's weights. Nothing is updated and the global random state is left as it was (so a
        run that calls it trains as one that does not); the module's mode is kept (dropout
        acts in training mode)."""
        if not self.use_prototypes:
            raise RuntimeError("the no-prototype ablation (use_prototypes=False) has none.")
        check_window(window, self.window_length)
        generator = keyed_generator(self.seed, _DIAGNOSTICS) if generator is None else generator
        with torch.random.fork_rng(devices=[]):  # dropout's draws leave training's stream alone
            losses = self.losses(window, generator)
        options = self.prototype_options
        weighted = {
            "diffusion": losses["diffusion"],
            "contrastive": options.contrastive_weight * losses["contrastive"],
            "ce": options.ce_weight * losses["ce"],
        }
        norms = {}
        for name, value in weighted.items():
            (gradient,) = torch.autograd.grad(
                value, self.prototypes, retain_graph=True, allow_unused=True
            )
            norms[name] = 0.0 if gradient is None else float(gradient.norm())
        total = sum(weighted.values())
        encoder = [p for p in self.encoder.parameters() if p.requires_grad]
        gradients = torch.autograd.grad(total, [self.prototypes, *encoder], allow_unused=True)
        norms["total"] = float(gradients[0].norm())
        squares = sum(float(g.pow(2).sum()) for g in gradients[1:] if g is not None)
        norms["encoder_total"] = squares**0.5
        return norms

    def on_after_backward(self) -> None:
        """Log the gradient norms reaching the prototypes and the encoder (before clipping),
        the epoch's mean: ``train/prototype_grad_norm``, ``train/encoder_grad_norm``."""
        if not self.use_prototypes:
            return
        gradient = self.prototypes.grad
        logged = dict(on_step=False, on_epoch=True, sync_dist=True)
        norm = torch.zeros(()) if gradient is None else gradient.detach().norm()
        self.log("train/prototype_grad_norm", norm.float(), **logged)
        squares = [
            p.grad.detach().pow(2).sum() for p in self.encoder.parameters() if p.grad is not None
        ]
        encoder = torch.stack(squares).sum().sqrt() if squares else torch.zeros(())
        self.log("train/encoder_grad_norm", encoder.float(), **logged)

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
        are the module's ``sampling`` (``sampler``, ``steps``, ``eta``) and ``guidance.weight``;
        draws come from ``generator`` (CPU). ``samples > 1`` returns the mean of that many draws
        per window (an estimate of the conditional mean, the point estimate of least squared
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
        sampler = require_choice(
            self.sampling.sampler if sampler is None else sampler, "sampler", SAMPLERS
        )
        weight = self.guidance.weight if guidance_weight is None else guidance_weight
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
        common = dict(
            clip_x0=self.sampling.clip_x0,
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
                self.sampling.steps if sampling_steps is None else sampling_steps,
                self.sampling.eta if eta is None else eta,
                **common,
            )
        return sample.transpose(1, 2)

    def _noise(self, x: Tensor, steps: Tensor, condition: Tensor) -> Tensor:
        """The UNet's noise estimate; an ``x0`` model's output is turned into the noise it
        implies, ``eps = (x_t - sqrt(abar_t) x0_hat) / sqrt(1 - abar_t)``."""
        output = self.unet(x, steps, condition)
        if self.diffusion.prediction == "epsilon":
            return output
        abar = self.schedule.alpha_bar(steps).to(x.dtype).to(x.device)[:, None, None]
        return epsilon_from_x0(x, output, abar)

    def unscale(self, window: Tensor) -> Tensor:
        """Scaled windows back to (time, lat, lng) in float64 by the stored scaling."""
        if torch.isnan(self.scale_low).any():
            raise RuntimeError(
                "ProDiff has no scaling to return to degrees: pass scaling=WindowScaling(low, "
                "span), or fit it with a TrajectoryDataModule (its training-split scaling is "
                "stored)."
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
        if self.use_prototypes:
            self.val_prototype_usage.update(self.prototype_weights(batch["window"]))

    def test_step(self, batch: dict[str, Tensor], batch_index: int) -> None:
        self.test_metrics.update(self._generated(batch, batch_index, _TEST), batch["raw"])
        if self.use_prototypes:
            self.test_prototype_usage.update(self.prototype_weights(batch["window"]))

    def _log_metrics(self, metrics, usage: _PrototypeUsage | None, stage: str) -> None:
        """The scores, and with prototypes their usage as ``{stage}/prototype_{entropy,
        effective,sample_effective,hard_effective,max_weight}``."""
        self.log_dict({metric_key(k): v.float() for k, v in metrics.compute().items()})
        metrics.reset()
        if usage is not None:
            values = usage.compute()
            self.log_dict({f"{stage}/prototype_{k}": v.float() for k, v in values.items()})
            usage.reset()

    def on_validation_epoch_end(self) -> None:
        usage = self.val_prototype_usage if self.use_prototypes else None
        self._log_metrics(self.val_metrics, usage, "val")

    def on_test_epoch_end(self) -> None:
        usage = self.test_prototype_usage if self.use_prototypes else None
        self._log_metrics(self.test_metrics, usage, "test")

    def predict_step(self, batch: dict[str, Tensor], batch_index: int) -> Tensor:
        """Generated windows in (time, lat, lng) degrees, float64."""
        return self._generated(batch, batch_index, _PREDICT)

    def configure_optimizers(self) -> Any:
        return self.optimizer_options.configure(self.parameters(), self.trainer)
