"""``DocREDDataModule``: hybrid prompts of DocRED-format documents, for a causal LM.

Training rows are ``(prompt, answer)`` pairs: every labelled entity pair (one row per gold
relation) and ``negatives_per_positive`` sampled unlabelled pairs per labelled one, answered
``none``. Validation and test batches hold whole documents: every ordered entity pair's prompt
(left-padded, for generation) with the gold documents, so that the official scores are summed
over documents each seen once (under DDP, ``UnrepeatedDistributedSampler`` gives each rank its
own documents, with no repeats to even the shards).

The documents (:class:`DocREDSource`), the prompt's parts (:class:`HybridPromptOptions`) and the
DocKG with its sentence encoder (:class:`DocKGOptions`) are one object each.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch import LightningDataModule
from lightning.pytorch.overrides.distributed import UnrepeatedDistributedSampler
from lightning.pytorch.utilities import rank_zero_warn
from torch.utils.data import DataLoader

from lightning_info.core.resume import ResumableDataLoader
from lightning_info.core.sampling import EpochShuffleSampler
from lightning_info.core.validation import (
    require_bool,
    require_fraction,
    require_int,
    require_non_negative,
)
from lightning_info.lm.features import pad_token_id, pad_token_rows
from lightning_info.methods.docks_rag.docred import read_docred, read_relation_info
from lightning_info.methods.docks_rag.functional import (
    NO_RELATION,
    answer_text,
    entity_pairs,
    hybrid_prompt,
    pair_relations,
    train_fact_names,
)
from lightning_info.methods.docks_rag.knowledge import build_knowledge
from lightning_info.methods.docks_rag.set_rag import retrieve_sentences
from lightning_info.methods.docks_rag.synthetic import RELATIONS, synthetic_docred

__all__ = ["DocKGOptions", "DocREDDataModule", "DocREDSource", "HybridPromptOptions"]


@dataclass(frozen=True)
class DocREDSource:
    """The documents: a DocRED / Re-DocRED split pair and its ``rel_info.json``, or, without
    files, ``synthetic_docred`` documents (``num_train`` and ``num_dev`` of world
    ``world_seed``) with its six relations."""

    train_file: str | None = None
    dev_file: str | None = None
    rel_info_file: str | None = None
    num_train: int = 100
    num_dev: int = 20
    world_seed: int = 0

    def __post_init__(self) -> None:
        if (self.train_file is None) != (self.dev_file is None):
            raise ValueError("give both train_file and dev_file, or neither (synthetic data)")
        if self.train_file is not None and self.rel_info_file is None:
            raise ValueError("DocRED files need their rel_info_file (relation id -> name)")
        require_int(self.num_train, "num_train", 2)
        require_int(self.num_dev, "num_dev", 1)
        require_int(self.world_seed, "world_seed", 0)

    def load(self) -> tuple[list[dict], list[dict], dict[str, str]]:
        """``(train, dev, relations)``: the DocRED files when given, else ``synthetic_docred``
        splits of one world (train seed 0, dev seed 1) with its relations."""
        if self.train_file is None:
            train = synthetic_docred(self.num_train, seed=0, world_seed=self.world_seed)
            dev = synthetic_docred(self.num_dev, seed=1, world_seed=self.world_seed)
            return train, dev, dict(RELATIONS)
        for path in (self.train_file, self.dev_file, self.rel_info_file):
            if not Path(path).is_file():
                raise FileNotFoundError(f"{path} does not exist")
        relations = read_relation_info(self.rel_info_file)
        train = read_docred(self.train_file, relations)
        return train, read_docred(self.dev_file, relations), relations


@dataclass(frozen=True)
class HybridPromptOptions:
    """The hybrid prompt's parts (``functional.hybrid_prompt``; the paper's ablation): the
    document text, the DocKG subgraph and the SetRAG sentences, ``top_k`` per query.
    ``query_triples`` (the default): show the DocKG's predicted triples for the queried pair
    itself, as the paper's subgraph does (they are the scorer's predictions, never gold labels,
    and the training documents' are cross-fitted, as noisy as on held-out documents, so they leak
    nothing); ``False`` drops them as if they were the answer (the protocol of the first recipe
    runs, NOTES.md)."""

    use_document: bool = True
    use_kg: bool = True
    use_set_rag: bool = True
    top_k: int = 5
    query_triples: bool = True

    def __post_init__(self) -> None:
        for name in ("use_document", "use_kg", "use_set_rag", "query_triples"):
            require_bool(getattr(self, name), name)
        if not (self.use_document or self.use_kg or self.use_set_rag):
            raise ValueError("a prompt needs at least one of use_document, use_kg, use_set_rag")
        require_int(self.top_k, "top_k", 1)


@dataclass(frozen=True)
class DocKGOptions:
    """The DocKG and the sentence encoder (``knowledge.build_knowledge``): ``tau`` is the DocKG's
    probability threshold, ``kg_folds`` the cross-fitting folds of the training triples,
    ``kg_steps`` each scorer's training steps; ``encoder`` and ``encoder_dim`` embed sentences
    and entities (``lm.sentence_encoders.embed_texts``: ``"auto"``, ``"tfidf"``, ``"minilm"``
    or a sentence-transformers model)."""

    tau: float = 0.5
    kg_folds: int = 2
    kg_steps: int = 300
    encoder: str = "auto"
    encoder_dim: int = 64

    def __post_init__(self) -> None:
        # NaN passed these checks and failed late, in setup, after the DocKG was fitted
        object.__setattr__(self, "tau", require_fraction(self.tau, "tau"))
        require_int(self.kg_folds, "kg_folds", 2)
        require_int(self.kg_steps, "kg_steps", 1)
        require_int(self.encoder_dim, "encoder_dim", 1)


def _instance(value: Any, name: str, kind: type) -> Any:
    if not isinstance(value, kind):
        raise TypeError(f"`{name}` must be a {kind.__name__}, got {type(value).__name__}.")
    return value


class DocREDDataModule(LightningDataModule):
    """DocRED-format documents as hybrid prompts (``functional.hybrid_prompt``).

    Args:
        tokenizer: a Hugging Face tokenizer, or a name or path for ``AutoTokenizer``.
        source: the documents (:class:`DocREDSource`: DocRED files, or synthetic documents).
        prompt: the prompt's parts and SetRAG's ``top_k`` (:class:`HybridPromptOptions`).
        knowledge: the DocKG and the sentence encoder (:class:`DocKGOptions`).
        negatives_per_positive: unlabelled entity pairs (answered ``none``) per labelled one in
            the training rows.
        max_length: the model's context in tokens. A prompt that would not fit with its longest
            answer keeps fewer document sentences; a warning says how much was cut.
        batch_size: training rows per batch; eval_documents: documents per evaluation batch.
        seed: the training rows' sampling and order, the DocKG's and the encoder's.
    """

    def __init__(
        self,
        tokenizer: Any,
        source: DocREDSource = DocREDSource(),
        prompt: HybridPromptOptions = HybridPromptOptions(),
        knowledge: DocKGOptions = DocKGOptions(),
        negatives_per_positive: float = 1.0,
        max_length: int = 512,
        batch_size: int = 16,
        eval_documents: int = 2,
        seed: int = 0,
    ):
        super().__init__()
        self.source = _instance(source, "source", DocREDSource)
        self.prompt = _instance(prompt, "prompt", HybridPromptOptions)
        self.knowledge_options = _instance(knowledge, "knowledge", DocKGOptions)
        # NaN passed this check and failed late, in setup, after the DocKG was fitted
        negatives_per_positive = require_non_negative(
            negatives_per_positive, "negatives_per_positive"
        )
        seed = require_int(seed, "seed", 0)
        if isinstance(tokenizer, str):
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(tokenizer)
        if tokenizer.eos_token_id is None:
            raise ValueError("the tokenizer needs an eos token (it ends every answer)")
        self.tokenizer = tokenizer
        self.negatives_per_positive = negatives_per_positive
        self.max_length = require_int(max_length, "max_length", 8)
        self.batch_size = require_int(batch_size, "batch_size", 1)
        self.eval_documents = require_int(eval_documents, "eval_documents", 1)
        self.seed = seed
        self._ready = False

    # -- building --------------------------------------------------------------------------

    def _prompt(self, index: int, query: tuple[int, int], sentences: int | None) -> str:
        document = self.documents[index]
        triples = self.knowledge.triples[index]
        parts = self.prompt
        retrieved = None
        if parts.use_set_rag:
            retrieved = retrieve_sentences(self.knowledge.indices[index], query, parts.top_k)
        return hybrid_prompt(
            document,
            query,
            self.relations,
            kg_triples=triples if parts.use_kg else None,
            retrieved=retrieved,
            retrieved_triples=triples,
            include_document=parts.use_document,
            document_sentences=sentences,
            keep_query_triples=parts.query_triples,
        )

    def _prompt_ids(self, index: int, query: tuple[int, int]) -> list[int]:
        """The prompt's tokens, document sentences dropped from its end until the prompt and the
        longest answer fit in ``max_length``."""
        room = self.max_length - self._longest_answer
        sentences = len(self.documents[index]["sents"])
        ids = self.tokenizer(self._prompt(index, query, None))["input_ids"]
        full = len(ids)
        while len(ids) > room and self.prompt.use_document and sentences > 0:
            sentences -= 1
            ids = self.tokenizer(self._prompt(index, query, sentences))["input_ids"]
        if len(ids) > room:
            raise ValueError(
                f"document {self.documents[index]['title']!r}: the prompt of pair {query} takes "
                f"{len(ids)} tokens without its document text, more than max_length="
                f"{self.max_length} leaves for the answer; raise max_length or lower top_k"
            )
        if full > len(ids):
            self._cut.append(full - len(ids))
        return list(ids)

    def setup(self, stage: str | None = None) -> None:
        if self._ready:
            return
        train, dev, self.relations = self.source.load()
        self.train_documents, self.dev_documents = train, dev
        self.documents = [*train, *dev]
        self.relation_ids = list(self.relations)
        self.labels = [NO_RELATION, *self.relation_ids]
        self.answers = [answer_text([], self.relations)]
        self.answers += [answer_text([r], self.relations) for r in self.relation_ids]
        self.train_facts = train_fact_names(train)
        options = self.knowledge_options
        self.knowledge = build_knowledge(
            train,
            dev,
            self.relation_ids,
            use_kg=self.prompt.use_kg,
            encoder=options.encoder,
            encoder_dim=options.encoder_dim,
            tau=options.tau,
            folds=options.kg_folds,
            kg_steps=options.kg_steps,
            seed=self.seed,
        )
        eos = self.tokenizer.eos_token_id
        self._answer_ids = [
            list(self.tokenizer(a, add_special_tokens=False)["input_ids"]) + [eos]
            for a in self.answers
        ]
        self._longest_answer = max(len(a) for a in self._answer_ids)
        self._cut: list[int] = []
        self.train_rows = self._training_rows()
        self.eval_prompts = [
            [self._prompt_ids(i, q) for q in entity_pairs(self.documents[i])]
            for i in range(len(train), len(self.documents))
        ]
        if self._cut:
            total = len(self.train_rows) + sum(len(p) for p in self.eval_prompts)
            rank_zero_warn(
                f"{len(self._cut)} of {total} prompts did not fit max_length={self.max_length} "
                f"and lost document text: {sum(self._cut)} tokens in all, up to "
                f"{max(self._cut)} in one prompt. Raise max_length (the model's context "
                "allowing) or lower top_k."
            )
        self._ready = True

    def _training_rows(self) -> list[tuple[list[int], list[int]]]:
        """``(prompt ids, answer ids)`` per training row, in a seeded order."""
        rng = random.Random(f"docred-rows-{self.seed}")
        rows = []
        index_of = {r: 1 + i for i, r in enumerate(self.relation_ids)}
        for i, document in enumerate(self.train_documents):
            gold = pair_relations(document)
            unlabelled = [q for q in entity_pairs(document) if q not in gold]
            take = min(len(unlabelled), round(self.negatives_per_positive * len(gold)))
            for query in sorted(gold):
                ids = self._prompt_ids(i, query)
                rows += [(ids, self._answer_ids[index_of[r]]) for r in sorted(gold[query])]
            for query in rng.sample(unlabelled, take):
                rows.append((self._prompt_ids(i, query), self._answer_ids[0]))
        if not rows:
            raise ValueError("the training documents hold no labelled entity pair")
        rng.shuffle(rows)
        return rows

    # -- loaders ---------------------------------------------------------------------------

    def _collate_train(
        self, rows: Sequence[tuple[list[int], list[int]]]
    ) -> dict[str, torch.Tensor]:
        pad = pad_token_id(self.tokenizer)
        input_ids, attention = pad_token_rows([prompt + answer for prompt, answer in rows], pad)
        labels, _ = pad_token_rows([[-100] * len(prompt) + answer for prompt, answer in rows], -100)
        return {"input_ids": input_ids, "attention_mask": attention, "labels": labels}

    def _collate_eval(self, documents: Sequence[int]) -> dict[str, Any]:
        prompts = [ids for d in documents for ids in self.eval_prompts[d]]
        queries = [
            (self.dev_documents[d]["title"], h, t)
            for d in documents
            for h, t in entity_pairs(self.dev_documents[d])
        ]
        # left padding: the answer follows the last column
        input_ids, attention = pad_token_rows(prompts, pad_token_id(self.tokenizer), left=True)
        return {
            "input_ids": input_ids,
            "attention_mask": attention,
            "queries": queries,
            "documents": [self.dev_documents[d] for d in documents],
        }

    def train_dataloader(self) -> DataLoader:
        return ResumableDataLoader(
            self.train_rows,
            trainer=self.trainer,
            batch_size=self.batch_size,
            sampler=EpochShuffleSampler(len(self.train_rows), seed=self.seed),
            collate_fn=self._collate_train,
        )

    def _eval_loader(self) -> DataLoader:
        documents = list(range(len(self.dev_documents)))
        trainer = self.trainer
        sampler = None
        if trainer is not None and trainer.world_size > 1:
            sampler = UnrepeatedDistributedSampler(
                documents, num_replicas=trainer.world_size, rank=trainer.global_rank, shuffle=False
            )
        return DataLoader(
            documents,
            batch_size=self.eval_documents,
            sampler=sampler,
            collate_fn=self._collate_eval,
        )

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader()

    def test_dataloader(self) -> DataLoader:
        return self._eval_loader()

    def predict_dataloader(self) -> DataLoader:
        return self._eval_loader()
