"""The benchmarks' timing helpers."""

import pytest

from lightning_info.core.timing import format_ratio, median_time, timed


def test_timed_returns_the_result_and_a_non_negative_time():
    seconds, value = timed(lambda: 41 + 1)
    assert value == 42 and seconds >= 0


def test_median_time_calls_repeats_times_and_keeps_the_last_result():
    calls = []
    seconds, value = median_time(lambda: calls.append(len(calls)) or len(calls), repeats=3)
    assert calls == [0, 1, 2] and value == 3 and seconds >= 0


@pytest.mark.parametrize(
    ("numerator", "denominator", "shown"),
    [
        (3.414, 1.0, "3.41x"),
        (250.0, 2.0, "125x"),
        (1.0, 4.0, "0.25x"),
        (None, 1.0, "-"),
        (2.0, None, "-"),
    ],
)
def test_format_ratio(numerator, denominator, shown):
    assert format_ratio(numerator, denominator) == shown
