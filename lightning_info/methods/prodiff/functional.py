"""ProDiff's pure core (Bu et al., ICML 2025): the endpoint-only interpolation baselines, the
k-means pseudo-labels, the prototype losses and attention, and the diffusion loss.

**Baselines.** Endpoint-only baselines for trajectory imputation: fill a window's interior from
its two endpoints (ProDiff's "linear interpolation" baseline).

A window is ``(B, k, 3)`` of (time, lat, lng), ``k >= 3``. Both baselines return a new tensor
whose first and last points are copies of the input's (bit for bit) and whose ``k - 2`` interior
points are placed at fractions ``f_j`` of the way from the start to the end:

- ``interior_times="interpolate"`` (default, the imputation task): only the two endpoints are
  read -- the interior may hold anything, NaN included. The interior times are spaced evenly
  between the endpoint times, ``t_j = t_0 + f_j (t_{k-1} - t_0)`` with ``f_j = j / (k - 1)``,
  and the positions sit at the same fractions, so the fill is linear in time (constant speed)
  and linear in the index alike.
- ``interior_times="given"`` (imputing positions at known timestamps): the window's interior
  times are kept as they are and the positions follow them, ``f_j = (t_j - t_0) /
  (t_{k-1} - t_0)``, falling back to ``j / (k - 1)`` for a window whose endpoint times are
  equal. A time before ``t_0`` or after ``t_{k-1}`` extrapolates along the same line / circle.

:func:`linear_interpolation` moves linearly in (lat, lng) degrees (a rhumb-like straight line on
the plate carree map; a window across the antimeridian goes the long way round, use the
great-circle version there); :func:`great_circle_interpolation` moves along the great circle
(:func:`~lightning_info.methods.prodiff.geometry.great_circle_interpolate`) at constant speed.
Over a city the two differ by centimetres.

**Pseudo-labels.** ProDiff clusters the prototype encoder's features of every training batch
with k-means and trains the prototypes to classify them (its cross-entropy prototype loss). The
clustering runs every step on features that live on the accelerator, so :func:`kmeans` is
written here in torch (scikit-learn's ``KMeans`` would copy every batch to the CPU and back):
k-means++ seeding (Arthur & Vassilvitskii, 2007: each next centre drawn with probability
proportional to the squared distance to the nearest chosen one) and Lloyd's iterations (assign
every point to its nearest centre, move every centre to the mean of its points; a centre that
loses all its points stays), until the centres stop moving or ``iterations`` run out.
:func:`match_clusters` then gives each cluster the prototype it is matched to (the one-to-one
assignment of least total centre-prototype distance, Hungarian method) as its label:
k-means numbers its clusters arbitrarily, and the reference code uses those numbers directly as
the class targets over the prototypes, pairing each cluster with a random prototype.

**Prototype losses** (section 3 of the paper), for encoder features ``f_i`` and prototypes
``P_1 .. P_K``:

- cross-entropy ``L_ce = CE(f_i . normalize(P)^T, y_i)`` against the pseudo-labels ``y_i``, the
  prototypes detached (it moves the features only), :func:`prototype_cross_entropy`;
- contrastive ``L_con = mean_i relu(||f_i - P_near(i)|| - ||f_i - P_far(i)|| + margin)`` with
  ``P_near(i)`` / ``P_far(i)`` the nearest and farthest prototype of ``f_i`` in Euclidean
  distance, :func:`prototype_contrastive_loss` (batched; the reference loops over samples);
- endpoint query attention ``p~ = softmax(cos(q, P) / tau) P`` for the query feature ``q``
  of the endpoints-only window (:func:`endpoints_only`), :func:`prototype_attention`; the
  weights alone, and the diagnostics of how queries use the prototypes, are in
  :mod:`~lightning_info.methods.prodiff.prototypes`. The paper's temperature is ``tau = sqrt(d)``:
  as a cosine lies in [-1, 1], no weight can exceed ``e^(2 / sqrt(d))`` times another (1.09 at
  ``d`` = 512, 1.28 at 64), so the mixture is close to the prototypes' mean for every query
  by construction; a smaller ``tau`` sharpens it.

**Diffusion loss** (section 3), on ``(B, C, k)`` windows whose endpoints are the condition:

- ``L_diff = mean |pred - target|`` over the ``k - 2`` interior points only,
  :func:`interior_l1_loss` (target the noise ``eps`` or, for an x0 model, the clean window);
- classifier-free guidance ``eps_c + w (eps_c - eps_u)``, :func:`classifier_free_guidance`
  (ProDiff trains the guided output itself);
- an x0 model's noise estimate ``eps = (x_t - sqrt(abar_t) x0_hat) / sqrt(1 - abar_t)``, the
  inverse of ``x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) eps``, :func:`epsilon_from_x0`.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from lightning_info.core.validation import (
    require_finite,
    require_finite_tensor,
    require_int,
    require_non_negative,
    require_real_floating,
    require_real_tensor,
)
from lightning_info.methods.prodiff.geometry import great_circle_interpolate
from lightning_info.methods.prodiff.prototypes import check_against_prototypes, prototype_weights

__all__ = [
    "INTERIOR_TIMES",
    "classifier_free_guidance",
    "endpoints_only",
    "epsilon_from_x0",
    "interior_l1_loss",
    "match_clusters",
    "prototype_attention",
    "prototype_contrastive_loss",
    "prototype_cross_entropy",
    "great_circle_interpolation",
    "interior_fractions",
    "kmeans",
    "linear_interpolation",
]

INTERIOR_TIMES = ("interpolate", "given")


def _check_window(window: Tensor, interior_times: str) -> None:
    require_real_tensor(window, "window")
    if not window.is_floating_point():
        raise TypeError(f"`window` must be a floating tensor, got dtype {window.dtype}.")
    if window.dim() != 3 or window.shape[2] != 3:
        raise ValueError(
            f"`window` must be (B, k, 3) of (time, lat, lng), got shape {tuple(window.shape)}."
        )
    if window.shape[1] < 3:
        raise ValueError(
            f"a window of length {window.shape[1]} has no interior point to fill: k must be >= 3."
        )
    if interior_times not in INTERIOR_TIMES:
        raise ValueError(
            f"`interior_times` must be one of {INTERIOR_TIMES}, got {interior_times!r}."
        )
    require_finite_tensor(window[:, [0, -1]], "window's endpoints")
    if interior_times == "given":
        times = require_finite_tensor(window[:, 1:-1, 0], "window's interior times")
        low = torch.minimum(window[:, :1, 0], window[:, -1:, 0])
        high = torch.maximum(window[:, :1, 0], window[:, -1:, 0])
        outside = ((times < low) | (times > high)) & (high > low)  # equal times: by index
        if bool(outside.any()):
            raise ValueError(
                "a window's interior times must lie between its endpoints' times: sort each "
                "trajectory by time before cutting windows."
            )


def interior_fractions(window: Tensor, interior_times: str = "interpolate") -> Tensor:
    """``(B, k - 2)`` fractions of the interior points between the endpoints (module docstring),
    in the window's dtype."""
    _check_window(window, interior_times)
    batch, k, _ = window.shape
    index = torch.arange(1, k - 1, dtype=window.dtype, device=window.device) / (k - 1)
    index = index.expand(batch, k - 2)
    if interior_times == "interpolate":
        return index
    start, end = window[:, :1, 0], window[:, -1:, 0]
    span = end - start
    same = span == 0
    by_time = (window[:, 1:-1, 0] - start) / torch.where(same, torch.ones_like(span), span)
    return torch.where(same, index, by_time)


