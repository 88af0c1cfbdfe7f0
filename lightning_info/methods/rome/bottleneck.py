"""Variational information bottleneck as a plug-in for any LightningModule with an encoder.

The deep variational information bottleneck (Alemi et al., "Deep Variational Information
Bottleneck", ICLR 2017, eq. 7) trains a stochastic encoder ``p(z | x) = N(mu(x), diag sigma(x)^2)``
with the objective

    L = distortion + beta_t * rate,    rate = 1/B * sum_b KL(p(z | x_b) || N(0, I)),

where the distortion is the host's own loss computed on ``z`` and the rate upper-bounds
``I(X; Z)``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from lightning_info.core.schedules import Schedule, as_schedule
from lightning_info.core.validation import (
    require_bool,
    require_int,
    require_non_negative,
    require_positive,
)
from lightning_info.measures.mutual_information import gaussian_kl_standard_normal

_SEED_RANGE = 2**62


class GaussianBottleneck(nn.Module):
    """Stochastic head ``h (..., d_in) -> z (..., k)``, ``z = mu + sigma * eps``, ``eps ~ N(0, I)``.

        mu = W_mu h + b_mu,    sigma = softplus(W_s h + b_s) + min_std

    In training mode ``z`` is the reparameterised sample (Kingma & Welling, ICLR 2014); in eval
    mode it is ``mu``, so evaluation is deterministic. After each call ``self.mu`` and
    ``self.log_var`` hold the (detached) parameters of the last batch; :meth:`encode` returns them
    attached to the graph, and :meth:`kl` gives ``KL(N(mu, sigma^2) || N(0, I))`` per sample.

    The noise of the ``n``-th training call is drawn from a generator seeded with
    ``(seed, n, noise_stream)``, and ``(seed, n)`` is saved in the ``state_dict``, so a run
    resumed from a checkpoint draws the same noise as an uninterrupted one, whatever the global RNG.
    ``seed=None`` takes the seed from the global torch RNG at construction.

    Args:
        in_features: ``d_in``.
        latent_dim: ``k``.
        min_std: floor added to ``sigma`` (> 0), keeping ``log sigma^2`` finite.
        seed: base seed of the noise, or ``None``.
    """

    def __init__(
        self, in_features: int, latent_dim: int, min_std: float = 1e-4, seed: int | None = None
    ) -> None:
        super().__init__()
        require_int(in_features, "in_features", 1)
        require_int(latent_dim, "latent_dim", 1)
        self.min_std = require_positive(min_std, "min_std")
        if seed is None:
            seed = int(torch.randint(_SEED_RANGE, ()))
        self.seed = require_int(seed, "seed", 0)
        self.draws = 0
        # Separates the noise of parallel replicas; the mixin sets it to the global rank.
        self.noise_stream = 0
        self.mean = nn.Linear(in_features, latent_dim)
        self.raw_std = nn.Linear(in_features, latent_dim)
        self.mu: Tensor | None = None
        self.log_var: Tensor | None = None

    def encode(self, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Return ``(z, mu, log_var)``, all attached to the graph."""
        if not isinstance(h, Tensor) or h.ndim < 1:
            raise TypeError(
                "GaussianBottleneck needs a feature tensor (..., in_features), got "
                f"{type(h).__name__}{tuple(h.shape) if isinstance(h, Tensor) else ''}."
            )
        if h.shape[-1] != self.mean.in_features:
            raise ValueError(
                f"GaussianBottleneck expects {self.mean.in_features} input features, got "
                f"shape {tuple(h.shape)}; set the input size to the encoder's output size."
            )
        if h.dtype != self.mean.weight.dtype and not torch.is_autocast_enabled(h.device.type):
            raise TypeError(
                f"GaussianBottleneck's weights are {self.mean.weight.dtype} but the features have "
                f"dtype {h.dtype}; pass `h.to({self.mean.weight.dtype})` or convert the module."
            )
        mu = self.mean(h)
        sigma = F.softplus(self.raw_std(h)) + self.min_std
        log_var = 2 * sigma.log()
        self.mu, self.log_var = mu.detach(), log_var.detach()
        if not self.training:
            return mu, mu, log_var
        return mu + sigma * self._noise(mu), mu, log_var

    def forward(self, h: Tensor) -> Tensor:
        return self.encode(h)[0]

    def kl(self) -> Tensor:
        """Per-sample ``KL(N(mu, sigma^2) || N(0, I))`` of the last call (detached)."""
        if self.mu is None or self.log_var is None:
            raise RuntimeError("GaussianBottleneck.kl() needs a forward call first.")
        return gaussian_kl_standard_normal(self.mu, self.log_var)

    def _noise(self, like: Tensor) -> Tensor:
        # A fixed odd-multiplier mix of the three integers; the generator scrambles the seed.
        mixed = self.seed * 0x9E3779B97F4A7C15 + self.draws * 0xBF58476D1CE4E5B9 + self.noise_stream
        generator = torch.Generator(device=like.device)
        generator.manual_seed(mixed % _SEED_RANGE)
        self.draws += 1
        return torch.randn(like.shape, generator=generator, device=like.device, dtype=like.dtype)

    def get_extra_state(self) -> Tensor:
        return torch.tensor([self.seed, self.draws], dtype=torch.int64)

    def set_extra_state(self, state: Tensor) -> None:
        """Restore ``(seed, draws)``: two non-negative integers, as :meth:`get_extra_state`
        saves them."""
        if (
            not isinstance(state, Tensor)
            or state.shape != (2,)
            or state.is_floating_point()
            or state.is_complex()
            or state.dtype == torch.bool
        ):
            raise ValueError(
                "GaussianBottleneck's saved state must be an integer tensor [seed, draws], got "
                f"{state!r}; load a state_dict saved by a GaussianBottleneck."
            )
        seed, draws = (int(v) for v in state.tolist())
        if seed < 0 or draws < 0:
            raise ValueError(
                f"GaussianBottleneck's saved state has seed={seed}, draws={draws}; both must "
                "be >= 0."
            )
        self.seed, self.draws = seed, draws

    def extra_repr(self) -> str:
        return (
            f"in_features={self.mean.in_features}, latent_dim={self.mean.out_features}, "
            f"min_std={self.min_std}"
        )


