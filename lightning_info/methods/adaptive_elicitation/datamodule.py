"""``ElicitationDataModule``: entities of the latent-type world as shuffled question/answer
block sequences, for meta-training a causal LM.

Every epoch each training entity's blocks come in a new order, drawn from a generator keyed by
``(seed, epoch, entity)``: the model learns ``p(answer | any subset of the entity's other
answers, question)``, the exchangeable sequence model the selection needs, and a run resumed from
a checkpoint sees the same orders as an uninterrupted one. The sampler hands each index with its
epoch to the dataset, so no state outside the sampler is needed (and Lightning's distributed
wrapper shards the pairs as it shards indices). Splits are by entity: validation entities are
others of the same world, in a fixed order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from lightning.pytorch import LightningDataModule
from torch.utils.data import DataLoader, Dataset

from lightning_info.core.sampling import EpochShuffleSampler, keyed_generator
from lightning_info.core.validation import require_int
from lightning_info.lm.features import pad_token_id
from lightning_info.methods.adaptive_elicitation.sequences import QuestionBank, encode_entity
from lightning_info.methods.adaptive_elicitation.world import LatentTypeWorld

__all__ = ["ElicitationDataModule", "latent_world_questions"]


def latent_world_questions(num_questions: int) -> list[str]:
    """The question texts of the latent-type world."""
    return [f"Does the entity show trait {q}?" for q in range(num_questions)]


class _EpochIndexSampler(EpochShuffleSampler):
    """``(index, epoch)`` pairs in the epoch's permutation."""

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return ((i, self.epoch) for i in super().__iter__())


class _Entities(Dataset):
    def __init__(self, bank: QuestionBank, answers: torch.Tensor, seed: int, shuffle: bool):
        self.bank, self.answers, self.seed, self.shuffle = bank, answers, seed, shuffle

    def __len__(self) -> int:
        return self.answers.shape[0]

    def __getitem__(self, key: int | tuple[int, int]) -> tuple[list[int], list[int]]:
        index, epoch = key if isinstance(key, tuple) else (key, 0)
        questions = list(range(self.answers.shape[1]))
        if self.shuffle:
            order = torch.randperm(
                len(questions), generator=keyed_generator(self.seed, epoch, index)
            )
            questions = order.tolist()
        return encode_entity(self.bank, [(q, int(self.answers[index, q])) for q in questions])


class ElicitationDataModule(LightningDataModule):
    """Entities of a :class:`LatentTypeWorld` as block sequences.

    Args:
        tokenizer: a Hugging Face tokenizer; the block markers and answer tokens are added to it
            (resize the model's embeddings to ``len(tokenizer)``).
        num_types, num_questions, num_answers, concentration, uninformative, world_seed: the
            world (``LatentTypeWorld.sample``).
        num_train, num_val: entities per split; seed: their draw and the block orders.
        batch_size: entities per batch.
    """

    def __init__(
        self,
        tokenizer: Any,
        num_types: int = 4,
        num_questions: int = 12,
        num_answers: int = 3,
        concentration: float = 0.3,
        uninformative: int = 0,
        world_seed: int = 0,
        num_train: int = 2000,
        num_val: int = 200,
        seed: int = 0,
        batch_size: int = 32,
    ):
        super().__init__()
        self.world = LatentTypeWorld.sample(num_types, num_questions, num_answers, concentration,
                                            uninformative, world_seed)  # fmt: skip
        self.bank = QuestionBank(tokenizer, latent_world_questions(num_questions), num_answers)
        self.tokenizer = tokenizer
        self.num_train = require_int(num_train, "num_train", 1)
        self.num_val = require_int(num_val, "num_val", 1)
        self.seed = require_int(seed, "seed", 0)
        self.batch_size = require_int(batch_size, "batch_size", 1)
        self.types, answers = self.world.sample_entities(num_train + num_val, seed=seed)
        self.train_answers, self.val_answers = answers[:num_train], answers[num_train:]

    def _collate(self, rows: list[tuple[list[int], list[int]]]) -> dict[str, torch.Tensor]:
        width = max(len(ids) for ids, _ in rows)
        input_ids = torch.full((len(rows), width), pad_token_id(self.tokenizer))
        attention = torch.zeros((len(rows), width), dtype=torch.long)
        labels = torch.full((len(rows), width), -100)
        for r, (ids, y) in enumerate(rows):
            input_ids[r, : len(ids)], labels[r, : len(y)] = torch.tensor(ids), torch.tensor(y)
            attention[r, : len(ids)] = 1
        return {"input_ids": input_ids, "attention_mask": attention, "labels": labels}

    def train_dataloader(self) -> DataLoader:
        data = _Entities(self.bank, self.train_answers, self.seed, shuffle=True)
        sampler = _EpochIndexSampler(len(data), seed=self.seed)
        return DataLoader(
            data, batch_size=self.batch_size, sampler=sampler, collate_fn=self._collate
        )

    def val_dataloader(self) -> DataLoader:
        data = _Entities(self.bank, self.val_answers, self.seed + 1, shuffle=True)
        return DataLoader(data, batch_size=self.batch_size, collate_fn=self._collate)