def _with_endpoints(window: Tensor, interior: Tensor) -> Tensor:
    out = torch.empty_like(window)
    out[:, 0] = window[:, 0]
    out[:, -1] = window[:, -1]
    out[:, 1:-1] = interior
    return out


def _interior_times(window: Tensor, fractions: Tensor, interior_times: str) -> Tensor:
    if interior_times == "given":
        return window[:, 1:-1, 0]
    start, end = window[:, :1, 0], window[:, -1:, 0]
    return start + fractions * (end - start)


def linear_interpolation(window: Tensor, *, interior_times: str = "interpolate") -> Tensor:
    """The window with its interior filled linearly between its endpoints in time, lat and lng
    (module docstring); endpoints copied bit for bit, the input left unchanged."""
    fractions = interior_fractions(window, interior_times)
    start, end = window[:, :1, 1:], window[:, -1:, 1:]
    positions = start + fractions.unsqueeze(-1) * (end - start)
    times = _interior_times(window, fractions, interior_times)
    return _with_endpoints(window, torch.cat((times.unsqueeze(-1), positions), -1))


def great_circle_interpolation(window: Tensor, *, interior_times: str = "interpolate") -> Tensor:
    """The window with its interior filled along the great circle between its endpoints at
    constant speed, times as in :func:`linear_interpolation` (module docstring); endpoints
    copied bit for bit, the input left unchanged."""
    fractions = interior_fractions(window, interior_times)
    positions = great_circle_interpolate(window[:, 0, 1:], window[:, -1, 1:], fractions)
    times = _interior_times(window, fractions, interior_times)
    interior = torch.cat((times.unsqueeze(-1), positions.to(window.dtype)), -1)
    return _with_endpoints(window, interior)


