"""Hop-diffused attention against its oracles: theta = [0, 1] is the masked attention, the long
series with its remainder is the PageRank solve, masking after the softmax is the -inf-masked
softmax, samples never mix, nodes are permutation-equivariant, isolated nodes keep their
features, and bad input is refused."""

from __future__ import annotations

import pytest
import torch

from lightning_info.methods.graph4mm import (
    HopDiffusedAttention,
    diffuse,
    hop_diffused_attention,
    masked_softmax_transition,
    masked_transition,
    ppr_weights,
)
from lightning_info.methods.graph4mm.functional import adjacency_mask


def _graph(batch: int, n: int, p: float = 0.4, seed: int = 0) -> torch.Tensor:
    """Symmetric 0/1 adjacencies without self loops, one per sample."""
    g = torch.Generator().manual_seed(seed)
    upper = (torch.rand(batch, n, n, generator=g) < p).triu(1)
    return (upper | upper.transpose(1, 2)).double()


def _scores(shape, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(*shape, generator=g, dtype=torch.float64)
    return logits, torch.softmax(logits, dim=-1)


def test_theta_zero_one_is_exactly_the_masked_attention():
    adjacency = _graph(2, 7)
    _, scores = _scores((2, 7, 7))
    attention = hop_diffused_attention(scores, adjacency, theta=[0.0, 1.0])
    transition = masked_transition(scores, adjacency)
    torch.testing.assert_close(attention, transition, rtol=0, atol=0)
    for b in range(2):
        for i in range(7):
            edges = adjacency[b, i].bool()
            if edges.any():  # by hand: the row's weights on its neighbours, renormalised
                expected = torch.where(edges, scores[b, i], 0.0)
                torch.testing.assert_close(attention[b, i], expected / expected.sum())


def test_post_softmax_renormalisation_equals_the_minus_inf_masked_softmax():
    adjacency = _graph(3, 9, p=0.5, seed=2)
    logits, scores = _scores((3, 2, 9, 9))  # heads broadcast the per-sample graph
    transition = masked_transition(scores, adjacency)
    masked = torch.softmax(logits.masked_fill(adjacency[:, None] == 0, float("-inf")), dim=-1)
    rows = adjacency.sum(-1)[:, None].expand(-1, 2, -1) > 0
    torch.testing.assert_close(transition[rows], masked[rows], rtol=1e-12, atol=1e-14)


def test_the_edge_softmax_from_logits_is_the_same_transition():
    adjacency = _graph(3, 9, p=0.4, seed=5)
    adjacency[0, 4, :] = adjacency[0, :, 4] = 0  # an isolated node
    logits, scores = _scores((3, 2, 9, 9))
    mask = adjacency_mask(logits, adjacency)
    edge = masked_softmax_transition(logits, mask)
    renormalised = masked_transition(scores, adjacency)
    torch.testing.assert_close(edge, renormalised, rtol=1e-12, atol=1e-14)
    assert masked_softmax_transition(logits, mask)[0, :, 4, 4].eq(1).all()


def test_the_edge_softmax_survives_where_renormalising_the_softmax_underflows():
    # row 0 puts nearly all its attention off the graph (on itself); its edges go to 1 and 2
    adjacency = torch.tensor([[0, 1, 1], [1, 0, 0], [1, 0, 0]])
    logits = torch.tensor([[[120.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]])
    reference = masked_softmax_transition(
        logits.double(), adjacency_mask(logits.double(), adjacency)
    )
    expected = torch.softmax(torch.tensor([1.0, 0.0], dtype=torch.float64), 0)
    torch.testing.assert_close(reference[0, 0, 1:], expected)
    logits.requires_grad_(True)
    edge = masked_softmax_transition(logits, adjacency_mask(logits, adjacency))
    torch.testing.assert_close(edge[0, 0].double(), reference[0, 0])
    (grad,) = torch.autograd.grad(edge[0, 0, 1], logits)
    assert torch.isfinite(grad).all() and grad[0, 0, 1] > 0
    # renormalising the float32 softmax: the edges' weights underflow to 0, and the row is
    # taken for an isolated node (a self loop), the wrong transition
    post = masked_transition(torch.softmax(logits.detach(), -1), adjacency)
    assert post[0, 0].tolist() == [1.0, 0.0, 0.0]


def test_the_series_with_its_remainder_tends_to_the_pagerank_solve():
    adjacency = _graph(2, 8, p=0.5, seed=3)
    _, scores = _scores((2, 8, 8), seed=4)
    x = torch.randn(2, 8, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    alpha = 0.3
    transition = masked_transition(scores, adjacency)
    eye = torch.eye(8, dtype=torch.float64)
    exact = alpha * torch.linalg.solve(eye - (1 - alpha) * transition, x)
    series = hop_diffused_attention(scores, adjacency, alpha=alpha, steps=150) @ x
    torch.testing.assert_close(series, exact, rtol=0, atol=1e-12)
    # the same series applied to X by products with X alone
    via_values = diffuse(transition, x, ppr_weights(alpha, 150))
    torch.testing.assert_close(via_values, exact, rtol=0, atol=1e-12)


def test_rows_sum_to_one_with_the_remainder_and_shrink_without_it():
    adjacency = _graph(2, 6, seed=6)
    _, scores = _scores((2, 6, 6), seed=7)
    kept = hop_diffused_attention(scores, adjacency, alpha=0.1, steps=4)
    torch.testing.assert_close(kept.sum(-1), torch.ones(2, 6, dtype=torch.float64))
    cut = hop_diffused_attention(scores, adjacency, alpha=0.1, steps=4, remainder=False)
    torch.testing.assert_close(cut.sum(-1), torch.full((2, 6), 1 - 0.9**4, dtype=torch.float64))
    assert ppr_weights(0.1, 4).tolist() == pytest.approx([0.1, 0.09, 0.081, 0.0729, 0.6561])


def test_rescaled_weights_sum_to_one_and_keep_the_series_proportions():
    adjacency = _graph(2, 6, seed=6)
    _, scores = _scores((2, 6, 6), seed=7)
    rescaled = hop_diffused_attention(scores, adjacency, remainder=False, rescale=True)
    cut = hop_diffused_attention(scores, adjacency, remainder=False)
    torch.testing.assert_close(rescaled.sum(-1), torch.ones(2, 6, dtype=torch.float64))
    torch.testing.assert_close(rescaled, cut / (1 - 0.9**4), rtol=1e-12, atol=1e-14)
    series = [0.1, 0.09, 0.081, 0.0729]
    expected = [w / sum(series) for w in series]
    assert ppr_weights(0.1, 4, remainder=False, rescale=True).tolist() == pytest.approx(expected)
    doubled = hop_diffused_attention(scores, adjacency, theta=[0, 2], remainder=False, rescale=True)
    assert doubled.equal(masked_transition(scores, adjacency))
    with pytest.raises(ValueError, match="remainder or rescale"):
        ppr_weights(0.1, 4, remainder=True, rescale=True)


def test_a_node_without_edges_keeps_its_own_features():
    adjacency = _graph(1, 5, p=1.0)
    adjacency[0, 2, :] = adjacency[0, :, 2] = 0  # node 2 is isolated
    _, scores = _scores((1, 5, 5), seed=8)
    attention = hop_diffused_attention(scores, adjacency)
    torch.testing.assert_close(attention[0, 2], torch.eye(5, dtype=torch.float64)[2])
    assert abs(float(attention[0, :, 2].sum()) - 1.0) < 1e-15  # and no other node reads it


def test_samples_never_mix_in_a_batch():
    """The reference broadcasts (B, N, N) by (B, 1, N, N) and averages over samples; here
    changing sample 1 leaves sample 0 exactly as it was."""
    adjacency = _graph(2, 6, seed=9)
    _, scores = _scores((2, 6, 6), seed=10)
    before = hop_diffused_attention(scores, adjacency)
    changed_scores, changed_graph = scores.clone(), adjacency.clone()
    changed_scores[1] = torch.softmax(torch.randn(6, 6, dtype=torch.float64), -1)
    changed_graph[1] = _graph(1, 6, p=0.9, seed=11)[0]
    after = hop_diffused_attention(changed_scores, changed_graph)
    torch.testing.assert_close(after[0], before[0], rtol=0, atol=0)
    alone = hop_diffused_attention(scores[:1], adjacency[:1])
    torch.testing.assert_close(alone[0], before[0], rtol=0, atol=0)

    torch.manual_seed(0)
    layer = HopDiffusedAttention(8, heads=2).double()
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    out = layer(x, adjacency)
    x2 = x.clone()
    x2[1] = torch.randn(6, 8, dtype=torch.float64)
    torch.testing.assert_close(layer(x2, changed_graph)[0], out[0], rtol=0, atol=0)


def test_the_layer_is_permutation_equivariant():
    torch.manual_seed(1)
    layer = HopDiffusedAttention(12, heads=3, alpha=0.2, steps=3).double()
    x = torch.randn(2, 7, 12, dtype=torch.float64)
    adjacency = _graph(2, 7, seed=12)
    perm = torch.randperm(7, generator=torch.Generator().manual_seed(13))
    out = layer(x, adjacency)
    permuted = layer(x[:, perm], adjacency[:, perm][:, :, perm])
    torch.testing.assert_close(permuted, out[:, perm], rtol=1e-12, atol=1e-12)
    shared = layer(x, adjacency[0])  # one (N, N) graph for the whole batch
    torch.testing.assert_close(shared[0], out[0], rtol=0, atol=0)


def test_bad_input_is_refused():
    _, scores = _scores((2, 4, 4))
    adjacency = _graph(2, 4)
    with pytest.raises(ValueError, match="adjacency must be"):
        masked_transition(scores, adjacency[:, :3, :3])
    with pytest.raises(ValueError, match="holds 3 graphs for a batch of 2"):
        masked_transition(scores, _graph(3, 4))
    with pytest.raises(ValueError, match="binary"):
        masked_transition(scores, adjacency * 0.5)
    with pytest.raises(ValueError, match="scores must be"):
        masked_transition(scores[0, 0], adjacency)
    with pytest.raises(ValueError, match="non-negative"):
        masked_transition(-scores, adjacency)
    with pytest.raises(ValueError, match="NaN"):
        masked_transition(scores.masked_fill(scores > 0.3, float("nan")), adjacency)
    with pytest.raises(ValueError, match="alpha"):
        ppr_weights(0.0, 4)
    with pytest.raises(ValueError, match="steps"):
        ppr_weights(0.1, 0)
    with pytest.raises(ValueError, match="divisible"):
        HopDiffusedAttention(10, heads=3)
