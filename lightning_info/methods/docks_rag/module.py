"""``DocKSRAG``: hybrid-prompt tuning of a causal LM for document-level relation extraction.

DocKS-RAG (Xu et al., ICML 2025) fine-tunes an LLM with LoRA (peft) on hybrid prompts (the
document, its DocKG subgraph and its SetRAG sentences; ``DocREDDataModule``) with the pair's
relation as the answer: the mean next-token negative log-likelihood of the answer tokens. At
evaluation every ordered entity pair of a document is asked, the answer decoded greedily under
the constraint that it be a relation name or ``none`` (``decoding.constrained_answers``), and the
non-``none`` answers are scored by the official DocRED scorer (``DocREDScores``: F1, Ign F1).
"""

from __future__ import annotations

from typing import Any

import torch

from lightning_info.core.options import AdamWOptions
from lightning_info.core.validation import require_int
from lightning_info.lm.fine_tuner import CausalLMFineTuner
from lightning_info.methods.docks_rag.decoding import LabelTrie, constrained_answers
from lightning_info.methods.docks_rag.docred import check_predictions
from lightning_info.methods.docks_rag.metrics import DocREDScores

__all__ = ["DocKSRAG"]

DEFAULT_LORA = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.0}
"""The paper's rank 16; peft picks the target modules of known architectures."""
DOCKS_RAG_OPTIMIZER = AdamWOptions(lr=5e-5)


class DocKSRAG(CausalLMFineTuner):
    """LoRA tuning of ``model`` on hybrid prompts, evaluated by constrained decoding.

    The shared ``CausalLMFineTuner`` loads, wraps (LoRA), trains and optimises the model; this
    class adds the evaluation by constrained decoding and the official scores.

    Args:
        model: a causal LM module, or a Hugging Face name or path (``lm.tiny_lm.load_causal_lm``).
        tokenizer: the model's tokenizer (default: the data module's).
        lora: ``peft.LoraConfig`` arguments; ``None`` tunes every weight.
        optimizer: AdamW's settings (the paper's learning rate 5e-5 by default).
        generation_batch_size: prompts decoded at once in evaluation.

    The relations, answer texts and training facts (for Ign F1) come from the trainer's
    ``DocREDDataModule`` at setup.
    """

    def __init__(
        self,
        model: torch.nn.Module | str,
        tokenizer: Any = None,
        lora: dict[str, Any] | None = DEFAULT_LORA,
        optimizer: AdamWOptions = DOCKS_RAG_OPTIMIZER,
        generation_batch_size: int = 64,
    ) -> None:
        super().__init__(model, optimizer=optimizer, lora=lora)
        self.generation_batch_size = require_int(generation_batch_size, "generation_batch_size", 1)
        self.tokenizer = tokenizer
        self.val_scores = DocREDScores()
        self.test_scores = DocREDScores()
        self._trie: LabelTrie | None = None
        self.labels: list[str] = []

    def setup(self, stage: str) -> None:
        data = getattr(self.trainer, "datamodule", None)
        if data is None or not hasattr(data, "answers"):
            raise ValueError("DocKSRAG needs a DocREDDataModule (its relations and answers)")
        data.setup(stage)
        self.tokenizer = self.tokenizer or data.tokenizer
        self.labels = data.labels
        self._trie = LabelTrie(self.tokenizer, data.answers)
        self.val_scores.train_facts = set(data.train_facts)
        self.test_scores.train_facts = set(data.train_facts)

    def predict_relations(self, batch: dict[str, Any]) -> list[dict[str, Any]]:
        """DocRED-format predictions ``{title, h_idx, t_idx, r}`` for a batch's pairs whose
        decoded answer is a relation."""
        was_training = self.model.training
        self.model.eval()
        chosen: list[int] = []
        ids, mask = batch["input_ids"], batch["attention_mask"]
        for start in range(0, ids.shape[0], self.generation_batch_size):
            rows = slice(start, start + self.generation_batch_size)
            keep = int(mask[rows].sum(1).max())  # drop columns that are padding in every row
            chosen += constrained_answers(
                self.model, ids[rows, -keep:], mask[rows, -keep:], self._trie
            )
        self.model.train(was_training)
        return [
            {"title": title, "h_idx": h, "t_idx": t, "r": self.labels[c]}
            for (title, h, t), c in zip(batch["queries"], chosen)
            if c != 0
        ]

    def _evaluate(self, batch: dict[str, Any], scores: DocREDScores) -> None:
        # an override of predict_relations with string entity indices would score F1 0 silently
        scores.update(check_predictions(self.predict_relations(batch)), batch["documents"])

    def validation_step(self, batch: dict[str, Any], batch_idx: int) -> None:
        self._evaluate(batch, self.val_scores)

    def test_step(self, batch: dict[str, Any], batch_idx: int) -> None:
        self._evaluate(batch, self.test_scores)

    def predict_step(self, batch: dict[str, Any], batch_idx: int) -> list[dict[str, Any]]:
        return self.predict_relations(batch)

    def _log_scores(self, scores: DocREDScores, stage: str) -> None:
        values = scores.compute()
        for name in ("precision", "recall", "f1", "ign_f1"):
            self.log(f"{stage}/{name}", values[name], prog_bar=name in ("f1", "ign_f1"))
        scores.reset()

    def on_validation_epoch_end(self) -> None:
        self._log_scores(self.val_scores, "val")

    def on_test_epoch_end(self) -> None:
        self._log_scores(self.test_scores, "test")
