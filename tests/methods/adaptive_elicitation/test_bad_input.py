import json
import random

import pytest
import torch

from lightning_info.methods.adaptive_elicitation.datamodule import ElicitationDataModule
from lightning_info.methods.adaptive_elicitation.entities import (
    EntityTable,
    digits_table,
    latent_world_table,
    read_entities_jsonl,
)
from lightning_info.methods.adaptive_elicitation.functional import (
    batched_information_gain,
    lookahead_scores,
    select_question,
)
from lightning_info.methods.adaptive_elicitation.world import ExactPosteriorModel, LatentTypeWorld
from tests.methods.adaptive_elicitation import tiny

WORLD = LatentTypeWorld.sample(num_types=3, num_questions=5, num_answers=3, seed=0)
MODEL = ExactPosteriorModel(WORLD)
YES_NO = ["No", "Yes"]


def _table(answers=((0, 1),), labels=None, questions=("a", "b"), names=YES_NO):
    answers = answers if isinstance(answers, torch.Tensor) else torch.tensor(answers)
    return EntityTable(questions, names, answers, labels)


BAD_INPUT = [
    pytest.param(
        lambda: batched_information_gain(MODEL, [[]], [[0, 1]], [4, 3, 4]),
        ValueError,
        r"targets \[4\] are listed more than once: each would weigh twice",
        id="information-gain-repeated-target",
    ),
    pytest.param(
        lambda: batched_information_gain(MODEL, [[2]], [[0, 1]], [4]),
        TypeError,
        r"a context is a list of \(question, answer\) pairs, got the entry 2",
        id="information-gain-context-not-pairs",
    ),
    pytest.param(
        lambda: batched_information_gain(MODEL, [[(2, 0), (2, 1)]], [[0, 1]], [4]),
        ValueError,
        r"the context answers question\(s\) \[2\] more than once",
        id="information-gain-question-answered-twice",
    ),
    pytest.param(
        lambda: batched_information_gain(MODEL, [[]], [[0, 1.0]], [4]),
        TypeError,
        r"candidate question 1.0 is not an index: give an int",
        id="information-gain-float-candidate",
    ),
    pytest.param(
        lambda: lookahead_scores(MODEL, [], [0, 1], [4], True),
        ValueError,
        r"depth must be a positive integer, got True",
        id="lookahead-depth-bool",
    ),
    pytest.param(
        lambda: lookahead_scores(MODEL, [], [0, 1], [4], "2"),
        ValueError,
        r"depth must be a positive integer, got '2'",
        id="lookahead-depth-string",
    ),
    pytest.param(
        lambda: lookahead_scores(MODEL, [], [0, 1], [4], 0),
        ValueError,
        r"depth must be a positive integer, got 0",
        id="lookahead-depth-zero",
    ),
    pytest.param(
        lambda: select_question("random", MODEL, [], [0, 1], [4], rng=3),
        TypeError,
        r"`rng` must be a random.Random or None, got int 3",
        id="select-rng-int",
    ),
    pytest.param(
        lambda: select_question(["eig"], MODEL, [], [0, 1], [4]),
        ValueError,
        r"unknown policy \['eig'\]: choose from",
        id="select-policy-list",
    ),
    pytest.param(
        lambda: _table(torch.tensor([[0.5, 1.0]])),
        TypeError,
        r"`answers` must hold integer indices \(torch.long\), got torch.float32",
        id="entity-table-fractional-answers",
    ),
    pytest.param(
        lambda: _table(torch.tensor([[True, False]])),
        TypeError,
        r"`answers` must hold integer indices \(torch.long\), got torch.bool",
        id="entity-table-bool-answers",
    ),
    pytest.param(
        lambda: _table([[0, 1]], labels=torch.tensor([0, 1])),
        ValueError,
        r"`labels` must hold one label per entity, shape \(1,\), got \(2,\)",
        id="entity-table-labels-length",
    ),
    pytest.param(
        lambda: _table([[0, 1]], labels=torch.tensor([0.5])),
        TypeError,
        r"`labels` must hold integer indices",
        id="entity-table-float-labels",
    ),
    pytest.param(
        lambda: _table(questions="ab"),
        TypeError,
        r"`questions` must be a sequence of strings, got a single str",
        id="entity-table-questions-string",
    ),
    pytest.param(
        lambda: _table(names="NY"),
        TypeError,
        r"`answer_names` must be a sequence of strings, got a single str",
        id="entity-table-answer-names-string",
    ),
    pytest.param(
        lambda: _table(names=["No", "No"]),
        ValueError,
        r"`answer_names` must be distinct",
        id="entity-table-answer-names-repeated",
    ),
    pytest.param(
        lambda: _table([[0, 1]]).blocks(-1),
        ValueError,
        r"`entity` must be an index in \[0, 1\), got -1",
        id="entity-table-blocks-negative-entity",
    ),
    pytest.param(
        lambda: _table([[0, 1]]).blocks(True),
        TypeError,
        r"`entity` must be an integer index, got bool True",
        id="entity-table-blocks-bool-entity",
    ),
    pytest.param(
        lambda: _table([[0, 1]]).blocks(0, [-1]),
        ValueError,
        r"`questions entry` must be an index in \[0, 2\), got -1",
        id="entity-table-blocks-negative-question",
    ),
    pytest.param(
        lambda: _table([[0, 1]]).blocks(0, [1.0]),
        TypeError,
        r"`questions entry` must be an integer index, got float 1.0",
        id="entity-table-blocks-float-question",
    ),
    pytest.param(
        lambda: latent_world_table(WORLD, 3, seed=1.5),
        TypeError,
        r"`seed` must be an int, got 1.5",
        id="latent-table-seed-float",
    ),
    pytest.param(
        lambda: latent_world_table(WORLD, 3, seed=-1),
        ValueError,
        r"`seed` must be >= 0, got -1",
        id="latent-table-seed-negative",
    ),
    pytest.param(
        lambda: latent_world_table("world", 3),
        TypeError,
        r"`world` must be a LatentTypeWorld, got str",
        id="latent-table-not-a-world",
    ),
    pytest.param(
        lambda: latent_world_table(WORLD, True),
        TypeError,
        r"`count` must be an int, got True",
        id="latent-table-count-bool",
    ),
    pytest.param(
        lambda: digits_table(class_questions="no"),
        TypeError,
        r"`class_questions` must be True or False, got 'no'",
        id="digits-table-class-questions-string",
    ),
    pytest.param(
        lambda: digits_table(images=[1.5]),
        TypeError,
        r"`images\[0\]` must be an integer index, got float 1.5",
        id="digits-table-float-image",
    ),
    pytest.param(
        lambda: digits_table(images=torch.tensor([True, False])),
        TypeError,
        r"`images` must hold integer indices, got dtype torch.bool",
        id="digits-table-bool-mask-images",
    ),
    pytest.param(
        lambda: digits_table(images=[2000]),
        ValueError,
        r"images must be a non-empty set of indices in 0\.\.1796",
        id="digits-table-image-past-the-end",
    ),
    pytest.param(
        lambda: digits_table(images="12"),
        TypeError,
        r"`images` must be a sequence of integer indices, got a string '12'",
        id="digits-table-images-string",
    ),
    pytest.param(
        lambda: ElicitationDataModule(tiny._questions_tokenizer(), source=3),
        TypeError,
        r"`source` must be 'latent', 'digits' or the path of a JSON-lines file .* got int 3",
        id="datamodule-source-int",
    ),
    pytest.param(
        lambda: tiny.data(answer_names=["x"]),
        ValueError,
        r"`answer_names` names the answers of a JSON-lines source; source='latent'",
        id="datamodule-answer-names-without-a-file",
    ),
    pytest.param(
        lambda: tiny.data(num_val=1.5),
        TypeError,
        r"`num_val` must be an int, got 1.5",
        id="datamodule-num-val-float",
    ),
]


