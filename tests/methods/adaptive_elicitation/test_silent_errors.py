"""Input that used to give a silently wrong answer is refused (issue 35): a NaN concentration, a
negative or out-of-range question index (Python indexing read another question's column), a
non-integer index or answer. Valid boundary input still works."""

from __future__ import annotations

import math

import pytest
import torch

from lightning_info.methods.adaptive_elicitation.datamodule import (
    DigitQuestionOptions,
    LatentWorldOptions,
)
from lightning_info.methods.adaptive_elicitation.entities import read_entities_jsonl
from lightning_info.methods.adaptive_elicitation.evaluation import elicitation_curves
from lightning_info.methods.adaptive_elicitation.functional import (
    batched_lookahead_scores,
    expected_information_gain,
    select_questions,
)
from lightning_info.methods.adaptive_elicitation.module import ElicitationLM
from lightning_info.methods.adaptive_elicitation.sequences import LMPredictive, QuestionBank
from lightning_info.methods.adaptive_elicitation.world import (
    EmpiricalPredictiveModel,
    ExactPosteriorModel,
    LatentTypeWorld,
)
from tests.methods.adaptive_elicitation import tiny

WORLD = LatentTypeWorld.sample(num_types=3, num_questions=5, num_answers=3, seed=0)
MODEL = ExactPosteriorModel(WORLD)
ANSWERS = WORLD.sample_entities(6, seed=1)[1]
RANGE = r"out of range: it must be in 0\.\.4"


def _lm(answer_ids=None, with_tokenizer=False):
    """The tiny LM built for the tiny data's tokenizer (vocabulary ``len(tokenizer)``) and the
    module over it; ``answer_ids=None``: the bank's."""
    bank = tiny.data().bank
    model = tiny.tiny_causal_lm(tiny._questions_tokenizer(), n_layer=1, n_embd=16, n_head=2)
    ids = bank.answer_ids if answer_ids is None else answer_ids(bank, len(bank.tokenizer))
    tokenizer = bank.tokenizer if with_tokenizer else None
    return ElicitationLM(model, ids, tokenizer=tokenizer)


def _jsonl(tmp_path):
    path = tmp_path / "people.jsonl"
    path.write_text('{"answers": {"q": "Yes"}}\n{"answers": {"q": "No"}}\n')
    return path


