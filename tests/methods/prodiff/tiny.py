"""The tiny ProDiff of the ProDiff tests: a two-level UNet of 8 channels, a one-layer encoder
of width 16, 4 prototypes, a 20-step diffusion; the networks built in ProDiff's own order
(denoiser, condition, encoder), so a seed gives the weights a default-built model would get."""

from __future__ import annotations

from typing import Any

from lightning_info.methods.prodiff import (
    DiffusionOptions,
    EndpointCondition,
    ProDiff,
    PrototypeOptions,
    SamplingOptions,
    TrajectoryEncoder,
    TrajectoryUNet,
)

EMBED_DIM = 16


def tiny_prodiff(
    k: int = 6,
    *,
    use_prototypes: bool = True,
    channels: int = 8,
    sampling_steps: int = 5,
    num_steps: int = 20,
    **options: Any,
) -> ProDiff:
    """The tiny model for windows of ``k`` points; ``options`` are further ProDiff arguments
    (``diffusion`` replaces the 20-step schedule, ``sampling`` the ``sampling_steps``)."""
    unet = TrajectoryUNet(
        k, base_channels=channels, multipliers=(1, 2), res_blocks=1, attention_lengths=()
    )
    condition = EndpointCondition(3, unet.embed_dim, EMBED_DIM if use_prototypes else None)
    encoder = (
        TrajectoryEncoder(k, embed_dim=EMBED_DIM, num_layers=1, num_heads=2, feedforward_dim=16)
        if use_prototypes
        else None
    )
    defaults = {
        "diffusion": DiffusionOptions(num_steps=num_steps),
        "prototype_options": PrototypeOptions(num_prototypes=4),
        "sampling": SamplingOptions(steps=sampling_steps),
    }
    return ProDiff(
        denoiser=unet,
        condition=condition,
        encoder=encoder,
        use_prototypes=use_prototypes,
        **{**defaults, **options},
    )