def test_valid_boundary_input_still_works():
    assert _table([[0, 1]]).blocks(torch.tensor(0), [1, 0]) == [(1, 1), (0, 0)]
    assert _table(questions=("a", "b")).questions == ["a", "b"]
    table = digits_table(images=torch.tensor([0, 5]))
    assert table.labels.tolist() == [0, 5]
    assert select_question("random", MODEL, [(2, 0)], [0, 1], [4], rng=random.Random(1)) in (0, 1)
    gains = batched_information_gain(MODEL, [[(2, 0)]], [[0, 1]], [3, 4])
    assert torch.isfinite(gains).all()


def _write(tmp_path, *records):
    path = tmp_path / "people.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_a_null_answer_names_the_file_line_and_question(tmp_path):
    path = _write(tmp_path, {"answers": {"q": "Yes"}}, {"answers": {"Owns a dog?": None}})
    with pytest.raises(
        ValueError, match=r"people\.jsonl:2: question 'Owns a dog\?' has the answer null; leave"
    ):
        read_entities_jsonl(path)


@pytest.mark.parametrize("second", ["1", True])
def test_mixed_answer_types_for_one_question_are_refused(tmp_path, second):
    path = _write(tmp_path, {"answers": {"q": 1}}, {"answers": {"q": second}})
    with pytest.raises(
        ValueError,
        match=r"people\.jsonl:2: question 'q' has the \w+ answer .*line 1 gave it a number; "
        "give every answer to one question the same JSON type",
    ):
        read_entities_jsonl(path)


