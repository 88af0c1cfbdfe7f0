"""Information bottleneck: MI bounds, the IB mixin, attacks, robustness metrics, ROME."""

from lightning_info.bottleneck.attacks import fgsm, next_class_targets, pgd
from lightning_info.bottleneck.bounds import (
    donsker_varadhan,
    gaussian_kl_standard_normal,
    infonce,
    jensen_shannon_mi,
    mean_embedding_distance,
    mmd2,
    nt_xent,
)
from lightning_info.bottleneck.mixin import GaussianBottleneck, InformationBottleneckMixin
from lightning_info.bottleneck.robustness import (
    ImprovedRobustnessRatio,
    RobustnessRatio,
    attack_efficiency,
    attack_success_rates,
    crei,
    improved_crei,
    improved_robustness_ratio,
    robustness_ratio,
)
from lightning_info.bottleneck.rome import (
    ROMEDistillation,
    SmallConvNet,
    evaluate_distilled,
    rome_alignment,
)

__all__ = [
    "GaussianBottleneck",
    "ImprovedRobustnessRatio",
    "InformationBottleneckMixin",
    "ROMEDistillation",
    "RobustnessRatio",
    "SmallConvNet",
    "attack_efficiency",
    "attack_success_rates",
    "crei",
    "donsker_varadhan",
    "fgsm",
    "gaussian_kl_standard_normal",
    "improved_crei",
    "improved_robustness_ratio",
    "infonce",
    "jensen_shannon_mi",
    "mean_embedding_distance",
    "mmd2",
    "next_class_targets",
    "nt_xent",
    "evaluate_distilled",
    "pgd",
    "robustness_ratio",
    "rome_alignment",
]
