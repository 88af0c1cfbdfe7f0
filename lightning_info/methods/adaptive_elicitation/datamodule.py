"""``ElicitationDataModule``: entities as shuffled question/answer block sequences, for
meta-training a causal LM.

Entities come from the latent-type world, scikit-learn's digits, or a user's JSON lines
(``entities.py``). They are split by entity into train, validation and test, from a seeded
permutation; with ``held_out_questions`` the split is also by question: those questions never
appear in the training sequences, only in validation and test (the targets a model must
generalise to). The digits' ``shifts`` augment the training images only, after the split: each
training image becomes one entity per pixel shift, and validation and test keep the unshifted
images, so no test image reaches training in any shift.

Every epoch each training entity's blocks come in a new order, drawn from a generator keyed by
``(seed, epoch, entity)``: the model learns ``p(answer | any subset of the entity's other
answers, question)``, the exchangeable sequence model the selection needs, and a run resumed from
a checkpoint sees the same orders as an uninterrupted one. The sampler hands each index with its
epoch to the dataset, so no state outside the sampler is needed (and Lightning's distributed
wrapper shards the pairs as it shards indices). Validation and test entities have one fixed
shuffled order each.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch import LightningDataModule
from torch.utils.data import DataLoader, Dataset

from lightning_info.core.resume import ResumableDataLoader
from lightning_info.core.sampling import EpochShuffleSampler, keyed_generator
from lightning_info.core.validation import require_fraction, require_int, require_positive
from lightning_info.lm.features import pad_token_id, pad_token_rows
from lightning_info.methods.adaptive_elicitation.entities import (
    EntityTable,
    digit_shifts,
    digits_questions,
    digits_table,
    latent_world_table,
    read_entities_jsonl,
)
from lightning_info.methods.adaptive_elicitation.functional import check_index
from lightning_info.methods.adaptive_elicitation.sequences import QuestionBank, encode_entity
from lightning_info.methods.adaptive_elicitation.world import LatentTypeWorld

__all__ = ["DigitQuestionOptions", "ElicitationDataModule", "LatentWorldOptions"]

SOURCES = ("latent", "digits")


@dataclass(frozen=True)
class LatentWorldOptions:
    """The latent-type world (:meth:`LatentTypeWorld.sample`, seeded by ``world_seed``) and the
    ``num_entities`` it draws (:func:`~.entities.latent_world_table`)."""

    num_types: int = 4
    num_questions: int = 12
    num_answers: int = 3
    concentration: float = 0.3
    uninformative: int = 0
    world_seed: int = 0
    num_entities: int = 2400

    def __post_init__(self) -> None:
        require_int(self.num_types, "num_types", 1)
        require_int(self.num_questions, "num_questions", 1)
        require_int(self.num_answers, "num_answers", 1)
        require_positive(self.concentration, "concentration")
        if require_int(self.uninformative, "uninformative", 0) > self.num_questions:
            raise ValueError(f"uninformative must be in [0, {self.num_questions}]")
        require_int(self.world_seed, "world_seed", 0)
        require_int(self.num_entities, "num_entities", 1)

    def sample(self) -> LatentTypeWorld:
        """The world these options describe."""
        return LatentTypeWorld.sample(
            self.num_types,
            self.num_questions,
            self.num_answers,
            self.concentration,
            self.uninformative,
            self.world_seed,
        )


@dataclass(frozen=True)
class DigitQuestionOptions:
    """The digits' questions (:func:`~.entities.digits_table`): "Region r dark?" for square
    regions of ``region`` pixels a side (it divides 8) whose mean ink reaches ``threshold``, then
    "Is it a k?" for the ten classes when ``class_questions``. ``shifts``: the ``(down, right)``
    pixel shifts each training image is augmented with (one entity per image and shift;
    validation and test images stay unshifted); ``[[0, 0]]``, the default, is none. ``shift``
    is the shorthand for every shift in ``-shift..shift`` both ways (``1``: 9 per image).
    ``regions``: only these region questions, in this order (default: all), so a question's
    index is its place in this list."""

    region: int = 2
    threshold: float = 0.5
    class_questions: bool = True
    shifts: tuple[tuple[int, int], ...] = ((0, 0),)
    shift: int = 0
    regions: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if 8 % require_int(self.region, "region", 1):
            raise ValueError(f"region must divide the digits' 8 pixels, got {self.region}")
        require_fraction(self.threshold, "threshold")
        shift = require_int(self.shift, "shift", 0)
        shifts = digit_shifts(self.shifts)
        if shift:
            if shifts != ((0, 0),):
                raise ValueError("give shifts or shift, not both")
            span = range(-shift, shift + 1)
            shifts = digit_shifts([(down, right) for down in span for right in span])
        object.__setattr__(self, "shifts", shifts)
        if self.regions is not None:
            object.__setattr__(self, "regions", tuple(self.regions))
        self.questions()  # the regions are checked

    def questions(self) -> list[str]:
        """The question texts (:func:`~.entities.digits_questions`)."""
        return digits_questions(self.region, self.class_questions, self.regions)

    def table(self, images=None, shifts=((0, 0),)) -> EntityTable:
        """The entities of ``images`` (default: all) in each of ``shifts``
        (:func:`~.entities.digits_table`)."""
        return digits_table(
            self.region, self.threshold, self.class_questions, images, shifts, self.regions
        )


class _EpochIndexSampler(EpochShuffleSampler):
    """``(index, epoch)`` pairs in the epoch's permutation."""

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return ((i, self.epoch) for i in super().__iter__())


