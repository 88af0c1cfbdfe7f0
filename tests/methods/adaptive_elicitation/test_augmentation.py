"""The digits' pixel-shift augmentation: shifted images against a zero-padded shift by hand,
their region answers against a pixel count, and the data module's split by original image (no
test or validation image reaches training in any shift); the kept-regions option."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from lightning_info.lm.tiny_lm import train_bpe_tokenizer
from lightning_info.methods.adaptive_elicitation.datamodule import (
    DigitQuestionOptions,
    ElicitationDataModule,
)
from lightning_info.methods.adaptive_elicitation.entities import (
    digits_questions,
    digits_table,
    shift_images,
)

PLUS = [(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)]


def _shift_by_hand(image: np.ndarray, down: int, right: int) -> np.ndarray:
    """Pad 8 blank pixels on every side, then cut the 8x8 window moved the other way."""
    padded = np.pad(image, 8)
    return padded[8 - down : 16 - down, 8 - right : 16 - right]


def test_shifted_images_equal_a_zero_padded_shift_and_a_roll_inside_a_blank_border():
    images = torch.rand(3, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    for down, right in [(a, b) for a in (-1, 0, 1) for b in (-1, 0, 1)] + [(2, -3), (-7, 7)]:
        moved = shift_images(images, down, right).numpy()
        for n in range(3):
            expected = _shift_by_hand(images[n].numpy(), down, right)
            np.testing.assert_array_equal(moved[n], expected)
    # an image with a blank border: a one-pixel shift loses nothing, as np.roll does
    framed = torch.zeros(8, 8, dtype=torch.float64)
    framed[1:7, 1:7] = images[0, 1:7, 1:7]
    for down, right in PLUS:
        rolled = np.roll(framed.numpy(), (down, right), axis=(0, 1))
        np.testing.assert_array_equal(shift_images(framed, down, right).numpy(), rolled)
    assert not np.array_equal(shift_images(images[0], 1, 0).numpy(), np.roll(images[0], 1, 0))
    with pytest.raises(ValueError, match="down must be an int in"):
        shift_images(images, 8, 0)
    with pytest.raises(ValueError, match="right must be an int in"):
        shift_images(images, 0, 1.0)


def test_shifted_digits_answer_the_regions_of_the_shifted_image():
    from sklearn.datasets import load_digits

    images, labels = load_digits(return_X_y=True)
    picked = [4, 1000, 17]
    shifts = [(0, 0), (1, -1), (-2, 0)]
    table = digits_table(threshold=0.25, images=picked, shifts=shifts)
    assert table.answers.shape == (9, 26)
    assert table.labels.tolist() == [int(labels[n]) for n in picked] * 3
    for s, (down, right) in enumerate(shifts):
        for i, n in enumerate(picked):
            image = _shift_by_hand(images[n].reshape(8, 8) / 16.0, down, right)
            row = table.answers[s * len(picked) + i]
            for r in range(16):
                top, left = 2 * (r // 4), 2 * (r % 4)
                ink = image[top : top + 2, left : left + 2].mean()
                assert int(row[r]) == int(ink >= 0.25)
            assert int(row[16:].argmax()) == labels[n] and int(row[16:].sum()) == 1
    # kept regions: the same answers, in the order given
    kept = digits_table(threshold=0.25, images=picked, shifts=shifts, regions=[9, 1])
    assert kept.questions[:3] == ["Region 9 dark?", "Region 1 dark?", "Is it a 0?"]
    assert torch.equal(kept.answers, table.answers[:, [9, 1, *range(16, 26)]])
    for bad, message in (
        ({"shifts": [(0, 0), (0, 0)]}, "distinct"),
        ({"shifts": [(0, 8)]}, "within -7..7"),
        ({"shifts": [(0,)]}, "pairs"),
        ({"shifts": []}, "non-empty"),
        ({"images": [1797]}, "indices in 0..1796"),
        ({"regions": [1, 1]}, "distinct"),
    ):
        with pytest.raises(ValueError, match=message):
            digits_table(**bad)
    with pytest.raises(ValueError, match="out of range"):
        digits_table(regions=[16])


@functools.lru_cache(maxsize=1)
def _tokenizer():
    return train_bpe_tokenizer(digits_questions() * 5, vocab_size=300)


def _data(digits: DigitQuestionOptions, seed: int = 0) -> ElicitationDataModule:
    return ElicitationDataModule(_tokenizer(), source="digits", digits=digits, seed=seed)


def test_augmented_split_keeps_every_test_image_out_of_training():
    plain = _data(DigitQuestionOptions(), seed=1)
    data = _data(DigitQuestionOptions(shift=1), seed=1)
    assert DigitQuestionOptions(shift=1).shifts == tuple(
        (a, b) for a in (-1, 0, 1) for b in (-1, 0, 1)
    )
    # the split is by original image, made before augmenting: the same as without shifts
    assert torch.equal(data.test_entities, plain.test_entities)
    assert torch.equal(data.val_entities, plain.val_entities)
    assert torch.equal(data.train_originals, plain.train_entities)
    originals = set(data.origins[data.train_entities].tolist())
    held_out = set(data.test_entities.tolist()) | set(data.val_entities.tolist())
    assert originals == set(plain.train_entities.tolist()) and not originals & held_out
    assert set(data.origins[data.test_entities].tolist()) == set(data.test_entities.tolist())
    # originals x variants, each original 9 times
    assert len(data.train_entities) == len(plain.train_entities) * 9 == 1397 * 9
    counts = torch.bincount(data.origins[data.train_entities], minlength=1797)
    assert set(counts[list(originals)].tolist()) == {9} and int(counts[list(held_out)].sum()) == 0
    assert len(data.train_dataloader().dataset) == 1397 * 9
    # test and validation entities are the unshifted images; training rows their shifted copies
    unshifted = digits_table()
    for split in (data.test_entities, data.val_entities):
        assert torch.equal(data.table.answers[split], unshifted.answers[split])
    rows = data.table.answers[data.train_entities]
    copies = digits_table(images=data.origins[data.train_entities[:1397]], shifts=[(0, 0)])
    assert torch.equal(rows[:1397], copies.answers)
    by_shift = digits_table(images=data.train_originals, shifts=[(1, 1)])
    assert torch.equal(rows[-1397:], by_shift.answers)  # the last shift, (1, 1)
    assert not torch.equal(rows[-1397:], rows[:1397])


def test_shifts_without_the_unshifted_image_and_refused_options():
    data = _data(DigitQuestionOptions(shifts=[[1, 0], [0, 1]], regions=[1, 2, 5]))
    assert data.table.questions[:4] == ["Region 1 dark?", "Region 2 dark?", "Region 5 dark?"] + [
        "Is it a 0?"
    ]
    assert len(data.train_entities) == 2 * 1397
    assert not set(data.train_entities.tolist()) & set(data.train_originals.tolist())
    with pytest.raises(ValueError, match="shifts or shift"):
        DigitQuestionOptions(shifts=[(0, 1)], shift=1)
    with pytest.raises(ValueError, match="within -7..7"):
        DigitQuestionOptions(shifts=[(0, -8)])
    with pytest.raises(ValueError, match="out of range"):
        DigitQuestionOptions(regions=[0, 16])
