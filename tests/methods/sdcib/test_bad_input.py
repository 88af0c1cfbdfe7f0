"""Bad arguments to the SDCIB data, its encoder, its loss options and ``assignment_mi`` are
refused with a message naming the argument; valid boundary input still works."""

from __future__ import annotations

import pytest
import torch

from lightning_info.methods.sdcib.datamodule import (
    ClusteringViewsDataModule,
    SyntheticViewsOptions,
)
from lightning_info.methods.sdcib.functional import assignment_mi
from lightning_info.methods.sdcib.module import SDCIBLossOptions, ViewEncoder

GENERATOR = torch.Generator().manual_seed(0)
C = torch.rand(4, 3, generator=GENERATOR).softmax(1)
H = torch.randn(4, 5, generator=GENERATOR)


def _critic(c, h):
    return c.sum(1) + h.sum(1)


def _encoder() -> ViewEncoder:
    torch.manual_seed(0)
    return ViewEncoder(3, (4,))


BAD_INPUT = [
    pytest.param(
        lambda: assignment_mi(_critic, C[:, 0], H[:, 0]),
        ValueError,
        r"`c` \(B, K\) and `h` \(B, width\) must be 2-D, got shapes \(4,\) and \(4,\)",
        id="mi-one-dimensional",
    ),
    pytest.param(
        lambda: assignment_mi(_critic, C, H[:3]),
        ValueError,
        r"`c` and `h` need the same batch of at least 2 samples",
        id="mi-batch-mismatch",
    ),
    pytest.param(
        lambda: assignment_mi(lambda c, h: _critic(c, h)[:, None], C, H),
        ValueError,
        r"the critic must return one score per pair, shape \(4,\), got \(4, 1\) on the joint",
        id="mi-critic-column",
    ),
    pytest.param(
        lambda: assignment_mi(lambda c, h: _critic(c, h).sum(), C, H),
        ValueError,
        r"the critic must return one score per pair, shape \(4,\), got \(\)",
        id="mi-critic-scalar",
    ),
    pytest.param(
        lambda: assignment_mi(_critic, C, torch.full((4, 5), float("nan"))),
        ValueError,
        r"`critic_pos` contains 4 NaN/inf value\(s\)",
        id="mi-nan-representation",
    ),
    pytest.param(
        lambda: SyntheticViewsOptions(num_samples=1.5),
        TypeError,
        r"`num_samples` must be an int, got 1.5",
        id="synthetic-options-samples-float",
    ),
    pytest.param(
        lambda: SyntheticViewsOptions(num_views=True),
        TypeError,
        r"`num_views` must be an int, got True",
        id="synthetic-options-views-bool",
    ),
    pytest.param(
        lambda: SyntheticViewsOptions(noise=float("nan")),
        ValueError,
        r"`noise` must be finite, got nan",
        id="synthetic-options-noise-nan",
    ),
    pytest.param(
        lambda: SyntheticViewsOptions(noise=-1.0),
        ValueError,
        r"`noise` must be >= 0, got -1.0",
        id="synthetic-options-noise-negative",
    ),
    pytest.param(
        lambda: SyntheticViewsOptions(latent_clusters=0),
        ValueError,
        r"`latent_clusters` must be >= 2, got 0",
        id="synthetic-options-no-clusters",
    ),
    pytest.param(
        lambda: SyntheticViewsOptions(private_clusters=1),
        ValueError,
        r"`private_clusters` must be 0 \(no view-specific structure\) or at least 2, got 1",
        id="synthetic-options-one-private-cluster",
    ),
    pytest.param(
        lambda: ClusteringViewsDataModule("synthetic", synthetic={"num_views": 0}),
        ValueError,
        r"`num_views` must be >= 1, got 0",
        id="datamodule-synthetic-mapping-checked-at-construction",
    ),
    pytest.param(
        lambda: ClusteringViewsDataModule(["digits"]),
        ValueError,
        r"`name` must be one of \('digits', 'synthetic'\), got \['digits'\]",
        id="datamodule-name-list",
    ),
    pytest.param(
        lambda: ClusteringViewsDataModule(classes=2.5),
        TypeError,
        r"`classes` must be an int, got 2.5",
        id="datamodule-classes-float",
    ),
    pytest.param(
        lambda: ClusteringViewsDataModule(standardize="no"),
        TypeError,
        r"`standardize` must be True or False, got 'no'",
        id="datamodule-standardize-string",
    ),
    pytest.param(
        lambda: SDCIBLossOptions(alpha=1.0),
        ValueError,
        r"`loss.alpha` must lie in \[0, 1\), got 1.0",
        id="loss-options-alpha-one",
    ),
    pytest.param(
        lambda: SDCIBLossOptions(temperature=True),
        TypeError,
        r"`loss.temperature` must be a real number, got True",
        id="loss-options-temperature-bool",
    ),
    pytest.param(
        lambda: SDCIBLossOptions(beta=float("nan")),
        ValueError,
        r"`loss.beta` must be finite, got nan",
        id="loss-options-beta-nan",
    ),
    pytest.param(
        lambda: ViewEncoder(True),
        TypeError,
        r"`input_dim` must be an int, got True",
        id="encoder-input-dim-bool",
    ),
    pytest.param(
        lambda: ViewEncoder(3, 4),
        TypeError,
        r"`hidden` must be a sequence of layer widths, got int 4; one layer of width w is \(w,\)",
        id="encoder-hidden-int",
    ),
    pytest.param(
        lambda: ViewEncoder(3, "64"),
        TypeError,
        r"`hidden` must be a sequence of layer widths, got str '64'",
        id="encoder-hidden-string",
    ),
    pytest.param(
        lambda: ViewEncoder(3, (2.0,)),
        TypeError,
        r"`hidden` must be an int, got 2.0",
        id="encoder-hidden-float-width",
    ),
    pytest.param(
        lambda: _encoder()(torch.randn(5, 4)),
        ValueError,
        r"`x` must be a floating-point \(batch, 3\) tensor, got shape \(5, 4\)",
        id="encoder-wrong-width",
    ),
    pytest.param(
        lambda: _encoder()(torch.ones(5, 3, dtype=torch.long)),
        ValueError,
        r"`x` must be a floating-point \(batch, 3\) tensor, got shape \(5, 3\) of torch.int64",
        id="encoder-integer-input",
    ),
    pytest.param(
        lambda: _encoder()(torch.randn(5, 3), generator=3),
        TypeError,
        r"`generator` must be a torch.Generator or None, got int",
        id="encoder-generator-int",
    ),
    pytest.param(
        lambda: assignment_mi(3, C, H),
        TypeError,
        r"`critic` must be callable as critic\(c, h\) -> \(B,\) scores, got int 3",
        id="mi-critic-not-callable",
    ),
]


def test_valid_boundary_input_still_works():
    assert SyntheticViewsOptions(num_samples=2, latent_clusters=2, private_clusters=2)
    layers = _encoder()(torch.randn(5, 3), generator=torch.Generator().manual_seed(1))
    assert [tuple(layer.shape) for layer in layers] == [(5, 4)]
    joint, marginal = _critic(C, H), _critic(C, H.roll(1, dims=0))
    expected = (
        -torch.nn.functional.softplus(-joint).mean() - torch.nn.functional.softplus(marginal).mean()
    )
    assert torch.allclose(assignment_mi(_critic, C, H), expected, atol=1e-5)
