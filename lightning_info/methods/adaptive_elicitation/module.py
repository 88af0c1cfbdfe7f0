"""``ElicitationLM``: meta-training of a causal LM on entities' shuffled question/answer blocks.

The loss is the next-token cross-entropy at the answer tokens only (the labels of
``sequences.encode_entity``), as the reference trains it; ``CausalLMFineTuner`` (shared with the
other LM methods) computes it and logs the split's answer NLL. Validation also logs the accuracy
of the most probable answer among the answer tokens (``val/accuracy``).
"""

from __future__ import annotations

from typing import Any

import torch
from torchmetrics import MeanMetric

from lightning_info.lm.fine_tuner import CausalLMFineTuner

__all__ = ["ElicitationLM"]


class ElicitationLM(CausalLMFineTuner):
    """``CausalLMFineTuner`` on block sequences, with answer accuracy; ``answer_ids`` are the
    answer tokens (``QuestionBank.answer_ids``), among which the accuracy's argmax is taken."""

    def __init__(
        self,
        model: torch.nn.Module | str,
        answer_ids: list[int],
        lr: float = 1e-3,
        weight_decay: float = 0.0,
        lora: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(model, lr=lr, weight_decay=weight_decay, lora=lora)
        if not answer_ids:
            raise ValueError("answer_ids must name the answer tokens")
        self.answer_ids = list(answer_ids)
        self.val_accuracy = MeanMetric()

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        logits = self._evaluate(batch, self.val_nll, "val").logits
        targets = batch["labels"][:, 1:]
        at = targets != -100
        answers = torch.tensor(self.answer_ids, device=logits.device)
        predicted = answers[logits[:, :-1][at][:, answers].argmax(-1)]
        correct = (predicted == targets[at]).double()
        self.val_accuracy.update(correct.mean(), weight=correct.numel())
        self.log("val/accuracy", self.val_accuracy, on_step=False, on_epoch=True)
