"""The terms of SDCIB's loss against brute-force loops, and the fused vote."""

from __future__ import annotations

import math

import pytest
import torch

from lightning_info.methods.sdcib.functional import (
    aligned_vote,
    assignment_mi,
    cluster_contrast,
    prior_kl,
    sdcib_loss,
)


def _softplus(x: float) -> float:
    return math.log1p(math.exp(-abs(x))) + max(x, 0.0)


def _cosine(a, b) -> float:
    return float(a @ b / (a.norm() * b.norm()))


def _nt_xent_loop(z1, z2, tau) -> float:
    z = torch.cat([z1, z2]).double()
    n = z1.shape[0]
    total = 0.0
    for i in range(2 * n):
        positive = (i + n) % (2 * n)
        numerator = math.exp(_cosine(z[i], z[positive]) / tau)
        denominator = sum(math.exp(_cosine(z[i], z[k]) / tau) for k in range(2 * n) if k != i)
        total += -math.log(numerator / denominator)
    return total / (2 * n)


class _BilinearCritic(torch.nn.Module):
    def __init__(self, clusters: int, width: int, seed: int) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.weight = torch.nn.Parameter(torch.randn(clusters, width, generator=g))

    def forward(self, c, h):
        return ((c @ self.weight) * h).sum(1)


def test_assignment_mi_is_the_jensen_shannon_bound_with_the_batch_rolled():
    g = torch.Generator().manual_seed(0)
    c = torch.softmax(torch.randn(6, 3, generator=g), 1).double()
    h = torch.randn(6, 4, generator=g).double()
    critic = _BilinearCritic(3, 4, 1).double()
    joint = [float(critic(c[b : b + 1], h[b : b + 1])) for b in range(6)]
    # product of marginals: assignment b with the representation of sample b - 1
    marginal = [float(critic(c[b : b + 1], h[(b - 1) % 6 : (b - 1) % 6 + 1])) for b in range(6)]
    expected = -sum(_softplus(-t) for t in joint) / 6 - sum(_softplus(t) for t in marginal) / 6
    assert float(assignment_mi(critic, c, h)) == pytest.approx(expected, abs=1e-12)


def test_cluster_contrast_is_nt_xent_over_assignment_columns():
    g = torch.Generator().manual_seed(1)
    c_i = torch.softmax(torch.randn(7, 4, generator=g), 1).double()
    c_j = torch.softmax(torch.randn(7, 4, generator=g), 1).double()
    expected = _nt_xent_loop(c_i.T, c_j.T, 0.1)
    assert float(cluster_contrast(c_i, c_j, 0.1)) == pytest.approx(expected, rel=1e-10)


def test_prior_kl_is_kl_of_softmaxes_with_the_generators_draw():
    h = torch.randn(5, 6, generator=torch.Generator().manual_seed(2)).double()
    eps = torch.randn(h.shape, generator=torch.Generator().manual_seed(3), dtype=h.dtype)
    p, q = torch.softmax(eps, 1), torch.softmax(h, 1)
    expected = (
        sum(
            sum(float(p[b, k] * (p[b, k].log() - q[b, k].log())) for k in range(6))
            for b in range(5)
        )
        / 5
    )
    value = prior_kl(h, torch.Generator().manual_seed(3))
    assert float(value) == pytest.approx(expected, rel=1e-12)


def _case(views=3, layers=2, batch=6, clusters=3, width=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    hs = [
        [torch.randn(batch, width, generator=g).double() for _ in range(layers)]
        for _ in range(views)
    ]
    cs = [
        torch.softmax(torch.randn(batch, clusters, generator=g), 1).double() for _ in range(views)
    ]
    critics = [
        [_BilinearCritic(clusters, width, 10 * i + k).double() for k in range(layers)]
        for i in range(views)
    ]
    return hs, cs, critics


@pytest.mark.parametrize("deep", [True, False])
def test_sdcib_loss_equals_the_sum_over_views_and_layers(deep):
    hs, cs, critics = _case()
    alpha, beta, tau, tau_c = 0.3, 2.0, 0.2, 0.5
    loss = sdcib_loss(
        hs,
        cs,
        critics,
        alpha=alpha,
        beta=beta,
        temperature=tau,
        cluster_temperature=tau_c,
        deep=deep,
        generator=torch.Generator().manual_seed(7),
    )
    layers = [0, 1] if deep else [1]
    g = torch.Generator().manual_seed(7)  # the prior draws, in the loss's order
    prior = information = views_term = clusters = 0.0
    for i in range(3):
        for k in layers:
            prior += float(prior_kl(hs[i][k], g))
            information += float(assignment_mi(critics[i][k], cs[i], hs[i][k]))
        for j in range(3):
            if j != i:
                views_term += sum(_nt_xent_loop(hs[i][k], hs[j][k], tau) for k in layers)
                clusters += _nt_xent_loop(cs[i].T, cs[j].T, tau_c)
    total = alpha * (prior - beta * information) + (1 - alpha) * (views_term + clusters)
    assert float(loss.prior) == pytest.approx(prior, rel=1e-10)
    assert float(loss.mutual_information) == pytest.approx(information, rel=1e-10)
    assert float(loss.view_contrast) == pytest.approx(views_term, rel=1e-10)
    assert float(loss.cluster_contrast) == pytest.approx(clusters, rel=1e-10)
    assert float(loss.total) == pytest.approx(total, rel=1e-10)


def test_the_information_term_is_maximised():
    # the reference minimises I(c; h): here a critic that separates the joint from the rolled
    # pairs better (larger bound) must give a lower loss
    hs, cs, critics = _case(views=2, layers=1)
    critic = critics[0][0]
    base = sdcib_loss(hs, cs, critics, generator=torch.Generator().manual_seed(0))
    base.total.backward()
    grad = critic.weight.grad.clone()
    with torch.no_grad():
        critic.weight -= 1e-3 * grad  # a gradient step on the loss
    after = sdcib_loss(hs, cs, critics, generator=torch.Generator().manual_seed(0))
    assert float(after.mutual_information) > float(base.mutual_information)
    assert float(after.total) < float(base.total)


def test_aligned_vote_undoes_a_permutation_of_each_views_clusters():
    g = torch.Generator().manual_seed(4)
    logits = torch.randn(40, 4, generator=g) * 3
    reference = torch.softmax(logits, 1)
    cycle = torch.tensor([1, 2, 3, 0])  # view 1 calls cluster k what view 0 calls cycle[k]
    permuted = reference[:, cycle.argsort()]
    labels, total = aligned_vote([reference, permuted, reference[:, [3, 2, 1, 0]]])
    assert torch.equal(labels, reference.argmax(1))
    torch.testing.assert_close(total, 3 * reference)


def test_bad_inputs():
    hs, cs, critics = _case(views=2)
    with pytest.raises(ValueError, match="at least 2"):
        sdcib_loss(hs[:1], cs[:1], critics[:1])
    with pytest.raises(ValueError, match="one entry per view"):
        sdcib_loss(hs, cs[:1], critics)
    with pytest.raises(ValueError, match="same number of layers"):
        sdcib_loss([hs[0], hs[1][:1]], cs, critics)
    with pytest.raises(ValueError, match="alpha"):
        sdcib_loss(hs, cs, critics, alpha=1.5)
    with pytest.raises(ValueError, match="at least 2"):
        assignment_mi(critics[0][0], cs[0][:1], hs[0][0][:1])
    with pytest.raises(ValueError, match="same shape"):
        aligned_vote([cs[0], cs[1][:, :2]])
