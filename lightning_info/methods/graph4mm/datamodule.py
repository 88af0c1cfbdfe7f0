"""``MultimodalGraphDataModule``: small multimodal graphs as batches for :class:`~.module.Graph4MM`.

Each sample is one graph (``graphs.MultimodalGraph``, node 0 its centre). The language model's
prompt holds the texts of the centre's neighbours (what a text-only LM is given) in ``prompt``
(a template with ``{context}``); the target is the graph's text to generate, followed by the
end-of-sequence token. A batch is a dict:

- ``images`` ``(B, N, C, H, W)``, ``has_image`` ``(B, N)``, ``node_mask`` ``(B, N)`` (real
  nodes), ``adjacency`` ``(B, N, N)`` (bool, symmetric, padded nodes unlinked);
- ``node_text_ids`` / ``node_text_mask`` ``(B, N, L)``: each node's text, right-padded;
- ``prompt_ids`` / ``prompt_mask`` ``(B, P)``, left-padded so that every prompt ends in the
  last column, with one placeholder slot (a padding id, mask 1) where the template has
  ``{graph}`` (at the start without it); ``query_position`` ``(B,)``: that slot's column, where
  the model writes its query tokens; ``target_ids`` / ``target_mask`` ``(B, R)``, right-padded;
- ``label`` ``(B,)``: the centre's class (-1: none).

Sources: ``"digits"`` (``graphs.digit_graphs`` over a seeded 60/20/20 split of scikit-learn's
digits images, so test graphs show unseen images) or the path of a user's JSON file
(``graphs.read_graphs_json``), split by a seeded permutation. Without a ``tokenizer`` a
byte-level BPE tokenizer is trained on the training split's texts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch import LightningDataModule
from torch.utils.data import DataLoader

from lightning_info.core.resume import ResumableDataLoader
from lightning_info.core.sampling import EpochShuffleSampler
from lightning_info.core.validation import require_finite, require_int
from lightning_info.data.digits import load_digits_images
from lightning_info.lm.features import pad_token_id, pad_token_rows
from lightning_info.methods.graph4mm.graphs import (
    DIGIT_WORDS,
    MultimodalGraph,
    digit_graphs,
    read_graphs_json,
)

__all__ = ["DigitGraphOptions", "MultimodalGraphDataModule"]

DEFAULT_PROMPT = "linked:{graph} {context}. digits of the linked nodes:"


@dataclass(frozen=True)
class DigitGraphOptions:
    """The shape of the digit graphs (:func:`~.graphs.digit_graphs`): 1..``max_neighbours``
    neighbours of the centre and up to ``max_distractors`` two-hop nodes; a neighbour shows the
    centre's digit with probability ``homophily``; a non-centre node is a text node (a caption
    naming its digit) with probability ``text_node_rate``, else an image node."""

    max_neighbours: int = 3
    max_distractors: int = 3
    homophily: float = 0.8
    text_node_rate: float = 0.5

    def __post_init__(self) -> None:
        require_int(self.max_neighbours, "digits.max_neighbours", 1)
        require_int(self.max_distractors, "digits.max_distractors", 0)
        for name in ("homophily", "text_node_rate"):
            value = require_finite(getattr(self, name), f"digits.{name}")
            if not 0.0 <= value <= 1.0:
                raise ValueError(
                    f"`digits.{name}` is a probability: it must lie in [0, 1], got {value!r}"
                )


class MultimodalGraphDataModule(LightningDataModule):
    """Multimodal graphs split into train, validation and test (module docstring).

    Args:
        tokenizer: a Hugging Face tokenizer with an end-of-sequence token; ``None``: a BPE
            tokenizer trained on the training texts (``vocab_size``), as ``self.tokenizer``.
        source: ``"digits"`` or a JSON / JSON-lines file of graphs.
        num_train, num_val, num_test: graphs per split (digits); for a file, ``num_val`` and
            ``num_test`` are taken from a seeded permutation and the rest train.
        digits: the digit graphs' shape (:class:`DigitGraphOptions`; unused for a file).
        class_names: a file's classes (default: its centres' labels, sorted).
        prompt: the LM prompt, ``{context}`` replaced by the neighbours' texts joined by ``"; "``
            and ``{graph}`` marking where the query tokens go (optional: at the start).
        max_text_tokens: each node text's tokens are cut to this many.
        seed: the graphs, the splits and the shuffling. batch_size: graphs per batch.

    ``num_classes``, ``class_names``, the split lists ``train_graphs``, ``val_graphs`` and
    ``test_graphs``, and ``digits`` exist after construction.
    """

    def __init__(
        self,
        tokenizer: Any = None,
        source: str = "digits",
        num_train: int = 2000,
        num_val: int = 200,
        num_test: int = 300,
        digits: DigitGraphOptions = DigitGraphOptions(),
        class_names: list[str] | None = None,
        prompt: str = DEFAULT_PROMPT,
        max_text_tokens: int = 16,
        vocab_size: int = 400,
        seed: int = 0,
        batch_size: int = 32,
    ):
        super().__init__()
        self.seed = require_int(seed, "seed", 0)
        self.batch_size = require_int(batch_size, "batch_size", 1)
        self.max_text_tokens = require_int(max_text_tokens, "max_text_tokens", 1)
        if not isinstance(prompt, str):
            raise TypeError(f"`prompt` must be a template string, got {type(prompt).__name__}.")
        if "{context}" not in prompt or prompt.count("{graph}") > 1:
            raise ValueError(
                "prompt must contain {context} (the neighbours' texts) and at most one {graph} "
                "(where the query tokens go)"
            )
        try:
            prompt.format(context="", graph="")
        except (KeyError, IndexError, ValueError) as error:
            raise ValueError(
                f"`prompt` {prompt!r} is not a template of {{context}} and {{graph}} alone "
                f"({type(error).__name__}: {error}); write a literal brace as {{{{ or }}}}."
            ) from None
        self.prompt = prompt
        if not isinstance(digits, DigitGraphOptions):
            raise TypeError(f"`digits` must be a DigitGraphOptions, got {digits!r}.")
        self.digits = digits
        if source == "digits":
            if class_names is not None:
                raise ValueError(
                    "`class_names` names the classes of a file source; the digit graphs' "
                    "classes are the digit words: leave class_names=None."
                )
            self._digit_splits(num_train, num_val, num_test)
        elif Path(source).is_file():
            self._file_splits(source, class_names, num_val, num_test)
        else:
            raise ValueError(f"source must be 'digits' or an existing JSON file, got {source!r}")
        if tokenizer is None:
            from lightning_info.lm.tiny_lm import train_bpe_tokenizer

            tokenizer = train_bpe_tokenizer(self.training_texts(), vocab_size=vocab_size)
        if tokenizer.eos_token_id is None:
            raise ValueError("the tokenizer needs an end-of-sequence token to end the targets")
        self.tokenizer = tokenizer

    def _digit_splits(self, num_train, num_val, num_test) -> None:
        images, labels = load_digits_images()
        order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(self.seed))
        cuts = (0, int(0.6 * len(order)), int(0.8 * len(order)), len(order))
        counts = (
            require_int(num_train, "num_train", 1),
            require_int(num_val, "num_val", 1),
            require_int(num_test, "num_test", 0),
        )
        splits = []
        for offset, count in enumerate(counts):
            rows = order[cuts[offset] : cuts[offset + 1]]
            seed = 3 * self.seed + offset
            if count:
                splits.append(
                    digit_graphs(
                        images[rows], labels[rows], count, **asdict(self.digits), seed=seed
                    )
                )
            else:
                splits.append([])
        self.train_graphs, self.val_graphs, self.test_graphs = splits
        self.class_names = list(DIGIT_WORDS)

    def _file_splits(self, source, class_names, num_val, num_test) -> None:
        graphs, self.class_names = read_graphs_json(source, class_names)
        num_val, num_test = require_int(num_val, "num_val", 1), require_int(num_test, "num_test", 0)
        if num_val + num_test >= len(graphs):
            raise ValueError(
                f"num_val + num_test ({num_val + num_test}) leaves no training graph of "
                f"{len(graphs)} in {source}"
            )
        order = torch.randperm(len(graphs), generator=torch.Generator().manual_seed(self.seed))
        pick = [graphs[i] for i in order.tolist()]
        self.val_graphs = pick[:num_val]
        self.test_graphs = pick[num_val : num_val + num_test]
        self.train_graphs = pick[num_val + num_test :]

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def prompt_text(self, graph: MultimodalGraph) -> str:
        """The LM prompt of ``graph``: its centre's neighbours' texts in the template (without
        the placeholder)."""
        return "".join(self._prompt_parts(graph))

    def _prompt_parts(self, graph: MultimodalGraph) -> tuple[str, str]:
        """The prompt's text before and after the placeholder."""
        context = "; ".join(graph.texts[i] for i in graph.neighbours())
        template = self.prompt if "{graph}" in self.prompt else "{graph}" + self.prompt
        before, after = template.split("{graph}", 1)
        return before.format(context=context), after.format(context=context)

    def encode_prompt(self, graph: MultimodalGraph) -> tuple[list[int], int]:
        """The prompt's token ids with the placeholder slot (a padding id), and its index. The
        two parts are tokenised apart, so the ids without the slot are what a text-only LM
        reads."""
        before, after = (self._ids(part) if part else [] for part in self._prompt_parts(graph))
        return before + [pad_token_id(self.tokenizer)] + after, len(before)

    def training_texts(self) -> list[str]:
        """Every text of the training split (node texts, prompts, targets)."""
        texts = [t for g in self.train_graphs for t in g.texts]
        texts += [self.prompt_text(g) + " " + g.target for g in self.train_graphs]
        return texts

    def collate(self, graphs: list[MultimodalGraph]) -> dict[str, torch.Tensor]:
        """The batch of ``graphs`` (module docstring)."""
        b, n = len(graphs), max(len(g.texts) for g in graphs)
        images = torch.zeros(b, n, *graphs[0].images.shape[1:])
        has_image = torch.zeros(b, n, dtype=torch.bool)
        node_mask = torch.zeros(b, n, dtype=torch.bool)
        adjacency = torch.zeros(b, n, n, dtype=torch.bool)
        node_rows, prompts, slots, targets = [], [], [], []
        pad, eos = pad_token_id(self.tokenizer), self.tokenizer.eos_token_id
        for i, g in enumerate(graphs):
            k = len(g.texts)
            images[i, :k], has_image[i, :k], node_mask[i, :k] = g.images, g.has_image, True
            adjacency[i, :k, :k] = g.adjacency()
            encoded = self.tokenizer(list(g.texts), add_special_tokens=False)["input_ids"]
            node_rows += [ids[: self.max_text_tokens] or [pad] for ids in encoded]
            node_rows += [[pad]] * (n - k)
            ids, slot = self.encode_prompt(g)
            prompts.append(ids)
            slots.append(slot - len(ids))  # from the end: the prompts are left-padded
            targets.append(self._ids(" " + g.target) + [eos])
        node_ids, node_text_mask = pad_token_rows(node_rows, pad)
        prompt_ids, prompt_mask = pad_token_rows(prompts, pad, left=True)
        target_ids, target_mask = pad_token_rows(targets, pad)
        return {
            "images": images,
            "has_image": has_image,
            "node_mask": node_mask,
            "adjacency": adjacency,
            "node_text_ids": node_ids.view(b, n, -1),
            "node_text_mask": node_text_mask.view(b, n, -1).bool() & node_mask[..., None],
            "prompt_ids": prompt_ids,
            "prompt_mask": prompt_mask,
            "query_position": prompt_ids.shape[1] + torch.tensor(slots, dtype=torch.long),
            "target_ids": target_ids,
            "target_mask": target_mask,
            "label": torch.tensor([g.label for g in graphs], dtype=torch.long),
        }

    def _ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def train_dataloader(self) -> DataLoader:
        sampler = EpochShuffleSampler(len(self.train_graphs), seed=self.seed)
        return ResumableDataLoader(
            self.train_graphs,
            trainer=self.trainer,
            sampler=sampler,
            batch_size=self.batch_size,
            collate_fn=self.collate,
        )

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_graphs, batch_size=self.batch_size, collate_fn=self.collate)

    def test_dataloader(self) -> DataLoader:
        if not self.test_graphs:
            raise ValueError("num_test is 0: there are no test graphs")
        return DataLoader(self.test_graphs, batch_size=self.batch_size, collate_fn=self.collate)
