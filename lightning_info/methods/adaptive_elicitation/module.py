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
from lightning_info.lm.fine_tuner import CausalLMFineTuner

__all__ = ["ElicitationLM"]


class ElicitationLM(CausalLMFineTuner):
    """``CausalLMFineTuner`` on block sequences, with answer accuracy; ``answer_ids`` are the
    answer tokens (``QuestionBank.answer_ids``), among which the accuracy's argmax is taken.

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
    ) -> None:
        super().__init__(model, optimizer=optimizer, lora=lora)
        if not answer_ids:
            raise ValueError("answer_ids must name the answer tokens")
        self.answer_ids = list(answer_ids)
        self.val_accuracy = MeanMetric()
        self.test_accuracy = MeanMetric()

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