def _plus_plus_seeds(points: Tensor, k: int, generator: torch.Generator | None) -> Tensor:
    """k-means++ seeding on ``points``' device, no value read back: centre ``j`` is point ``i``
    with probability ``w_i = D_i / sum D`` (``D_i`` the squared distance to the nearest chosen
    centre; uniform when every ``D_i`` is 0), drawn as ``argmax_i w_i / q_i`` with ``q_i ~
    Exp(1)`` (the exponential race: ``P(argmax = i) = w_i``). The ``q`` are drawn by
    ``generator`` on the CPU in float64, exactly as ``torch.multinomial(w, 1)`` draws them, so the
    centres are those ``multinomial`` on the CPU would choose from the same generator; it is not
    called because it reads its weights on the host to check them."""
    n = points.shape[0]
    first = torch.randint(n, (1,), generator=generator).to(points.device)
    centres = [points[first]]
    nearest = ((points - centres[0]) ** 2).sum(1)
    for _ in range(1, k):
        total = nearest.sum()
        weights = torch.where(total > 0, nearest / total, 1.0 / n)
        race = torch.empty(n, dtype=torch.float64).exponential_(1, generator=generator)
        chosen = (weights.double() / race.to(points.device)).argmax().reshape(1)
        centres.append(points[chosen])
        nearest = torch.minimum(nearest, ((points - centres[-1]) ** 2).sum(1))
    return torch.cat(centres)


@torch.no_grad()
def kmeans(
    points: Tensor,
    k: int,
    iterations: int = 20,
    generator: torch.Generator | None = None,
    *,
    validate_args: bool = True,
) -> tuple[Tensor, Tensor]:
    """``(labels (n,), centres (k, d))`` of k-means on ``points (n, d)`` (see the module
    docstring); draws with ``generator`` (a CPU generator), no gradient.

    On an accelerator nothing is read back: the seeding runs on the device and Lloyd's
    iterations all run (on the CPU they stop once the centres stop moving, which leaves the
    same centres: a fixed point stays one). ``validate_args`` refuses NaN or infinite points
    (one host read); shapes and ``k`` are always checked."""
    require_real_floating(points, "points")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"`generator` must be a torch.Generator, got {type(generator).__name__}.")
    if points.ndim != 2 or points.shape[0] == 0:
        raise ValueError(f"`points` must be a non-empty (n, d) tensor, got {tuple(points.shape)}.")
    k = require_int(k, "k", 1)
    if k > points.shape[0]:
        raise ValueError(f"k = {k} clusters need at least {k} points, got {points.shape[0]}.")
    if validate_args and not torch.isfinite(points).all():
        raise ValueError("`points` hold NaN or infinity.")
    points = points.detach()
    iterations = require_int(iterations, "iterations", 0)
    centres = _plus_plus_seeds(points, k, generator)
    on_host = points.device.type == "cpu"
    for _ in range(iterations):
        labels = torch.cdist(points, centres).argmin(1)
        sums = torch.zeros_like(centres).index_add_(0, labels, points)
        # a scatter, not torch.bincount: on an accelerator bincount reads the largest label
        counts = points.new_zeros(k, 1).index_add_(0, labels, points.new_ones(len(labels), 1))
        moved = torch.where(counts > 0, sums / counts.clamp_min(1), centres)
        if on_host and torch.equal(moved, centres):
            break
        centres = moved
    return torch.cdist(points, centres).argmin(1), centres


def match_clusters(centres: Tensor, prototypes: Tensor) -> Tensor:
    """``assignment (m,)``: the prototype matched to each of ``m <= K`` k-means clusters, the
    one-to-one assignment of least total Euclidean distance between ``centres (m, d)`` and
    ``prototypes (K, d)`` (``scipy.optimize.linear_sum_assignment``). Cluster labels ``y``
    become prototype labels ``assignment[y]``."""
    from scipy.optimize import linear_sum_assignment

    if centres.ndim != 2 or prototypes.ndim != 2 or centres.shape[1] != prototypes.shape[1]:
        raise ValueError(
            f"`centres` and `prototypes` must be (m, d) and (K, d), got "
            f"{tuple(centres.shape)} and {tuple(prototypes.shape)}."
        )
    if centres.shape[0] > prototypes.shape[0]:
        raise ValueError(
            f"{centres.shape[0]} clusters cannot be matched one to one to "
            f"{prototypes.shape[0]} prototypes."
        )
    cost = torch.cdist(centres.detach().double(), prototypes.detach().double()).cpu().numpy()
    if not np.isfinite(cost).all():
        raise ValueError("`centres` or `prototypes` hold NaN or infinity.")
    _, assignment = linear_sum_assignment(cost)
    return torch.as_tensor(assignment, dtype=torch.long, device=centres.device)


