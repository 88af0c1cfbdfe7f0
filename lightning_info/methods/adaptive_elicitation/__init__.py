"""Adaptive elicitation of latent information (Wang, Zollo, Zemel & Namkoong, ICML 2025):
expected information gain from a model's own predictive distributions, batched over entities,
candidates and simulated answers; the greedy, lookahead, answer-entropy and random policies; the
latent-type world with its exact posterior model, the digits and a user's JSON lines as entities;
``ElicitationLM`` and ``ElicitationDataModule`` for meta-training a causal LM; and the
elicitation curves the recipe reports.

See README.md in this folder."""

from lightning_info.methods.adaptive_elicitation.datamodule import (
    DigitQuestionOptions,
    ElicitationDataModule,
    LatentWorldOptions,
)
from lightning_info.methods.adaptive_elicitation.entities import (
    EntityTable,
    digits_table,
    latent_world_table,
    read_entities_jsonl,
)
from lightning_info.methods.adaptive_elicitation.evaluation import elicitation_curves
from lightning_info.methods.adaptive_elicitation.functional import (
    batched_information_gain,
    batched_lookahead_scores,
    expected_information_gain,
    lookahead_scores,
    select_question,
    select_questions,
)
from lightning_info.methods.adaptive_elicitation.module import ElicitationLM
from lightning_info.methods.adaptive_elicitation.sequences import LMPredictive, QuestionBank
from lightning_info.methods.adaptive_elicitation.world import (
    EmpiricalPredictiveModel,
    ExactPosteriorModel,
    LatentTypeWorld,
)

__all__ = [
    "DigitQuestionOptions",
    "ElicitationDataModule",
    "ElicitationLM",
    "EmpiricalPredictiveModel",
    "EntityTable",
    "ExactPosteriorModel",
    "LMPredictive",
    "LatentTypeWorld",
    "LatentWorldOptions",
    "QuestionBank",
    "batched_information_gain",
    "batched_lookahead_scores",
    "digits_table",
    "elicitation_curves",
    "expected_information_gain",
    "latent_world_table",
    "lookahead_scores",
    "read_entities_jsonl",
    "select_question",
    "select_questions",
]
