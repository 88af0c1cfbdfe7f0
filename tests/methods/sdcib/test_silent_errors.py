"""Labels that used to give silently wrong clustering scores are refused (issue 35): labels of
-1 gave ``num_classes`` 0 (or left those samples out of every class) and float labels were
truncated by ``.long()``. Valid labels still work."""

from __future__ import annotations

import pytest
import torch

from lightning_info.data.multiview import MultiViewDataset, TensorViewsDataModule, check_views
from lightning_info.methods.sdcib.functional import (
    aligned_vote,
    cluster_contrast,
    prior_kl,
    sdcib_loss,
)
from lightning_info.methods.sdcib.metrics import AlignedVoteClustering
from lightning_info.methods.sdcib.module import SDCIB

VIEWS = [torch.randn(6, 3, generator=torch.Generator().manual_seed(0)), torch.randn(6, 2)]
FIX = r"map the classes to 0, 1, \.\.\."
ONE_HOT = [torch.eye(3), torch.eye(3)[[1, 2, 0]]]


def _critic(c, h):
    return c.sum(1) + h.sum(1)


def _loss(widths=(3, 3), depth=1, **kwargs):
    generator = torch.Generator().manual_seed(0)
    layers = [[torch.randn(4, w, generator=generator)] * depth for w in widths]
    assignments = [torch.rand(4, 2, generator=generator).softmax(1)] * len(widths)
    return sdcib_loss(layers, assignments, [[_critic] * depth] * len(widths), **kwargs)


BAD_INPUT = [
    pytest.param(
        lambda: TensorViewsDataModule(VIEWS, torch.full((6,), -1), batch_size=2),
        ValueError,
        r"`labels` must be class indices >= 0, got -1; " + FIX,
        id="all-minus-one",
    ),
    pytest.param(
        lambda: TensorViewsDataModule(VIEWS, torch.tensor([0, 1, 2, -1, 0, 1]), batch_size=2),
        ValueError,
        "must be class indices >= 0, got -1",
        id="one-minus-one",
    ),
    pytest.param(
        lambda: TensorViewsDataModule(VIEWS, torch.tensor([0, 0.5, 1, 1, 2, 2.9]), batch_size=2),
        TypeError,
        r"`labels` must be integer class indices, got dtype torch.float32",
        id="float-labels",
    ),
    pytest.param(
        lambda: TensorViewsDataModule(VIEWS, torch.arange(6) % 2 == 0, batch_size=2),
        TypeError,
        "must be integer class indices, got dtype torch.bool",
        id="bool-labels",
    ),
    pytest.param(
        lambda: MultiViewDataset(VIEWS, torch.tensor([0.0] * 6)),
        TypeError,
        "must be integer class indices",
        id="dataset-float-labels",
    ),
    pytest.param(
        lambda: check_views(VIEWS, torch.arange(5)),
        ValueError,
        r"`labels` must be a tensor of shape \(6,\)",
        id="wrong-length",
    ),
    pytest.param(
        lambda: prior_kl(torch.zeros(0, 4)),
        ValueError,
        r"`h` must be a \(B, r\) batch .*B >= 1.*got shape \(0, 4\); an empty batch",
        id="prior-kl-empty-batch",
    ),
    pytest.param(
        lambda: prior_kl(torch.zeros(4)),
        ValueError,
        r"`h` must be a \(B, r\) batch .*got shape \(4,\)",
        id="prior-kl-1d",
    ),
    pytest.param(
        lambda: cluster_contrast(torch.rand(5, 3), torch.rand(6, 3)),
        ValueError,
        r"`c_i` and `c_j` must be \(B, K\) .*got shapes \(5, 3\) and \(6, 3\)",
        id="cluster-contrast-batches-differ",
    ),
    pytest.param(
        lambda: _loss(widths=(3, 5)),
        ValueError,
        r"layer 0 must have one \(B, r_k\) shape in every view .*\[\(4, 3\), \(4, 5\)\]",
        id="loss-widths-differ",
    ),
    pytest.param(
        lambda: _loss(depth=0, deep=False),
        ValueError,
        r"`layers` holds no layer",
        id="loss-no-layers",
    ),
    pytest.param(
        lambda: _loss(deep="no"),
        TypeError,
        r"`deep` must be a bool, got str 'no'",
        id="loss-deep-string",
    ),
    pytest.param(
        lambda: aligned_vote(ONE_HOT, True),
        TypeError,
        r"`reference` must be an integer index, got bool True",
        id="vote-reference-bool",
    ),
    pytest.param(
        lambda: aligned_vote(ONE_HOT, 0.0),
        TypeError,
        r"`reference` must be an integer index, got float 0.0",
        id="vote-reference-float",
    ),
    pytest.param(
        lambda: aligned_vote(ONE_HOT, -1),
        ValueError,
        r"`reference` must be an index in \[0, 2\), got -1",
        id="vote-reference-negative",
    ),
    pytest.param(
        lambda: SDCIB([3, 4], 2, reference_view=True),
        TypeError,
        r"`reference_view` must be an integer index, got bool True",
        id="module-reference-bool",
    ),
    pytest.param(
        lambda: SDCIB([3, 4], 2, reference_view=1.0),
        TypeError,
        r"`reference_view` must be an integer index, got float 1.0",
        id="module-reference-float",
    ),
    pytest.param(
        lambda: SDCIB([3, 4], 2, deep="False"),
        TypeError,
        r"`deep` must be a bool, got str 'False'",
        id="module-deep-string",
    ),
    pytest.param(
        lambda: AlignedVoteClustering(2, True),
        TypeError,
        r"`reference` must be an integer index, got bool True",
        id="metric-reference-bool",
    ),
]


def test_valid_labels_count_their_classes():
    data = TensorViewsDataModule(
        VIEWS, torch.tensor([0, 2, 2, 1, 0, 2], dtype=torch.int32), batch_size=2
    )
    assert data.num_classes == 3 and data.labels.dtype == torch.long
    assert data.labels.tolist() == [0, 2, 2, 1, 0, 2]
    one_class = TensorViewsDataModule(VIEWS, torch.zeros(6, dtype=torch.long), batch_size=6)
    assert one_class.num_classes == 1


def test_prior_kl_of_one_row_is_the_closed_form_kl():
    """One row, the KL of the softmax of the drawn noise to the softmax of ``h``, in float64."""
    h = torch.tensor([[0.3, -1.2, 2.0]], dtype=torch.float64)
    eps = torch.randn(h.shape, generator=torch.Generator().manual_seed(5), dtype=h.dtype)
    p, q = eps.softmax(1), h.softmax(1)
    expected = float((p * (p.log() - q.log())).sum())
    got = prior_kl(h, torch.Generator().manual_seed(5))
    assert float(got) == pytest.approx(expected, rel=1e-12)


def test_the_last_view_as_reference_is_that_view_not_an_alias():
    labels, total = aligned_vote(ONE_HOT, 1)
    assert labels.tolist() == [1, 2, 0]  # view 1's own labels
    torch.testing.assert_close(total, 2 * ONE_HOT[1])
    assert SDCIB([3, 4], 2, reference_view=1, deep=False).val_clustering.reference == 1


def test_sdcib_loss_record_keeps_its_terms():
    """The loss record stores the given terms unchanged (it has no checks of its own)."""
    from lightning_info.methods.sdcib.functional import SDCIBLoss

    terms = [torch.tensor(float(i)) for i in range(5)]
    loss = SDCIBLoss(*terms)
    fields = [loss.total, loss.prior, loss.mutual_information, loss.view_contrast]
    assert all(a is b for a, b in zip(fields + [loss.cluster_contrast], terms))
