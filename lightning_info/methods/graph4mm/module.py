"""``Graph4MM``: a frozen causal LM that reads a multimodal graph through learned query tokens.

For a batch of ``MultimodalGraphDataModule``:

1. every node's text becomes the mean of the frozen LM's input embeddings over its tokens, every
   image a feature vector from the image encoder; a node's feature is ``[text; image;
   has_image; is_centre]`` (the centre is node 0);
2. the :class:`~.qformer.MMQFormer` reads the image features by cross-attention and the node
   features by the joint attention (hop-diffused over the graph for ``variant="graph4mm"``) and
   gives ``num_queries`` vectors of the LM's width;
3. the LM runs on ``[prompt with the queries at its placeholder slot; target]`` (the data
   module's ``query_position``, by default right after "linked:", where the LM reads the linked
   nodes); the generative loss is the next-token cross-entropy of the target tokens, the
   discriminative head a linear layer on the LM's last hidden state at the prompt's last token.

Variants, the paper's ablations: ``"graph4mm"``; ``"agnostic"``: the joint attention ignores
the graph; ``"image_only"``: a Q-Former over the images alone (no text nodes); ``"text_only"``:
no queries, the LM reads the prompt alone (the neighbours' texts). The LM stays frozen and in
eval mode; ``lora`` (``peft.LoraConfig`` arguments) adds trainable adapters.

Validation and test log ``{stage}/loss`` (target NLL per token), ``{stage}/token_accuracy``
(teacher-forced argmax), ``{stage}/rougel`` and ``{stage}/exact_match`` of the greedy decoding
against the target (ROUGE-L F1 by torchmetrics), and ``{stage}/accuracy`` of the node label.

The forward pass checks shapes only and reads no value back from the device: the queries are
written into the prompt by a gather at each sample's slot, and a batch without labelled nodes
adds a zero discriminative term. With ``validate_args=True`` it also refuses NaN or infinite
images and query slots outside the prompt (host reads, a device synchronisation each on an
accelerator). Selecting the nodes that have an image (a boolean index) still waits for the
device, as every boolean index does.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
import torch.nn.functional as F
from lightning.pytorch import LightningModule
from torch import Tensor, nn
from torchmetrics import MeanMetric
from torchmetrics.text.rouge import ROUGEScore

from lightning_info.core.logging import metric_key
from lightning_info.core.options import AdamWOptions
from lightning_info.core.validation import (
    require_bool,
    require_choice,
    require_finite_tensor,
    require_int,
    require_non_negative,
)
from lightning_info.methods.graph4mm.decoding import greedy_decode, positions
from lightning_info.methods.graph4mm.encoders import image_encoder as build_image_encoder
from lightning_info.methods.graph4mm.qformer import MMQFormer

__all__ = ["Graph4MM", "TASKS", "VARIANTS", "variant_qformer"]

VARIANTS = ("graph4mm", "agnostic", "image_only", "text_only")
TASKS = ("generate", "classify", "both")
DEFAULT_OPTIMIZER = AdamWOptions()


def variant_qformer(
    variant: Literal["graph4mm", "agnostic", "image_only", "text_only"],
    dim: int = 64,
    num_queries: int = 8,
    layers: int = 2,
    heads: int = 4,
    ffn_mult: int = 4,
    hop: dict[str, Any] | None = None,
) -> MMQFormer | None:
    """The Q-Former of ``variant`` (the paper's ablations, module docstring) with its widths
    left for :class:`Graph4MM` to fill in; ``Graph4MM`` builds ``variant_qformer(variant)``
    when given none. ``"graph4mm"``: hop-diffused joint attention, ``hop`` holding
    ``HopDiffusedAttention``'s ``alpha``, ``steps``, ``remainder``, ``rescale`` (its defaults
    where missing: ``alpha=0.1``, 4 steps, the remainder); ``"agnostic"`` and
    ``"image_only"``: plain joint attention (``hop`` unused); ``"text_only"``: ``None``, no
    Q-Former."""
    require_choice(variant, "variant", VARIANTS)
    if variant == "text_only":
        return None
    return MMQFormer(
        dim,
        num_queries=num_queries,
        layers=layers,
        heads=heads,
        ffn_mult=ffn_mult,
        hop=({} if hop is None else hop) if variant == "graph4mm" else None,
    )


_IGNORED = -100  # cross_entropy's ignore_index for the rows without a label


class Graph4MM(LightningModule):
    """Graph4MM (module docstring).

    Args:
        lm: a causal LM module, or a Hugging Face name / local folder (its tokenizer is loaded
            with it); frozen. tokenizer: decodes the generations (needed with a module ``lm``).
        num_classes: classes of the node label (the discriminative head).
        variant: one of :data:`VARIANTS`. task: ``"generate"``, ``"classify"`` or ``"both"``
            (losses summed, the label's weighted by ``class_weight``).
        image_encoder: ``None`` (``SmallConvEncoder()``, a small ConvNet trained here, 64 wide
            on one channel), a Hugging Face vision model's name or folder, or a module
            (``encoders.image_encoder``; e.g. ``SmallConvEncoder(in_channels=3, dim=128)``);
            freeze_image_encoder: keep a pretrained encoder's weights fixed.
        qformer: the :class:`~.qformer.MMQFormer` (or a module with its call signature);
            ``None``: ``variant_qformer(variant)`` (width 64, 8 queries, 2 layers, 4 heads,
            hop diffusion ``alpha=0.1`` over 4 steps with the remainder). An ``MMQFormer``
            given without its widths is built here with them (image encoder's ``out_dim``;
            LM width + image width + 2 for the node features, ``None`` for ``"image_only"``;
            LM width); one built already must have these. Its joint attention must diffuse
            over the graph (``hop``) exactly for ``variant="graph4mm"``; ``"text_only"`` has
            none.
        lora: ``peft.LoraConfig`` arguments for adapters in the LM, or ``None``.
        optimizer: AdamW over the trainable parameters and its optional warmup-cosine schedule
            (:class:`~lightning_info.core.options.AdamWOptions`; lr 1e-3, no weight decay, a
            constant rate by default).
        max_new_tokens: greedy decoding.
        validate_args: check the values of every batch (images finite, query slots inside the
            prompt); default ``False`` (module docstring).

    The module's hyperparameters leave ``lm``, ``tokenizer``, ``image_encoder`` and
    ``qformer`` out (``load_from_checkpoint`` needs them passed again when they are not the
    defaults).
    """

    def __init__(
        self,
        lm: nn.Module | str,
        tokenizer: Any = None,
        num_classes: int = 10,
        variant: Literal["graph4mm", "agnostic", "image_only", "text_only"] = "graph4mm",
        task: Literal["generate", "classify", "both"] = "both",
        image_encoder: nn.Module | str | None = None,
        freeze_image_encoder: bool = True,
        qformer: nn.Module | None = None,
        lora: dict[str, Any] | None = None,
        class_weight: float = 1.0,
        optimizer: AdamWOptions = DEFAULT_OPTIMIZER,
        max_new_tokens: int = 12,
        validate_args: bool = False,
    ):
        super().__init__()
        require_choice(variant, "variant", VARIANTS)
        require_choice(task, "task", TASKS)
        if not isinstance(optimizer, AdamWOptions):
            raise TypeError(f"`optimizer` must be an AdamWOptions, got {optimizer!r}.")
        require_bool(freeze_image_encoder, "freeze_image_encoder")
        if qformer is not None and variant == "text_only":
            raise ValueError("the text_only variant has no Q-Former: pass qformer=None")
        self.save_hyperparameters(ignore=["lm", "tokenizer", "image_encoder", "qformer"])
        self.variant, self.task = variant, task
        self.optimizer_options = optimizer
        self.class_weight = require_non_negative(class_weight, "class_weight")
        self.max_new_tokens = require_int(max_new_tokens, "max_new_tokens", 1)
        self.validate_args = require_bool(validate_args, "validate_args")
        if isinstance(lm, str):
            from lightning_info.lm.tiny_lm import load_causal_lm

            lm, loaded = load_causal_lm(lm)
            tokenizer = tokenizer or loaded
        self.tokenizer = tokenizer
        lm.requires_grad_(False)
        if lora is not None:
            from peft import LoraConfig, get_peft_model

            lm = get_peft_model(lm, LoraConfig(task_type="CAUSAL_LM", **lora))
        self.lm = lm.eval()
        width = lm.get_input_embeddings().embedding_dim
        self.image_encoder = self.qformer = self.null_image = None
        if variant != "text_only":
            self.image_encoder = build_image_encoder(image_encoder, frozen=freeze_image_encoder)
            image_width = self.image_encoder.out_dim
            self.null_image = nn.Parameter(torch.zeros(1, 1, image_width))  # "no image" token
            widths = (
                image_width,
                None if variant == "image_only" else width + image_width + 2,
                width,
            )
            qformer = variant_qformer(variant) if qformer is None else qformer
            if getattr(qformer, "built", True) is False:
                qformer.build(*widths)
            self.qformer = _checked_qformer(qformer, variant, widths)
        self.classifier = (
            nn.Linear(width, require_int(num_classes, "num_classes", 2))
            if task != "generate"
            else None
        )
        self.metrics = nn.ModuleDict(
            {
                stage: nn.ModuleDict(
                    {
                        "loss": MeanMetric(),
                        "token_accuracy": MeanMetric(),
                        "exact_match": MeanMetric(),
                        "accuracy": MeanMetric(),
                        "rougeL": ROUGEScore(rouge_keys="rougeL"),
                    }
                )
                for stage in ("val", "test")
            }
        )

    def train(self, mode: bool = True) -> Graph4MM:
        super().train(mode)
        self.lm.eval()  # frozen: no dropout, whatever Lightning switches
        return self

    # -- the forward pass ------------------------------------------------------------------------

    def _embed(self, ids: Tensor) -> Tensor:
        return self.lm.get_input_embeddings()(ids)

    def query_tokens(self, batch: dict[str, Tensor]) -> Tensor:
        """The Q-Former's queries ``(B, M, W)`` (``(B, 0, W)`` for the text-only variant)."""
        b = batch["prompt_ids"].shape[0]
        if self.qformer is None:
            embedding = self.lm.get_input_embeddings().weight
            return embedding.new_zeros(b, 0, embedding.shape[1])
        has_image = batch["has_image"] & batch["node_mask"]
        images = batch["images"]
        if self.validate_args:
            require_finite_tensor(images, "images")
        features = self.image_encoder(images[has_image])
        image = features.new_zeros(*has_image.shape, features.shape[-1])
        image[has_image] = features
        image_tokens = torch.cat([image, self.null_image.expand(b, -1, -1)], dim=1)
        image_mask = torch.cat([has_image, has_image.new_ones(b, 1)], dim=1)
        if self.variant == "image_only":
            return self.qformer(image_tokens, None, image_mask=image_mask)
        mask = batch["node_text_mask"].to(image.dtype)
        text = (self._embed(batch["node_text_ids"]) * mask[..., None]).sum(2)
        text = text / mask.sum(2, keepdim=True).clamp(min=1)
        centre = torch.zeros_like(has_image)
        centre[:, 0] = True
        nodes = torch.cat(
            [text, image, has_image[..., None].to(image.dtype), centre[..., None].to(image.dtype)],
            dim=-1,
        )
        return self.qformer(
            image_tokens,
            nodes,
            image_mask=image_mask,
            text_mask=batch["node_mask"],
            adjacency=batch["adjacency"],
        )

    def prompt_embeddings(self, batch: dict[str, Tensor], queries: Tensor) -> tuple[Tensor, Tensor]:
        """The prompt's input embeddings with the queries written at the placeholder slot
        (``query_position``), ``(B, P - 1 + M, W)``, and their mask; without queries (text-only)
        the slot is dropped.

        Output position ``t`` of a sample with slot ``s`` holds prompt token ``t`` for
        ``t < s``, query ``t - s`` for ``s <= t < s + M`` and prompt token ``t - M + 1`` after
        them: one gather per tensor on the device, no slot read on the host."""
        embeds, mask = self._embed(batch["prompt_ids"]), batch["prompt_mask"]
        (b, p, width), m = embeds.shape, queries.shape[1]
        slot = batch["query_position"].reshape(b, 1).to(embeds.device)
        if self.validate_args and bool(((slot < 0) | (slot >= p)).any()):
            raise ValueError(
                f"`query_position` must index the prompt's {p} columns, got "
                f"{batch['query_position'].tolist()}."
            )
        t = torch.arange(p - 1 + m, device=embeds.device)[None, :]
        inside = (t >= slot) & (t < slot + m)
        source = torch.where(t < slot, t, t - m + 1).clamp(0, p - 1)  # queries' columns: any
        rows = embeds.gather(1, source[..., None].expand(-1, -1, width))
        masks = mask.gather(1, source)
        if m:
            query = (t - slot).clamp(0, m - 1)
            picked = queries.gather(1, query[..., None].expand(-1, -1, width))
            rows = torch.where(inside[..., None], picked, rows)
            masks = torch.where(inside, torch.ones_like(masks), masks)
        return rows, masks

    def forward(
        self, batch: dict[str, Tensor], queries: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Logits ``(B, R, V)`` for the target tokens (teacher-forced) and the LM's last hidden
        state ``(B, W)`` at the prompt's last token; ``queries``: the batch's
        :meth:`query_tokens`, if already computed."""
        queries = self.query_tokens(batch) if queries is None else queries
        prompt, prompt_mask = self.prompt_embeddings(batch, queries)
        embeds = torch.cat([prompt, self._embed(batch["target_ids"])], dim=1)
        mask = torch.cat([prompt_mask, batch["target_mask"]], dim=1)
        out = self.lm(
            inputs_embeds=embeds,
            attention_mask=mask,
            position_ids=positions(mask),
            output_hidden_states=True,
        )
        last, r = prompt.shape[1] - 1, batch["target_ids"].shape[1]
        return out.logits[:, last : last + r], out.hidden_states[-1][:, last]

    def _losses(
        self, batch: dict[str, Tensor], queries: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor | None, Tensor]:
        """``(total loss, per-token target NLL, class logits or None, logits)``."""
        logits, hidden = self(batch, queries)
        targets = batch["target_ids"].masked_fill(batch["target_mask"] == 0, -100)
        nll = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
        generation = nll.sum() / batch["target_mask"].sum().clamp(min=1)
        class_logits = self.classifier(hidden) if self.classifier is not None else None
        loss = generation if self.task != "classify" else generation.new_zeros(())
        if class_logits is not None:
            labels = batch["label"]
            labelled = labels >= 0
            # The labelled rows first, in their order, the others ignored: the mean sums as it
            # would over class_logits[labelled], whose boolean index would read the count.
            order = (~labelled).to(torch.uint8).argsort(stable=True)
            targets = labels.masked_fill(~labelled, _IGNORED)[order]
            classify = F.cross_entropy(class_logits[order], targets, ignore_index=_IGNORED)
            # No labelled row: a zero term (its mean is 0 / 0) that keeps every parameter in
            # the graph with a zero gradient.
            classify = torch.where(labelled.any(), classify, 0.0)
            loss = loss + self.class_weight * classify
        return loss, generation, class_logits, logits

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        loss, generation, _, _ = self._losses(batch)
        b = batch["prompt_ids"].shape[0]
        self.log("train/loss", loss, prog_bar=True, batch_size=b, sync_dist=True)
        self.log("train/generation_nll", generation, batch_size=b, sync_dist=True)
        return loss

    # -- evaluation ------------------------------------------------------------------------------

    @torch.no_grad()
    def generate(self, batch: dict[str, Tensor], queries: Tensor | None = None) -> list[str]:
        """Greedy generations of the batch's graphs (decoded, special tokens dropped);
        ``queries`` as for :meth:`forward`."""
        if self.tokenizer is None:
            raise ValueError("Graph4MM needs its tokenizer to decode generations: pass one")
        queries = self.query_tokens(batch) if queries is None else queries
        embeds, mask = self.prompt_embeddings(batch, queries)
        eos = self.tokenizer.eos_token_id
        tokens = greedy_decode(self.lm, embeds, mask, self.max_new_tokens, eos)
        return self._decode(tokens, tokens != eos)

    def _decode(self, ids: Tensor, keep: Tensor) -> list[str]:
        """Rows of ``ids`` decoded up to their first dropped token."""
        texts = []
        for row, kept in zip(ids.tolist(), keep.long().cumprod(-1).tolist()):
            tokens = [t for t, k in zip(row, kept) if k]
            texts.append(self.tokenizer.decode(tokens, skip_special_tokens=True).strip())
        return texts

    def _evaluate(self, batch: dict[str, Tensor], stage: str) -> None:
        metrics = self.metrics[stage]
        queries = self.query_tokens(batch)  # shared by the teacher-forced pass and the decoding
        _, generation, class_logits, logits = self._losses(batch, queries)
        tokens = batch["target_mask"].sum()
        metrics["loss"].update(generation, weight=tokens)
        correct = (logits.argmax(-1) == batch["target_ids"]) & batch["target_mask"].bool()
        metrics["token_accuracy"].update(correct.sum() / tokens.clamp(min=1), weight=tokens)
        if self.task != "classify":
            ends = batch["target_ids"] == self.tokenizer.eos_token_id
            references = self._decode(batch["target_ids"], batch["target_mask"].bool() & ~ends)
            predictions = self.generate(batch, queries)
            metrics["rougeL"].update(predictions, references)
            exact = torch.tensor([float(p == r) for p, r in zip(predictions, references)])
            metrics["exact_match"].update(exact.mean(), weight=len(exact))
        if class_logits is not None and bool((batch["label"] >= 0).any()):
            labelled = batch["label"] >= 0
            hits = (class_logits[labelled].argmax(-1) == batch["label"][labelled]).double()
            metrics["accuracy"].update(hits.mean(), weight=hits.numel())
        for name in ("loss", "token_accuracy", "exact_match", "accuracy"):
            if metrics[name].update_count:
                self.log(f"{stage}/{name}", metrics[name], on_step=False, on_epoch=True)

    def _log_rouge(self, stage: str) -> None:
        rouge = self.metrics[stage]["rougeL"]
        if rouge.update_count:
            self.log(metric_key(stage, "rougeL"), rouge.compute()["rougeL_fmeasure"])
            rouge.reset()

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._evaluate(batch, "val")

    def on_validation_epoch_end(self) -> None:
        self._log_rouge("val")

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._evaluate(batch, "test")

    def on_test_epoch_end(self) -> None:
        self._log_rouge("test")

    def configure_optimizers(self) -> Any:
        trainable = [p for p in self.parameters() if p.requires_grad]
        return self.optimizer_options.configure(trainable, self.trainer)


def _checked_qformer(
    qformer: nn.Module, variant: str, widths: tuple[int, int | None, int]
) -> nn.Module:
    """``qformer``, or raise if its widths (where it tells them) or its use of the graph do not
    fit ``variant``."""
    built = getattr(qformer, "widths", None)
    if built is not None and tuple(built) != widths:
        raise ValueError(
            f"the qformer's widths (image_dim, text_dim, out_dim) are {tuple(built)}, but this "
            f"Graph4MM feeds it {widths}: the image encoder's out_dim, the language model's "
            "width + the image width + 2 (None for image_only), the language model's width. "
            "Build it with these, or give it no widths and Graph4MM sets them."
        )
    uses_graph = getattr(qformer, "uses_graph", None)
    if uses_graph is not None and bool(uses_graph) != (variant == "graph4mm"):
        if variant == "graph4mm":
            raise ValueError(
                "variant='graph4mm' diffuses the joint attention over the graph: give the "
                "qformer hop settings (e.g. MMQFormer(64, hop={'alpha': 0.1, 'steps': 4}))"
            )
        raise ValueError(
            f"variant={variant!r} ignores the graph: give the qformer hop=None (or use "
            "variant='graph4mm')"
        )
    return qformer
