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


def test_peak_memory_sees_a_large_temporary_and_not_a_small_one():
    import sys

    import numpy as np

    from lightning_info.core.timing import peak_memory

    def allocate():
        block = np.ones(25_000_000)  # 200 MB, written so that it is resident
        return float(block[-1])

    seconds, value, extra = peak_memory(allocate)
    assert value == 1.0 and seconds >= 0
    _, _, small = peak_memory(lambda: sum(range(1000)))
    if sys.platform != "linux":
        assert extra is None
        return
    assert extra > 150e6 and small < 20e6
