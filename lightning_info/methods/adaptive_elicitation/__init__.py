"""Adaptive elicitation of latent information (Wang, Zollo, Zemel & Namkoong, ICML 2025), in
progress: expected information gain from a model's predictive distributions, the selection
policies, the synthetic latent-type world with its exact posterior model, and the entity-block
encoding with a causal LM's predictive distributions, ``ElicitationLM`` and
``ElicitationDataModule``.

See README.md in this folder."""

from lightning_info.methods.adaptive_elicitation.datamodule import ElicitationDataModule
from lightning_info.methods.adaptive_elicitation.functional import (
    expected_information_gain,
    lookahead_scores,
    select_question,
)
from lightning_info.methods.adaptive_elicitation.module import ElicitationLM
from lightning_info.methods.adaptive_elicitation.sequences import LMPredictive, QuestionBank
from lightning_info.methods.adaptive_elicitation.world import ExactPosteriorModel, LatentTypeWorld

__all__ = [
    "ElicitationDataModule",
    "ElicitationLM",
    "ExactPosteriorModel",
    "LMPredictive",
    "LatentTypeWorld",
    "QuestionBank",
    "expected_information_gain",
    "lookahead_scores",
    "select_question",
]
