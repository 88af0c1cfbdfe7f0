"""lightning-info: information-theoretic training methods as PyTorch Lightning plugins.

Every public plugin is importable from here (``from lightning_info import FisherConstraint``).
The names are resolved on first use (PEP 562), so ``import lightning_info`` loads neither
Lightning's heavier dependencies nor an optional extra; a plugin whose extra is missing raises an
``ImportError`` naming the extra to install when it is first touched.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS: dict[str, tuple[str, ...]] = {
    "lightning_info.core": (
        "ConstantSchedule",
        "CosineSchedule",
        "ExponentialSchedule",
        "LinearSchedule",
        "Schedule",
    ),
    "lightning_info.core.lookahead": ("Lookahead",),
    "lightning_info.data": (
        "DigitsDataModule",
        "GaussianMixtureDataModule",
        "MultiViewDataModule",
        "TensorViewsDataModule",
    ),
    "lightning_info.lm": ("CausalLMFineTuner",),
    "lightning_info.methods.asymmetric_ac": (
        "AsymmetricActorCritic",
        "LinearAsymmetricActorCritic",
        "ObservationWindow",
        "PartialObservation",
        "evaluate_policy",
        "t_maze",
    ),
    "lightning_info.methods.cacti": (
        "CACTI",
        "CACTIImputer",
        "ImputationMAE",
        "ImputationR2",
        "ImputationRMSE",
        "ImputationWasserstein",
        "TabularImputationDataModule",
        "simulate_missing",
    ),
    "lightning_info.methods.cmv_nd": (
        "AttributeMissingGraphDataModule",
        "NeighbourhoodDifferentiation",
        "neighbourhood_views",
        "sign_views",
    ),
    "lightning_info.methods.adaptive_elicitation": (
        "ElicitationDataModule",
        "ElicitationLM",
        "EmpiricalPredictiveModel",
        "ExactPosteriorModel",
        "LMPredictive",
        "LatentTypeWorld",
        "elicitation_curves",
        "expected_information_gain",
        "select_questions",
    ),
    "lightning_info.methods.diffusion_fisher": (
        "DiffusionModel",
        "diffusion_fisher_matrix",
        "diffusion_fisher_mvp",
        "diffusion_fisher_trace",
    ),
    "lightning_info.methods.docks_rag": (
        "DocKSRAG",
        "DocREDDataModule",
        "DocREDScores",
        "docred_scores",
        "synthetic_docred",
    ),
    "lightning_info.methods.efg_last_iterate": (
        "GameEpisodesDataModule",
        "LastIterateSolver",
        "TabularSolver",
        "nash_conv",
    ),
    "lightning_info.methods.graph4mm": (
        "Graph4MM",
        "HopDiffusedAttention",
        "MMQFormer",
        "MultimodalGraphDataModule",
        "hop_diffused_attention",
    ),
    "lightning_info.methods.fic_tsc": (
        "UCRUEADataModule",
        "FisherConstraint",
        "FisherPenalty",
        "FisherPenaltyMixin",
        "InceptionTime",
        "InceptionTimeClassifier",
    ),
    "lightning_info.methods.fisher_sft": (
        "FisherSubsetDataModule",
        "FisherSubsetSampler",
    ),
    "lightning_info.methods.ancestral_search": (
        "AncestralGraphSearch",
        "BayesianNetworkDataModule",
        "graph_scores",
        "m_separated",
        "mag_from_dag",
        "pag_from_dag",
        "shifted_information",
    ),
    "lightning_info.methods.prodiff": (
        "MaxTrajectoryDeviation",
        "MeanTrajectoryDeviation",
        "ProDiff",
        "TimeMAE",
        "TrajectoryCoverage",
        "TrajectoryDataModule",
        "great_circle_interpolation",
        "haversine_metres",
        "linear_interpolation",
    ),
    "lightning_info.methods.prism": (
        "FragmentAuditor",
        "FragmentExtractionAudit",
        "fragment_log_probability",
        "prism_score",
    ),
    "lightning_info.methods.rome": (
        "GaussianBottleneck",
        "ImprovedRobustnessRatio",
        "InformationBottleneckMixin",
        "RobustnessRatio",
        "ROMEDistillation",
        "evaluate_distilled",
        "fgsm",
        "improved_robustness_ratio",
        "pgd",
        "robustness_ratio",
    ),
    "lightning_info.methods.sdcib": (
        "SDCIB",
        "AlignedVoteClustering",
        "ClusteringViewsDataModule",
        "aligned_vote",
        "sdcib_loss",
    ),
    "lightning_info.methods.smoothed_information": (
        "SmoothedEntropy",
        "SmoothedFisherInformation",
        "SmoothedInformationMonitor",
        "SmoothedMutualInformation",
        "smoothed_entropy",
        "smoothed_fisher_information",
        "smoothed_mutual_information",
    ),
    "lightning_info.methods.train_test_overlap": (
        "TestInstance",
        "TrainTestOverlap",
        "compute_overlap",
        "overlap_with_dask",
        "overlap_with_datasets",
    ),
    "lightning_info.nn": ("MLPClassifier",),
    "lightning_info.methods.ood_shaping": (
        "FeatureShapingScorer",
        "OODShapingReport",
        "tune",
    ),
    "lightning_info.methods.pointwise_confidence": (
        "MSPScorer",
        "PMIScorer",
        "PSIScorer",
        "PVIScorer",
        "PosthocScoring",
    ),
    "lightning_info.scoring": ("PosthocScorer",),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'lightning_info' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
