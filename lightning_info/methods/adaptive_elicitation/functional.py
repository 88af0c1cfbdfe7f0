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

which, for an exchangeable model, is ``mean_t I(Y_t; Y_d | C)``. Every function here is batched
over contexts (one per entity being questioned): :func:`batched_information_gain` evaluates every
context, candidate and hypothetical answer in two calls of ``predictive``, the base contexts once
(for ``p(Y_d | C)`` and ``p(Y_t | C)``) and all ``B x D x A`` extended contexts once; the
depth-``k`` lookahead takes ``2k - 1`` calls, one greedy level per pair of calls.
"""

from __future__ import annotations

import numbers
import random
from collections.abc import Sequence
from typing import Protocol

import torch
from torch import Tensor

__all__ = [
    "POLICIES",
    "PredictiveModel",
    "batched_information_gain",
    "batched_lookahead_scores",
    "check_index",
    "entropy",
    "expected_information_gain",
    "lookahead_scores",
    "select_question",
    "select_questions",
    "target_entropy",
]

Context = Sequence[tuple[int, int]]
POLICIES = ("eig", "lookahead", "max_entropy", "random")


class PredictiveModel(Protocol):
    """``num_answers``; a model may also set ``num_questions``, which bounds the question
    indices the functions here accept."""

    num_answers: int

    def predictive(self, contexts: Sequence[Context], questions: Sequence[int]) -> Tensor: ...


def entropy(p: Tensor) -> Tensor:
    """Shannon entropy in nats over the last axis (``0 log 0 = 0``); a NaN or negative
    probability gives NaN rather than being read as 0."""
    if not isinstance(p, Tensor):
        raise TypeError(f"`p` must be a tensor of probabilities, got {type(p).__name__}.")
    return -torch.where(p == 0, torch.zeros_like(p), p * torch.log(p)).sum(-1)


def _check(context: Context, candidates: Sequence[int], targets: Sequence[int]) -> None:
    if not candidates:
        raise ValueError("no candidate questions to choose from")
    if not targets:
        raise ValueError("no target questions: the information gain is about targets")
    repeated = sorted({q for q in targets if list(targets).count(q) > 1})
    if repeated:
        raise ValueError(
            f"targets {repeated} are listed more than once: each would weigh twice in the mean "
            "over targets; list each target question once"
        )
    asked_list = [q for q, _ in context]
    twice = sorted({q for q in asked_list if asked_list.count(q) > 1})
    if twice:
        raise ValueError(
            f"the context answers question(s) {twice} more than once; give each asked question "
            "one answer"
        )
    asked = set(asked_list)
    overlap = asked & set(candidates)
    if overlap:
        raise ValueError(f"candidates {sorted(overlap)} are already answered in the context")


def check_index(value: object, what: str, size: int | None) -> None:
    """Raise unless ``value`` is an int (not a bool) in ``[0, size)`` (``size=None``: ``>= 0``):
    a negative index would silently read another question or answer."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what} {value!r} is not an index: give an int")
    if value < 0 or (size is not None and value >= size):
        bound = ">= 0" if size is None else f"in 0..{size - 1}"
        raise ValueError(
            f"{what} {value} is out of range: it must be {bound} (a negative index would read "
            "another one)"
        )


def _check_indices(
    model: PredictiveModel,
    contexts: Sequence[Context],
    candidates: Sequence[Sequence[int]],
    targets: Sequence[int],
) -> None:
    """Every question an int in ``[0, model.num_questions)`` (when the model says how many it
    has, else ``>= 0``), every context answer one in ``[0, model.num_answers)``."""
    size = getattr(model, "num_questions", None)
    for q in targets:
        check_index(q, "target question", size)
    for own in candidates:
        for q in own:
            check_index(q, "candidate question", size)
    for context in contexts:
        for q, y in context:
            check_index(q, "context question", size)
            check_index(y, f"the answer to context question {q}:", model.num_answers)


def _check_batch(
    contexts: Sequence[Context],
    candidates: Sequence[Sequence[int]],
    targets: Sequence[int],
    model: PredictiveModel,
) -> None:
    if len(contexts) != len(candidates):
        raise ValueError(
            f"one candidate list per context: {len(contexts)} contexts, {len(candidates)} lists"
        )
    if not contexts:
        raise ValueError("no contexts")
    for context in contexts:
        for pair in context:
            if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
                raise TypeError(
                    f"a context is a list of (question, answer) pairs, got the entry {pair!r}; "
                    "write [(question, answer), ...]"
                )
    _check_indices(model, contexts, candidates, targets)
    for context, own in zip(contexts, candidates):
        _check(context, own, targets)


def _check_depth(depth: int) -> None:
    if isinstance(depth, bool) or not isinstance(depth, numbers.Real) or int(depth) != depth:
        raise ValueError(f"depth must be a positive integer, got {depth!r}")
    if depth < 1:
        raise ValueError(f"depth must be a positive integer, got {depth!r}")


