"""Expected information gain with the exact posterior model against mutual information by
enumeration of the joint (1e-9), its sign and zeros, one batched call per evaluation, lookahead
against a brute-force greedy rollout, and the selection policies."""

from __future__ import annotations

import itertools
import math
import random

import pytest
import torch

from lightning_info.methods.adaptive_elicitation.functional import (
    batched_information_gain,
    batched_lookahead_scores,
    entropy,
    expected_information_gain,
    lookahead_scores,
    select_question,
    select_questions,
)
from lightning_info.methods.adaptive_elicitation.world import ExactPosteriorModel, LatentTypeWorld


def _posterior(world, context):
    """Bayes' rule term by term."""
    weights = []
    for k in range(world.prior.shape[0]):
        w = float(world.prior[k])
        for q, y in context:
            w *= float(world.theta[k, q, y])
        weights.append(w)
    total = sum(weights)
    return [w / total for w in weights]


def _mutual_information(world, context, d, t):
    """I(Y_d; Y_t | C) from the joint p(y_d, y_t | C) = sum_k p(k|C) theta_kd theta_kt."""
    post = _posterior(world, context)
    answers = range(world.num_answers)
    joint = {
        (a, b): sum(
            post[k] * float(world.theta[k, d, a] * world.theta[k, t, b]) for k in range(len(post))
        )
        for a in answers
        for b in answers
    }
    pd = {a: sum(joint[a, b] for b in answers) for a in answers}
    pt = {b: sum(joint[a, b] for a in answers) for b in answers}
    return sum(p * math.log(p / (pd[a] * pt[b])) for (a, b), p in joint.items() if p > 0)


def _entropy_of_targets(world, context, targets):
    post = _posterior(world, context)
    total = 0.0
    for t in targets:
        p = [
            sum(post[k] * float(world.theta[k, t, y]) for k in range(len(post)))
            for y in range(world.num_answers)
        ]
        total -= sum(x * math.log(x) for x in p if x > 0)
    return total / len(targets)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_eig_of_the_exact_model_is_the_mutual_information_by_enumeration(seed):
    world = LatentTypeWorld.sample(num_types=5, num_questions=9, num_answers=3, seed=seed)
    model = ExactPosteriorModel(world)
    targets = [7, 8]
    for context in ([], [(0, 1)], [(0, 2), (3, 0), (5, 1)]):
        asked = {q for q, _ in context}
        candidates = [q for q in range(7) if q not in asked]
        eig = expected_information_gain(model, context, candidates, targets)
        expected = [
            sum(_mutual_information(world, context, d, t) for t in targets) / len(targets)
            for d in candidates
        ]
        torch.testing.assert_close(
            eig, torch.tensor(expected, dtype=torch.float64), rtol=0, atol=1e-9
        )


def test_eig_is_non_negative_and_zero_for_questions_independent_of_the_type():
    world = LatentTypeWorld.sample(num_types=4, num_questions=10, uninformative=3, seed=4)
    model = ExactPosteriorModel(world)
    rng = random.Random(0)
    for _ in range(20):
        asked = rng.sample(range(5), rng.randint(0, 3))
        context = [(q, rng.randrange(world.num_answers)) for q in asked]
        candidates = [q for q in range(10) if q not in asked and q not in (5, 6)]
        eig = expected_information_gain(model, context, candidates, [5, 6])
        assert bool((eig >= -1e-12).all())
        assert float(eig[-3:].abs().max()) < 1e-12  # questions 7, 8, 9
        assert float(eig[:-3].max()) > 1e-4


class _Counting(ExactPosteriorModel):
    """The exact model, recording the number of contexts of each ``predictive`` call."""

    def __init__(self, world):
        super().__init__(world)
        self.calls: list[int] = []

    def predictive(self, contexts, questions):
        self.calls.append(len(contexts))
        return super().predictive(contexts, questions)


def test_every_candidate_and_answer_in_two_predictive_calls():
    world = LatentTypeWorld.sample(num_questions=8, seed=5)

    model = _Counting(world)
    expected_information_gain(model, [(0, 0)], [1, 2, 3, 4, 5], [6, 7])
    assert model.calls == [1, 5 * world.num_answers]


def _greedy_rollout_entropy(world, context, candidates, targets, depth):
    """Brute force: the expected target entropy after ``depth`` greedy questions, each chosen by
    enumerated mutual information."""
    if depth == 0:
        return _entropy_of_targets(world, context, targets)
    gains = [sum(_mutual_information(world, context, d, t) for t in targets) for d in candidates]
    best = candidates[max(range(len(candidates)), key=lambda i: (gains[i], -i))]
    post = _posterior(world, context)
    rest = [q for q in candidates if q != best]
    value = 0.0
    for y in range(world.num_answers):
        p = sum(post[k] * float(world.theta[k, best, y]) for k in range(len(post)))
        value += p * _greedy_rollout_entropy(world, [*context, (best, y)], rest, targets, depth - 1)
    return value


