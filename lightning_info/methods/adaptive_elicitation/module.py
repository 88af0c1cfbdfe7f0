"""``ElicitationLM``: meta-training of a causal LM on entities' shuffled question/answer blocks.

The loss is the next-token cross-entropy at the answer tokens only (the labels of
``sequences.encode_entity``), as the reference trains it; ``CausalLMFineTuner`` (shared with the
other LM methods) computes it and logs the split's answer NLL. Validation and test also log the
accuracy of the most probable answer among the answer tokens (``val/accuracy``,
``test/accuracy``).
"""

from __future__ import annotations

from typing import Any

import torch
from torchmetrics import MeanMetric

from lightning_info.core.options import AdamWOptions
from lightning_info.core.validation import require_indices
from lightning_info.lm.fine_tuner import CausalLMFineTuner
from lightning_info.methods.adaptive_elicitation.sequences import answer_tokens

__all__ = ["ElicitationLM"]


class ElicitationLM(CausalLMFineTuner):
    """``CausalLMFineTuner`` on block sequences, with answer accuracy; ``answer_ids`` are the
    answer tokens (``QuestionBank.answer_ids``), among which the accuracy's argmax is taken.

    ``answer_ids`` are checked at construction: distinct integer ids inside the model's
    vocabulary (its input embeddings) and, with ``tokenizer``, the ids of the answer tokens
    ``<A0>``, ``<A1>``, ... it holds; at ``setup`` they must equal the data module's
    ``bank.answer_ids`` when it has one. Any other list is refused: the accuracy would be
    taken over other tokens than the answers.

    With ``optimizer.warmup_fraction`` (of ``optimizer.schedule_steps`` optimizer steps;
    ``None``: the trainer's ``estimated_stepping_batches``, which change with ``max_epochs``, so
    fix ``schedule_steps`` to resume into a longer run) the learning rate warms up linearly and
    then decays along a cosine (``core.schedules.warmup_cosine``); ``warmup_fraction=None`` keeps
    it constant. At equal steps a small LM trained from scratch ends closer to the exact
    predictive with it (the method card's measurements)."""

    def __init__(
        self,
        model: torch.nn.Module | str,
        answer_ids: list[int],
        optimizer: AdamWOptions = AdamWOptions(),
        lora: dict[str, Any] | None = None,
        tokenizer: Any = None,
    ) -> None:
        super().__init__(model, optimizer=optimizer, lora=lora)
        self.answer_ids = _checked_answer_ids(answer_ids, self.model, tokenizer)
        self.val_accuracy = MeanMetric()
        self.test_accuracy = MeanMetric()

    def setup(self, stage: str) -> None:
        bank = getattr(getattr(self.trainer, "datamodule", None), "bank", None)
        expected = getattr(bank, "answer_ids", None)
        if expected is not None and list(expected) != self.answer_ids:
            raise ValueError(
                f"`answer_ids` {self.answer_ids} are not the data module's answer tokens "
                f"{list(expected)}: build the module with `data.bank.answer_ids`."
            )

    def _answer_accuracy(self, batch, output, metric: MeanMetric, stage: str) -> None:
        targets = batch["labels"][:, 1:]
        at = targets != -100
        answers = torch.tensor(self.answer_ids, device=output.logits.device)
        predicted = answers[output.logits[:, :-1][at][:, answers].argmax(-1)]
        correct = (predicted == targets[at]).double()
        metric.update(correct.mean(), weight=correct.numel())
        self.log(f"{stage}/accuracy", metric, on_step=False, on_epoch=True)

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        output = self._evaluate(batch, self.val_nll, "val")
        self._answer_accuracy(batch, output, self.val_accuracy, "val")

    def test_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        output = self._evaluate(batch, self.test_nll, "test")
        self._answer_accuracy(batch, output, self.test_accuracy, "test")


def _vocabulary_size(model: torch.nn.Module) -> int | None:
    """The rows of the model's input embeddings (``config.vocab_size`` without them)."""
    embeddings = getattr(model, "get_input_embeddings", None)
    if callable(embeddings) and getattr(embeddings(), "num_embeddings", None) is not None:
        return int(embeddings().num_embeddings)
    return getattr(getattr(model, "config", None), "vocab_size", None)


def _checked_answer_ids(answer_ids: Any, model: torch.nn.Module, tokenizer: Any) -> list[int]:
    if answer_ids is None or (hasattr(answer_ids, "__len__") and len(answer_ids) == 0):
        raise ValueError("`answer_ids` must name the answer tokens: pass QuestionBank.answer_ids.")
    size = _vocabulary_size(model)
    ids = require_indices(answer_ids, "answer_ids", size, unique=True).tolist()
    if tokenizer is not None:
        expected = answer_tokens(tokenizer, len(ids))
        if ids != expected:
            raise ValueError(
                f"`answer_ids` {ids} are not the tokenizer's answer tokens <A0>..<A{len(ids) - 1}> "
                f"(ids {expected}): pass QuestionBank.answer_ids of this tokenizer."
            )
    return ids