def _output_features(encoder: nn.Module) -> int | None:
    """``out_features`` of the encoder's last module that declares one (e.g. its last Linear)."""
    sizes = [
        m.out_features
        for m in encoder.modules()
        if isinstance(getattr(m, "out_features", None), int)
    ]
    return sizes[-1] if sizes else None


class InformationBottleneckMixin:
    """Mix into a LightningModule to train its encoder as a variational information bottleneck.

    Put the mixin first in the bases and name the encoder attribute; ``training_step`` and the
    model's ``forward`` are left as they are::

        class BottleneckClassifier(InformationBottleneckMixin, Classifier):
            ib_encoder = "encoder"   # self.encoder: features (..., d_in)
            ib_latent_dim = 8        # the layers after the encoder take 8 features
            ib_beta = LinearSchedule(0.0, 1e-3, 1000)

    After the host's ``__init__`` the mixin registers ``self.ib_bottleneck``, a
    :class:`GaussianBottleneck` ``d_in -> k``, and a forward hook on the encoder that replaces
    its output by the bottleneck's ``z``: a sample in training, ``mu`` in eval. A hook, rather than
    swapping the attribute for ``nn.Sequential(encoder, bottleneck)``, keeps the encoder object,
    its attributes and its ``state_dict`` keys unchanged (host checkpoints and code that reaches
    into ``self.encoder`` still work), and applies wherever the encoder is called. Registering in
    ``__init__`` puts the bottleneck in ``self.parameters()`` before ``configure_optimizers`` and
    in every ``state_dict``, so ``load_from_checkpoint`` restores it without a ``Trainer``.

    ``training_step`` must return a loss tensor or a dict with ``"loss"`` (the distortion); the
    mixin returns ``distortion + beta_t * rate`` with ``beta_t = ib_beta(global_step)`` and the
    rate averaged over every encoder call of the step, and logs ``ib/rate``, ``ib/distortion``,
    ``ib/beta`` and ``ib/loss``. Needs automatic optimization.

    Class attributes:
        ib_encoder: name or dotted path of the encoder submodule (``"encoder"``,
            ``"model.bert.encoder.layer.5"``).
        ib_latent_dim: ``k``; ``None`` keeps the encoder's output size.
        ib_input_dim: ``d_in``; ``None`` reads ``out_features`` of the encoder's last layer.
        ib_beta: ``beta >= 0``, or a schedule of the optimizer step.
        ib_min_std: floor of ``sigma``.
        ib_seed: base seed of the bottleneck noise; ``None`` draws one from the global RNG.
        ib_validate_args: refuse a step whose bottleneck parameters hold NaN or infinity (one
            host read per encoder call, a device synchronisation on an accelerator); ``False``
            (the default) reads nothing, and a NaN reaches the loss as in any torch model.
    """

    ib_encoder: str = "encoder"
    ib_latent_dim: int | None = None
    ib_input_dim: int | None = None
    ib_beta: float | Schedule = 1e-3
    ib_min_std: float = 1e-4
    ib_seed: int | None = None
    ib_validate_args: bool = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        try:
            encoder = self.get_submodule(self.ib_encoder)
        except AttributeError:
            encoder = None
        if not isinstance(encoder, nn.Module) or encoder is self:
            raise AttributeError(
                f"InformationBottleneckMixin needs `self.{self.ib_encoder}` to be an nn.Module "
                f"set in __init__ (got {type(encoder).__name__}); set the class attribute "
                "`ib_encoder` to the name or dotted path of the encoder (e.g. "
                "'model.encoder')."
            )
        if isinstance(self.ib_beta, (int, float)) and not isinstance(self.ib_beta, bool):
            require_non_negative(self.ib_beta, "ib_beta")
        require_bool(self.ib_validate_args, "ib_validate_args")
        self._ib_schedule = as_schedule(self.ib_beta, "ib_beta")
        require_non_negative(self._ib_schedule(0), "ib_beta")
        in_features = _output_features(encoder) if self.ib_input_dim is None else self.ib_input_dim
        if in_features is None:
            raise ValueError(
                f"Cannot read the output size of `self.{self.ib_encoder}` (no layer with "
                "`out_features`); set the class attribute `ib_input_dim`."
            )
        self.ib_bottleneck = GaussianBottleneck(
            in_features,
            in_features if self.ib_latent_dim is None else self.ib_latent_dim,
            self.ib_min_std,
            self.ib_seed,
        )
        self._ib_rates: list[Tensor] | None = None
        encoder.register_forward_hook(self._ib_hook)

    def _ib_hook(self, module: nn.Module, inputs: Any, output: Any) -> Tensor:
        if not isinstance(output, Tensor):
            raise TypeError(
                f"InformationBottleneckMixin needs `self.{self.ib_encoder}` to return one "
                f"tensor, got {type(output).__name__}."
            )
        z, mu, log_var = self.ib_bottleneck.encode(output)
        if self._ib_rates is not None:
            rate = gaussian_kl_standard_normal(mu, log_var, validate_args=self.ib_validate_args)
            self._ib_rates.append(rate.mean())
        return z

    def training_step(self, *args: Any, **kwargs: Any) -> Any:
        if not self.automatic_optimization:
            raise RuntimeError(
                "InformationBottleneckMixin adds to the loss returned by training_step, which "
                "manual optimization does not use; add beta * ib_bottleneck.encode()'s KL "
                "yourself before manual_backward."
            )
        self.ib_bottleneck.noise_stream = self.global_rank
        self._ib_rates = []
        try:
            output = super().training_step(*args, **kwargs)
            rates = self._ib_rates
        except RuntimeError as error:
            if "shape" not in str(error) or not self._ib_rates:  # the encoder ran
                raise
            latent = self.ib_bottleneck.mean.out_features
            raise RuntimeError(
                f"a layer after `self.{self.ib_encoder}` failed on the bottleneck's {latent} "
                f"features ({error}); the bottleneck replaces the encoder's output with "
                f"`ib_latent_dim` = {latent} features, so the next layer must take {latent} "
                "inputs: set `ib_latent_dim` to its input width, or widen that layer."
            ) from error
        finally:
            self._ib_rates = None
        if output is None:
            return None
        loss = output.get("loss") if isinstance(output, dict) else output
        if not isinstance(loss, Tensor):
            raise TypeError(
                "InformationBottleneckMixin needs training_step to return a loss tensor or a "
                f"dict with 'loss', got {type(output).__name__}."
            )
        if not rates:
            raise RuntimeError(
                f"training_step never called `self.{self.ib_encoder}`, so there is no rate to "
                "add; the bottleneck sits on that encoder's output."
            )
        beta = require_non_negative(self._ib_schedule(self.trainer.global_step), "ib_beta")
        rate = torch.stack(rates).mean()
        total = loss + beta * rate
        for name, value in (
            ("ib/rate", rate.detach()),
            ("ib/distortion", loss.detach()),
            ("ib/beta", beta),
            ("ib/loss", total.detach()),
        ):
            self.log(name, value, on_step=True, on_epoch=False, batch_size=1)
        if isinstance(output, dict):
            return {**output, "loss": total}
        return total
