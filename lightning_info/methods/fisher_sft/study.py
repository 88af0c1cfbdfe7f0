"""An offline SFT benchmark from the standard library's docstrings, and a tiny base LM for it.

The docstring corpus (:func:`~lightning_info.lm.corpus.stdlib_docstrings`) is split by
module into pretraining text, a fine-tuning pool ("Explain <name>." -> docstring) and a held-out
set, so that no module is shared between them. :func:`pretrain_docstring_lm` trains a BPE tokenizer
and a small GPT-2 on the pretraining text and saves both with ``save_pretrained``;
:class:`DocstringSFTDataModule` serves the FisherSFT (or baseline) subset of the pool.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from lightning.pytorch import LightningDataModule
from torch.utils.data import DataLoader

from lightning_info.core.validation import require_int
from lightning_info.lm.corpus import instruction_dataset, split_corpus, stdlib_docstrings
from lightning_info.lm.tiny_lm import tiny_causal_lm, train_bpe_tokenizer
from lightning_info.lm.training import fit_causal_lm
from lightning_info.methods.fisher_sft.datamodule import FisherSubsetDataModule

SPLIT_FRACTIONS = (0.5, 0.4, 0.1)
"""Pretraining text / fine-tuning pool / held-out set, as shares of the docstrings."""


def docstring_splits(split_seed: int = 0) -> tuple[list[tuple[str, str]], ...]:
    """``(pretraining, pool, held_out)`` lists of ``(name, docstring)``, disjoint by module."""
    return split_corpus(stdlib_docstrings(), SPLIT_FRACTIONS, seed=split_seed)


class _TextChunks(LightningDataModule):
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


def pretrain_docstring_lm(
    out_dir: str | Path,
    *,
    split_seed: int = 0,
    vocab_size: int = 2000,
    n_layer: int = 2,
    n_embd: int = 64,
    n_head: int = 4,
    max_length: int = 192,
    max_epochs: int = 15,
    batch_size: int = 16,
    lr: float = 3e-3,
    seed: int = 0,
) -> Path:
    """Train a tokenizer and a small GPT-2 on the pretraining docstrings; save both to ``out_dir``.

    Nothing is downloaded. Returns ``out_dir``, loadable with ``from_pretrained`` (and so usable
    wherever a Hugging Face model name is accepted).
    """
    pretraining, _, _ = docstring_splits(split_seed)
    texts = [text for _, text in pretraining]
    tokenizer = train_bpe_tokenizer(texts, vocab_size=vocab_size)
    model = tiny_causal_lm(
        tokenizer,
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        n_positions=max(256, max_length),
        seed=seed,
    )
    data = _TextChunks(texts, tokenizer, max_length, batch_size)
    fit_causal_lm(model, data, epochs=max_epochs, lr=lr, seed=seed, progress_bar=True)
    out_dir = Path(out_dir)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


class DocstringSFTDataModule(FisherSubsetDataModule):
    """The docstring instruction pool, with a FisherSFT / random / k-center subset of ``budget``.

    ``tokenizer`` is a path or Hugging Face name loaded with ``AutoTokenizer.from_pretrained``
    (the base model's). The held-out docstrings (other modules than the pool's) serve as the
    validation and test set. ``pool_size`` / ``held_out_size`` cap the two sets (``None``: all).
    """

    def __init__(
        self,
        tokenizer: str,
        budget: int,
        strategy: str = "fisher",
        pool_size: int | None = None,
        held_out_size: int | None = None,
        split_seed: int = 0,
        max_length: int = 192,
        batch_size: int = 8,
        embed_batch_size: int = 32,
        lam: float = 1.0,
        pooling: str = "none",
        seed: int = 0,
        selection_path: str | None = None,
        progress: bool = True,
    ) -> None:
        from transformers import AutoTokenizer

        _, pool_pairs, held_out_pairs = docstring_splits(split_seed)
        if pool_size is not None:
            pool_pairs = pool_pairs[: require_int(pool_size, "pool_size", 1)]
        if held_out_size is not None:
            held_out_pairs = held_out_pairs[: require_int(held_out_size, "held_out_size", 1)]
        loaded = AutoTokenizer.from_pretrained(tokenizer)
        if loaded.pad_token is None:
            loaded.pad_token = loaded.eos_token
        super().__init__(
            instruction_dataset(pool_pairs, seed=split_seed),
            loaded,
            budget,
            strategy=strategy,
            eval_dataset=instruction_dataset(held_out_pairs, seed=split_seed),
            max_length=max_length,
            batch_size=batch_size,
            embed_batch_size=embed_batch_size,
            lam=lam,
            pooling=pooling,
            seed=seed,
            selection_path=selection_path,
            progress=progress,
        )
