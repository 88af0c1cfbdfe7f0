"""The pure core of adaptive elicitation (Wang, Zollo, Zemel & Namkoong, ICML 2025): expected
information gain of candidate questions from a model's own predictive distributions, and the
question-selection policies built on it.

A *predictive model* is anything with ``predictive(contexts, questions)``: for each context (a
sequence of ``(question, answer)`` pairs already observed for one entity) the distributions
``p(Y_q | context)`` of each question's answer, a tensor ``(len(contexts), len(questions), A)``.
The meta-trained language model and :class:`~.world.ExactPosteriorModel` both are.

Expected information gain of asking ``d`` given the context ``C``, about target questions ``T``
(the paper's objective, answers simulated by the model itself)::

    EIG(d) = mean_t H[p(Y_t | C)] - sum_y p(y | C, d) mean_t H[p(Y_t | C, (d, y))]

which, for an exchangeable model, is ``mean_t I(Y_t; Y_d | C)``. :func:`expected_information_gain`
evaluates every candidate and every hypothetical answer in one call of ``predictive``: the base
context once (for ``p(Y_d | C)`` and ``p(Y_t | C)``), and the ``D x A`` extended contexts once.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Protocol

import torch
from torch import Tensor

__all__ = [
    "POLICIES",
    "PredictiveModel",
    "entropy",
    "expected_information_gain",
    "lookahead_scores",
    "select_question",
    "target_entropy",
]

Context = Sequence[tuple[int, int]]
POLICIES = ("eig", "lookahead", "max_entropy", "random")


class PredictiveModel(Protocol):
    num_answers: int

    def predictive(self, contexts: Sequence[Context], questions: Sequence[int]) -> Tensor: ...


def entropy(p: Tensor) -> Tensor:
    """Shannon entropy in nats over the last axis (``0 log 0 = 0``)."""
    return -torch.where(p > 0, p * torch.log(p), torch.zeros_like(p)).sum(-1)


def _check(context: Context, candidates: Sequence[int], targets: Sequence[int]) -> None:
    if not candidates:
        raise ValueError("no candidate questions to choose from")
    if not targets:
        raise ValueError("no target questions: the information gain is about targets")
    asked = {q for q, _ in context}
    overlap = asked & set(candidates)
    if overlap:
        raise ValueError(f"candidates {sorted(overlap)} are already answered in the context")


def target_entropy(
    model: PredictiveModel, contexts: Sequence[Context], targets: Sequence[int]
) -> Tensor:
    """``mean_t H[p(Y_t | C)]`` for each context: the uncertainty left about the targets."""
    return entropy(model.predictive(contexts, targets)).mean(-1)


def expected_information_gain(
    model: PredictiveModel, context: Context, candidates: Sequence[int], targets: Sequence[int]
) -> Tensor:
    """``EIG(d)`` (module docstring) for every candidate ``d``, shape ``(D,)``."""
    _check(context, candidates, targets)
    candidates, targets = list(candidates), list(targets)
    base = model.predictive([context], candidates + targets)[0]
    answer_p, prior_h = base[: len(candidates)], entropy(base[len(candidates) :]).mean()
    answers = range(model.num_answers)
    extended = [[*context, (d, y)] for d in candidates for y in answers]
    posterior_h = target_entropy(model, extended, targets).view(len(candidates), -1)
    return prior_h - (answer_p * posterior_h).sum(-1)


def _rollout_entropy(model, context, candidates, targets, depth) -> Tensor:
    """Expected target entropy after ``depth`` more greedy-EIG questions from ``context``."""
    if depth == 0 or not candidates:
        return target_entropy(model, [context], targets)[0]
    gains = expected_information_gain(model, context, candidates, targets)
    best = candidates[int(torch.argmax(gains))]
    rest = [q for q in candidates if q != best]
    p = model.predictive([context], [best])[0, 0]
    return sum(
        p[y] * _rollout_entropy(model, [*context, (best, y)], rest, targets, depth - 1)
        for y in range(model.num_answers)
        if p[y] > 0
    )


def lookahead_scores(
    model: PredictiveModel,
    context: Context,
    candidates: Sequence[int],
    targets: Sequence[int],
    depth: int = 2,
) -> Tensor:
    """Depth-limited planning: for each candidate ``d``, the expected drop of the target
    entropy when ``d`` is asked and then ``depth - 1`` more questions are chosen greedily by EIG,
    every answer simulated by the model. ``depth = 1`` is :func:`expected_information_gain`."""
    if int(depth) != depth or depth < 1:
        raise ValueError(f"depth must be a positive integer, got {depth!r}")
    _check(context, candidates, targets)
    if depth == 1:
        return expected_information_gain(model, context, candidates, targets)
    candidates = list(candidates)
    prior_h = target_entropy(model, [context], targets)[0]
    p = model.predictive([context], candidates)[0]
    scores = []
    for i, d in enumerate(candidates):
        rest = candidates[:i] + candidates[i + 1 :]
        expected = sum(
            p[i, y] * _rollout_entropy(model, [*context, (d, y)], rest, targets, depth - 1)
            for y in range(model.num_answers)
            if p[i, y] > 0
        )
        scores.append(prior_h - expected)
    return torch.stack(scores)


def select_question(
    policy: str,
    model: PredictiveModel,
    context: Context,
    candidates: Sequence[int],
    targets: Sequence[int],
    rng: random.Random | None = None,
    depth: int = 2,
) -> int:
    """The next question under ``policy``: ``eig`` (argmax EIG), ``lookahead`` (argmax of
    :func:`lookahead_scores`), ``max_entropy`` (the candidate whose own answer is most uncertain)
    or ``random``. Ties go to the first candidate."""
    _check(context, candidates, targets)
    candidates = list(candidates)
    if policy == "random":
        return (rng or random.Random(0)).choice(candidates)
    if policy == "eig":
        scores = expected_information_gain(model, context, candidates, targets)
    elif policy == "lookahead":
        scores = lookahead_scores(model, context, candidates, targets, depth)
    elif policy == "max_entropy":
        scores = entropy(model.predictive([context], candidates)[0])
    else:
        raise ValueError(f"unknown policy {policy!r}: choose from {POLICIES}")
    return candidates[int(torch.argmax(scores))]
