"""DigitsDataModule: sklearn's bundled digits as [0, 1] images with a stratified split."""

import pytest
import torch
from sklearn.datasets import load_digits

from lightning_info.data.digits import DigitsDataModule, load_digits_images


def test_images_are_sklearn_pixels_over_16():
    images, labels = load_digits_images(10)
    features, target = load_digits(return_X_y=True)
    assert images.shape == (1797, 1, 8, 8) and images.dtype == torch.float32
    assert torch.equal(labels, torch.tensor(target))
    torch.testing.assert_close(images.flatten(1), torch.tensor(features / 16.0).float())
    assert images.min() == 0 and images.max() == 1


def test_split_is_stratified_disjoint_and_seeded():
    data = DigitsDataModule(classes=5, test_fraction=0.3, split_seed=1)
    images, labels = load_digits_images(5)
    counts = torch.bincount(labels)
    test_counts = torch.bincount(data.test_labels, minlength=5)
    assert torch.equal(test_counts, torch.round(0.3 * counts.double()).long())
    assert len(data.train_labels) + len(data.test_labels) == len(labels)
    train_rows = {tuple(r.tolist()) for r in data.train_images.flatten(1)}
    test_rows = [tuple(r.tolist()) for r in data.test_images.flatten(1)]
    duplicates_in_data = len(labels) - len({tuple(r.tolist()) for r in images.flatten(1)})
    assert sum(r in train_rows for r in test_rows) <= duplicates_in_data
    again = DigitsDataModule(classes=5, test_fraction=0.3, split_seed=1)
    assert torch.equal(again.test_images, data.test_images)
    other = DigitsDataModule(classes=5, test_fraction=0.3, split_seed=2)
    assert not torch.equal(other.test_images, data.test_images)


def test_loaders_cover_the_splits():
    data = DigitsDataModule(classes=3, batch_size=50)
    seen = torch.cat([y for _, y in data.train_dataloader()])
    assert torch.equal(seen.sort().values, data.train_labels.sort().values)
    assert sum(len(y) for _, y in data.test_dataloader()) == len(data.test_labels)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"classes": 11}, "10 classes"),
        ({"classes": 1}, "classes"),
        ({"test_fraction": 0.0}, "test_fraction"),
        ({"test_fraction": 1.0}, "test_fraction"),
        ({"batch_size": 0}, "batch_size"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DigitsDataModule(**kwargs)


def test_validation_split_is_carved_from_the_training_images():
    plain = DigitsDataModule(classes=5, split_seed=3)
    data = DigitsDataModule(classes=5, split_seed=3, val_fraction=0.25)
    assert torch.equal(data.test_images, plain.test_images)  # the test split does not move
    assert len(data.val_labels) + len(data.train_labels) == len(plain.train_labels)
    counts = torch.bincount(plain.train_labels, minlength=5)
    expected = torch.round(0.25 * counts.double()).long()
    assert torch.equal(torch.bincount(data.val_labels, minlength=5), expected)
    seen = {tuple(r.tolist()) for r in data.train_images.flatten(1)}
    overlap = sum(tuple(r.tolist()) in seen for r in data.val_images.flatten(1))
    assert overlap <= 2  # only the data set's own duplicate digits
    assert torch.equal(next(iter(data.val_dataloader()))[1], data.val_labels[:128])


def test_ood_sets_are_disjoint_halves_of_out_of_class_noise_and_shuffled_images():
    data = DigitsDataModule(classes=5)
    val, test = data.ood_images("val"), data.ood_images("test")
    assert set(val) == set(test) == {"digits", "noise", "shuffled"}
    all_images, labels = load_digits_images(10)
    other = all_images[labels >= 5].flatten(1)
    for name in ("digits",):
        both = torch.cat([val[name], test[name]]).flatten(1)
        assert len(both) == len(other)
        assert torch.equal(both.sort(0).values, other.sort(0).values)
    for split in (val, test):
        assert split["noise"].min() >= 0 and split["noise"].max() <= 1
        test_pixels = data.test_images.flatten(1).sort(1).values
        shuffled = split["shuffled"].flatten(1).sort(1).values
        # every shuffled image has exactly the pixel values of one test image
        assert all((test_pixels == row).all(1).any() for row in shuffled)
    assert not torch.equal(val["noise"][: len(test["noise"])], test["noise"][: len(val["noise"])])
    assert DigitsDataModule(classes=10).ood_images().keys() == {"noise", "shuffled"}
    with pytest.raises(ValueError, match="split"):
        data.ood_images("train")
