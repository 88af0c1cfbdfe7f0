import inspect
import json
import textwrap

import pytest

from lightning_info.lm.corpus import (
    PROMPT_TEMPLATES,
    instruction_dataset,
    module_of,
    split_corpus,
    stdlib_docstrings,
)


def test_default_corpus_is_deterministic_sorted_and_unique(pairs):
    assert stdlib_docstrings() == pairs
    names = [name for name, _ in pairs]
    texts = [text for _, text in pairs]
    assert names == sorted(names)
    assert len(set(names)) == len(names)
    assert len(set(texts)) == len(texts)
    assert len(pairs) > 500
    assert all(40 <= len(text) <= 1500 for text in texts)
    assert all(text == text.strip() for text in texts)


def test_texts_are_the_objects_own_cleaned_docstrings(pairs):
    found = dict(pairs)
    assert found["textwrap.dedent"] == inspect.cleandoc(textwrap.dedent.__doc__)
    assert found["json.JSONDecoder.decode"] == inspect.cleandoc(json.JSONDecoder.decode.__doc__)
    assert found["json"].startswith("JSON (JavaScript Object Notation)")
    # ``json.codecs`` is an imported module and ``Fraction.__init__`` is private: both skipped.
    assert not any(name.startswith("json.codecs") or ".__" in name for name in found)


def test_long_texts_are_cut_at_whitespace_and_short_ones_dropped():
    full = dict(stdlib_docstrings(["json", "textwrap"], min_chars=1, max_chars=10**6))
    cut = dict(stdlib_docstrings(["json", "textwrap"], min_chars=100, max_chars=300))
    assert cut and set(cut) <= set(full)
    assert any(len(full[name]) > 300 for name in cut)
    for name, text in cut.items():
        assert 100 <= len(text) <= 300
        assert full[name].startswith(text)
        if len(full[name]) > len(text):
            assert full[name][len(text)].isspace(), name
    short = [name for name, text in full.items() if len(text) < 100]
    assert short and not set(short) & set(cut)


def test_module_list_restricts_the_names():
    pairs = stdlib_docstrings(["json", "urllib.parse"])
    assert {module_of(name) for name, _ in pairs} == {"json", "urllib"}
    assert any(name.startswith("urllib.parse.") for name, _ in pairs)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"modules": []}, ValueError),
        ({"modules": ["no_such_module_xyz"]}, ValueError),
        ({"modules": [json]}, TypeError),
        ({"min_chars": 0}, ValueError),
        ({"min_chars": 50, "max_chars": 49}, ValueError),
    ],
)
def test_bad_corpus_arguments(kwargs, error):
    with pytest.raises(error):
        stdlib_docstrings(**kwargs)


def test_instruction_dataset_columns_and_templates(pairs):
    subset = pairs[:50]
    data = instruction_dataset(subset, seed=0)
    assert data.column_names == ["prompt", "response", "name"]
    assert list(data["name"]) == [name for name, _ in subset]
    assert list(data["response"]) == [text for _, text in subset]
    prompts = list(data["prompt"])
    for (name, _), prompt in zip(subset, prompts):
        assert prompt in {t.format(name=name) for t in PROMPT_TEMPLATES}
    assert len({p.replace(n, "{name}") for p, (n, _) in zip(prompts, subset)}) > 1
    again = instruction_dataset(subset[::-1], seed=0)
    assert list(again["prompt"])[::-1] == prompts
    assert list(instruction_dataset(subset, seed=1)["prompt"]) != prompts
    with pytest.raises(ValueError, match="empty"):
        instruction_dataset([])
    with pytest.raises(TypeError, match="Pair 0"):
        instruction_dataset([("name", 3)])


def test_split_is_disjoint_by_module_and_covers_the_corpus(pairs):
    parts = split_corpus(pairs, fractions=(0.5, 0.4, 0.1), seed=0)
    assert len(parts) == 3 and all(parts)
    modules = [{module_of(name) for name, _ in part} for part in parts]
    assert not (modules[0] & modules[1] or modules[0] & modules[2] or modules[1] & modules[2])
    assert sorted(pair for part in parts for pair in part) == sorted(pairs)
    assert all(part == sorted(part) for part in parts)
    shares = [len(part) / len(pairs) for part in parts]
    assert shares == pytest.approx([0.5, 0.4, 0.1], abs=0.1)
    assert split_corpus(pairs, fractions=(0.5, 0.4, 0.1), seed=0) == parts
    assert split_corpus(pairs, fractions=(0.5, 0.4, 0.1), seed=1) != parts


def test_split_errors(pairs):
    with pytest.raises(ValueError, match="sum to 1"):
        split_corpus(pairs, fractions=(0.5, 0.4))
    with pytest.raises(ValueError, match="> 0"):
        split_corpus(pairs, fractions=(1.0, 0.0))
    with pytest.raises(ValueError, match="non-empty parts"):
        split_corpus(stdlib_docstrings(["json"]), fractions=(0.5, 0.5))
    one, two = split_corpus(stdlib_docstrings(["json", "textwrap"]), fractions=(0.99, 0.01))
    assert one and two
