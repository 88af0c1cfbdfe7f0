"""MMQFormer: the queries' output ignores the order of text nodes and image tokens, padded
tokens change nothing, samples never mix, and the graph reaches the output only through the
hop-diffused joint attention."""

from __future__ import annotations

import pytest
import torch

from lightning_info.methods.graph4mm.qformer import MMQFormer

HOP = {"alpha": 0.2, "steps": 3}


def _former(hop=None, **kwargs):
    torch.manual_seed(0)
    return (
        MMQFormer(
            16,
            image_dim=6,
            text_dim=5,
            out_dim=12,
            num_queries=3,
            layers=2,
            heads=4,
            hop=hop,
            **kwargs,
        )
        .double()
        .eval()
    )


def _inputs(seed=0, batch=2, images=4, nodes=5):
    g = torch.Generator().manual_seed(seed)
    image = torch.randn(batch, images, 6, generator=g, dtype=torch.float64)
    text = torch.randn(batch, nodes, 5, generator=g, dtype=torch.float64)
    upper = (torch.rand(batch, nodes, nodes, generator=g) < 0.5).triu(1)
    return image, text, upper | upper.transpose(1, 2)


@pytest.mark.parametrize("hop", [None, HOP])
def test_queries_ignore_the_order_of_nodes_and_image_tokens(hop):
    former = _former(hop)
    image, text, adjacency = _inputs()
    out = former(image, text, adjacency=adjacency)
    assert out.shape == (2, 3, 12)
    nodes = torch.tensor([3, 0, 4, 1, 2])
    tokens = torch.tensor([2, 3, 1, 0])
    permuted = former(image[:, tokens], text[:, nodes], adjacency=adjacency[:, nodes][:, :, nodes])
    torch.testing.assert_close(permuted, out, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("hop", [None, HOP])
def test_padded_nodes_and_tokens_change_nothing(hop):
    former = _former(hop)
    image, text, adjacency = _inputs(seed=1)
    out = former(image, text, adjacency=adjacency)
    g = torch.Generator().manual_seed(2)
    padded_image = torch.cat([image, torch.randn(2, 2, 6, generator=g, dtype=torch.float64)], 1)
    padded_text = torch.cat([text, torch.randn(2, 3, 5, generator=g, dtype=torch.float64)], 1)
    padded_graph = torch.ones(2, 8, 8, dtype=torch.bool)  # edges to padding must not count
    padded_graph[:, :5, :5] = adjacency
    image_mask = torch.arange(6) < 4
    text_mask = torch.arange(8) < 5
    again = former(
        padded_image,
        padded_text,
        image_mask.expand(2, -1),
        text_mask.expand(2, -1),
        adjacency=padded_graph,
    )
    torch.testing.assert_close(again, out, rtol=1e-10, atol=1e-10)


def test_samples_never_mix_and_the_graph_matters_only_with_hop_diffusion():
    image, text, adjacency = _inputs(seed=3)
    other = adjacency.clone()
    other[1] = ~other[1] & ~torch.eye(5, dtype=torch.bool)
    for hop in (None, HOP):
        former = _former(hop)
        out = former(image, text, adjacency=adjacency)
        changed_text = text.clone()
        changed_text[1] += 1.0
        again = former(image, changed_text, adjacency=other)
        torch.testing.assert_close(again[0], out[0], rtol=0, atol=0)
        rewired = former(image, text, adjacency=other)
        moved = float((rewired[1] - out[1]).abs().max().detach())
        assert (moved > 1e-6) if hop else (moved == 0.0)


def test_bad_input_is_refused():
    image, text, adjacency = _inputs()
    with pytest.raises(ValueError, match="adjacency"):
        _former(HOP)(image, text)
    with pytest.raises(ValueError, match="adjacency must be"):
        _former(HOP)(image, text, adjacency=adjacency[:, :4, :4])
    with pytest.raises(ValueError, match="at least one image token"):
        _former(validate_args=True)(image, text, image_mask=torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="one batch"):
        _former()(image[:1], text)
    with pytest.raises(ValueError, match="divisible"):
        MMQFormer(10, 6, 5, 12, heads=4)


def test_widths_given_later_build_the_same_parameters():
    torch.manual_seed(0)
    direct = MMQFormer(16, 6, 5, 12, num_queries=3, heads=4, hop=HOP)
    deferred = MMQFormer(16, num_queries=3, heads=4, hop=HOP)
    assert not deferred.built and not list(deferred.parameters())
    image, text, adjacency = _inputs()
    with pytest.raises(ValueError, match="no widths yet"):
        deferred(image.float(), text.float(), adjacency=adjacency)
    torch.manual_seed(0)
    assert deferred.build(6, 5, 12) is deferred and deferred.widths == direct.widths == (6, 5, 12)
    for (name, a), (_, b) in zip(direct.state_dict().items(), deferred.state_dict().items()):
        assert torch.equal(a, b), name
    with pytest.raises(ValueError, match="already built"):
        deferred.build(6, 5, 12)


def test_bad_settings_are_refused_before_the_widths():
    with pytest.raises(ValueError, match="image_dim and out_dim together"):
        MMQFormer(16, image_dim=6)
    with pytest.raises(ValueError, match="text_dim together"):
        MMQFormer(16, text_dim=5)
    with pytest.raises(ValueError, match="alpha"):
        MMQFormer(16, hop={"alpha": 2.0})
    with pytest.raises(ValueError, match="give text_dim"):
        MMQFormer(16, hop=HOP).build(6, None, 12)
