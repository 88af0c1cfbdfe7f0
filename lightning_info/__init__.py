"""lightning-info: information-theoretic training methods as PyTorch Lightning plugins."""

from lightning_info.bottleneck import (
    GaussianBottleneck,
    ImprovedRobustnessRatio,
    InformationBottleneckMixin,
    RobustnessRatio,
    ROMEDistillation,
)
from lightning_info.control import (
    AsymmetricActorCritic,
    LinearAsymmetricActorCritic,
    ObservationWindow,
    PartialObservation,
)
from lightning_info.core import (
    ConstantSchedule,
    CosineSchedule,
    ExponentialSchedule,
    LinearSchedule,
    Schedule,
)
from lightning_info.data import DigitsDataModule, GaussianMixtureDataModule, UCRUEADataModule
from lightning_info.fisher import (
    DiffusionModel,
    FisherConstraint,
    FisherPenalty,
    FisherPenaltyMixin,
    FisherSubsetDataModule,
    FisherSubsetSampler,
    SmoothedInformationMonitor,
)
from lightning_info.language import CausalLMFineTuner
from lightning_info.models import InceptionTime, InceptionTimeClassifier, MLPClassifier
from lightning_info.scoring import (
    FeatureShapingScorer,
    MSPScorer,
    PMIScorer,
    PosthocScorer,
    PosthocScoring,
    PSIScorer,
    PVIScorer,
)

__version__ = "0.1.0"

__all__ = [
    "AsymmetricActorCritic",
    "CausalLMFineTuner",
    "ConstantSchedule",
    "CosineSchedule",
    "DiffusionModel",
    "DigitsDataModule",
    "ExponentialSchedule",
    "FisherConstraint",
    "GaussianMixtureDataModule",
    "FisherPenalty",
    "FisherPenaltyMixin",
    "FisherSubsetDataModule",
    "FisherSubsetSampler",
    "GaussianBottleneck",
    "ImprovedRobustnessRatio",
    "InceptionTime",
    "InceptionTimeClassifier",
    "InformationBottleneckMixin",
    "FeatureShapingScorer",
    "LinearAsymmetricActorCritic",
    "MLPClassifier",
    "MSPScorer",
    "LinearSchedule",
    "ObservationWindow",
    "PMIScorer",
    "PSIScorer",
    "PVIScorer",
    "PartialObservation",
    "PosthocScorer",
    "PosthocScoring",
    "ROMEDistillation",
    "RobustnessRatio",
    "SmoothedInformationMonitor",
    "Schedule",
    "UCRUEADataModule",
]