def _padded(candidates: Sequence[Sequence[int]]) -> tuple[list[list[int]], Tensor]:
    """Candidate lists padded to one width with their first entry, and the mask of real ones."""
    width = max(len(c) for c in candidates)
    padded = [list(c) + [c[0]] * (width - len(c)) for c in candidates]
    mask = torch.tensor([[i < len(c) for i in range(width)] for c in candidates])
    return padded, mask


def _expectation(p: Tensor, values: Tensor) -> Tensor:
    """``sum_y p(y) values(y)`` over the last axis; answers of probability 0 count 0 (their
    simulated contexts may be impossible under the model, with undefined entropies)."""
    return torch.where(p > 0, p * values, torch.zeros_like(values)).sum(-1)


def _simulated(
    contexts: Sequence[Context], questions: Sequence[Sequence[int]], num_answers: int
) -> list[list[tuple[int, int]]]:
    """``C + (d, y)`` for every context ``C``, its questions ``d`` and every answer ``y``, in
    that (context, question, answer) order."""
    return [
        [*context, (d, y)]
        for context, own in zip(contexts, questions)
        for d in own
        for y in range(num_answers)
    ]


def target_entropy(
    model: PredictiveModel, contexts: Sequence[Context], targets: Sequence[int]
) -> Tensor:
    """``mean_t H[p(Y_t | C)]`` for each context: the uncertainty left about the targets.

    Raises unless there is at least one context and ``targets`` is a non-empty list of distinct
    question indices (ints, not bools, in ``[0, model.num_questions)`` when the model says)."""
    if isinstance(targets, (str, bytes)) or not isinstance(targets, Sequence) or not targets:
        raise ValueError(
            f"`targets` must be a non-empty list of question indices, got {targets!r}."
        )
    if not contexts:
        raise ValueError("no contexts")
    size = getattr(model, "num_questions", None)
    for q in targets:
        check_index(q, "target question", size)
    if len(set(targets)) < len(targets):
        raise ValueError(f"targets {list(targets)} repeat a question: list each target once")
    return _target_entropy(model, contexts, targets)


def _target_entropy(
    model: PredictiveModel, contexts: Sequence[Context], targets: Sequence[int]
) -> Tensor:
    return entropy(model.predictive(contexts, targets)).mean(-1)


def _base_predictive(
    model: PredictiveModel,
    contexts: Sequence[Context],
    candidates: list[list[int]],
    targets: Sequence[int] = (),
) -> tuple[Tensor, Tensor]:
    """``p(Y_d | C)`` of each context's (equal-width) candidates ``(B, D, A)`` and ``p(Y_t | C)``
    of the targets ``(B, T, A)``, from one ``predictive`` call over the union of the candidates."""
    union = sorted({d for own in candidates for d in own})
    column = {q: i for i, q in enumerate(union)}
    base = model.predictive(contexts, union + list(targets))
    index = torch.tensor([[column[d] for d in own] for own in candidates])
    answer_p = torch.gather(base, 1, index[..., None].expand(-1, -1, base.shape[-1]))
    return answer_p, base[:, len(union) :]


def _gain_terms(
    model: PredictiveModel,
    contexts: Sequence[Context],
    candidates: list[list[int]],
    targets: Sequence[int],
) -> tuple[Tensor, Tensor, Tensor]:
    """``prior_h (B,)``, ``answer_p (B, D, A) = p(Y_d | C)`` and ``posterior_h (B, D, A) =
    mean_t H[p(Y_t | C, (d, y))]`` for equal-width candidate lists, in two ``predictive`` calls."""
    answer_p, target_p = _base_predictive(model, contexts, candidates, targets)
    prior_h = entropy(target_p).mean(-1)
    extended = _simulated(contexts, candidates, model.num_answers)
    posterior_h = _target_entropy(model, extended, targets).view(answer_p.shape)
    return prior_h, answer_p, posterior_h


def batched_information_gain(
    model: PredictiveModel,
    contexts: Sequence[Context],
    candidates: Sequence[Sequence[int]],
    targets: Sequence[int],
) -> Tensor:
    """``EIG(d)`` (module docstring) of each context's candidates, ``(B, D_max)``; lists shorter
    than the longest are padded with ``-inf``. Two ``predictive`` calls in all."""
    _check_batch(contexts, candidates, targets, model)
    return _information_gain(model, contexts, candidates, targets)


def _information_gain(model, contexts, candidates, targets) -> Tensor:
    padded, mask = _padded(candidates)
    prior_h, answer_p, posterior_h = _gain_terms(model, contexts, padded, targets)
    gains = prior_h[:, None] - _expectation(answer_p, posterior_h)
    return gains.masked_fill(~mask, float("-inf"))


def expected_information_gain(
    model: PredictiveModel, context: Context, candidates: Sequence[int], targets: Sequence[int]
) -> Tensor:
    """``EIG(d)`` (module docstring) for every candidate ``d`` of one context, shape ``(D,)``."""
    return batched_information_gain(model, [context], [candidates], targets)[0]


