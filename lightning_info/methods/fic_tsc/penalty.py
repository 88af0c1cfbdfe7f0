"""The paper's alternative to the constraint: the Fisher trace as a penalty in the loss."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from lightning_info.core.schedules import Schedule, as_schedule
from lightning_info.core.validation import require_int, require_non_negative
from lightning_info.methods.fic_tsc.functional import fisher_penalty


def double_backward_attention() -> AbstractContextManager:
    """Restrict ``scaled_dot_product_attention`` to its math kernel inside the block.

    The fused kernels (flash on CPU and CUDA, memory-efficient on CUDA) have no second derivative,
    so a loss whose forward used them cannot be differentiated twice ("derivative for
    aten::_scaled_dot_product_flash_attention_for_cpu_backward is not implemented"). Run the
    forward whose loss goes into :class:`FisherPenalty` inside this block; Hugging Face models
    with ``attn_implementation="sdpa"`` (their default) then use the math kernel.
    """
    return sdpa_kernel([SDPBackend.MATH])


class FisherPenalty(nn.Module):
    """``L + lambda_t * max(0, tr F_hat - eps)`` with ``tr F_hat = ||grad L||^2`` (double backward).

    Call it on the scalar mini-batch loss and the parameters to regularise; the result is a new
    loss whose ``backward`` yields ``g + 2 lambda H g`` while the hinge is active. A forward through
    attention layers must run under :func:`double_backward_attention` (the mixin does this).

    Args:
        weight: ``lambda`` (>= 0), or a schedule of the optimizer step.
        max_fisher: the hinge ``eps`` (>= 0); ``0`` penalises the whole trace.
    """

    def __init__(self, weight: float | Schedule = 0.1, max_fisher: float = 0.0) -> None:
        super().__init__()
        if isinstance(weight, (int, float)) and not isinstance(weight, bool):
            require_non_negative(weight, "weight")
        self.weight = as_schedule(weight, "weight")
        require_non_negative(self.weight(0), "weight")
        self.max_fisher = require_non_negative(max_fisher, "max_fisher")

    def forward(self, loss: Tensor, parameters: Any, step: int = 0) -> tuple[Tensor, Tensor]:
        """Return ``(penalised_loss, penalty)`` at optimizer step ``step`` (an int >= 0)."""
        require_int(step, "step", 0)
        weight = require_non_negative(self.weight(step), "weight")
        penalty = fisher_penalty(loss, parameters, self.max_fisher)
        return loss + weight * penalty, penalty


class FisherPenaltyMixin:
    """Mix into a LightningModule to add :class:`FisherPenalty` to its ``training_step`` loss.

    Put the mixin first in the bases; the module's own ``training_step`` is left as it is::

        class PenalisedClassifier(FisherPenaltyMixin, InceptionTimeClassifier):
            fisher_penalty = FisherPenalty(weight=0.1)

    The penalty uses the gradient of the loss returned by ``training_step`` (a tensor, or a dict
    with key ``"loss"``) with respect to all trainable parameters, and logs
    ``fisher_penalty/trace`` and ``fisher_penalty/loss``. Under gradient accumulation it acts on
    each micro-batch; under DDP on each rank's micro-batch (the outer gradient is still averaged).
    The host's ``training_step`` runs under :func:`double_backward_attention`, so transformers
    with fused attention kernels can be differentiated twice. Needs automatic optimization.
    """

    fisher_penalty: FisherPenalty = FisherPenalty()

    def training_step(self, *args: Any, **kwargs: Any) -> Any:
        if not self.automatic_optimization:
            raise RuntimeError(
                "FisherPenaltyMixin adds to the loss returned by training_step, which manual "
                "optimization does not use; call FisherPenalty yourself before manual_backward."
            )
        with double_backward_attention():
            output = super().training_step(*args, **kwargs)
        loss = output.get("loss") if isinstance(output, dict) else output
        if not isinstance(loss, Tensor):
            raise TypeError(
                "FisherPenaltyMixin needs training_step to return a loss tensor or a dict with "
                f"'loss', got {type(output).__name__}."
            )
        params = [p for p in self.parameters() if p.requires_grad]
        total, trace = self.fisher_penalty(loss, params, self.trainer.global_step)
        self.log("fisher_penalty/trace", trace.detach(), on_step=True, on_epoch=False, batch_size=1)
        self.log("fisher_penalty/loss", total.detach(), on_step=True, on_epoch=False, batch_size=1)
        if isinstance(output, dict):
            return {**output, "loss": total}
        return total
