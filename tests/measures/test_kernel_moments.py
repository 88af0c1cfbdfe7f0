"""Streamed Gaussian-kernel posterior moments against a dense softmax computation."""

import math

import pytest
import torch

from lightning_info.measures.kernel_moments import kernel_moments


def _dense(x, data, alpha, sigma, pi):
    distance = ((x[:, None, :] - alpha[:, None, None] * data[None]) ** 2).sum(-1)
    logits = -distance / (2 * sigma[:, None] ** 2) + pi.log()
    w = logits.softmax(1)
    d = x.shape[1]
    log_q = logits.logsumexp(1) - 0.5 * d * torch.log(2 * math.pi * sigma**2)
    mean = w @ data
    second = torch.einsum("bn,ni,nj->bij", w, data, data)
    return log_q, mean, w @ (data**2).sum(1), second


@pytest.mark.parametrize("chunk", [1, 7, 1000])
def test_streamed_moments_equal_the_dense_softmax(chunk):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 3, generator=g, dtype=torch.float64) * 3
    data = torch.randn(40, 3, generator=g, dtype=torch.float64)
    alpha = torch.rand(5, generator=g, dtype=torch.float64)
    sigma = 0.1 + torch.rand(5, generator=g, dtype=torch.float64)
    pi = torch.rand(40, generator=g, dtype=torch.float64)
    v = torch.randn(5, 3, generator=g, dtype=torch.float64)
    m = kernel_moments(
        x, data, alpha, sigma, data_weights=pi, vectors=v, second_moment=True, chunk_size=chunk
    )
    log_q, mean, sq, second = _dense(x, data, alpha, sigma, pi / pi.sum())
    torch.testing.assert_close(m.log_density, log_q, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(m.mean, mean, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(m.sq_norm, sq, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(m.second, second, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(m.projected, torch.einsum("bij,bj->bi", second, v))


@pytest.mark.parametrize("weighted", [False, True])
def test_moments_under_autograd_equal_the_dense_softmax_and_their_gradients(weighted):
    # with a gradient to keep, the pass cannot work in place of its logits
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(4, 3, generator=g, dtype=torch.float64) * 2).requires_grad_(True)
    data = torch.randn(30, 3, generator=g, dtype=torch.float64)
    v = torch.randn(4, 3, generator=g, dtype=torch.float64).requires_grad_(True)
    pi = torch.rand(30, generator=g, dtype=torch.float64) if weighted else torch.ones(30).double()
    alpha, sigma = (
        torch.full((4,), 0.7, dtype=torch.float64),
        torch.full((4,), 0.6, dtype=torch.float64),
    )
    m = kernel_moments(
        x,
        data,
        0.7,
        0.6,
        data_weights=pi if weighted else None,
        vectors=v,
        second_moment=True,
        chunk_size=7,
    )
    log_q, mean, sq, second = _dense(x, data, alpha, sigma, pi / pi.sum())
    projected = torch.einsum("bij,bj->bi", second, v)
    for ours, dense in ((m.log_density, log_q), (m.mean, mean), (m.projected, projected)):
        torch.testing.assert_close(ours, dense, rtol=1e-12, atol=1e-12)
        ours_grads = torch.autograd.grad(ours.sum(), (x, v), allow_unused=True, retain_graph=True)
        dense_grads = torch.autograd.grad(dense.sum(), (x, v), allow_unused=True, retain_graph=True)
        for a, b in zip(ours_grads, dense_grads):
            if b is None:
                assert a is None or a.abs().max() == 0
            else:
                torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_far_points_do_not_underflow():
    data = torch.tensor([[0.0], [1.0]], dtype=torch.float64)
    x = torch.tensor([[1000.0]], dtype=torch.float64)
    m = kernel_moments(x, data, 1.0, 0.01)
    assert torch.isfinite(m.log_density).all() and m.mean.item() == pytest.approx(1.0)


def test_bad_inputs():
    with pytest.raises(ValueError, match="share d"):
        kernel_moments(torch.zeros(2, 3), torch.zeros(4, 2), 1.0, 1.0)
    with pytest.raises(ValueError, match="empty"):
        kernel_moments(torch.zeros(2, 3), torch.zeros(0, 3), 1.0, 1.0)
    with pytest.raises(ValueError, match="sigma"):
        kernel_moments(torch.zeros(2, 3), torch.zeros(4, 3), 1.0, 0.0)
    with pytest.raises(ValueError, match="alpha"):
        kernel_moments(torch.zeros(2, 3), torch.zeros(4, 3), torch.ones(3), 1.0)
