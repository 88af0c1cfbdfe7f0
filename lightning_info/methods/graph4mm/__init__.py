"""Graph4MM (Ning, Fu, Wei, Xu & He, ICML 2025), in progress: hop-diffused attention (the
functional core and the ``HopDiffusedAttention`` layer) and the ``MMQFormer``.

See README.md in this folder."""

from lightning_info.methods.graph4mm.attention import HopDiffusedAttention
from lightning_info.methods.graph4mm.functional import (
    diffuse,
    hop_diffused_attention,
    masked_transition,
    ppr_weights,
)
from lightning_info.methods.graph4mm.qformer import MMQFormer

__all__ = [
    "HopDiffusedAttention",
    "MMQFormer",
    "diffuse",
    "hop_diffused_attention",
    "masked_transition",
    "ppr_weights",
]