BAD_INPUT = [
    pytest.param(
        lambda: LatentTypeWorld.sample(concentration=math.nan),
        ValueError,
        "`concentration` must be finite",
        id="world-concentration-nan",
    ),
    pytest.param(
        lambda: LatentTypeWorld.sample(concentration=0.0),
        ValueError,
        "`concentration` must be > 0",
        id="world-concentration-zero",
    ),
    pytest.param(
        lambda: LatentTypeWorld.sample(num_questions=2.5),
        TypeError,
        "`num_questions` must be an int",
        id="world-questions-float",
    ),
    pytest.param(
        lambda: LatentTypeWorld.sample(seed=-1),
        ValueError,
        "`seed` must be >= 0",
        id="world-seed-negative",
    ),
    pytest.param(
        lambda: LatentWorldOptions(concentration=math.nan),
        ValueError,
        "`concentration` must be finite",
        id="world-options-concentration-nan",
    ),
    pytest.param(
        lambda: LatentWorldOptions(num_questions=3, uninformative=4),
        ValueError,
        r"uninformative must be in \[0, 3\]",
        id="world-options-uninformative",
    ),
    pytest.param(
        lambda: LatentWorldOptions(num_entities=0),
        ValueError,
        "`num_entities` must be >= 1",
        id="world-options-no-entities",
    ),
    pytest.param(
        lambda: DigitQuestionOptions(region=3),
        ValueError,
        "region must divide the digits' 8 pixels",
        id="digits-options-region",
    ),
    pytest.param(
        lambda: DigitQuestionOptions(threshold=1.0),
        ValueError,
        r"`threshold` must lie in \[0, 1\)",
        id="digits-options-threshold",
    ),
    pytest.param(
        lambda: expected_information_gain(MODEL, [], [0, -1], [2]),
        ValueError,
        f"candidate question -1 is {RANGE}",
        id="eig-negative-candidate",
    ),
    pytest.param(
        lambda: expected_information_gain(MODEL, [], [0, 5], [2]),
        ValueError,
        f"candidate question 5 is {RANGE}",
        id="eig-candidate-past-the-end",
    ),
    pytest.param(
        lambda: expected_information_gain(MODEL, [], [0, 1], [-2]),
        ValueError,
        f"target question -2 is {RANGE}",
        id="eig-negative-target",
    ),
    pytest.param(
        lambda: expected_information_gain(MODEL, [(-1, 0)], [0], [2]),
        ValueError,
        f"context question -1 is {RANGE}",
        id="eig-negative-context-question",
    ),
    pytest.param(
        lambda: expected_information_gain(MODEL, [(3, 3)], [0], [2]),
        ValueError,
        r"answer to context question 3: 3 is out of range: it must be in 0\.\.2",
        id="eig-context-answer-past-the-end",
    ),
    pytest.param(
        lambda: expected_information_gain(MODEL, [], [0, 1.0], [2]),
        TypeError,
        "candidate question 1.0 is not an index",
        id="eig-float-candidate",
    ),
    pytest.param(
        lambda: select_questions("eig", MODEL, [[], []], [[0, 1], [1, -1]], [2]),
        ValueError,
        f"candidate question -1 is {RANGE}",
        id="select-negative",
    ),
    pytest.param(
        lambda: select_questions("random", MODEL, [[]], [[0, 7]], [2]),
        ValueError,
        f"candidate question 7 is {RANGE}",
        id="select-random-past-the-end",
    ),
    pytest.param(
        lambda: batched_lookahead_scores(MODEL, [[]], [[0, -3]], [2]),
        ValueError,
        f"candidate question -3 is {RANGE}",
        id="lookahead-negative",
    ),
    pytest.param(
        lambda: elicitation_curves("eig", MODEL, ANSWERS, [0, 1, -1], [3], 1),
        ValueError,
        f"candidate question -1 is {RANGE}",
        id="curves-negative",
    ),
    pytest.param(
        lambda: EmpiricalPredictiveModel(ANSWERS.double(), 3),
        TypeError,
        "answers must be integer",
        id="empirical-float-answers",
    ),
    pytest.param(
        lambda: EmpiricalPredictiveModel(ANSWERS - 2, 3),
        ValueError,
        r"answers must be in 0\.\.2, or -1",
        id="empirical-answers-below-minus-one",
    ),
    pytest.param(
        lambda: EmpiricalPredictiveModel(ANSWERS, 3, smoothing=math.nan),
        ValueError,
        "`smoothing` must be finite",
        id="empirical-smoothing-nan",
    ),
    pytest.param(
        lambda: _lm(lambda bank, size: [bank.answer_ids[0]] * 3),
        ValueError,
        r"`answer_ids` repeats the index\(es\) \[\d+\]; it stands for a set",
        id="lm-answer-ids-repeated",
    ),
    pytest.param(
        lambda: _lm(lambda bank, size: [size, size + 1, size + 2]),
        ValueError,
        r"`answer_ids` must hold indices in \[0, \d+\), got \d+",
        id="lm-answer-ids-outside-the-vocabulary",
    ),
    pytest.param(
        lambda: _lm(lambda bank, size: [-1, 0, 1]),
        ValueError,
        r"`answer_ids` must hold indices in \[0, \d+\), got -1",
        id="lm-answer-ids-negative",
    ),
    pytest.param(
        lambda: _lm(lambda bank, size: [0.0, 1.0, 2.0]),
        TypeError,
        r"`answer_ids\[0\]` must be an integer index, got float 0.0",
        id="lm-answer-ids-float",
    ),
    pytest.param(
        lambda: _lm(lambda bank, size: "012"),
        TypeError,
        r"`answer_ids` must be a sequence of integer indices, got a string '012'",
        id="lm-answer-ids-string",
    ),
    pytest.param(
        lambda: _lm(lambda bank, size: []),
        ValueError,
        r"`answer_ids` must name the answer tokens: pass QuestionBank.answer_ids",
        id="lm-answer-ids-empty",
    ),
    pytest.param(
        lambda: _lm(lambda bank, size: [0, 1, 2], with_tokenizer=True),
        ValueError,
        r"`answer_ids` \[0, 1, 2\] are not the tokenizer's answer tokens <A0>\.\.<A2> \(ids "
        r"\[\d+, \d+, \d+\]\): pass QuestionBank.answer_ids",
        id="lm-answer-ids-not-the-answer-tokens",
    ),
    pytest.param(
        lambda: _lm(lambda bank, size: bank.answer_ids[::-1], with_tokenizer=True),
        ValueError,
        r"are not the tokenizer's answer tokens",
        id="lm-answer-ids-reordered",
    ),
    pytest.param(
        lambda: LMPredictive(_lm().model, tiny.data().bank, batch_size=2.5),
        TypeError,
        r"`batch_size` must be an int, got 2.5",
        id="predictive-batch-size-float",
    ),
    pytest.param(
        lambda: QuestionBank(tiny._questions_tokenizer(), ["q"], 0),
        ValueError,
        r"`num_answers` must be >= 1, got 0",
        id="bank-no-answers",
    ),
    pytest.param(
        lambda tmp_path: read_entities_jsonl(_jsonl(tmp_path), "YesNo"),
        TypeError,
        r"`answer_names` must be a sequence of strings, got a single str",
        id="jsonl-answer-names-string",
    ),
    pytest.param(
        lambda tmp_path: read_entities_jsonl(_jsonl(tmp_path), ["Yes", "Yes", "No"]),
        ValueError,
        r"`answer_names` repeats \['Yes'\]; name each answer once",
        id="jsonl-answer-names-repeated",
    ),
    pytest.param(
        lambda: tiny.data(held_out_questions=3),
        TypeError,
        r"`held_out_questions` must be a list of question indices \(ints\), got int 3; one "
        r"question q is \[q\]",
        id="datamodule-held-out-bare-int",
    ),
]