def test_lookahead_matches_a_brute_force_greedy_rollout():
    world = LatentTypeWorld.sample(num_types=4, num_questions=7, num_answers=2, seed=6)
    model = ExactPosteriorModel(world)
    context, candidates, targets = [(0, 1)], [1, 2, 3, 4], [5, 6]
    torch.testing.assert_close(
        lookahead_scores(model, context, candidates, targets, depth=1),
        expected_information_gain(model, context, candidates, targets),
    )
    prior = _entropy_of_targets(world, context, targets)
    for depth in (2, 3):
        scores = lookahead_scores(model, context, candidates, targets, depth=depth)
        expected = []
        for i, d in enumerate(candidates):
            rest = candidates[:i] + candidates[i + 1 :]
            post = _posterior(world, context)
            after = sum(
                sum(post[k] * float(world.theta[k, d, y]) for k in range(len(post)))
                * _greedy_rollout_entropy(world, [*context, (d, y)], rest, targets, depth - 1)
                for y in range(world.num_answers)
            )
            expected.append(prior - after)
        torch.testing.assert_close(
            scores, torch.tensor(expected, dtype=torch.float64), rtol=0, atol=1e-9
        )
    # more questions ahead never leave more uncertainty in expectation
    two = lookahead_scores(model, context, candidates, targets, 2)
    assert bool(
        (two >= expected_information_gain(model, context, candidates, targets) - 1e-12).all()
    )


def test_policies_pick_their_argmax_and_refuse_bad_input():
    world = LatentTypeWorld.sample(num_questions=8, uninformative=2, seed=7)
    model = ExactPosteriorModel(world)
    context, candidates, targets = [(0, 2)], [1, 2, 3, 6, 7], [4, 5]
    eig = expected_information_gain(model, context, candidates, targets)
    assert (
        select_question("eig", model, context, candidates, targets) == candidates[int(eig.argmax())]
    )
    own = entropy(model.predictive([context], candidates)[0])
    assert (
        select_question("max_entropy", model, context, candidates, targets)
        == candidates[int(own.argmax())]
    )
    assert select_question("lookahead", model, context, candidates, targets) in candidates
    picks = {
        select_question("random", model, context, candidates, targets, random.Random(s))
        for s in range(30)
    }
    assert picks == set(candidates)
    with pytest.raises(ValueError, match="already answered"):
        expected_information_gain(model, context, [0, 1], targets)
    with pytest.raises(ValueError, match="no target"):
        expected_information_gain(model, context, candidates, [])
    with pytest.raises(ValueError, match="no candidate"):
        select_question("eig", model, context, [], targets)
    with pytest.raises(ValueError, match="unknown policy"):
        select_question("best", model, context, candidates, targets)
    with pytest.raises(ValueError, match="depth"):
        lookahead_scores(model, context, candidates, targets, depth=0)


def test_exact_posterior_is_bayes_rule_and_entities_are_seeded():
    world = LatentTypeWorld.sample(num_types=3, num_questions=5, seed=8)
    model = ExactPosteriorModel(world)
    for context in ([], [(1, 0)], [(1, 0), (2, 2), (4, 1)]):
        expected = torch.tensor(_posterior(world, context), dtype=torch.float64)
        torch.testing.assert_close(model.posterior([context])[0], expected)
    types, answers = world.sample_entities(50, seed=1)
    again = world.sample_entities(50, seed=1)
    assert torch.equal(types, again[0]) and torch.equal(answers, again[1])
    assert answers.shape == (50, 5) and int(answers.max()) < world.num_answers
    for a, b in itertools.combinations(range(3), 2):
        assert not torch.allclose(world.theta[a], world.theta[b])
    with pytest.raises(ValueError, match="uninformative"):
        LatentTypeWorld.sample(num_questions=3, uninformative=4)


def test_batched_scores_equal_one_context_at_a_time_with_ragged_candidates():
    world = LatentTypeWorld.sample(num_types=4, num_questions=9, num_answers=3, seed=9)
    model = ExactPosteriorModel(world)
    contexts = [[], [(0, 1)], [(0, 2), (3, 0)]]
    candidates = [[1, 2, 3, 4, 5, 6], [2, 4, 5], [1, 6]]
    targets = [7, 8]
    for depth in (1, 2, 3):
        batched = batched_lookahead_scores(model, contexts, candidates, targets, depth)
        assert batched.shape == (3, 6)
        for b, (context, own) in enumerate(zip(contexts, candidates)):
            alone = lookahead_scores(model, context, own, targets, depth)
            torch.testing.assert_close(batched[b, : len(own)], alone, rtol=0, atol=1e-12)
            assert bool(torch.isinf(batched[b, len(own) :]).all())
    for policy in ("eig", "lookahead", "max_entropy"):
        picks = select_questions(policy, model, contexts, candidates, targets)
        assert picks == [
            select_question(policy, model, c, own, targets) for c, own in zip(contexts, candidates)
        ]
    with pytest.raises(ValueError, match="one candidate list per context"):
        batched_information_gain(model, contexts, candidates[:2], targets)


def test_lookahead_takes_two_predictive_calls_per_greedy_level():
    world = LatentTypeWorld.sample(num_questions=8, seed=10)

    model = _Counting(world)
    for depth in (2, 3):
        model.calls.clear()
        batched_lookahead_scores(
            model, [[(0, 0)], [(1, 2)]], [[1, 2, 3, 4], [2, 3, 4, 5]], [6, 7], depth
        )
        assert len(model.calls) == 2 * depth - 1
