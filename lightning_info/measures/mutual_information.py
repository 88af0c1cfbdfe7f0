"""Variational mutual-information bounds and distribution-alignment terms, as functions on tensors.

Every function checks the shapes it is given and returns a 0-dim tensor (or one value per sample,
where it says so) that is differentiable in its inputs. With ``validate_args=True`` (the default,
as torchmetrics' functional metrics) it also checks the values: that the inputs are finite and
that ``sigma`` and ``neg_weights`` are in range, each check one read of a value on the host (a
device synchronisation on an accelerator). A training step passes ``validate_args=False``: then
only metadata (shapes) is read, and a NaN flows through as in any torch expression.

Critic-based bounds take the critic ``T(x, y)`` already evaluated: ``critic_pos`` on samples of
the joint ``P = p(x, y)``, ``critic_neg`` on samples of the product of marginals
``Q = p(x) p(y)``. With the optimal critic ``T* = log p(x, y) / (p(x) p(y))`` the
Donsker-Varadhan bound is tight, and InfoNCE approaches ``min(I(X; Y), log N)``
(Poole et al., "On Variational Bounds of Mutual Information", ICML 2019).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor
from torch.nn import functional as F

from lightning_info.core.validation import require_finite_tensor, require_positive


def _tensor(
    value: Tensor,
    name: str,
    *,
    ndim: int | None = None,
    min_ndim: int = 0,
    validate_args: bool = True,
) -> Tensor:
    if not isinstance(value, Tensor):
        raise TypeError(f"`{name}` must be a torch.Tensor, got {type(value).__name__}.")
    if ndim is not None and value.ndim != ndim:
        raise ValueError(f"`{name}` must be {ndim}-D, got shape {tuple(value.shape)}.")
    if value.ndim < min_ndim:
        raise ValueError(f"`{name}` must have >= {min_ndim} dims, got shape {tuple(value.shape)}.")
    if value.numel() == 0:
        raise ValueError(f"`{name}` is empty (shape {tuple(value.shape)}).")
    return require_finite_tensor(value, name) if validate_args else value


def gaussian_kl_standard_normal(
    mu: Tensor,
    log_var: Tensor | None = None,
    *,
    sigma: Tensor | None = None,
    validate_args: bool = True,
) -> Tensor:
    """Per-sample ``KL(N(mu, diag sigma^2) || N(0, I))``, summed over the last dimension.

        KL = 1/2 * sum_k (sigma_k^2 + mu_k^2 - 1 - log sigma_k^2)

    (Kingma & Welling, "Auto-Encoding Variational Bayes", ICLR 2014, appendix B), the rate term of
    the variational information bottleneck (Alemi et al., "Deep Variational Information
    Bottleneck", ICLR 2017). Give exactly one of ``log_var = log sigma^2`` and ``sigma`` (> 0),
    with the shape of ``mu`` ``(..., k)``. Returns a tensor of shape ``(...)``.
    ``validate_args``: check that the inputs are finite and ``sigma > 0`` (module docstring).
    """
    if (log_var is None) == (sigma is None):
        raise ValueError("Pass exactly one of `log_var` and `sigma`.")
    mu = _tensor(mu, "mu", min_ndim=1, validate_args=validate_args)
    if sigma is not None:
        sigma = _tensor(sigma, "sigma", validate_args=validate_args)
        if validate_args and bool((sigma <= 0).any()):
            raise ValueError("`sigma` must be > 0 everywhere.")
        log_var = 2 * sigma.log()
    else:
        log_var = _tensor(log_var, "log_var", validate_args=validate_args)
    if log_var.shape != mu.shape:
        raise ValueError(
            f"`mu` and the variance must have the same shape, got {tuple(mu.shape)} and "
            f"{tuple(log_var.shape)}."
        )
    return 0.5 * (log_var.exp() + mu.pow(2) - 1 - log_var).sum(-1)


def jensen_shannon_mi(
    critic_pos: Tensor,
    critic_neg: Tensor,
    neg_weights: Tensor | None = None,
    *,
    validate_args: bool = True,
) -> Tensor:
    """Jensen-Shannon mutual-information estimator of Deep InfoMax.

        I_JS = E_P[-softplus(-T)] - E_Q[softplus(T)]

    (Hjelm et al., "Learning Deep Representations by Mutual Information Estimation and
    Maximization", ICLR 2019, eq. 4). It equals ``2 JS(P || Q) - 2 log 2`` at the optimal critic, so
    a constant-zero critic gives ``-2 log 2``; the optimal critic is ``T = log dP/dQ``. Inputs of
    any shape; all elements are samples. ``neg_weights`` (shape of ``critic_neg``, non-negative)
    turns ``E_Q`` into a weighted mean, e.g. an exact expectation over a discrete variable.
    ``validate_args``: check that the inputs are finite and the weights non-negative (module
    docstring).
    """
    critic_pos = _tensor(critic_pos, "critic_pos", validate_args=validate_args)
    critic_neg = _tensor(critic_neg, "critic_neg", validate_args=validate_args)
    if neg_weights is None:
        negative = F.softplus(critic_neg).mean()
    else:
        if neg_weights.shape != critic_neg.shape or (
            validate_args and bool((neg_weights < 0).any())
        ):
            raise ValueError("`neg_weights` must be non-negative with the shape of `critic_neg`.")
        negative = (neg_weights * F.softplus(critic_neg)).sum() / neg_weights.sum()
    return -F.softplus(-critic_pos).mean() - negative


def infonce(scores: Tensor, *, validate_args: bool = True) -> Tensor:
    """InfoNCE lower bound from an ``(N, N)`` critic matrix ``s_ij = T(x_i, y_j)``.

        I >= log N - L_NCE = 1/N * sum_i [s_ii - logsumexp_j s_ij] + log N

    with the positive pairs on the diagonal (van den Oord et al., "Representation Learning with
    Contrastive Predictive Coding", 2018; Poole et al., ICML 2019, eq. 12). The value never exceeds
    ``log N``. ``validate_args``: check that the scores are finite (module docstring).
    """
    scores = _tensor(scores, "scores", ndim=2, validate_args=validate_args)
    n = scores.shape[0]
    if scores.shape[1] != n:
        raise ValueError(f"`scores` must be square (N, N), got shape {tuple(scores.shape)}.")
    return (scores.diagonal() - scores.logsumexp(dim=1)).mean() + math.log(n)


def donsker_varadhan(
    critic_pos: Tensor, critic_neg: Tensor, *, validate_args: bool = True
) -> Tensor:
    """Donsker-Varadhan lower bound used by MINE.

        I_DV = E_P[T] - log E_Q[e^T],   log E_Q[e^T] ~ logsumexp_j T(q_j) - log n

    (Belghazi et al., "Mutual Information Neural Estimation", ICML 2018, eq. 8), with the log-mean-
    exp evaluated by ``logsumexp`` so that large critic values do not overflow. Inputs of any
    shape; all elements are samples. ``validate_args``: check that the inputs are finite (module
    docstring).
    """
    critic_pos = _tensor(critic_pos, "critic_pos", validate_args=validate_args)
    critic_neg = _tensor(critic_neg, "critic_neg", validate_args=validate_args)
    log_mean_exp = critic_neg.reshape(-1).logsumexp(0) - math.log(critic_neg.numel())
    return critic_pos.mean() - log_mean_exp


def nt_xent(
    z1: Tensor, z2: Tensor, temperature: float = 0.5, *, validate_args: bool = True
) -> Tensor:
    """NT-Xent loss of SimCLR over the ``2N`` views of ``N`` pairs ``(z1[i], z2[i])``.

        l(i, j) = -log exp(sim(z_i, z_j) / tau) / sum_{k != i} exp(sim(z_i, z_k) / tau),
        L = 1/(2N) * sum_i l(i, pos(i))

    with ``sim`` the cosine similarity over the stacked views ``z = [z1; z2]`` and ``pos(i)`` the
    other view of the same example (Chen et al., "A Simple Framework for Contrastive Learning of
    Visual Representations", ICML 2020, eq. 1). Inputs are ``(N, d)``. ``validate_args``: check
    that the inputs are finite (module docstring).
    """
    z1 = _tensor(z1, "z1", ndim=2, validate_args=validate_args)
    z2 = _tensor(z2, "z2", ndim=2, validate_args=validate_args)
    if z1.shape != z2.shape:
        raise ValueError(f"`z1` and `z2` must have the same shape, got {z1.shape} and {z2.shape}.")
    temperature = require_positive(temperature, "temperature")
    n = z1.shape[0]
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    logits = z @ z.T / temperature
    self_pair = torch.eye(2 * n, dtype=torch.bool, device=z.device)
    logits = logits.masked_fill(self_pair, float("-inf"))
    positives = torch.cat([torch.arange(n, 2 * n), torch.arange(n)]).to(z.device)
    return F.cross_entropy(logits, positives)


def mean_embedding_distance(
    a: Tensor, b: Tensor, p: float = 2.0, *, validate_args: bool = True
) -> Tensor:
    """Distance between the sample means of two feature sets ``a (n, d)`` and ``b (m, d)``.

        D_p = ||mean_i a_i - mean_j b_j||_p^p    (finite p >= 1),
        D_inf = max_k |mean_i a_ik - mean_j b_jk|

    For ``p = 2`` this is the squared Euclidean distance of the mean embeddings, i.e. the biased
    (V-statistic) MMD^2 with the linear kernel ``k(u, v) = u^T v`` (Gretton et al., "A Kernel
    Two-Sample Test", JMLR 2012, sec. 2.2); ``p = 1`` sums absolute mean differences, which is
    less dominated by a few large coordinates. ``validate_args``: check that the inputs are
    finite (module docstring).
    """
    a = _tensor(a, "a", ndim=2, validate_args=validate_args)
    b = _tensor(b, "b", ndim=2, validate_args=validate_args)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"`a` and `b` need the same feature size, got {a.shape} and {b.shape}.")
    if not (p == math.inf or (isinstance(p, (int, float)) and 1 <= p < math.inf)):
        raise ValueError(f"`p` must be >= 1 or math.inf, got {p!r}.")
    diff = a.mean(0) - b.mean(0)
    if p == math.inf:
        return diff.abs().max()
    return diff.abs().pow(p).sum()


def _bandwidths(bandwidths: float | Sequence[float]) -> list[float]:
    values = [bandwidths] if isinstance(bandwidths, (int, float)) else list(bandwidths)
    if not values:
        raise ValueError("`bandwidths` must not be empty.")
    return [require_positive(v, "bandwidths") for v in values]


def _gaussian_kernel(x: Tensor, y: Tensor, bandwidths: float | Sequence[float] = 1.0) -> Tensor:
    """Gram matrix ``K_ij = sum_s exp(-||x_i - y_j||^2 / (2 sigma_s^2))`` of ``x``, ``y``.

    A sum of Gaussian kernels is again characteristic; several bandwidths spare the choice of one
    (Gretton et al., "Optimal kernel choice for large-scale two-sample tests", NeurIPS 2012).
    """
    sq_dist = (x.pow(2).sum(1, keepdim=True) + y.pow(2).sum(1) - 2 * x @ y.T).clamp_min(0)
    return sum(torch.exp(-sq_dist / (2 * s * s)) for s in _bandwidths(bandwidths))


def mmd2(
    x: Tensor,
    y: Tensor,
    bandwidths: float | Sequence[float] = 1.0,
    *,
    validate_args: bool = True,
) -> Tensor:
    """Unbiased squared maximum mean discrepancy between samples ``x (m, d)`` and ``y (n, d)``.

        MMD^2_u = 1/(m(m-1)) sum_{i != j} k(x_i, x_j) + 1/(n(n-1)) sum_{i != j} k(y_i, y_j)
                  - 2/(mn) sum_{i, j} k(x_i, y_j)

    (Gretton et al., "A Kernel Two-Sample Test", JMLR 2012, eq. 3) with the Gaussian kernel
    ``k(u, v) = exp(-||u - v||^2 / (2 sigma^2))``, or the sum of such kernels over several
    ``bandwidths``. Unbiased, so it can be slightly negative when both samples share a law. Needs
    ``m, n >= 2``. ``validate_args``: check that the inputs are finite (module docstring).
    """
    x = _tensor(x, "x", ndim=2, validate_args=validate_args)
    y = _tensor(y, "y", ndim=2, validate_args=validate_args)
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"`x` and `y` need the same feature size, got {x.shape} and {y.shape}.")
    m, n = x.shape[0], y.shape[0]
    if m < 2 or n < 2:
        raise ValueError(f"mmd2 needs at least 2 samples on each side, got {m} and {n}.")
    k_xx = _gaussian_kernel(x, x, bandwidths)
    k_yy = _gaussian_kernel(y, y, bandwidths)
    k_xy = _gaussian_kernel(x, y, bandwidths)
    within_x = (k_xx.sum() - k_xx.diagonal().sum()) / (m * (m - 1))
    within_y = (k_yy.sum() - k_yy.diagonal().sum()) / (n * (n - 1))
    return within_x + within_y - 2 * k_xy.mean()
