"""The shared validators of issue 48: an index, a set of indices, a probability, log-
probabilities, a real floating tensor, a sequence of strings, and a saved artefact's fingerprint.
Each refuses the coercions that made answers silently wrong (bools and floats as indices,
repeated indices in a set, probabilities where log-probabilities belong, a bare string read as
characters) and passes valid input through unchanged."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from lightning_info.core.fingerprint import fingerprint, require_fingerprint
from lightning_info.core.validation import (
    require_bool,
    require_equal_lengths,
    require_index,
    require_indices,
    require_log_probabilities,
    require_probability,
    require_real_floating,
    require_string_sequence,
)


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (True, TypeError, "integer index, got bool"),
        (0.7, TypeError, "integer index, got float"),
        ("0", TypeError, "integer index, got str"),
        (np.float64(1.0), TypeError, "integer index"),
        (torch.tensor(True), TypeError, "integer index"),
        (-1, ValueError, r"in \[0, 3\), got -1"),
        (3, ValueError, r"in \[0, 3\), got 3"),
    ],
)
def test_an_index_refuses_what_is_not_one(value, error, message):
    with pytest.raises(error, match=message):
        require_index(value, "i", 3)


def test_an_index_accepts_integers_of_any_library():
    assert require_index(2, "i", 3) == 2
    assert require_index(np.int64(2), "i", 3) == 2
    assert require_index(torch.tensor(2), "i", 3) == 2
    assert require_index(10**9, "i") == 10**9


@pytest.mark.parametrize(
    ("values", "kwargs", "error", "message"),
    [
        ([0, True], {}, TypeError, r"`s\[1\]` must be an integer index, got bool"),
        ([0, 0.7], {}, TypeError, r"`s\[1\]` .* got float"),
        (["0", "02"], {}, TypeError, r"`s\[0\]` .* got str"),
        ("012", {}, TypeError, "got a string"),
        (3, {}, TypeError, r"scalar 3; wrap it in a list"),
        (torch.tensor([True, False]), {}, TypeError, "dtype torch.bool.*nonzero"),
        (np.array([0.0, 1.0]), {}, TypeError, "dtype torch.float64"),
        ([0, 5], {"size": 5}, ValueError, r"in \[0, 5\), got 5"),
        ([-1, 2], {"size": 5}, ValueError, r"got -1"),
        ([1, 2, 1], {"size": 5, "unique": True}, ValueError, r"repeats the index\(es\) \[1\]"),
        (torch.zeros(2, 2, dtype=torch.long), {}, ValueError, r"1-D, got shape \(2, 2\)"),
    ],
)
def test_a_set_of_indices_refuses_coercions(values, kwargs, error, message):
    with pytest.raises(error, match=message):
        require_indices(values, "s", **kwargs)


def test_a_set_of_indices_keeps_valid_input():
    got = require_indices(np.array([4, 0, 2], dtype=np.int32), "s", 5, unique=True)
    assert got.dtype == torch.int64 and got.tolist() == [4, 0, 2]
    assert require_indices([], "s", 5).numel() == 0
    assert require_indices((1, 1), "s", 5).tolist() == [1, 1]


@pytest.mark.parametrize(
    ("value", "error"),
    [(float("nan"), ValueError), (1.5, ValueError), (-0.1, ValueError), (True, TypeError)],
)
def test_a_probability_lies_in_the_unit_interval(value, error):
    with pytest.raises(error):
        require_probability(value, "p")


def test_a_probability_accepts_both_ends():
    assert require_probability(0, "p") == 0.0 and require_probability(1.0, "p") == 1.0


@pytest.mark.parametrize(
    ("tensor", "message"),
    [
        (torch.tensor([0.2, 0.5]), r"0.5 > 0, which is not a log-probability"),
        (torch.tensor([-1.0, float("inf")]), "inf > 0"),
        (torch.tensor([-1.0, float("nan")]), "contains NaN"),
    ],
)
def test_log_probabilities_are_at_most_zero(tensor, message):
    with pytest.raises(ValueError, match=message):
        require_log_probabilities(tensor, "log_p")


def test_log_probabilities_accept_impossible_events():
    values = torch.tensor([0.0, -2.0, float("-inf")])
    assert require_log_probabilities(values, "log_p") is values


@pytest.mark.parametrize("dtype", [torch.int64, torch.complex64, torch.bool])
def test_features_must_be_real_floating(dtype):
    with pytest.raises(TypeError, match="real floating-point"):
        require_real_floating(torch.zeros(2, dtype=dtype), "x")


def test_equal_lengths_name_every_length():
    assert require_equal_lengths({"a": 3, "b": 3}) == 3
    with pytest.raises(ValueError, match="accuracies 1, timings 3"):
        require_equal_lengths({"accuracies": 1, "timings": 3})


def test_a_string_is_not_a_sequence_of_strings():
    with pytest.raises(TypeError, match="looks like JSON: parse it with json.loads"):
        require_string_sequence('["a", "b"]', "prompts")
    with pytest.raises(TypeError, match=r"Wrap it in a list"):
        require_string_sequence("fgsm", "attacks")
    with pytest.raises(TypeError, match=r"`prompts\[1\]` must be a string"):
        require_string_sequence(["a", 2], "prompts")
    assert require_string_sequence(("a", "b"), "prompts") == ["a", "b"]


@dataclasses.dataclass(frozen=True)
class _Options:
    bins: int
    variant: str


def test_a_fingerprint_changes_with_any_input():
    base = fingerprint(torch.arange(4.0), ["a", "b"], _Options(4, "x"), 7)
    assert base == fingerprint(torch.arange(4.0), ["a", "b"], _Options(4, "x"), 7)
    variants = [
        fingerprint(
            torch.arange(4.0) + 1e-6 * torch.tensor([0, 0, 0, 1.0]), ["a", "b"], _Options(4, "x"), 7
        ),
        fingerprint(torch.arange(4.0).double(), ["a", "b"], _Options(4, "x"), 7),
        fingerprint(torch.arange(4.0).reshape(2, 2), ["a", "b"], _Options(4, "x"), 7),
        fingerprint(torch.arange(4.0), ["ab"], _Options(4, "x"), 7),
        fingerprint(torch.arange(4.0), ["a", "b"], _Options(5, "x"), 7),
        fingerprint(torch.arange(4.0), ["a", "b"], _Options(4, "y"), 7),
        fingerprint(torch.arange(4.0), ["a", "b"], _Options(4, "x"), 8),
        fingerprint(torch.arange(4.0), ["a", "b"], _Options(4, "x")),
    ]
    assert len({base, *variants}) == len(variants) + 1


def test_a_fingerprint_does_not_depend_on_memory_layout_or_byte_order():
    matrix = torch.arange(6.0).reshape(2, 3)
    assert fingerprint(matrix) == fingerprint(matrix.t().contiguous().t())
    array = np.arange(6, dtype="<f8")
    assert fingerprint(array) != fingerprint(array.astype("<f4"))
    assert fingerprint(array) == fingerprint(array.astype(">f8").astype("<f8"))


def test_a_stale_or_missing_fingerprint_is_refused():
    require_fingerprint("abc", "abc", what="selection", where="s.json")
    with pytest.raises(ValueError, match=r"s.json holds a selection made from other inputs"):
        require_fingerprint("abc", "abd", what="selection", where="s.json")
    with pytest.raises(ValueError, match="without a fingerprint"):
        require_fingerprint(None, "abd", what="selection", where="s.json")


@pytest.mark.parametrize("value", ["no", "False", 1, 0, None])
def test_a_switch_is_a_bool(value):
    with pytest.raises(TypeError, match="must be True or False"):
        require_bool(value, "flag")


def test_a_switch_accepts_python_and_numpy_bools():
    assert require_bool(False, "flag") is False
    assert require_bool(np.bool_(True), "flag") is True