class _Entities(Dataset):
    """Entities ``rows`` of ``table``, blocks of ``questions`` only, shuffled by ``seed``."""

    def __init__(
        self,
        bank: QuestionBank,
        table: EntityTable,
        rows: torch.Tensor,
        questions: list[int],
        seed: int,
    ):
        self.bank, self.table, self.rows = bank, table, rows.tolist()
        self.questions, self.seed = questions, seed

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, key: int | tuple[int, int]) -> tuple[list[int], list[int]]:
        index, epoch = key if isinstance(key, tuple) else (key, 0)
        order = torch.randperm(
            len(self.questions), generator=keyed_generator(self.seed, epoch, index)
        )
        blocks = self.table.blocks(self.rows[index], [self.questions[i] for i in order.tolist()])
        return encode_entity(self.bank, blocks)


class ElicitationDataModule(LightningDataModule):
    """Entities as block sequences, split by entity (and optionally by question).

    Args:
        tokenizer: a Hugging Face tokenizer; the block markers and answer tokens are added to it
            (resize the model's embeddings to ``len(tokenizer)``).
        source: ``"latent"`` (the latent-type world), ``"digits"`` (scikit-learn's digits) or
            the path of a JSON-lines file of entities (``entities.read_entities_jsonl``).
        latent: the latent-type world and how many entities it draws
            (:class:`LatentWorldOptions`), for ``source="latent"``.
        digits: the digits' questions (:class:`DigitQuestionOptions`), for
            ``source="digits"``.
        answer_names: the answer set of a JSON-lines source (default: as first seen).
        num_val, num_test: entities held out for validation and test; the rest train.
        held_out_questions: question indices left out of every training sequence.
        seed: the split and the block orders. batch_size: entities per batch.

    After construction: ``table`` (:class:`~.entities.EntityTable`), ``bank``
    (:class:`~.sequences.QuestionBank`), ``world`` (the latent-type world, else ``None``) and the
    entity indices ``train_entities``, ``val_entities``, ``test_entities``. ``origins`` gives
    each entity's source row (its unshifted digit image, else itself) and ``train_originals``
    the unshifted training rows: with the digits' ``shifts`` the table holds every unshifted
    image first, then the shifted copies of the training images.
    """

    def __init__(
        self,
        tokenizer: Any,
        source: str = "latent",
        latent: LatentWorldOptions = LatentWorldOptions(),
        digits: DigitQuestionOptions = DigitQuestionOptions(),
        answer_names: Sequence[str] | None = None,
        num_val: int = 200,
        num_test: int = 200,
        held_out_questions: Sequence[int] = (),
        seed: int = 0,
        batch_size: int = 32,
    ):
        super().__init__()
        self.seed = require_int(seed, "seed", 0)
        self.batch_size = require_int(batch_size, "batch_size", 1)
        num_val = require_int(num_val, "num_val", 1)
        num_test = require_int(num_test, "num_test", 0)
        for name, value, kind in (
            ("latent", latent, LatentWorldOptions),
            ("digits", digits, DigitQuestionOptions),
        ):
            if not isinstance(value, kind):
                raise TypeError(f"`{name}` must be a {kind.__name__}, got {type(value).__name__}.")
        if not isinstance(source, (str, Path)):
            raise TypeError(
                f"`source` must be {SOURCES[0]!r}, {SOURCES[1]!r} or the path of a JSON-lines "
                f"file (a str or a Path), got {type(source).__name__} {source!r}"
            )
        if answer_names is not None and source in SOURCES:
            raise ValueError(
                f"`answer_names` names the answers of a JSON-lines source; source={source!r} "
                "has its own answers: drop `answer_names`"
            )
        self.world = None
        if source == "latent":
            self.world = latent.sample()
            self.table = latent_world_table(self.world, latent.num_entities, seed=self.seed)
        elif source == "digits":
            self.table = digits.table()
        elif Path(source).suffix in (".jsonl", ".json") or Path(source).is_file():
            self.table = read_entities_jsonl(source, answer_names)
        else:
            raise ValueError(
                f"source must be one of {SOURCES} or a JSON-lines file of entities, got {source!r}"
            )
        count = self.table.answers.shape[0]
        self.origins = torch.arange(count)
        if num_val + num_test >= count:
            raise ValueError(
                f"num_val + num_test ({num_val + num_test}) leaves no training entity of {count}"
            )
        total = len(self.table.questions)
        if isinstance(held_out_questions, (str, bytes)) or not hasattr(
            held_out_questions, "__iter__"
        ):
            raise TypeError(
                "`held_out_questions` must be a list of question indices (ints), got "
                f"{type(held_out_questions).__name__} {held_out_questions!r}; one question q "
                "is [q]."
            )
        for q in held_out_questions:  # ints in range: 1.5 or -1 would hold out another question
            check_index(q, "held_out_questions entry", total)
        held_out = sorted({int(q) for q in held_out_questions})
        if len(held_out) >= total:
            raise ValueError(
                f"held_out_questions must be some (not all) of the indices 0..{total - 1}"
            )
        self.held_out_questions = held_out
        order = torch.randperm(count, generator=torch.Generator().manual_seed(self.seed))
        self.val_entities = order[:num_val]
        self.test_entities = order[num_val : num_val + num_test]
        self.train_entities = self.train_originals = order[num_val + num_test :]
        if source == "digits" and digits.shifts != ((0, 0),):
            self._augment(digits)
        self.bank = QuestionBank(tokenizer, self.table.questions, self.table.num_answers)
        self.tokenizer = tokenizer

    def _augment(self, digits: DigitQuestionOptions) -> None:
        """Append the training images' shifted copies; they alone train (the unshifted ones
        too when ``(0, 0)`` is a shift)."""
        moved = [s for s in digits.shifts if s != (0, 0)]
        copies = digits.table(self.train_originals, moved)
        count = self.table.answers.shape[0]
        self.table = EntityTable(
            self.table.questions,
            self.table.answer_names,
            torch.cat([self.table.answers, copies.answers]),
            torch.cat([self.table.labels, copies.labels]),
        )
        self.origins = torch.cat([self.origins, self.train_originals.repeat(len(moved))])
        kept = [self.train_originals] if (0, 0) in digits.shifts else []
        self.train_entities = torch.cat([*kept, torch.arange(count, count + len(copies.answers))])

    def _collate(self, rows: list[tuple[list[int], list[int]]]) -> dict[str, torch.Tensor]:
        input_ids, attention = pad_token_rows(
            [ids for ids, _ in rows], pad_token_id(self.tokenizer)
        )
        labels, _ = pad_token_rows([y for _, y in rows], -100)
        return {"input_ids": input_ids, "attention_mask": attention, "labels": labels}

    def _dataset(self, rows: torch.Tensor, seed: int, training: bool = False) -> _Entities:
        questions = range(len(self.table.questions))
        kept = [q for q in questions if not training or q not in self.held_out_questions]
        return _Entities(self.bank, self.table, rows, kept, seed)

    def train_dataloader(self) -> DataLoader:
        data = self._dataset(self.train_entities, self.seed, training=True)
        sampler = _EpochIndexSampler(len(data), seed=self.seed)
        return ResumableDataLoader(
            data,
            trainer=self.trainer,
            batch_size=self.batch_size,
            sampler=sampler,
            collate_fn=self._collate,
        )

    def val_dataloader(self) -> DataLoader:
        data = self._dataset(self.val_entities, self.seed + 1)
        return DataLoader(data, batch_size=self.batch_size, collate_fn=self._collate)

    def test_dataloader(self) -> DataLoader:
        if len(self.test_entities) == 0:
            raise ValueError("num_test is 0: there are no test entities")
        data = self._dataset(self.test_entities, self.seed + 2)
        return DataLoader(data, batch_size=self.batch_size, collate_fn=self._collate)
