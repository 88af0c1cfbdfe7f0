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
    "lightning_info.core.options": ("AdamWOptions",),
    "lightning_info.core": (
        "ConstantSchedule",
        "CosineSchedule",
        "ExponentialSchedule",
        "LinearSchedule",
        "Schedule",
    ),
    "lightning_info.data": (
        "DigitsDataModule",
        "GaussianMixtureDataModule",
        "MultiViewDataModule",
        "TensorViewsDataModule",
    ),
    "lightning_info.lm": ("CausalLMFineTuner",),
    "lightning_info.methods.asymmetric_ac": (
        "A2COptions",
        "AsymmetricActorCritic",
        "evaluate_policy",
        "LinearAsymmetricActorCritic",
        "ObservationWindow",
        "PartialObservation",
        "SGDSettings",
        "t_maze",
    ),
    "lightning_info.methods.cacti": (
        "CACTI",
        "CACTIImputer",
        "CACTINetwork",
        "ImputationMAE",
        "ImputationR2",
        "ImputationRMSE",
        "ImputationWasserstein",
        "MissingnessOptions",
        "simulate_missing",
        "SplitOptions",
        "TabularImputationDataModule",
    ),
    "lightning_info.methods.cmv_nd": (
        "AttributeMissingGraphDataModule",
        "GraphFeatureOptions",
        "GraphFiles",
        "neighbourhood_views",
        "NeighbourhoodDifferentiation",
        "SBMOptions",
        "sign_views",
    ),
    "lightning_info.methods.adaptive_elicitation": (
        "DigitQuestionOptions",
        "elicitation_curves",
        "ElicitationDataModule",
        "ElicitationLM",
        "EmpiricalPredictiveModel",
        "ExactPosteriorModel",
        "expected_information_gain",
        "LatentTypeWorld",
        "LatentWorldOptions",
        "LMPredictive",
        "select_questions",
    ),
    "lightning_info.methods.diffusion_fisher": (
        "diffusion_fisher_matrix",
        "diffusion_fisher_mvp",
        "diffusion_fisher_trace",
        "DiffusionModel",
        "TimeConditionedMLP",
    ),
    "lightning_info.methods.docks_rag": (
        "DocKGOptions",
        "DocKSRAG",
        "docred_scores",
        "DocREDDataModule",
        "DocREDScores",
        "DocREDSource",
        "HybridPromptOptions",
        "synthetic_docred",
    ),
    "lightning_info.methods.efg_last_iterate": (
        "GameEpisodesDataModule",
        "LastIterateSolver",
        "TabularSolver",
        "nash_conv",
    ),
    "lightning_info.methods.graph4mm": (
        "DigitGraphOptions",
        "Graph4MM",
        "hop_diffused_attention",
        "HopDiffusedAttention",
        "MMQFormer",
        "MultimodalGraphDataModule",
    ),
    "lightning_info.methods.fic_tsc": (
        "UCRUEADataModule",
        "FisherConstraint",
        "FisherPenalty",
        "FisherPenaltyMixin",
        "Lookahead",
        "InceptionTime",
        "InceptionTimeClassifier",
    ),
    "lightning_info.methods.fisher_sft": (
        "dask_two_round_select",
        "FeatureStore",
        "FisherSubsetDataModule",
        "FisherSubsetSampler",
        "PromptResponseColumns",
        "SubsetSelectionOptions",
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
        "DiffusionOptions",
        "EndpointCondition",
        "great_circle_interpolation",
        "GuidanceOptions",
        "haversine_metres",
        "linear_interpolation",
        "MaxTrajectoryDeviation",
        "MeanTrajectoryDeviation",
        "ProDiff",
        "PrototypeOptions",
        "SamplingOptions",
        "SyntheticCity",
        "TimeMAE",
        "TrajectoryColumns",
        "TrajectoryCoverage",
        "TrajectoryDataModule",
        "TrajectoryEncoder",
        "TrajectoryUNet",
        "WindowScaling",
    ),
    "lightning_info.methods.prism": (
        "fragment_log_probability",
        "FragmentAuditOptions",
        "FragmentAuditor",
        "FragmentExtractionAudit",
        "min_k_score",
        "prism_score",
    ),
    "lightning_info.methods.rome": (
        "AttackOptions",
        "DistillationOptions",
        "evaluate_distilled",
        "fgsm",
        "GaussianBottleneck",
        "improved_robustness_ratio",
        "ImprovedRobustnessRatio",
        "InformationBottleneckMixin",
        "NetworkPoolOptions",
        "pgd",
        "RobustEvaluationOptions",
        "robustness_ratio",
        "RobustnessRatio",
        "ROMEDistillation",
        "SmallConvNet",
    ),
    "lightning_info.methods.sdcib": (
        "aligned_vote",
        "AlignedVoteClustering",
        "ClusteringViewsDataModule",
        "SDCIB",
        "sdcib_loss",
        "SDCIBLossOptions",
        "ViewEncoder",
    ),
    "lightning_info.methods.smoothed_information": (
        "smoothed_entropy",
        "smoothed_fisher_information",
        "smoothed_mutual_information",
        "SmoothedEntropy",
        "SmoothedEstimatorOptions",
        "SmoothedFisherInformation",
        "SmoothedInformationMonitor",
        "SmoothedMutualInformation",
    ),
    "lightning_info.methods.train_test_overlap": (
        "compute_overlap",
        "overlap_with_dask",
        "overlap_with_datasets",
        "OverlapOptions",
        "TestInstance",
        "TrainTestOverlap",
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
