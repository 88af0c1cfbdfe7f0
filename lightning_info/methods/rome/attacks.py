"""Gradient attacks in pixel space: FGSM and L-inf / L2 PGD, for robustness evaluation and training.

For a classifier ``f``, a loss ``L`` and a clean batch ``(x, y)`` with pixels in ``[lo, hi]``:

    FGSM (Goodfellow et al., 2015):  x' = clip_[lo,hi](x + eps * sign(grad_x L(f(x), y)))

    PGD (Madry et al., 2018):        x_{t+1} = Pi_{B(x, eps) cap [lo,hi]^d}(x_t + alpha * s_t),

with ``s_t = sign(grad)`` for the L-inf ball and ``s_t = grad / ||grad||_2`` (per sample) for the
L2 ball. The projection is onto the eps-ball first (clamping ``delta`` for L-inf, rescaling it to
norm ``<= eps`` for L2) and then onto the pixel box; for ``x`` inside the box, clamping only moves
each coordinate towards ``x``, so the result stays in the eps-ball. A targeted attack takes the
target labels as ``y`` and descends the loss instead (``-alpha * s_t``).

Inputs live in the model's input space, which must be pixel space: ``eps``, ``step_size`` and
``clip`` are in pixel units (``8/255`` means eight grey levels). A model that expects normalised
inputs should carry its normalisation as its first layer, e.g.
``nn.Sequential(Normalize(mean, std), net)``, so that the bounds here stay the pixel bounds.

Every attack runs the model in eval mode and restores each submodule's own train/eval flag
afterwards; gradients are taken with ``torch.autograd.grad`` with respect to the input only, so
no ``.grad`` of a model parameter is created or changed. The input tensor is never written to,
and the adversarial batch comes back detached.

``x`` must have the dtype of the model's parameters (a float64 batch for a float32 model is
refused, not cast), and with a pixel range ``clip = (lo, hi)`` the radius is bounded by it: an
L-inf ``eps`` above ``hi - lo`` or an L2 ``eps`` above the box's diameter
``(hi - lo) * sqrt(d)`` (``d`` coordinates per sample) would send every pixel to a bound, so it
is refused (pixels in ``[0, 1]`` take ``8/255``, not ``8``).

Shapes, dtypes and the arguments are always checked. With ``validate_args=True`` (the default)
the values are checked too: ``x`` finite and inside ``clip``, class labels in ``[0, C)``; each
is a read of a value on the host, a device synchronisation on an accelerator. A training step
whose batches are valid by construction passes ``validate_args=False``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lightning_info.core.validation import (
    require_finite,
    require_finite_tensor,
    require_int,
    require_non_negative,
    require_real_tensor,
)

LossFn = Callable[[Tensor, Tensor], Tensor]
Clip = tuple[float, float] | None

_NORMS = ("linf", "l2")
_CLASS_INDEX_LOSSES = (F.cross_entropy, F.nll_loss)
_CLASS_INDEX_LOSS_MODULES = (nn.CrossEntropyLoss, nn.NLLLoss)


def next_class_targets(y: Tensor, num_classes: int) -> Tensor:
    """Target labels ``(y + 1) mod num_classes`` for a targeted attack (BEARD's target map).

    ``num_classes`` is required: taking it from a fixed constant would send every label of a
    100-class problem into the first ten classes.
    """
    return shifted_targets(y, num_classes, 1)


def shifted_targets(
    y: Tensor, num_classes: int, shift: int, *, validate_args: bool = True
) -> Tensor:
    """Target labels ``(y + shift) mod num_classes``: the map ``c -> c + shift`` of a targeted
    attack (``shift=1`` is BEARD's; ``2`` or ``-1`` test whether a robustness is specific to
    it). ``shift`` must not be a multiple of ``num_classes`` (the target would be the label).
    ``validate_args``: refuse labels outside ``[0, num_classes)`` (one host read)."""
    num_classes = require_int(num_classes, "num_classes", 2)
    shift = check_target_shift(shift, num_classes)
    _require_label_dtype(y)
    if validate_args and y.numel() and (int(y.min()) < 0 or int(y.max()) >= num_classes):
        raise ValueError(
            f"`y` must hold labels in [0, {num_classes}), got values in "
            f"[{int(y.min())}, {int(y.max())}]."
        )
    return (y + shift) % num_classes


def _require_label_dtype(y: Tensor) -> None:
    """``y`` must be a tensor of integer class labels (reads metadata only)."""
    if not isinstance(y, Tensor):
        raise TypeError(f"`y` must be a torch.Tensor of class labels, got {type(y).__name__}.")
    if y.is_floating_point() or y.is_complex() or y.dtype == torch.bool:
        raise TypeError(f"`y` must hold integer class labels, got dtype {y.dtype}.")


def check_target_shift(shift: int, num_classes: int) -> int:
    """``shift`` as an int (a bool, a float or a string is refused, not converted), refused when
    it is a multiple of ``num_classes`` (the target would be the label itself)."""
    if isinstance(shift, bool) or not isinstance(shift, numbers.Integral):
        raise TypeError(f"`shift` must be an int, got {shift!r}.")
    shift = int(shift)
    if shift % num_classes == 0:
        raise ValueError(f"a shift of {shift} maps every class of {num_classes} onto itself")
    return shift


TARGET_MAPS = ("next", "rotating", "untargeted")


def training_attack_labels(
    y: Tensor, num_classes: int, target_map: str, step: int, *, validate_args: bool = True
) -> tuple[Tensor, bool]:
    """The labels an attack on ``y`` aims at during distillation, and whether it is targeted.

    ``"next"`` is the reference's map ``c -> (c + 1) mod K``; ``"rotating"`` targets
    ``c -> (c + s) mod K`` with ``s = 1 + step mod (K - 1)``, a shift that visits every other
    class in turn over the steps; ``"untargeted"`` attacks away from ``y`` itself.
    ``validate_args``: as in :func:`shifted_targets`.
    """
    if target_map not in TARGET_MAPS:
        raise ValueError(f"`target_map` must be one of {TARGET_MAPS}, got {target_map!r}.")
    num_classes = require_int(num_classes, "num_classes", 2)
    step = require_int(step, "step", 0)
    _require_label_dtype(y)
    if target_map == "untargeted":
        return y, False
    shift = 1 if target_map == "next" else 1 + step % (num_classes - 1)
    return shifted_targets(y, num_classes, shift, validate_args=validate_args), True


def fgsm(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    eps: float,
    *,
    targeted: bool = False,
    clip: Clip = (0.0, 1.0),
    loss_fn: LossFn = F.cross_entropy,
    validate_args: bool = True,
) -> Tensor:
    """Fast gradient sign method (Goodfellow et al., 2015), ``clip(x +- eps * sign(grad_x L))``.

    Args:
        model: classifier mapping ``x`` to logits; evaluated in eval mode.
        x: clean batch in pixel space, first dimension the batch, inside ``clip``.
        y: labels of ``x``; for ``targeted=True`` the labels the attack should reach. With a
            cross-entropy or NLL loss, integer class indices in ``[0, C)`` (or ``(N, C)`` class
            probabilities for cross-entropy).
        eps: L-inf radius in pixel units, ``>= 0``.
        targeted: descend ``L(f(x), y)`` towards ``y`` instead of ascending it away from ``y``.
        clip: valid pixel range ``(low, high)``; ``None`` leaves the result unclamped.
        loss_fn: ``loss_fn(logits, y)`` to a scalar; any positive scaling (mean or sum) gives
            the same sign.
        validate_args: check the values of ``x`` and ``y`` (module docstring).

    Returns:
        The detached adversarial batch, same shape and dtype as ``x``.
    """
    eps = require_non_negative(eps, "eps")
    bounds = _check_batch(x, y, clip, loss_fn, model, validate_args)
    _check_radius(eps, "linf", bounds, x)
    with _eval_mode(model):
        grad = _input_grad(model, x, y, loss_fn, check_labels=validate_args)
    direction = -1.0 if targeted else 1.0
    return _clamp(x.detach() + direction * eps * grad.sign(), bounds).detach()


def pgd(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    eps: float,
    *,
    steps: int = 10,
    step_size: float | None = None,
    norm: str = "linf",
    targeted: bool = False,
    random_start: bool = True,
    clip: Clip = (0.0, 1.0),
    generator: torch.Generator | None = None,
    loss_fn: LossFn = F.cross_entropy,
    validate_args: bool = True,
) -> Tensor:
    """Projected gradient descent on the loss (Madry et al., 2018), L-inf or L2 ball.

    Each of the ``steps`` iterations moves by ``step_size`` along the sign of the input gradient
    (``norm="linf"``) or along the per-sample L2-normalised gradient (``norm="l2"``; a sample
    with a zero gradient does not move), then projects onto the ``eps``-ball around ``x`` and
    onto the pixel range ``clip``.

    The random start draws ``delta`` uniformly from the ball: ``U(-eps, eps)`` per coordinate for
    L-inf; for L2 a Gaussian direction normalised to unit length times ``eps * u**(1/d)`` with
    ``u ~ U(0, 1)`` and ``d`` the number of coordinates of one sample. The start is clamped to
    ``clip`` as well.

    Args:
        model: classifier mapping ``x`` to logits; evaluated in eval mode.
        x: clean batch in pixel space, first dimension the batch, inside ``clip``.
        y: labels of ``x``; for ``targeted=True`` the labels the attack should reach (see
            :func:`next_class_targets`). Same rules as for :func:`fgsm`.
        eps: radius of the ball in pixel units, ``>= 0``; ``eps=0`` returns ``x`` unchanged.
        steps: number of gradient steps, ``>= 1``.
        step_size: length of one step; ``None`` means ``2.5 * eps / steps``, which lets the
            iterates cross the ball from one side to the other.
        norm: ``"linf"`` or ``"l2"``.
        targeted: descend ``L(f(x'), y)`` towards ``y`` instead of ascending it.
        random_start: start from a uniform draw in the ball rather than from ``x``.
        clip: valid pixel range ``(low, high)``; ``None`` leaves the iterates unclamped.
        generator: source of the random start, on ``x``'s device; ``None`` uses the global one.
        loss_fn: ``loss_fn(logits, y)`` to a scalar whose per-sample terms do not interact
            (mean or sum both give the same step directions).
        validate_args: check the values of ``x`` and ``y`` (module docstring).

    Returns:
        The detached adversarial batch, same shape and dtype as ``x``.
    """
    eps = require_non_negative(eps, "eps")
    steps = require_int(steps, "steps", 1)
    if norm not in _NORMS:
        raise ValueError(f"`norm` must be one of {_NORMS}, got {norm!r}.")
    alpha = 2.5 * eps / steps if step_size is None else require_non_negative(step_size, "step_size")
    bounds = _check_batch(x, y, clip, loss_fn, model, validate_args)
    _check_radius(eps, norm, bounds, x)
    x = x.detach()

    if random_start and eps > 0:
        delta = _random_in_ball(x, eps, norm, generator)
        x_adv = _clamp(x + delta, bounds)
    else:
        x_adv = x.clone()
    direction = -1.0 if targeted else 1.0
    with _eval_mode(model):
        for step_index in range(steps):
            check_labels = validate_args and step_index == 0
            grad = _input_grad(model, x_adv, y, loss_fn, check_labels=check_labels)
            step = grad.sign() if norm == "linf" else grad / _per_sample_norm(grad).clamp_min(1e-12)
            x_adv = x_adv + direction * alpha * step
            x_adv = _clamp(x + _project(x_adv - x, eps, norm), bounds)
    return x_adv.detach()


def _check_batch(
    x: Tensor, y: Tensor, clip: Clip, loss_fn: LossFn, model: nn.Module, validate_args: bool
) -> tuple[float, float] | None:
    if not isinstance(x, Tensor) or not x.is_floating_point():
        raise TypeError(f"`x` must be a floating-point tensor, got {type(x).__name__}.")
    weights = next((p.dtype for p in model.parameters() if p.is_floating_point()), None)
    if weights is not None and x.dtype != weights:
        raise TypeError(
            f"`x` has dtype {x.dtype} but the model's parameters are {weights}; pass "
            f"`x.to({weights})` (or attack a model of x's dtype)."
        )
    if x.dim() < 2 or not isinstance(y, Tensor) or y.dim() < 1 or x.shape[0] != y.shape[0]:
        raise ValueError(
            f"`x` must be a batch (N, ...) with N labels in `y`, got shapes "
            f"{tuple(x.shape)} and {tuple(getattr(y, 'shape', ()))}."
        )
    require_real_tensor(x, "x")
    require_real_tensor(y, "y")
    if _takes_class_indices(loss_fn) and y.dim() == 1 and _not_integer(y):
        raise TypeError(
            f"`y` must hold integer class indices, got dtype {y.dtype}; pass `y.long()` "
            "(or class probabilities of shape (N, C) to cross-entropy)."
        )
    if validate_args:
        require_finite_tensor(x, "x")
    if clip is None:
        return None
    if len(clip) != 2:
        raise ValueError(f"`clip` must be a pair (low, high) or None, got {clip!r}.")
    low, high = require_finite(clip[0], "clip[0]"), require_finite(clip[1], "clip[1]")
    if not low < high:
        raise ValueError(f"`clip` must satisfy low < high, got {clip!r}.")
    if not validate_args:
        return low, high
    lowest, highest = (
        (float(x.detach().min()), float(x.detach().max())) if x.numel() else (low, high)
    )
    if lowest < low or highest > high:
        raise ValueError(
            f"`x` has values in [{lowest:.4g}, {highest:.4g}], outside "
            f"clip={clip!r}. Attacks work in pixel space: pass unnormalised images and put "
            "the normalisation inside the model."
        )
    return low, high


def _check_radius(eps: float, norm: str, bounds: tuple[float, float] | None, x: Tensor) -> None:
    """Refuse a radius larger than the pixel box it moves in (L-inf: its width; L2: its
    diagonal), which would push every pixel to a bound instead of perturbing it."""
    if bounds is None:
        return
    width = bounds[1] - bounds[0]
    if norm == "linf" and eps > width:
        raise ValueError(
            f"`eps` = {eps} is larger than the pixel range clip={bounds}; it is in pixel units "
            f"(e.g. 8/255 for pixels in [0, 1]); pass eps <= {width:g}."
        )
    diameter = width * math.sqrt(x[0].numel()) if x.shape[0] else width
    if norm == "l2" and eps > diameter:
        raise ValueError(
            f"`eps` = {eps} is larger than the L2 diameter {diameter:g} of the pixel box "
            f"clip={bounds} in {x[0].numel()} coordinates; pass eps <= {diameter:g}."
        )


@contextmanager
def _eval_mode(model: nn.Module) -> Iterator[None]:
    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for module, training in modes:
            module.training = training


def _takes_class_indices(loss_fn: LossFn) -> bool:
    return loss_fn in _CLASS_INDEX_LOSSES or isinstance(loss_fn, _CLASS_INDEX_LOSS_MODULES)


def _not_integer(y: Tensor) -> bool:
    return y.is_floating_point() or y.is_complex() or y.dtype == torch.bool


def _check_labels(logits: Tensor, y: Tensor) -> None:
    """Class indices ``y`` must lie in ``[0, C)`` for a model with ``C`` outputs."""
    if logits.dim() < 2 or y.dim() != 1 or _not_integer(y) or not y.numel():
        return
    classes = logits.shape[1]
    low, high = torch.stack([y.min(), y.max()]).tolist()
    if low < 0 or high >= classes:
        raise ValueError(
            f"`y` must hold class indices in [0, {classes}) for a model with {classes} outputs, "
            f"got values in [{low}, {high}]; check that the labels match the model's classes."
        )


def _input_grad(
    model: nn.Module, x: Tensor, y: Tensor, loss_fn: LossFn, check_labels: bool = False
) -> Tensor:
    x = x.detach().requires_grad_(True)
    with torch.enable_grad():
        logits = model(x)
        if check_labels and _takes_class_indices(loss_fn):
            _check_labels(logits, y)
        loss = loss_fn(logits, y)
        (grad,) = torch.autograd.grad(loss, x)
    return grad


def _clamp(x: Tensor, bounds: tuple[float, float] | None) -> Tensor:
    return x if bounds is None else x.clamp(bounds[0], bounds[1])


def _per_sample_norm(t: Tensor) -> Tensor:
    """L2 norm of each sample, shaped to broadcast against ``t``."""
    norms = t.flatten(1).norm(p=2, dim=1)
    return norms.view(-1, *([1] * (t.dim() - 1)))


def _project(delta: Tensor, eps: float, norm: str) -> Tensor:
    if norm == "linf":
        return delta.clamp(-eps, eps)
    norms = _per_sample_norm(delta)
    return delta * (eps / norms.clamp_min(1e-12)).clamp(max=1.0)


def _random_in_ball(x: Tensor, eps: float, norm: str, generator: torch.Generator | None) -> Tensor:
    if norm == "linf":
        u = torch.rand(x.shape, generator=generator, device=x.device, dtype=x.dtype)
        return (2 * u - 1) * eps
    gaussian = torch.randn(x.shape, generator=generator, device=x.device, dtype=x.dtype)
    direction = gaussian / _per_sample_norm(gaussian).clamp_min(1e-12)
    dims = x[0].numel()
    u = torch.rand(x.shape[0], generator=generator, device=x.device, dtype=x.dtype)
    radius = eps * u.pow(1.0 / dims)
    return direction * radius.view(-1, *([1] * (x.dim() - 1)))
