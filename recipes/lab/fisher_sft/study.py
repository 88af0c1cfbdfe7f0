"""The FisherSFT recipe's base model: a tokenizer and a small GPT-2 pretrained offline on the
standard library's docstrings.

:func:`pretrain_docstring_lm` trains a BPE tokenizer and a small GPT-2 on the pretraining part of
:func:`~lab.fisher_sft.docstrings.docstring_splits` and saves both with
``save_pretrained``; :class:`~lab.fisher_sft.docstrings.DocstringSFTDataModule`
then serves the FisherSFT (or baseline) subset of the fine-tuning pool.
"""

from __future__ import annotations

from pathlib import Path

from lab.fisher_sft.docstrings import TextChunks, docstring_splits
from lab.lm_training import fit_causal_lm
from lightning_info.lm.tiny_lm import tiny_causal_lm, train_bpe_tokenizer

__all__ = ["pretrain_docstring_lm"]


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
    data = TextChunks(texts, tokenizer, max_length, batch_size)
    fit_causal_lm(model, data, epochs=max_epochs, lr=lr, seed=seed, progress_bar=True)
    out_dir = Path(out_dir)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir
