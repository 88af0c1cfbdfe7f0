"""Elicitation curves: how well a model predicts an entity's target answers after ``n`` questions
chosen by a policy, ``n = 0 .. steps``.

Every entity starts from an empty context. At each step the policy picks one question per entity
among its unasked candidates (all entities in one batched call of ``select_questions``), the
entity's true answer is appended to its context, and the scorer's predictive distributions of the
target questions are compared with the entity's true target answers: accuracy of the most
probable answer and negative log-likelihood of the true one (nats), per entity and step. The
policy's model chooses; the scorer predicts (usually the same model; the exact posterior model
for the upper reference on the latent-type world).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch
from torch import Tensor

from lightning_info.core.validation import require_int
from lightning_info.methods.adaptive_elicitation.entities import MISSING
from lightning_info.methods.adaptive_elicitation.functional import (
    PredictiveModel,
    check_index,
    select_questions,
)

__all__ = ["elicitation_curves"]


def _score(scorer: PredictiveModel, contexts, truth: Tensor, targets) -> tuple[Tensor, Tensor]:
    """Per entity: accuracy and NLL over its answered targets, ``(E,)`` each."""
    p = scorer.predictive(contexts, targets).double()
    answered = truth != MISSING
    index = truth.clamp(min=0)[..., None]
    nll = -torch.log(torch.gather(p, 2, index)[..., 0])
    hits = (p.argmax(-1) == truth).double()
    count = answered.sum(1).clamp(min=1)
    zero = torch.zeros_like(nll)
    return (
        torch.where(answered, hits, zero).sum(1) / count,
        torch.where(answered, nll, zero).sum(1) / count,
    )


def elicitation_curves(
    policy: str,
    model: PredictiveModel,
    answers: Tensor,
    candidates: Sequence[int],
    targets: Sequence[int],
    steps: int,
    scorer: PredictiveModel | None = None,
    rng: random.Random | None = None,
    depth: int = 2,
) -> dict[str, Tensor]:
    """``{"accuracy", "nll"}``, each ``(E, steps + 1)``: the target accuracy and NLL of each
    entity (rows of ``answers (E, Q)``, ``-1`` where unanswered) after ``0 .. steps`` questions
    asked by ``policy`` (``functional.POLICIES``) with ``model``; ``scorer`` (default ``model``)
    predicts the targets. Entities run out of questions when they have answered no more
    candidates; ``steps`` must not exceed what every entity can answer."""
    candidates, targets = list(candidates), list(targets)
    if set(candidates) & set(targets):
        raise ValueError("candidates and targets must be disjoint questions")
    if answers.dim() != 2 or answers.shape[0] == 0:
        raise ValueError(f"answers must be (entities, questions), got {tuple(answers.shape)}")
    for q in candidates:
        check_index(q, "candidate question", answers.shape[1])
    for q in targets:
        check_index(q, "target question", answers.shape[1])
    steps = require_int(steps, "steps", 0)
    available = [[q for q in candidates if int(row[q]) != MISSING] for row in answers]
    fewest = min(len(own) for own in available)
    if steps < 0 or steps > fewest:
        raise ValueError(
            f"steps must be in [0, {fewest}]: an entity has answered only {fewest} candidates"
        )
    scorer = scorer or model
    rng = rng or random.Random(0)
    truth = answers[:, targets]
    contexts: list[list[tuple[int, int]]] = [[] for _ in range(answers.shape[0])]
    accuracy, nll = [], []
    for step in range(steps + 1):
        hits, losses = _score(scorer, contexts, truth, targets)
        accuracy.append(hits)
        nll.append(losses)
        if step == steps:
            break
        picks = select_questions(policy, model, contexts, available, targets, rng, depth)
        for e, q in enumerate(picks):
            contexts[e].append((q, int(answers[e, q])))
            available[e].remove(q)
    return {"accuracy": torch.stack(accuracy, 1), "nll": torch.stack(nll, 1)}