def prototype_cross_entropy(features: Tensor, prototypes: Tensor, labels: Tensor) -> Tensor:
    """``CE(f . normalize(P)^T, y)``, mean over the batch, prototypes detached (module
    docstring); ``labels`` ``(B,)`` integer prototype indices."""
    check_against_prototypes(features, prototypes, "features")
    if (
        labels.dtype.is_floating_point
        or labels.dtype == torch.bool
        or labels.shape != (features.shape[0],)
    ):
        raise ValueError(
            f"`labels` must be ({features.shape[0]},) integer prototype indices, got dtype "
            f"{labels.dtype} and shape {tuple(labels.shape)}."
        )
    logits = features @ F.normalize(prototypes.detach(), dim=-1).T
    return F.cross_entropy(logits, labels)


def prototype_contrastive_loss(features: Tensor, prototypes: Tensor, margin: float = 1.0) -> Tensor:
    """``mean_i relu(||f_i - P_near(i)|| - ||f_i - P_far(i)|| + margin)`` (module docstring);
    gradients reach the features and the two chosen prototypes; ``margin`` finite, >= 0."""
    check_against_prototypes(features, prototypes, "features")
    margin = require_non_negative(margin, "margin")
    distances = torch.cdist(features, prototypes)
    near = distances.gather(1, distances.detach().argmin(1, keepdim=True))
    far = distances.gather(1, distances.detach().argmax(1, keepdim=True))
    return F.relu(near - far + margin).mean()


def prototype_attention(
    query: Tensor, prototypes: Tensor, temperature: float | None = None
) -> Tensor:
    """``softmax(cos(q, P) / tau) P``: ``(B, d)`` queries, ``(K, d)`` prototypes, ``(B, d)``
    out; ``tau`` as in :func:`prototype_weights` (``None``: ``sqrt(d)``, the paper's)."""
    return prototype_weights(query, prototypes, temperature) @ prototypes


def endpoints_only(window: Tensor) -> Tensor:
    """``(B, k, C)`` windows with every interior point set to zero (what the condition sees:
    the reference's ``mask_data_general``); the interior is never read, NaN included."""
    if require_real_tensor(window, "window").dim() != 3 or window.shape[1] < 2:
        raise ValueError(f"`window` must be (B, k >= 2, C), got shape {tuple(window.shape)}.")
    keep = torch.zeros(window.shape[1], 1, dtype=torch.bool, device=window.device)
    keep[[0, -1]] = True
    return torch.where(keep, window, torch.zeros((), dtype=window.dtype, device=window.device))


def interior_l1_loss(predicted: Tensor, target: Tensor) -> Tensor:
    """``L_diff = mean |predicted - target|`` over the interior points ``1 .. k-2`` of ``(B, C,
    k)`` tensors (module docstring): the endpoints are the condition, not scored."""
    require_real_floating(predicted, "predicted")
    require_real_floating(target, "target")
    if predicted.shape != target.shape or predicted.ndim != 3 or predicted.shape[2] < 3:
        raise ValueError(
            f"`predicted` and `target` must be (B, C, k >= 3) of one shape, got "
            f"{tuple(predicted.shape)} and {tuple(target.shape)}."
        )
    return (predicted - target)[:, :, 1:-1].abs().mean()


def classifier_free_guidance(conditional: Tensor, unconditional: Tensor, weight: float) -> Tensor:
    """``eps_c + w (eps_c - eps_u)`` (module docstring); ``w = 0`` is the conditional output.
    A Python ``weight`` must be finite (a tensor is taken as given: checking it would
    synchronise)."""
    if not isinstance(weight, Tensor):
        require_finite(weight, "weight")
    if conditional.shape != unconditional.shape:
        raise ValueError(
            f"`conditional` and `unconditional` must have one shape, got "
            f"{tuple(conditional.shape)} and {tuple(unconditional.shape)}."
        )
    return conditional + weight * (conditional - unconditional)


def epsilon_from_x0(noisy: Tensor, x0: Tensor, alpha_bar: Tensor) -> Tensor:
    """``(x_t - sqrt(abar_t) x0_hat) / sqrt(1 - abar_t)``: the noise an x0 estimate implies
    (module docstring); ``alpha_bar`` broadcasts against ``noisy``, a tensor or a Python
    number in ``(0, 1)`` (a number is checked; a tensor is taken as given: checking it would
    synchronise)."""
    if noisy.shape != x0.shape:
        raise ValueError(
            f"`noisy` and `x0` must have one shape, got {tuple(noisy.shape)} and {tuple(x0.shape)}."
        )
    if not isinstance(alpha_bar, Tensor):
        if not 0.0 < require_finite(alpha_bar, "alpha_bar") < 1.0:
            raise ValueError(f"`alpha_bar` must lie in (0, 1), got {alpha_bar!r}.")
        alpha_bar = torch.tensor(alpha_bar, dtype=noisy.dtype, device=noisy.device)
    return (noisy - alpha_bar.sqrt() * x0) / (1 - alpha_bar).sqrt()
