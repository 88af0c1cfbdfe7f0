"""Fisher information, entropy and mutual information of Gaussian-smoothed densities.

For ``n`` samples ``X_1..X_n`` of a density ``f`` on ``R^d`` and a noise level ``t > 0`` the
plug-in estimate of ``f * phi_t`` (``phi_t`` the ``N(0, t I)`` density) is the Gaussian kernel
density estimate with bandwidth ``sqrt(t)``,

    f_t(y) = (1/n) sum_i N(y; X_i, t I),      grad log f_t(y) = (E_w[X | y] - y) / t,

where ``w`` are the softmax kernel weights of
:func:`~lightning_info.measures.kernel_moments.kernel_moments`
(``alpha = 1``, ``sigma = sqrt(t)``). ``f_t`` is exactly the law of ``Y = X_I + sqrt(t) Z`` with
``I`` uniform on ``1..n`` and ``Z ~ N(0, I)``, i.e. of a Gaussian channel whose input has the
empirical distribution. The estimators below are functionals of this one density:

- Fisher information ``J_t = int ||grad f_t||^2 / f_t`` (the plug-in estimator of ``J(f * phi_t)``,
  minimax optimal for ``t > 0``): in 1-D by grid quadrature, in ``d`` dimensions by Monte Carlo
  over ``Y ~ f_t``. By Brown's identity ``J_t = d/t - mmse_t / t^2`` with
  ``mmse_t = E||X_I - E[X_I | Y]||^2 = E_Y[tr Cov_w(X | Y)]``; the default Monte Carlo estimator
  averages the posterior variance ``tr Cov_w(X | Y)`` (a Rao-Blackwellised form of the squared
  score, the same expectation with a much smaller variance), ``mc_estimator="score"`` averages
  ``||grad log f_t(Y)||^2`` itself.
- Entropy by de Bruijn's identity ``d/ds h(f * phi_s) = J(f * phi_s) / 2`` and
  ``h(f * phi_s) - (d/2) log(2 pi e s) -> 0`` as ``s -> inf`` (finite variance):

      h_t = (d/2) log(2 pi e t) + 1/2 int_t^inf (d/s - J_s) ds
          = (d/2) log(2 pi e t) + 1/2 int_{log t}^inf g(e^u) du,     g(s) = mmse_s / s in [0, d],

  integrated with Simpson's rule on a grid uniform in ``u = log s`` up to
  ``T = tail_factor * max(t, lambda_max)`` (``lambda_k`` the eigenvalues of the samples'
  covariance), plus the tail of the Gaussian with the same covariance,
  ``int_T^inf (d/s - J_s) ds ~ sum_k log(1 + lambda_k / T)``, whose error is ``O((lambda/T)^2)``.
  The Monte Carlo draws are shared by all ``s`` (common random numbers), so ``g`` is smooth in
  ``s``. ``estimator="plug_in"`` computes ``-E log f_t(Y)`` directly instead (a cross-check: both
  estimate ``h(f_t)``).
- Mutual information of the Gaussian channel, ``I(X; X + sqrt(t) Z) = h_t - (d/2) log(2 pi e t)``
  (I-MMSE: ``dI/d snr = mmse / 2``); with the de Bruijn estimator it is ``>= 0`` by construction
  (and at most ``log n``, the entropy of the empirical input).

Every quantity is invariant to translation, so samples are centred first; the work is done in
float64. Cost: one :func:`kernel_moments` pass over the samples per query point, i.e.
``O(num_mc * n * d)`` per noise level in ``d`` dimensions and ``O(n * span / sqrt(t) * grid)``
for the 1-D quadrature (grid points are laid only within ``8 sqrt(t)`` of a sample).

How the expectations are computed and the entropy integrated is one
:class:`SmoothedEstimatorOptions`, taken by every function here, by the Metrics
:class:`SmoothedFisherInformation`, :class:`SmoothedEntropy` and
:class:`SmoothedMutualInformation` (which accumulate samples over batches and, under DDP, over
processes, and apply the same functions to all of them, optionally to a seeded uniform subsample
of at most ``max_samples`` rows, see :class:`SampleReservoir`) and by
:class:`~lightning_info.methods.smoothed_information.callback.SmoothedInformationMonitor`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from lightning_info.core.validation import (
    require_choice,
    require_finite_tensor,
    require_int,
    require_non_negative,
    require_positive,
    require_real_tensor,
)
from lightning_info.measures.kernel_moments import kernel_moments

__all__ = [
    "check_estimator_options",
    "check_sample_dtype",
    "check_times",
    "ENTROPY_ESTIMATORS",
    "fisher_from_mmse",
    "MC_ESTIMATORS",
    "METHODS",
    "mmse_from_fisher",
    "smoothed_entropy",
    "smoothed_fisher_information",
    "smoothed_information",
    "smoothed_mmse",
    "smoothed_mutual_information",
    "SmoothedEstimatorOptions",
    "SmoothedInformation",
]

Times = float | Sequence[float] | Tensor

METHODS = ("auto", "quadrature", "monte_carlo")
MC_ESTIMATORS = ("posterior", "score")
ENTROPY_ESTIMATORS = ("de_bruijn", "plug_in")
_QUERY_CHUNK = 1024  # query points per kernel_moments call
_DATA_CHUNK = 2048  # data points per kernel_moments chunk: 1024 x 2048 float64 = 16 MiB
_TAIL_SDS = 8.0  # the 1-D grid covers every sample +- 8 sqrt(t)
MIN_RELATIVE_T = 1e-10
"""Smallest ``t / R^2`` accepted, ``R^2`` the largest squared norm of a centred sample: the kernel
weights are computed from ``||y||^2 - 2 y.x + ||x||^2``, whose float64 rounding error is about
``2e-16 R^2``, so ``t`` must stay well above it (at this bound the error is ``~1e-6`` nats)."""
T_RANGE = (1e-100, 1e100)
"""Absolute range of ``t``: ``t^2`` and ``1 / t^2`` must be float64 numbers."""


@dataclass(frozen=True)
class SmoothedEstimatorOptions:
    """How the plug-in estimators compute their expectations under ``f_t`` (module docstring).

    Args:
        method: ``"quadrature"`` (1-D only: trapezoid rule on a lattice of spacing
            ``sqrt(t) / grid`` within ``8 sqrt(t)`` of the samples), ``"monte_carlo"``
            (``Y ~ f_t``), or ``"auto"``: quadrature in 1-D, Monte Carlo otherwise.
        num_mc: Monte Carlo draws of ``Y`` (shared by all ``t``).
        grid: quadrature points per standard deviation ``sqrt(t)``, at least 2.
        mc_estimator: the Monte Carlo Fisher information of
            :func:`smoothed_fisher_information`: ``"posterior"``, ``d/t - E tr Cov_w(X | Y) /
            t^2`` (Brown's identity; low variance, exact for Gaussian data), or ``"score"``,
            ``E ||grad log f_t(Y)||^2``.
        estimator: the entropy and MI estimator of :func:`smoothed_entropy` and
            :func:`smoothed_mutual_information`: ``"de_bruijn"`` (:func:`smoothed_information`)
            or ``"plug_in"``, ``-E log f_t(Y)``.
        log_step: largest spacing of the de Bruijn integral's Simpson grid in ``log s``.
        tail_factor: ``T / max(t, lambda_max)`` (> 1), where the de Bruijn integral's Gaussian
            tail correction takes over (its relative error is ``O(tail_factor^-2)``).
    """

    method: Literal["auto", "quadrature", "monte_carlo"] = "auto"
    num_mc: int = 4096
    grid: int = 8
    mc_estimator: Literal["posterior", "score"] = "posterior"
    estimator: Literal["de_bruijn", "plug_in"] = "de_bruijn"
    log_step: float = 0.5
    tail_factor: float = 100.0

    def __post_init__(self) -> None:
        require_choice(self.method, "method", METHODS)
        require_int(self.num_mc, "num_mc", 1)
        require_int(self.grid, "grid", 2)
        require_choice(self.mc_estimator, "mc_estimator", MC_ESTIMATORS)
        require_choice(self.estimator, "estimator", ENTROPY_ESTIMATORS)
        object.__setattr__(self, "log_step", require_positive(self.log_step, "log_step"))
        tail_factor = require_positive(self.tail_factor, "tail_factor")
        if tail_factor <= 1:
            raise ValueError(f"`tail_factor` must be > 1, got {tail_factor!r}.")
        object.__setattr__(self, "tail_factor", tail_factor)


def check_estimator_options(options: SmoothedEstimatorOptions) -> SmoothedEstimatorOptions:
    """``options``, or raise unless it is a :class:`SmoothedEstimatorOptions`."""
    if not isinstance(options, SmoothedEstimatorOptions):
        raise TypeError(
            f"`options` must be a SmoothedEstimatorOptions, got {type(options).__name__}; "
            "pass e.g. SmoothedEstimatorOptions(num_mc=1024)."
        )
    return options


@dataclass(frozen=True)
class SmoothedInformation:
    """Fisher information, entropy and Gaussian-channel mutual information of ``f_t``.

    Each field is a float64 tensor with the shape of ``t``: 0-dim for one noise level, ``(K,)``
    for ``K`` of them (in the order given).
    """

    fisher: Tensor
    entropy: Tensor
    mutual_information: Tensor


# --------------------------------------------------------------------------------------------
# Argument handling
# --------------------------------------------------------------------------------------------


def check_sample_dtype(samples: Tensor) -> Tensor:
    """Raise unless ``samples`` is a real tensor of real numbers (not bool or complex)."""
    if not isinstance(samples, Tensor):
        raise TypeError(f"`samples` must be a tensor, got {type(samples).__name__}.")
    require_real_tensor(samples, "samples")
    if samples.dtype == torch.bool or samples.is_complex():
        raise TypeError(
            f"`samples` must be real numbers, got dtype {samples.dtype}; convert it yourself "
            "(e.g. `.double()`, or `.real` of a complex tensor) if that is what you mean."
        )
    return samples


def _samples(samples: Tensor) -> Tensor:
    """``(n,)`` or ``(n, d)`` samples as a centred float64 ``(n, d)`` tensor (never in place)."""
    check_sample_dtype(samples)
    if samples.dim() == 1:
        samples = samples[:, None]
    if samples.dim() != 2:
        raise ValueError(
            f"`samples` must have shape (n,) or (n, d), got {tuple(samples.shape)}; flatten "
            "each sample first."
        )
    if samples.shape[0] == 0 or samples.shape[1] == 0:
        raise ValueError(f"`samples` is empty (shape {tuple(samples.shape)}).")
    require_finite_tensor(samples, "samples")
    samples = samples.to(torch.float64)
    return samples - samples.mean(0)


def check_times(t: Times) -> tuple[list[float], bool]:
    """Noise levels as a list of floats > 0, and whether a single number was given."""
    if isinstance(t, Tensor):
        if t.dtype == torch.bool or t.is_complex():
            raise TypeError(f"`t` must hold real noise variances, got dtype {t.dtype}.")
        if t.dim() > 1:
            raise ValueError(f"`t` must be a number or 1-D, got shape {tuple(t.shape)}.")
        scalar = t.dim() == 0
        values = [float(v) for v in t.reshape(-1)]
    elif isinstance(t, Sequence) and not isinstance(t, str):
        scalar, values = False, list(t)
    else:
        scalar, values = True, [t]
    if not values:
        raise ValueError("`t` must hold at least one noise level.")
    return [require_positive(v, "t") for v in values], scalar


def _check_scale(data: Tensor, times: list[float]) -> None:
    """Raise unless every ``t`` lies in :data:`T_RANGE` and ``t >= MIN_RELATIVE_T * R^2``
    (``data`` centred): below that the kernel weights, and so every estimate, are rounding
    noise (``inf``, NaN or far off)."""
    radius_sq = float((data * data).sum(1).max())
    if not math.isfinite(radius_sq):
        raise ValueError(
            "`samples` are too large: their squared norms overflow float64; rescale them."
        )
    low, high = T_RANGE
    floor = max(low, MIN_RELATIVE_T * radius_sq)
    for s in times:
        if not floor <= s <= high:
            raise ValueError(
                f"`t` = {s!r} is outside [{floor:.3g}, {high:g}]: the smallest noise variance "
                f"these samples allow is {MIN_RELATIVE_T:g} x their largest squared norm "
                f"about the mean ({radius_sq:.3g}), below which float64 rounding dominates; "
                "pass a larger t (or rescale the samples)."
            )


def _method(method: str, dim: int) -> str:
    if method == "auto":
        return "quadrature" if dim == 1 else "monte_carlo"
    if method == "quadrature" and dim != 1:
        raise ValueError(
            f"`method='quadrature'` integrates on a 1-D grid, but the samples have d={dim}; "
            "use method='monte_carlo' (or 'auto')."
        )
    return method


def _output(values: list[Tensor], scalar: bool) -> Tensor:
    stacked = torch.stack(values)
    return stacked[0] if scalar else stacked


# --------------------------------------------------------------------------------------------
# Expectations under f_t: by 1-D quadrature or by Monte Carlo
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Nodes:
    """Points ``y`` at which ``E_{Y ~ f_t}`` is evaluated: Monte Carlo draws of ``f_t``
    (``spacing=None``, equal weights) or a 1-D lattice (weights ``f_t(y) * spacing``)."""

    points: Tensor
    spacing: float | None


def _grid(data: Tensor, t: float, grid: int) -> _Nodes:
    """Lattice points with spacing ``sqrt(t) / grid`` within ``8 sqrt(t)`` of some sample (1-D)."""
    sd = math.sqrt(t)
    step = sd / grid
    xs = data[:, 0].sort().values
    reach = _TAIL_SDS * sd
    # merge the intervals [x_i - reach, x_i + reach] into disjoint runs
    gaps = torch.nonzero(xs[1:] - xs[:-1] > 2 * reach).flatten()
    starts = torch.cat([xs[:1], xs[gaps + 1]]) - reach
    ends = torch.cat([xs[gaps], xs[-1:]]) + reach
    origin = float(starts[0])
    first = torch.ceil((starts - origin) / step).long()
    last = torch.floor((ends - origin) / step).long()
    counts = last - first + 1
    offsets = torch.arange(int(counts.sum()), device=data.device) - torch.repeat_interleave(
        torch.cumsum(counts, 0) - counts, counts
    )
    index = torch.repeat_interleave(first, counts) + offsets
    return _Nodes(points=(origin + index.to(data.dtype) * step)[:, None], spacing=step)


@dataclass(frozen=True)
class _Draws:
    """Monte Carlo draws ``Y_s = X_I + sqrt(s) Z`` shared by every noise level ``s``."""

    index: Tensor
    noise: Tensor

    def at(self, data: Tensor, s: float) -> _Nodes:
        return _Nodes(points=data[self.index] + math.sqrt(s) * self.noise, spacing=None)


def _draws(data: Tensor, num_mc: int, generator: torch.Generator | None) -> _Draws:
    """``num_mc`` draws of ``(I, Z)``; ``I`` is stratified (whole random permutations of 0..n-1,
    then a random subset), so every sample is used ``floor`` or ``ceil(num_mc / n)`` times."""
    if generator is None:
        generator = torch.Generator().manual_seed(0)
    n, dim = data.shape
    device = generator.device
    order = torch.randperm(n, generator=generator, device=device)
    index = order.repeat(-(-num_mc // n))[:num_mc]
    noise = torch.randn(num_mc, dim, generator=generator, device=device, dtype=torch.float64)
    return _Draws(index=index.to(data.device), noise=noise.to(data.device))


@dataclass(frozen=True)
class _Moments:
    """Per node: ``log f_t(y)``, ``||grad log f_t(y)||^2``, ``tr Cov_w(X | y)`` and the posterior
    mean; and the node weights (``f_t(y) dy`` on a grid, ``1 / M`` for Monte Carlo)."""

    log_density: Tensor
    score_sq: Tensor
    posterior_variance: Tensor
    mean: Tensor
    weight: Tensor

    def expect(self, values: Tensor) -> Tensor:
        return (self.weight * values).sum()


def _moments(nodes: _Nodes, data: Tensor, t: float) -> _Moments:
    parts = [
        kernel_moments(chunk, data, 1.0, math.sqrt(t), chunk_size=_DATA_CHUNK)
        for chunk in nodes.points.split(_QUERY_CHUNK)
    ]
    log_density = torch.cat([p.log_density for p in parts])
    mean = torch.cat([p.mean for p in parts])
    sq_norm = torch.cat([p.sq_norm for p in parts])
    score_sq = ((mean - nodes.points) ** 2).sum(1) / t**2
    posterior_variance = (sq_norm - (mean * mean).sum(1)).clamp_min(0)
    if nodes.spacing is None:
        weight = torch.full_like(log_density, 1.0 / log_density.numel())
    else:
        weight = log_density.exp() * nodes.spacing
    return _Moments(log_density, score_sq, posterior_variance, mean, weight)


def _expectations_at(
    data: Tensor,
    t: float,
    method: str,
    draws: _Draws | None,
    grid: int,
) -> _Moments:
    nodes = _grid(data, t, grid) if method == "quadrature" else draws.at(data, t)
    return _moments(nodes, data, t)


# --------------------------------------------------------------------------------------------
# Public functions
# --------------------------------------------------------------------------------------------


def smoothed_fisher_information(
    samples: Tensor,
    t: Times,
    options: SmoothedEstimatorOptions = SmoothedEstimatorOptions(),
    *,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Plug-in Fisher information ``J(f_t) = int ||grad f_t||^2 / f_t`` of ``f * phi_t``.

    Args:
        samples: ``(n,)`` or ``(n, d)`` i.i.d. samples of ``f``.
        t: noise variance ``t > 0`` (a number), or several (a sequence or 1-D tensor); each
            must lie in ``[max(1e-100, MIN_RELATIVE_T R^2), 1e100]``, ``R^2`` the largest squared
            norm of a centred sample (:data:`MIN_RELATIVE_T`; smaller ``t`` is refused).
        options: ``method``, ``num_mc``, ``grid`` and ``mc_estimator``
            (:class:`SmoothedEstimatorOptions`).
        generator: random source of the Monte Carlo draws; ``None`` uses a generator seeded with 0,
            so that results are reproducible.

    Returns:
        float64 tensor, 0-dim for one ``t``, ``(K,)`` for ``K``.
    """
    data = _samples(samples)
    times, scalar = check_times(t)
    _check_scale(data, times)
    options = check_estimator_options(options)
    method = _method(options.method, data.shape[1])
    grid = options.grid
    dim = data.shape[1]
    draws = _draws(data, options.num_mc, generator) if method == "monte_carlo" else None
    values = []
    for s in times:
        moments = _expectations_at(data, s, method, draws, grid)
        if method == "monte_carlo" and options.mc_estimator == "posterior":
            mmse = moments.expect(moments.posterior_variance)
            values.append(fisher_from_mmse(mmse, s, dim))
        else:
            values.append(moments.expect(moments.score_sq))
    return _output(values, scalar)


def smoothed_information(
    samples: Tensor,
    t: Times,
    options: SmoothedEstimatorOptions = SmoothedEstimatorOptions(),
    *,
    generator: torch.Generator | None = None,
) -> SmoothedInformation:
    """Fisher information, de Bruijn entropy and Gaussian-channel MI of ``f_t``, for every ``t``.

    One pass computes ``g(s) = mmse_s / s`` on a grid of ``log s`` from ``min(t)`` to
    ``T = tail_factor * max(max(t), lambda_max)`` that contains every ``t``; the Fisher information
    at each ``t`` is ``J_t = (d - g(t)) / t`` (Brown's identity; in 1-D by quadrature it equals
    :func:`smoothed_fisher_information` to quadrature accuracy) and the entropy and MI follow from
    the de Bruijn integral (module docstring).

    Args:
        samples, t, generator: as in :func:`smoothed_fisher_information`.
        options: ``method``, ``num_mc``, ``grid``, ``log_step`` and ``tail_factor``
            (:class:`SmoothedEstimatorOptions`; the Fisher information is always Brown's
            identity here and the entropy de Bruijn's, whatever ``mc_estimator`` and
            ``estimator`` say).
    """
    data = _samples(samples)
    times, scalar = check_times(t)
    _check_scale(data, times)
    options = check_estimator_options(options)
    method = _method(options.method, data.shape[1])
    grid, log_step, tail_factor = options.grid, options.log_step, options.tail_factor
    dim = data.shape[1]
    draws = _draws(data, options.num_mc, generator) if method == "monte_carlo" else None
    eigenvalues = _covariance_eigenvalues(data)
    levels = sorted(set(times))
    top = tail_factor * max(levels[-1], float(eigenvalues.max()))
    bounds = [math.log(s) for s in levels] + [math.log(top)]

    cache: dict[float, Tensor] = {}  # panels share their end points

    def g(u: float) -> Tensor:
        if u not in cache:
            s = math.exp(u)
            moments = _expectations_at(data, s, method, draws, grid)
            cache[u] = moments.expect(moments.posterior_variance) / s
        return cache[u]

    g_at_level: dict[float, Tensor] = {}
    panel_integrals = []
    for k in range(len(levels)):
        low, high = bounds[k], bounds[k + 1]
        intervals = 2 * max(1, math.ceil((high - low) / (2 * log_step)))
        u = [low + (high - low) * i / intervals for i in range(intervals)] + [high]
        values = torch.stack([g(v) for v in u])
        g_at_level[levels[k]] = values[0]
        panel_integrals.append(_simpson(values, (high - low) / intervals))
    tail = torch.log1p(eigenvalues / top).sum()
    # integral from levels[k] to infinity, for every k
    from_level = torch.flip(torch.cumsum(torch.flip(torch.stack(panel_integrals), [0]), 0), [0])
    from_level = from_level + tail.to(from_level.device)
    position = {s: k for k, s in enumerate(levels)}
    fisher, entropy, mutual = [], [], []
    for s in times:
        info = 0.5 * from_level[position[s]]
        mutual.append(info)
        entropy.append(info + _gaussian_entropy(s, dim))
        fisher.append((dim - g_at_level[s]) / s)
    return SmoothedInformation(
        fisher=_output(fisher, scalar),
        entropy=_output(entropy, scalar),
        mutual_information=_output(mutual, scalar),
    )


def smoothed_entropy(
    samples: Tensor,
    t: Times,
    options: SmoothedEstimatorOptions = SmoothedEstimatorOptions(),
    *,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Plug-in differential entropy ``h(f_t)`` (nats) of ``f * phi_t``.

    ``options.estimator``: ``"de_bruijn"``, ``(d/2) log(2 pi e t) + 1/2 int_t^inf (d/s - J_s)
    ds`` (see :func:`smoothed_information`), or ``"plug_in"``, ``-E log f_t(Y)`` by quadrature
    (1-D) or Monte Carlo. The other arguments are as in :func:`smoothed_information`.
    """
    options = check_estimator_options(options)
    if options.estimator == "de_bruijn":
        return smoothed_information(samples, t, options, generator=generator).entropy
    data = _samples(samples)
    times, scalar = check_times(t)
    _check_scale(data, times)
    method = _method(options.method, data.shape[1])
    draws = _draws(data, options.num_mc, generator) if method == "monte_carlo" else None
    values = []
    for s in times:
        moments = _expectations_at(data, s, method, draws, options.grid)
        values.append(-moments.expect(moments.log_density))
    return _output(values, scalar)


def smoothed_mutual_information(
    samples: Tensor,
    t: Times,
    options: SmoothedEstimatorOptions = SmoothedEstimatorOptions(),
    *,
    generator: torch.Generator | None = None,
) -> Tensor:
    """``I(X; X + sqrt(t) Z) = h(f_t) - (d/2) log(2 pi e t)`` (nats) with ``X`` the empirical law.

    Same arguments as :func:`smoothed_entropy`. The de Bruijn estimator is ``>= 0`` by
    construction; the plug-in one can dip below 0 by Monte Carlo error when the MI is tiny.
    """
    options = check_estimator_options(options)
    if options.estimator == "de_bruijn":
        return smoothed_information(samples, t, options, generator=generator).mutual_information
    data = _samples(samples)
    entropy = smoothed_entropy(data, t, options, generator=generator)
    times, _ = check_times(t)
    gaussian = torch.tensor(
        [_gaussian_entropy(s, data.shape[1]) for s in times], dtype=torch.float64
    )
    return entropy - gaussian.to(entropy.device).reshape(entropy.shape)


def smoothed_mmse(
    samples: Tensor,
    t: Times,
    options: SmoothedEstimatorOptions = SmoothedEstimatorOptions(),
    *,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Plug-in MMSE ``E||X_I - E[X_I | Y]||^2`` of ``X_I`` from ``Y = X_I + sqrt(t) Z``.

    ``X_I`` is a uniform draw from the samples (the empirical prior) and ``E[X_I | Y]`` the
    posterior mean of :func:`kernel_moments` over the samples, the Bayes estimator for that prior.
    Plain Monte Carlo over ``(I, Z)`` with ``options.num_mc`` draws (whatever ``options.method``
    says); by Brown's identity it equals ``mmse_from_fisher(J(f_t), t, d)``.
    """
    data = _samples(samples)
    times, scalar = check_times(t)
    _check_scale(data, times)
    draws = _draws(data, check_estimator_options(options).num_mc, generator)
    values = []
    for s in times:
        moments = _moments(draws.at(data, s), data, s)
        values.append(((data[draws.index] - moments.mean) ** 2).sum(1).mean())
    return _output(values, scalar)


def _brown_arguments(
    value: float | Tensor, name: str, t: float | Tensor, dim: int
) -> tuple[float | Tensor, float | Tensor]:
    """``value`` (a Fisher information or an MMSE) and ``t`` checked: finite, ``value >= 0``,
    ``t > 0``, tensors of broadcastable shapes."""
    require_int(dim, "dim", 1)
    for item, item_name, positive in ((value, name, False), (t, "t", True)):
        if isinstance(item, Tensor):
            require_real_tensor(item, item_name)
            if item.dtype == torch.bool or item.is_complex():
                raise TypeError(f"`{item_name}` must hold real numbers, got dtype {item.dtype}.")
            require_finite_tensor(item, item_name)
            if bool((item <= 0).any() if positive else (item < 0).any()):
                bound = "> 0" if positive else ">= 0"
                raise ValueError(f"`{item_name}` must be {bound}, got {item.min().item():.4g}.")
        elif positive:
            require_positive(item, item_name)
        else:
            require_non_negative(item, item_name)
    if isinstance(value, Tensor) and isinstance(t, Tensor):
        try:
            torch.broadcast_shapes(value.shape, t.shape)
        except RuntimeError:
            raise ValueError(
                f"`{name}` {tuple(value.shape)} and `t` {tuple(t.shape)} must have broadcastable "
                "shapes, e.g. one value per noise level."
            ) from None
    return value, t


def mmse_from_fisher(fisher: float | Tensor, t: float | Tensor, dim: int) -> Tensor | float:
    """Brown's identity ``mmse = t d - t^2 J`` for ``Y = X + sqrt(t) Z`` with ``Y ~ f * phi_t``.

    ``fisher`` must be finite and ``>= 0``, ``t`` finite and ``> 0`` (numbers or tensors of
    broadcastable shapes), ``dim`` an int ``>= 1``.
    """
    fisher, t = _brown_arguments(fisher, "fisher", t, dim)
    return t * dim - t**2 * fisher


def fisher_from_mmse(mmse: float | Tensor, t: float | Tensor, dim: int) -> Tensor | float:
    """Brown's identity the other way round: ``J(f * phi_t) = d / t - mmse / t^2``; arguments
    as in :func:`mmse_from_fisher`, with ``mmse >= 0``."""
    mmse, t = _brown_arguments(mmse, "mmse", t, dim)
    return dim / t - mmse / t**2


def _gaussian_entropy(t: float, dim: int) -> float:
    """``h(N(0, t I_d)) = (d/2) log(2 pi e t)``."""
    return 0.5 * dim * math.log(2 * math.pi * math.e * t)


def _covariance_eigenvalues(data: Tensor) -> Tensor:
    """Eigenvalues of the (biased, ``1/n``) covariance of centred data: those of the empirical
    law, the input of the Gaussian channel. Computed from the smaller of ``X^T X`` and ``X X^T``."""
    n, dim = data.shape
    gram = data.T @ data if dim <= n else data @ data.T
    return torch.linalg.eigvalsh(gram / n).clamp_min(0)


def _simpson(values: Tensor, step: float) -> Tensor:
    """Composite Simpson rule over an odd number of equally spaced values."""
    weights = torch.ones_like(values)
    weights[1:-1:2] = 4
    weights[2:-1:2] = 2
    return (weights * values).sum() * step / 3


# --------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------