def test_the_last_question_is_its_own_eig_not_a_negative_alias():
    """Question 4 (the last) is a valid candidate; -1 used to return its EIG for "another"
    question. The EIG of question 4 equals the formula written out by hand."""
    eig = expected_information_gain(MODEL, [(0, 1)], [1, 4], [2, 3])
    prior = MODEL.predictive([[(0, 1)]], [2, 3])[0]
    h = lambda p: float(-(p * p.log()).sum(-1).mean())  # noqa: E731
    answer = MODEL.predictive([[(0, 1)]], [4])[0, 0]
    after = sum(
        float(answer[y]) * h(MODEL.predictive([[(0, 1), (4, y)]], [2, 3])[0]) for y in range(3)
    )
    assert float(eig[1]) == pytest.approx(h(prior) - after, abs=1e-12)
    assert select_questions("max_entropy", MODEL, [[]], [[0, 4]], [2])[0] in (0, 4)
    numpy_index = expected_information_gain(MODEL, [], [torch.tensor(4).numpy()[()]], [2])
    assert torch.isfinite(numpy_index).all()  # a numpy integer is an index too


def test_boundary_worlds_and_tables_still_work():
    one = LatentTypeWorld.sample(num_types=1, num_questions=1, num_answers=1, uninformative=1)
    assert one.theta.shape == (1, 1, 1)
    holes = ANSWERS.clone()
    holes[0, 0] = -1  # -1 marks an unanswered question
    model = EmpiricalPredictiveModel(holes, 3, smoothing=1e-6)
    assert model.num_questions == 5
    p = model.predictive([[(4, int(ANSWERS[1, 4]))]], [0])
    torch.testing.assert_close(p.sum(-1), torch.ones(1, 1, dtype=torch.float64))
    curves = elicitation_curves("eig", MODEL, ANSWERS, [0, 1], [4], 2)
    assert curves["accuracy"].shape == (6, 3)


def test_the_banks_answer_ids_are_accepted_and_checked_against_the_data(tmp_path):
    from lightning.pytorch import Trainer

    module = _lm(with_tokenizer=True)
    bank = tiny.data().bank
    assert module.answer_ids == bank.answer_ids
    assert bank.answer_ids == bank.tokenizer.convert_tokens_to_ids(["<A0>", "<A1>", "<A2>"])
    other = _lm(lambda bank, size: [bank.answer_ids[1], bank.answer_ids[0], bank.answer_ids[2]])
    trainer = Trainer(
        max_steps=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    with pytest.raises(
        ValueError,
        match=r"are not the data module's answer tokens .*"
        r"data\.bank\.answer_ids",
    ):
        trainer.validate(other, datamodule=tiny.data())
    scores = trainer.validate(module, datamodule=tiny.data(), verbose=False)[0]
    assert 0.0 <= scores["val/accuracy"] <= 1.0


def test_answer_names_as_a_list_fix_the_answer_order(tmp_path):
    table = read_entities_jsonl(_jsonl(tmp_path), ["No", "Yes"])
    assert table.answer_names == ["No", "Yes"] and table.answers.flatten().tolist() == [1, 0]
