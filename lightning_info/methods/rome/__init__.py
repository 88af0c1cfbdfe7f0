"""ROME: robust dataset distillation via the information bottleneck (Zhou et al., ICML 2025).

See README.md in this folder."""

from lightning_info.methods.rome.attacks import (
    fgsm,
    next_class_targets,
    pgd,
    shifted_targets,
    training_attack_labels,
)
from lightning_info.methods.rome.augment import DSA
from lightning_info.methods.rome.bottleneck import GaussianBottleneck, InformationBottleneckMixin
from lightning_info.methods.rome.evaluation import evaluate_distilled
from lightning_info.methods.rome.functional import rome_alignment
from lightning_info.methods.rome.metrics import (
    ImprovedRobustnessRatio,
    RobustnessRatio,
    attack_efficiency,
    attack_success_rates,
    crei,
    improved_crei,
    improved_robustness_ratio,
    robustness_ratio,
)
from lightning_info.methods.rome.module import (
    AttackOptions,
    DistillationOptions,
    NetworkPoolOptions,
    RobustEvaluationOptions,
    ROMEDistillation,
)
from lightning_info.methods.rome.network import SmallConvNet

__all__ = [
    "AttackOptions",
    "DSA",
    "DistillationOptions",
    "GaussianBottleneck",
    "ImprovedRobustnessRatio",
    "InformationBottleneckMixin",
    "NetworkPoolOptions",
    "ROMEDistillation",
    "RobustEvaluationOptions",
    "RobustnessRatio",
    "SmallConvNet",
    "attack_efficiency",
    "attack_success_rates",
    "crei",
    "evaluate_distilled",
    "fgsm",
    "improved_crei",
    "improved_robustness_ratio",
    "next_class_targets",
    "shifted_targets",
    "training_attack_labels",
    "pgd",
    "robustness_ratio",
    "rome_alignment",
]