def test_one_type_per_question_reads_as_text(tmp_path):
    path = _write(
        tmp_path,
        {"answers": {"count": 1, "flag": True, "word": "1"}},
        {"answers": {"count": 2, "flag": False}},
    )
    table = read_entities_jsonl(path)
    assert table.answer_names == ["1", "True", "2", "False"]
    assert table.answers.tolist() == [[0, 1, 0], [2, 3, -1]]


def test_a_nested_answer_is_refused(tmp_path):
    path = _write(tmp_path, {"answers": {"q": ["a", "b"]}})
    with pytest.raises(ValueError, match=r"people\.jsonl:1: .* string, number or boolean"):
        read_entities_jsonl(path)


def test_a_json_syntax_error_names_the_file_and_line(tmp_path):
    path = tmp_path / "people.jsonl"
    path.write_text('{"answers": {"q": "Yes"}}\n\n{"answers": {"q": "No"}\n')
    with pytest.raises(ValueError, match=r"people\.jsonl, line 3, column \d+: not valid JSON"):
        read_entities_jsonl(path)


from lightning_info.methods.adaptive_elicitation import functional as _core  # noqa: E402


class _Uniform:
    """A predictive model over 3 questions with 2 equally likely answers each."""

    num_questions, num_answers = 3, 2

    def predictive(self, contexts, questions):
        return torch.full((len(contexts), len(questions), 2), 0.5)


BAD_INPUT += [
    pytest.param(
        lambda: _core.check_index(True, "target question", 3),
        TypeError,
        r"target question True is not an index: give an int",
        id="check-index-bool",
    ),
    pytest.param(
        lambda: _core.entropy([0.5, 0.5]),
        TypeError,
        r"`p` must be a tensor of probabilities, got list",
        id="entropy-list",
    ),
    pytest.param(
        lambda: _core.target_entropy(_Uniform(), [[]], []),
        ValueError,
        r"`targets` must be a non-empty list of question indices",
        id="target-entropy-no-targets",
    ),
    pytest.param(
        lambda: _core.target_entropy(_Uniform(), [[]], "01"),
        ValueError,
        r"`targets` must be a non-empty list of question indices, got '01'",
        id="target-entropy-bare-string",
    ),
    pytest.param(
        lambda: _core.target_entropy(_Uniform(), [[]], [True]),
        TypeError,
        r"target question True is not an index",
        id="target-entropy-bool-target",
    ),
    pytest.param(
        lambda: _core.target_entropy(_Uniform(), [[]], [3]),
        ValueError,
        r"target question 3 is out of range: it must be in 0\.\.2",
        id="target-entropy-target-out-of-range",
    ),
    pytest.param(
        lambda: _core.target_entropy(_Uniform(), [[]], [1, 1]),
        ValueError,
        r"repeat a question",
        id="target-entropy-repeated-target",
    ),
    pytest.param(
        lambda: _core.target_entropy(_Uniform(), [], [0]),
        ValueError,
        r"no contexts",
        id="target-entropy-no-contexts",
    ),
]


def test_entropy_propagates_nan_and_negative_probabilities():
    """A NaN or negative probability gives NaN, not an entropy that reads it as 0; valid rows
    still match ``-sum p log p`` in float64."""
    out = _core.entropy(torch.tensor([[float("nan"), 1.0], [-0.5, 1.5], [0.25, 0.75]]))
    assert torch.isnan(out[:2]).all()
    p = torch.tensor([0.25, 0.75], dtype=torch.float64)
    assert float(out[2]) == pytest.approx(float(-(p * p.log()).sum()), rel=1e-6)
    assert float(_core.target_entropy(_Uniform(), [[]], [0, 2])[0]) == pytest.approx(
        torch.log(torch.tensor(2.0)).item()
    )
