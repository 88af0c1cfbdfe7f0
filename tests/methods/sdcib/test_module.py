"""SDCIB trained on small multi-view data, its data modules and the fused-clustering metric."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch

from lightning_info.data.multiview import TensorViewsDataModule, standardize_columns
from lightning_info.measures.clustering import clustering_scores
from lightning_info.methods.sdcib import (
    SDCIB,
    AlignedVoteClustering,
    ClusteringViewsDataModule,
    SDCIBLossOptions,
    ViewEncoder,
)
from lightning_info.methods.sdcib.datamodule import (
    SyntheticViewsOptions,
    digits_views,
    shared_latent_views,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # small MLPs: one thread is fastest

QUIET = dict(
    accelerator="cpu",
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
)


def test_digits_views_are_halves_and_thumbnail_of_the_images():
    views, labels = digits_views(3)
    assert [v.shape[1] for v in views] == [32, 32, 16] and len(labels) == views[0].shape[0]
    from lightning_info.data.digits import load_digits_images

    images, _ = load_digits_images(3)
    first = images[0, 0]
    assert torch.equal(views[0][0], first[:, :4].flatten())
    assert torch.equal(views[1][0], first[:, 4:].flatten())
    assert torch.allclose(views[2][0, 0], first[:2, :2].mean())


def test_shared_latent_views_are_seeded_and_balanced():
    a, labels = shared_latent_views(num_samples=90, num_clusters=3, num_views=4, seed=1)
    b, same = shared_latent_views(num_samples=90, num_clusters=3, num_views=4, seed=1)
    c, _ = shared_latent_views(num_samples=90, num_clusters=3, num_views=4, seed=2)
    assert len(a) == 4 and all(torch.equal(x, y) for x, y in zip(a, b))
    assert torch.equal(labels, same) and not torch.equal(a[0], c[0])
    assert torch.bincount(labels).tolist() == [30, 30, 30]


def test_data_module_standardises_each_view_and_keeps_the_labels_apart():
    data = ClusteringViewsDataModule(
        "synthetic",
        synthetic=SyntheticViewsOptions(num_samples=60, latent_clusters=3),
        batch_size=8,
    )
    assert data.view_dims == [32, 32, 32] and data.num_classes == 3 and data.num_views == 3
    for view in data.views:
        torch.testing.assert_close(view.mean(0), torch.zeros(32), atol=1e-5, rtol=0)
    ((views, y),) = [next(iter(data.train_dataloader()))]
    assert len(views) == 3 and views[0].shape == (8, 32) and y.shape == (8,)
    with pytest.raises(ValueError, match="exceeds"):
        ClusteringViewsDataModule(
            "synthetic", synthetic=SyntheticViewsOptions(num_samples=10), batch_size=16
        )
    with pytest.raises(ValueError, match="name"):
        ClusteringViewsDataModule("cora")


def test_user_views_are_checked_and_not_modified():
    x = torch.randn(20, 3)
    before = x.clone()
    data = TensorViewsDataModule([x, x * 2], torch.arange(20) % 2, batch_size=4)
    assert torch.equal(x, before)
    torch.testing.assert_close(data.views[1], standardize_columns(x * 2))
    with pytest.raises(ValueError, match="same samples"):
        TensorViewsDataModule([x, x[:5]], torch.arange(20) % 2)
    with pytest.raises(ValueError, match="NaN"):
        TensorViewsDataModule([x, torch.full((20, 2), float("nan"))], torch.arange(20) % 2)


def test_sdcib_separates_well_separated_synthetic_clusters():
    accuracies = []
    for seed in range(3):
        data = ClusteringViewsDataModule(
            "synthetic",
            synthetic=SyntheticViewsOptions(
                num_samples=150, latent_clusters=3, separation=6.0, noise=0.2
            ),
            batch_size=50,
            data_seed=seed,
        )
        pl.seed_everything(seed)
        model = SDCIB(data.view_dims, 3, hidden=(32, 16), lr=3e-3, seed=seed)
        trainer = pl.Trainer(max_epochs=15, limit_val_batches=0, **QUIET)
        trainer.fit(model, datamodule=data)
        (scores,) = trainer.test(model, datamodule=data, verbose=False)
        accuracies.append(scores["test/acc"])
    # three clusters: a random assignment has ACC about 1/3; a merged pair of clusters 2/3
    assert sorted(accuracies)[1] > 0.95 and min(accuracies) > 0.6, accuracies


def test_aligned_vote_metric_accumulates_batches_like_one_call():
    g = torch.Generator().manual_seed(0)
    target = torch.randint(0, 3, (30,), generator=g)
    views = [
        torch.softmax(
            torch.randn(30, 3, generator=g) + 4 * torch.nn.functional.one_hot(target, 3), 1
        )
        for _ in range(2)
    ]
    metric = AlignedVoteClustering(2)
    for start in range(0, 30, 7):
        metric.update([v[start : start + 7] for v in views], target[start : start + 7])
    scores = metric.compute()
    fused = (views[0] + views[1]).argmax(1)  # both views already agree on their labels
    expected = clustering_scores(fused, target)
    for name, value in expected.items():
        assert float(scores[name]) == pytest.approx(value, abs=1e-6)
    with pytest.raises(ValueError, match="expected 2 views"):
        metric.update(views[:1], target)


def test_bad_model_arguments():
    with pytest.raises(ValueError, match="at least 2 views"):
        SDCIB([4], 3)
    with pytest.raises(ValueError, match="num_clusters"):
        SDCIB([4, 4], 1)
    with pytest.raises(ValueError, match=r"`loss.alpha` must lie in \[0, 1\)"):
        SDCIBLossOptions(alpha=2.0)
    with pytest.raises(ValueError, match="`loss.temperature` must be > 0"):
        SDCIBLossOptions(temperature=0.0)
    with pytest.raises(TypeError, match="`loss` must be an SDCIBLossOptions"):
        SDCIB([4, 4], 3, loss={"alpha": 0.5})
    with pytest.raises(ValueError, match="reference_view"):
        SDCIB([4, 4], 3, reference_view=2)
    model = SDCIB([4, 4], 3, hidden=(8,))
    with pytest.raises(ValueError, match="expected 2 views"):
        model([torch.randn(5, 4)])
    with pytest.raises(ValueError, match=r"one encoder per view \(2\), got 1"):
        SDCIB([4, 4], 3, encoders=[ViewEncoder(4, (8,))])
    with pytest.raises(ValueError, match=r"`encoders\[1\]` takes inputs of width 5, but view 1"):
        SDCIB([4, 4], 3, encoders=[ViewEncoder(4, (8,)), ViewEncoder(5, (8,))])
    with pytest.raises(ValueError, match="the same layer widths"):
        SDCIB([4, 4], 3, encoders=[ViewEncoder(4, (8,)), ViewEncoder(4, (6,))])
    with pytest.raises(TypeError, match=r"`encoders\[1\]` must be an nn.Module with the `widths`"):
        SDCIB([4, 4], 3, encoders=[ViewEncoder(4, (8,)), torch.nn.Linear(4, 8)])


def test_injected_encoders_are_the_default_ones_when_built_alike():
    torch.manual_seed(0)
    default = SDCIB([5, 3], 3, hidden=(8, 4))
    torch.manual_seed(0)
    encoders = [ViewEncoder(5, (8, 4)), ViewEncoder(3, (8, 4))]
    injected = SDCIB([5, 3], 3, encoders=encoders)
    assert injected.encoders[1] is encoders[1] and "encoders" not in injected.hparams
    for (name, a), (_, b) in zip(default.state_dict().items(), injected.state_dict().items()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)


def test_the_study_builds_the_loss_options_from_a_mapping():
    from lab.sdcib.study import fit_sdcib

    data = ClusteringViewsDataModule(
        "synthetic",
        synthetic=SyntheticViewsOptions(num_samples=24, latent_clusters=2),
        batch_size=12,
    )
    scores, model = fit_sdcib(data, 0, {"hidden": [4], "loss": {"alpha": 0.2}}, max_epochs=1)
    assert model.loss_options == SDCIBLossOptions(alpha=0.2)
    assert set(scores) == {"acc", "nmi", "ari"}
