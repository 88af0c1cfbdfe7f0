"""SDCIB: the super deep contrastive information bottleneck of multi-view clustering (functional).

Lou, Zhang, Wu & Hu, "Super Deep Contrastive Information Bottleneck for Multi-modal Clustering",
ICML 2025. Every view ``i`` has an encoder whose hidden layers ``k = 1..L`` each end in a Gaussian
head, ``h_i^k ~ N(mu_i^k, diag (sigma_i^k)^2)``, and a cluster head gives the soft assignment
``c_i = softmax(W h_i^L)``. The loss of view ``i`` is

    L_i = alpha [ sum_k KL(softmax(eps_k) || softmax(h_i^k)) - beta sum_k I_JS(c_i; h_i^k) ]
        + (1 - alpha) [ sum_{j != i} sum_k NTXent(h_i^k, h_j^k) + sum_{j != i} CC(c_i, c_j) ]
                                                                                        (SD)

with ``eps_k ~ N(0, I)`` (the compression term: every layer's representation is pulled towards a
random prior), ``I_JS`` the Jensen-Shannon mutual-information bound of Deep InfoMax between the
assignment and each layer's representation, *maximised* (the reference code minimises it: its sign
is wrong), ``NTXent`` SimCLR's loss between the views of a layer (at every layer: the "super deep"
part) and ``CC`` the cluster-level contrast of Contrastive Clustering, NT-Xent between the columns
of two assignment matrices. The total is ``sum_i L_i``. ``deep=False`` keeps the last layer only
(the paper's ablation).

The shared bounds come from :mod:`lightning_info.measures.mutual_information`
(``jensen_shannon_mi``, ``nt_xent``); the critic is a module given here, always called with the
same argument order ``critic(c, h)`` (the reference swaps it between its warm-up and its loss).
Inference aligns every view's assignments to a reference view by Hungarian matching and sums the
aligned probabilities (:func:`aligned_vote`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.nn import functional as F

from lightning_info.core.validation import require_fraction, require_index, require_non_negative
from lightning_info.measures.clustering import align_probabilities
from lightning_info.measures.mutual_information import jensen_shannon_mi, nt_xent

__all__ = [
    "aligned_vote",
    "assignment_mi",
    "cluster_contrast",
    "prior_kl",
    "sdcib_loss",
    "SDCIBLoss",
]

Critic = Callable[[Tensor, Tensor], Tensor]


def prior_kl(h: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """``KL(softmax(eps) || softmax(h))`` averaged over the batch, ``eps ~ N(0, I)`` of ``h``'s
    shape: the compression term of (SD) for one view and layer. ``h`` is ``(B, r)`` with
    ``B >= 1`` (an empty batch has no average). Only shapes are checked: no device
    synchronisation, so it runs inside a training step as it is."""
    if h.dim() != 2 or h.shape[0] == 0 or h.shape[1] == 0:
        raise ValueError(
            f"`h` must be a (B, r) batch of representations with B >= 1 and r >= 1, got shape "
            f"{tuple(h.shape)}; an empty batch has no average KL."
        )
    eps = torch.randn(h.shape, generator=generator, dtype=h.dtype).to(h.device)
    return F.kl_div(
        F.log_softmax(h, dim=1), F.log_softmax(eps, dim=1), log_target=True, reduction="batchmean"
    )


def assignment_mi(critic: Critic, c: Tensor, h: Tensor, *, validate_args: bool = True) -> Tensor:
    """``I_JS(c; h)`` of (SD): the critic on the batch's pairs ``(c_b, h_b)`` (joint) and on
    ``(c_b, h_{b+1})`` (the batch rolled by one: product of marginals). ``validate_args``:
    refuse non-finite critic scores (one host read; shapes are always checked)."""
    if not callable(critic):
        raise TypeError(
            f"`critic` must be callable as critic(c, h) -> (B,) scores, got "
            f"{type(critic).__name__} {critic!r}."
        )
    if c.dim() != 2 or h.dim() != 2:
        raise ValueError(
            f"`c` (B, K) and `h` (B, width) must be 2-D, got shapes {tuple(c.shape)} and "
            f"{tuple(h.shape)}; one sample is x[None]."
        )
    if c.shape[0] != h.shape[0] or c.shape[0] < 2:
        raise ValueError("`c` and `h` need the same batch of at least 2 samples.")
    joint = critic(c, h)
    marginal = critic(c, h.roll(1, dims=0))
    for name, scores in (("joint", joint), ("marginal", marginal)):
        if not isinstance(scores, Tensor) or scores.shape != (c.shape[0],):
            shape = tuple(scores.shape) if isinstance(scores, Tensor) else type(scores).__name__
            raise ValueError(
                f"the critic must return one score per pair, shape ({c.shape[0]},), got {shape} "
                f"on the {name} pairs; squeeze a trailing dimension of 1."
            )
    return jensen_shannon_mi(joint, marginal, validate_args=validate_args)


def cluster_contrast(
    c_i: Tensor, c_j: Tensor, temperature: float = 0.1, *, validate_args: bool = True
) -> Tensor:
    """``CC(c_i, c_j)``: NT-Xent between the ``K`` assignment columns of two views (Li et al.,
    "Contrastive Clustering", AAAI 2021, eq. 6): column ``k`` of one view is the positive of
    column ``k`` of the other. ``validate_args``: refuse non-finite assignments (one host
    read)."""
    if c_i.dim() != 2 or c_i.shape != c_j.shape:
        raise ValueError(
            f"`c_i` and `c_j` must be (B, K) assignments of one batch and one K, got shapes "
            f"{tuple(c_i.shape)} and {tuple(c_j.shape)}."
        )
    return nt_xent(c_i.T, c_j.T, temperature, validate_args=validate_args)


@dataclass
class SDCIBLoss:
    """The terms of (SD) summed over views (and layers), and the total."""

    total: Tensor
    prior: Tensor
    mutual_information: Tensor
    view_contrast: Tensor
    cluster_contrast: Tensor


def sdcib_loss(
    layers: Sequence[Sequence[Tensor]],
    assignments: Sequence[Tensor],
    critics: Sequence[Sequence[Critic]],
    alpha: float = 0.1,
    beta: float = 1.0,
    temperature: float = 0.1,
    cluster_temperature: float = 0.1,
    deep: bool = True,
    generator: torch.Generator | None = None,
    *,
    validate_args: bool = True,
) -> SDCIBLoss:
    """(SD) over ``V`` views.

    Args:
        layers: ``layers[i][k]`` the sampled representation ``h_i^k`` ``(B, r_k)`` of view ``i``
            at layer ``k`` (the same ``r_k`` in every view).
        assignments: ``c_i`` ``(B, K)``, rows summing to 1.
        critics: ``critics[i][k](c, h)`` the critic of ``I_JS(c_i; h_i^k)``, one score per row.
        alpha, beta: the weights of (SD); ``alpha`` in ``[0, 1]``.
        temperature, cluster_temperature: of NT-Xent between views and of ``CC``.
        deep: every layer (``True``) or the last one only.
        validate_args: refuse NaN or infinite representations, assignments and critic scores,
            one host read (a device synchronisation) per term; ``False`` checks shapes only,
            as a training step does.
    """
    views = len(layers)
    if views < 2:
        raise ValueError(f"SDCIB contrasts views with each other: give at least 2, got {views}.")
    if len(assignments) != views or len(critics) != views:
        raise ValueError("`layers`, `assignments` and `critics` need one entry per view.")
    depth = len(layers[0])
    if any(len(view) != depth for view in layers) or any(len(c) != depth for c in critics):
        raise ValueError("every view needs the same number of layers and one critic per layer.")
    if depth == 0:
        raise ValueError("`layers` holds no layer: give each view at least one representation.")
    if not isinstance(deep, bool):
        raise TypeError(f"`deep` must be a bool, got {type(deep).__name__} {deep!r}.")
    for k in range(depth):
        shapes = [tuple(view[k].shape) for view in layers]
        if any(shape != shapes[0] for shape in shapes):
            raise ValueError(
                f"layer {k} must have one (B, r_k) shape in every view (they are contrasted), "
                f"got {shapes}."
            )
    alpha = require_fraction(alpha, "alpha")
    beta = require_non_negative(beta, "beta")
    kept = range(depth) if deep else range(depth - 1, depth)
    zero = assignments[0].new_zeros(())
    prior, information, views_term, clusters = zero, zero, zero, zero
    for i in range(views):
        for k in kept:
            prior = prior + prior_kl(layers[i][k], generator)
            information = information + assignment_mi(
                critics[i][k], assignments[i], layers[i][k], validate_args=validate_args
            )
        for j in range(views):
            if j == i:
                continue
            for k in kept:
                views_term = views_term + nt_xent(
                    layers[i][k], layers[j][k], temperature, validate_args=validate_args
                )
            clusters = clusters + cluster_contrast(
                assignments[i], assignments[j], cluster_temperature, validate_args=validate_args
            )
    total = alpha * (prior - beta * information) + (1 - alpha) * (views_term + clusters)
    return SDCIBLoss(total, prior, information, views_term, clusters)


def aligned_vote(probabilities: Sequence[Tensor], reference: int = 0) -> tuple[Tensor, Tensor]:
    """The fused clustering: every view's ``(N, K)`` soft assignments with their clusters
    relabelled to agree with view ``reference`` (Hungarian matching of the argmax assignments),
    summed; returns ``(argmax labels (N,), summed aligned probabilities (N, K))``."""
    probabilities = list(probabilities)
    if not probabilities:
        raise ValueError("no views to vote.")
    reference = require_index(reference, "reference", len(probabilities))
    anchor = probabilities[reference]
    total = torch.zeros_like(anchor)
    for view in probabilities:
        if view.shape != anchor.shape:
            raise ValueError("every view's probabilities must have the same shape (N, K).")
        total = total + align_probabilities(anchor, view)
    return total.argmax(1), total
