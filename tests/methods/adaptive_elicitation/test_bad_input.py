import json

import pytest

from lightning_info.methods.adaptive_elicitation.entities import read_entities_jsonl


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
