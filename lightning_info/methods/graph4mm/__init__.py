"""Graph4MM (Ning, Fu, Wei, Xu & He, ICML 2025): hop-diffused attention, the multimodal
Q-Former, the ``Graph4MM`` LightningModule around a frozen causal LM, and the multimodal graphs
it reads (``MultimodalGraphDataModule``).

See README.md in this folder."""

from lightning_info.methods.graph4mm.attention import HopDiffusedAttention
from lightning_info.methods.graph4mm.datamodule import (
    DigitGraphOptions,
    MultimodalGraphDataModule,
)
from lightning_info.methods.graph4mm.encoders import (
    PretrainedImageEncoder,
    SmallConvEncoder,
    image_encoder,
)
from lightning_info.methods.graph4mm.functional import (
    diffuse,
    hop_diffused_attention,
    masked_softmax_transition,
    masked_transition,
    ppr_weights,
)
from lightning_info.methods.graph4mm.graphs import (
    MultimodalGraph,
    digit_graphs,
    read_graphs_json,
)
from lightning_info.methods.graph4mm.module import Graph4MM, variant_qformer
from lightning_info.methods.graph4mm.qformer import MMQFormer

__all__ = [
    "DigitGraphOptions",
    "Graph4MM",
    "HopDiffusedAttention",
    "MMQFormer",
    "MultimodalGraph",
    "MultimodalGraphDataModule",
    "PretrainedImageEncoder",
    "SmallConvEncoder",
    "diffuse",
    "digit_graphs",
    "hop_diffused_attention",
    "image_encoder",
    "masked_softmax_transition",
    "masked_transition",
    "ppr_weights",
    "read_graphs_json",
    "variant_qformer",
]
