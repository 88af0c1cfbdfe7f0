"""The FisherSFT recipe's data: the standard library's docstrings, split by module into
pretraining text, a fine-tuning pool and a held-out set (``docstring_splits``); the pool as a
``FisherSubsetDataModule`` (``DocstringSFTDataModule``); the pretraining text as language-modelling
batches (``TextChunks``)."""

from __future__ import annotations

from typing import Any, Literal

import torch
from lightning.pytorch import LightningDataModule
from torch.utils.data import DataLoader

from lightning_info.core.validation import require_int
from lightning_info.lm.corpus import instruction_dataset, split_corpus, stdlib_docstrings
from lightning_info.lm.tiny_lm import load_tokenizer
from lightning_info.methods.fisher_sft import FisherSubsetDataModule, SubsetSelectionOptions

EMBED_32 = SubsetSelectionOptions(embed_batch_size=32)
"""The recipe's selection defaults: embedding 32 examples at a time."""

SPLIT_FRACTIONS = (0.5, 0.4, 0.1)
"""Pretraining text / fine-tuning pool / held-out set, as shares of the docstrings."""


def docstring_splits(split_seed: int = 0) -> tuple[list[tuple[str, str]], ...]:
    """``(pretraining, pool, held_out)`` lists of ``(name, docstring)``, disjoint by module."""
    return split_corpus(stdlib_docstrings(), SPLIT_FRACTIONS, seed=split_seed)


class TextChunks(LightningDataModule):
    """Language-modelling batches of the given texts, each text cut to ``max_length`` tokens."""

    def __init__(self, texts: list[str], tokenizer: Any, max_length: int, batch_size: int) -> None:
        super().__init__()
        self.texts, self.tokenizer = texts, tokenizer
        self.max_length, self.batch_size = max_length, batch_size

    def _collate(self, texts: list[str]) -> dict[str, torch.Tensor]:
        eos = self.tokenizer.eos_token
        encoded = self.tokenizer(
            [t + eos for t in texts],
            padding=True,
            truncation=True,
            max_length=self.max_length,
            return_tensors="pt",
        )
        labels = encoded["input_ids"].masked_fill(encoded["attention_mask"] == 0, -100)
        return {**encoded, "labels": labels}

    def train_dataloader(self) -> DataLoader:
        generator = torch.Generator().manual_seed(0)
        return DataLoader(
            self.texts,
            batch_size=self.batch_size,
            shuffle=True,
            generator=generator,
            collate_fn=self._collate,
        )


class DocstringSFTDataModule(FisherSubsetDataModule):
    """The docstring instruction pool, with a FisherSFT / random / k-center subset of ``budget``.

    ``tokenizer`` is a path or Hugging Face name loaded with
    :func:`~lightning_info.lm.tiny_lm.load_tokenizer` (``AutoTokenizer.from_pretrained``)
    (the base model's). The held-out docstrings (other modules than the pool's) serve as the
    validation and test set. ``pool_size`` / ``held_out_size`` cap the two sets (``None``: all);
    ``split_seed`` draws the module-disjoint splits (:func:`docstring_splits`). The other
    arguments are :class:`FisherSubsetDataModule`'s (here embedding 32 examples at a time).
    """

    def __init__(
        self,
        tokenizer: str,
        budget: int,
        strategy: Literal["fisher", "random", "k_center"] = "fisher",
        selection_options: SubsetSelectionOptions = EMBED_32,
        pool_size: int | None = None,
        held_out_size: int | None = None,
        split_seed: int = 0,
        max_length: int = 192,
        batch_size: int = 8,
        seed: int = 0,
        progress: bool = True,
    ) -> None:
        _, pool_pairs, held_out_pairs = docstring_splits(split_seed)
        if pool_size is not None:
            pool_pairs = pool_pairs[: require_int(pool_size, "pool_size", 1)]
        if held_out_size is not None:
            held_out_pairs = held_out_pairs[: require_int(held_out_size, "held_out_size", 1)]
        loaded = load_tokenizer(tokenizer)
        if loaded.pad_token is None:
            loaded.pad_token = loaded.eos_token
        super().__init__(
            instruction_dataset(pool_pairs, seed=split_seed),
            loaded,
            budget,
            strategy,
            selection_options=selection_options,
            eval_dataset=instruction_dataset(held_out_pairs, seed=split_seed),
            max_length=max_length,
            batch_size=batch_size,
            seed=seed,
            progress=progress,
        )
