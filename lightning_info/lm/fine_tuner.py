"""``CausalLMFineTuner``: supervised fine-tuning of a Hugging Face causal LM, optionally LoRA."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import torch
from lightning.pytorch import LightningModule
from torchmetrics import MeanMetric

from lightning_info.core.options import AdamWOptions


class CausalLMFineTuner(LightningModule):
    """Fine-tunes ``model`` on batches with ``input_ids``, ``attention_mask`` and ``labels``.

    ``model`` is a causal LM module, or a Hugging Face name or local path loaded with
    :func:`~lightning_info.lm.tiny_lm.load_causal_lm` (what a LightningCLI config passes): a
    missing folder, an unreachable hub id or a tokenizer of another model fails at once.

    The loss is the mean next-token negative log-likelihood over the label tokens (``labels ==
    -100`` are ignored), as computed by the model itself. Validation and test log the
    token-weighted mean NLL over the whole split (``val/loss``) and its exponential, the
    perplexity (``val/ppl``). With ``lora`` (a dict of ``peft.LoraConfig`` arguments, e.g.
    ``{"r": 8, "lora_alpha": 16, "target_modules": ["c_attn"]}``) only the LoRA adapters train.
    ``optimizer`` is AdamW over the trainable weights, with a warmup-cosine schedule when its
    ``warmup_fraction`` is set (:class:`~lightning_info.core.options.AdamWOptions`).

    The wrapped model is available as ``self.model``, in train mode from construction on (as
    every module a Trainer fits starts): ``from_pretrained`` returns a model in eval mode, which
    would leave its dropout off in training. The Trainer switches it to eval mode for validation,
    testing and prediction, and back. :class:`FisherSubsetDataModule` embeds the pool with it
    when no other feature model is given.
    """

    def __init__(
        self,
        model: torch.nn.Module | str,
        optimizer: AdamWOptions = AdamWOptions(),
        lora: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(optimizer, AdamWOptions):
            raise TypeError(
                f"`optimizer` must be an AdamWOptions, got {type(optimizer).__name__}: pass "
                "AdamWOptions(lr=..., weight_decay=...) (in a YAML: `optimizer: {lr: ...}`)."
            )
        self.optimizer_options = optimizer
        if isinstance(model, (str, os.PathLike)):
            from lightning_info.lm.tiny_lm import load_causal_lm

            model, _ = load_causal_lm(model)
        if not isinstance(model, torch.nn.Module):
            raise TypeError(
                "`model` must be a causal LM (a torch.nn.Module) or a local folder / Hugging "
                f"Face hub id (a str), got {type(model).__name__}."
            )
        if lora is not None and not isinstance(lora, Mapping):
            raise TypeError(
                "`lora` must be a dict of peft.LoraConfig arguments or None, got "
                f"{type(lora).__name__}; e.g. {{'r': 8, 'lora_alpha': 16, "
                "'target_modules': ['c_attn']}."
            )
        if lora is not None:
            from peft import LoraConfig, get_peft_model

            model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", **lora))
        self.model = model.train()
        self.val_nll = MeanMetric()
        self.test_nll = MeanMetric()

    def forward(self, **batch: torch.Tensor) -> Any:
        return self.model(**batch)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self.model(**batch).loss
        size = batch["input_ids"].shape[0]
        self.log("train/loss", loss, prog_bar=True, batch_size=size, sync_dist=True)
        return loss

    def _evaluate(self, batch: dict[str, torch.Tensor], metric: MeanMetric, stage: str) -> Any:
        """Log the split's token-weighted NLL; returns the model's output (loss and logits)."""
        output = self.model(**batch)
        loss = output.loss
        # The model averages over this batch's target tokens; weight by their count so that the
        # epoch value is the mean over all target tokens of the split.
        targets = (batch["labels"][:, 1:] != -100).sum()
        metric.update(loss.detach(), weight=targets)
        self.log(f"{stage}/loss", metric, on_step=False, on_epoch=True)
        return output

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self._evaluate(batch, self.val_nll, "val")

    def test_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self._evaluate(batch, self.test_nll, "test")

    def _log_perplexity(self, metric: MeanMetric, stage: str) -> None:
        if metric.update_called:
            self.log(f"{stage}/ppl", torch.exp(metric.compute()))

    def on_validation_epoch_end(self) -> None:
        self._log_perplexity(self.val_nll, "val")

    def on_test_epoch_end(self) -> None:
        self._log_perplexity(self.test_nll, "test")

    def configure_optimizers(self) -> Any:
        params = [p for p in self.model.parameters() if p.requires_grad]
        return self.optimizer_options.configure(params, self.trainer)
