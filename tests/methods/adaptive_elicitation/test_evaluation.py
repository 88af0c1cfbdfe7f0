"""Elicitation curves against a per-entity loop: each entity questioned alone, its target
accuracy and NLL computed by hand from the exact posterior predictive."""

from __future__ import annotations

import math
import random

import pytest
import torch

from lightning_info.methods.adaptive_elicitation.evaluation import elicitation_curves
from lightning_info.methods.adaptive_elicitation.functional import select_question
from lightning_info.methods.adaptive_elicitation.world import ExactPosteriorModel, LatentTypeWorld


@pytest.mark.parametrize("policy", ["eig", "lookahead", "max_entropy"])
def test_curves_equal_questioning_each_entity_alone(policy):
    world = LatentTypeWorld.sample(num_types=3, num_questions=8, uninformative=2, seed=11)
    model = ExactPosteriorModel(world)
    _, answers = world.sample_entities(6, seed=3)
    candidates, targets = [0, 1, 2, 3, 6, 7], [4, 5]
    curves = elicitation_curves(policy, model, answers, candidates, targets, steps=3)
    assert curves["accuracy"].shape == curves["nll"].shape == (6, 4)
    for e in range(6):
        context, left = [], list(candidates)
        for step in range(4):
            p = model.predictive([context], targets)[0]
            truth = [int(answers[e, t]) for t in targets]
            nll = -sum(math.log(float(p[i, y])) for i, y in enumerate(truth)) / 2
            hits = sum(int(p[i].argmax()) == y for i, y in enumerate(truth)) / 2
            assert abs(float(curves["nll"][e, step]) - nll) < 1e-9
            assert float(curves["accuracy"][e, step]) == hits
            if step < 3:
                q = select_question(policy, model, context, left, targets)
                context.append((q, int(answers[e, q])))
                left.remove(q)
    if policy != "max_entropy":  # the uniform questions 6, 7 carry no information
        assert curves["nll"][:, 3].mean() < curves["nll"][:, 0].mean()


def test_random_curves_are_seeded_and_missing_answers_are_skipped():
    world = LatentTypeWorld.sample(num_types=3, num_questions=6, seed=12)
    model = ExactPosteriorModel(world)
    _, answers = world.sample_entities(5, seed=4)
    one = elicitation_curves(
        "random", model, answers, [0, 1, 2, 3], [4, 5], 2, rng=random.Random(7)
    )
    two = elicitation_curves(
        "random", model, answers, [0, 1, 2, 3], [4, 5], 2, rng=random.Random(7)
    )
    assert torch.equal(one["nll"], two["nll"])
    holes = answers.clone()
    holes[0, 5] = -1  # entity 0's second target is unanswered: scored on the first alone
    holes[1, :2] = -1  # entity 1 can answer two candidates only
    curves = elicitation_curves("eig", model, holes, [0, 1, 2, 3], [4, 5], 2)
    p = model.predictive([[]], [4])[0, 0]
    assert abs(float(curves["nll"][0, 0]) + math.log(float(p[int(answers[0, 4])]))) < 1e-9
    with pytest.raises(ValueError, match="steps must be in"):
        elicitation_curves("eig", model, holes, [0, 1, 2, 3], [4, 5], 3)
    with pytest.raises(ValueError, match="disjoint"):
        elicitation_curves("eig", model, answers, [0, 4], [4, 5], 1)