def _rollout_entropy(
    model: PredictiveModel,
    contexts: list[Context],
    candidates: list[list[int]],
    targets: Sequence[int],
    depth: int,
) -> Tensor:
    """Expected target entropy after ``depth`` more greedy-EIG questions from each context,
    ``(B,)``: one level of greedy choices for all contexts per two ``predictive`` calls."""
    ready = [i for i, own in enumerate(candidates) if depth == 0 or not own]
    out = torch.empty(len(contexts), dtype=torch.float64)
    if ready:
        out[ready] = _target_entropy(model, [contexts[i] for i in ready], targets).double()
    going = sorted(set(range(len(contexts))) - set(ready))
    if not going:
        return out
    contexts = [contexts[i] for i in going]
    padded, mask = _padded([candidates[i] for i in going])
    prior_h, answer_p, posterior_h = _gain_terms(model, contexts, padded, targets)
    expected_h = _expectation(answer_p, posterior_h).masked_fill(~mask, float("inf"))
    best = torch.argmin(expected_h, dim=1)  # argmax EIG: the prior entropy is shared
    rows = torch.arange(len(going))
    if depth == 1:
        out[going] = expected_h[rows, best].double()
        return out
    choices = [padded[b][int(best[b])] for b in range(len(going))]
    answers = range(model.num_answers)
    following = _rollout_entropy(
        model,
        _simulated(contexts, [[d] for d in choices], model.num_answers),
        [[q for q in candidates[i] if q != d] for i, d in zip(going, choices) for _ in answers],
        targets,
        depth - 1,
    )
    out[going] = _expectation(answer_p[rows, best], following.view(len(going), -1)).double()
    return out


def batched_lookahead_scores(
    model: PredictiveModel,
    contexts: Sequence[Context],
    candidates: Sequence[Sequence[int]],
    targets: Sequence[int],
    depth: int = 2,
) -> Tensor:
    """Depth-limited planning for each context, ``(B, D_max)`` (``-inf`` padding): for each
    candidate ``d``, the expected drop of the target entropy when ``d`` is asked and then
    ``depth - 1`` more questions are chosen greedily by EIG, every answer simulated by the model.
    ``depth = 1`` is :func:`batched_information_gain`."""
    _check_depth(depth)
    _check_batch(contexts, candidates, targets, model)
    return _lookahead(model, contexts, candidates, targets, depth)


def _lookahead(model, contexts, candidates, targets, depth) -> Tensor:
    if depth == 1:
        return _information_gain(model, contexts, candidates, targets)
    padded, mask = _padded(candidates)
    answer_p, target_p = _base_predictive(model, contexts, padded, targets)
    prior_h = entropy(target_p).mean(-1)
    answers = range(model.num_answers)
    after = _rollout_entropy(
        model,
        _simulated(contexts, padded, model.num_answers),
        [
            [q for q in own if q != d]
            for own, row in zip(candidates, padded)
            for d in row
            for _ in answers
        ],
        targets,
        depth - 1,
    ).view(answer_p.shape)
    scores = prior_h[:, None] - _expectation(answer_p, after)
    return scores.masked_fill(~mask, float("-inf"))


def lookahead_scores(
    model: PredictiveModel,
    context: Context,
    candidates: Sequence[int],
    targets: Sequence[int],
    depth: int = 2,
) -> Tensor:
    """:func:`batched_lookahead_scores` of one context, ``(D,)``."""
    return batched_lookahead_scores(model, [context], [candidates], targets, depth)[0]


def select_questions(
    policy: str,
    model: PredictiveModel,
    contexts: Sequence[Context],
    candidates: Sequence[Sequence[int]],
    targets: Sequence[int],
    rng: random.Random | None = None,
    depth: int = 2,
) -> list[int]:
    """The next question of each context under ``policy``: ``eig`` (argmax EIG), ``lookahead``
    (argmax of :func:`batched_lookahead_scores`), ``max_entropy`` (the candidate whose own answer
    is most uncertain) or ``random``. Ties go to the first candidate."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}: choose from {POLICIES}")
    _check_batch(contexts, candidates, targets, model)
    if rng is not None and not isinstance(rng, random.Random):
        raise TypeError(
            f"`rng` must be a random.Random or None, got {type(rng).__name__} {rng!r}; pass "
            "random.Random(seed)"
        )
    if policy == "random":
        rng = rng or random.Random(0)
        return [rng.choice(list(own)) for own in candidates]
    if policy == "eig":
        scores = _information_gain(model, contexts, candidates, targets)
    elif policy == "lookahead":
        _check_depth(depth)
        scores = _lookahead(model, contexts, candidates, targets, depth)
    else:
        padded, mask = _padded(candidates)
        scores = entropy(_base_predictive(model, contexts, padded)[0])
        scores = scores.masked_fill(~mask, float("-inf"))
    return [list(own)[int(i)] for own, i in zip(candidates, torch.argmax(scores, dim=1))]


def select_question(
    policy: str,
    model: PredictiveModel,
    context: Context,
    candidates: Sequence[int],
    targets: Sequence[int],
    rng: random.Random | None = None,
    depth: int = 2,
) -> int:
    """:func:`select_questions` for one context."""
    return select_questions(policy, model, [context], [candidates], targets, rng, depth)[0]
